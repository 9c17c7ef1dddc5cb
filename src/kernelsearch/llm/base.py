"""Records and contracts shared by every part of the LLM layer.

A request is plain data with a stable content hash (`LLMRequest.key`): that hash is the
request id, the cache key and the exchange file name, so the same question asked in two runs
is recognised as the same question.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("system", "user", "assistant")
KEY_VERSION = 1  # bump when the key recipe changes, so old cache entries stop matching
DEFAULT_TIMEOUT_S = 600.0  # seconds a request may take (exchange: wait for its answer) unless --llm-timeout says otherwise


@dataclass(frozen=True)
class Message:
    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message role must be one of {ROLES}, got {self.role!r}")

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class LLMRequest:
    """One question for a model.

    `sample_index` tells apart the N answers of best-of-N sampling: it is part of the key when
    `temperature > 0`, and dropped at temperature 0, where every sample would be the same
    greedy answer and asking again buys nothing. `extra` holds provider parameters (top_p,
    seed, reasoning_effort, ...) that go into the request body and into the key. `metadata`
    (purpose, problem name, ...) is for people reading exchange files and logs; it is not
    part of the key.
    """

    model: str
    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int = 8192
    sample_index: int = 0
    stop: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Accept lists and dicts from callers; store tuples of Message so the request is hashable data.
        msgs = tuple(m if isinstance(m, Message) else Message(**m) for m in self.messages)
        object.__setattr__(self, "messages", msgs)
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "max_tokens", int(self.max_tokens))
        if not msgs:
            raise ValueError("a request needs at least one message")

    def key_payload(self) -> dict[str, Any]:
        """The fields that decide the answer, in canonical form."""
        payload: dict[str, Any] = {
            "v": KEY_VERSION,
            "model": self.model,
            "messages": [m.to_dict() for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.temperature > 0 and self.sample_index:
            payload["sample_index"] = int(self.sample_index)
        if self.stop:
            payload["stop"] = list(self.stop)
        if self.extra:
            payload["extra"] = self.extra
        return payload

    def key(self) -> str:
        """sha256 hex of the canonical JSON of `key_payload()`."""
        blob = json.dumps(
            self.key_payload(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [m.to_dict() for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "sample_index": self.sample_index,
            "stop": list(self.stop),
            "extra": dict(self.extra),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLMRequest:
        return cls(
            model=d["model"],
            messages=tuple(Message(**m) for m in d["messages"]),
            temperature=d.get("temperature", 0.0),
            max_tokens=d.get("max_tokens", 8192),
            sample_index=d.get("sample_index", 0),
            stop=tuple(d.get("stop") or ()),
            extra=dict(d.get("extra") or {}),
            metadata=dict(d.get("metadata") or {}),
        )

    @property
    def text(self) -> str:
        """All message contents joined: what replay `contains` matching looks at."""
        return "\n".join(m.content for m in self.messages)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LLMResponse:
    """An answer. `cost_usd` is None when the price is unknown (never a silent 0)."""

    content: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cost_usd: float | None = None
    cached: bool = False
    provider: str = ""
    model: str = ""
    request_id: str = ""
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "latency_s": self.latency_s,
            "cost_usd": self.cost_usd,
            "cached": self.cached,
            "provider": self.provider,
            "model": self.model,
            "request_id": self.request_id,
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLMResponse:
        u = d.get("usage") or {}
        return cls(
            content=d["content"],
            usage=Usage(int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))),
            latency_s=float(d.get("latency_s", 0.0)),
            cost_usd=d.get("cost_usd"),
            cached=bool(d.get("cached", False)),
            provider=d.get("provider", ""),
            model=d.get("model", ""),
            request_id=d.get("request_id", ""),
            finish_reason=d.get("finish_reason"),
        )


class LLMError(Exception):
    """A request failed in a way that asking again the same way will not fix."""


class TransientLLMError(LLMError):
    """Rate limit, timeout, 5xx, dropped connection: worth retrying after a pause."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PendingResponse(Exception):
    """The exchange has no answer yet; the request file stays where it is.

    Deliberately not an LLMError: code that treats LLMError as "this proposal failed" must
    not swallow it, because the right move is to stop and come back once it is answered.
    `more` lists further pending requests when several were asked at once.
    """

    def __init__(
        self, request_id: str, path: Path | str, more: tuple[PendingResponse, ...] = ()
    ) -> None:
        self.request_id = request_id
        self.path = Path(path)
        self.more = tuple(more)
        n = 1 + len(self.more)
        extra = f" (and {n - 1} more)" if n > 1 else ""
        super().__init__(f"no answer yet for request {request_id}: {self.path}{extra}")


class Provider(ABC):
    """Something that answers requests. Stateless apart from configuration; thread-safe."""

    name: str = "provider"
    model: str | None = None  # default model when a request leaves it empty
    priced: bool = True  # False: the price table does not apply (answers from files)

    @abstractmethod
    def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request, or raise LLMError / TransientLLMError / PendingResponse."""
