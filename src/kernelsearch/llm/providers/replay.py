"""`replay:FILE`: answers read from a JSONL file, for tests, demos and offline re-runs.

One JSON object per line; blank lines and lines starting with `#` or `//` are skipped::

    {"key": "<request key>", "content": "..."}
    {"model": "gpt-4o", "content": "..."}
    {"match": {"model": "gpt-4o", "contains": ["softmax", "ModelNew"]}, "content": "..."}
    {"key": "...", "match": {"contains": "softmax"}, "content": "...",
     "usage": {"input_tokens": 10, "output_tokens": 20}, "finish_reason": "length"}

Lookup: an entry whose `"key"` equals the request key (`LLMRequest.key()`) answers it, as
often as asked (the last such line wins). Otherwise the request takes the first unused
fallback entry that fits, in file order: fallback entries are those without a key, plus keyed
entries that carry a `"match"` (so recordings survive edited prompts). An entry fits when its
model (`match.model`, else top-level `"model"`; absent = any) equals the request's model and
every `match.contains` string occurs in the request's messages. So hand-written files are
served in order per model. A request asked again gets the answer it got before. Running out
is an LLMError. `"finish_reason"` is handed on as the provider's (absent: none reported).
`append_record` writes the keyed lines from live answers. The format is documented for users in
docs/formats.md ("Recorded answers").
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Provider, Usage


@dataclass
class ReplayEntry:
    line: int
    content: str
    key: str | None = None
    model: str | None = None
    contains: tuple[str, ...] = ()
    fallback: bool = True
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def fits(self, request: LLMRequest) -> bool:
        if self.model is not None and self.model != request.model:
            return False
        text = request.text
        return all(s in text for s in self.contains)


def _entry(obj: Any, where: str, line: int) -> ReplayEntry:
    if not isinstance(obj, dict) or not isinstance(obj.get("content"), str):
        raise LLMError(f'replay: {where}: each line must be an object with a string "content"')
    match = obj.get("match") or {}
    if not isinstance(match, dict):
        raise LLMError(f'replay: {where}: "match" must be an object')
    contains = match.get("contains", ())
    if isinstance(contains, str):
        contains = (contains,)
    usage = obj.get("usage") or {}
    try:
        tokens = Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
    except (AttributeError, TypeError, ValueError) as e:
        raise LLMError(f'replay: {where}: bad "usage": {e}') from e
    key = obj.get("key")
    return ReplayEntry(
        line=line,
        content=obj["content"],
        key=key,
        model=match.get("model", obj.get("model")),
        contains=tuple(str(s) for s in contains),
        fallback=key is None or "match" in obj,
        usage=tokens,
        finish_reason=obj.get("finish_reason"),
    )


def load_replay(path: Path) -> list[ReplayEntry]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise LLMError(f"replay: cannot read {path}: {e}") from e
    entries = []
    for n, raw in enumerate(lines, start=1):
        s = raw.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            raise LLMError(f"replay: {path}:{n}: not valid JSON: {e}") from e
        entries.append(_entry(obj, f"{path}:{n}", n))
    return entries


class ReplayProvider(Provider):
    name = "replay"
    priced = False

    def __init__(self, path: str | os.PathLike[str], *, model: str = "replay") -> None:
        self.path = Path(path)
        self.model = model
        self.entries = load_replay(self.path)
        self._by_key = {e.key: e for e in self.entries if e.key is not None}
        self._used: set[int] = set()
        self._served: dict[str, ReplayEntry] = {}
        self._lock = threading.Lock()

    def _pick(self, request: LLMRequest, key: str) -> ReplayEntry:
        with self._lock:
            entry = self._by_key.get(key) or self._served.get(key)
            if entry is None:
                entry = next(
                    (
                        e
                        for e in self.entries
                        if e.fallback and e.line not in self._used and e.fits(request)
                    ),
                    None,
                )
            if entry is None:
                left = sum(1 for e in self.entries if e.fallback and e.line not in self._used)
                raise LLMError(
                    f"replay: {self.path} has no answer for request {key[:12]}… "
                    f"(model {request.model!r}): no entry with that key, and none of the "
                    f"{left} unused fallback entries fits"
                )
            self._used.add(entry.line)
            self._served[key] = entry
            return entry

    def complete(self, request: LLMRequest) -> LLMResponse:
        if not request.model:
            request = replace(request, model=self.model)
        key = request.key()
        entry = self._pick(request, key)
        return LLMResponse(
            content=entry.content,
            usage=entry.usage,
            provider=self.name,
            model=request.model,
            cost_usd=0.0,
            request_id=key,
            finish_reason=entry.finish_reason,
        )


def append_record(path: str | os.PathLike[str], request: LLMRequest, response: LLMResponse) -> None:
    """Append one keyed line, so a live run can be replayed exactly later."""
    line = {
        "key": request.key(),
        "model": request.model,
        "content": response.content,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    }
    if response.finish_reason:
        line["finish_reason"] = response.finish_reason
    if request.metadata:
        line["metadata"] = request.metadata
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
