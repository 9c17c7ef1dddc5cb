"""`anthropic:MODEL`: the messages API through the official `anthropic` SDK.

System messages travel in the separate `system` field; consecutive turns of the same role
are merged, as the API wants alternating turns. Temperature goes in the request body via
`extra_body`, which works with SDKs that still take it as an argument and with those that
dropped it. Newer models reject a non-default temperature: pass `send_temperature=False`.
"""

from __future__ import annotations

import os
from typing import Any

from kernelsearch.llm.base import (
    DEFAULT_TIMEOUT_S,
    LLMError,
    LLMRequest,
    LLMResponse,
    Provider,
    TransientLLMError,
    Usage,
)
from kernelsearch.llm.providers._sdk import (
    describe_status_error,
    is_transient_status,
    resolve_api_key,
    retry_after_s,
)


def split_system(request: LLMRequest) -> tuple[str, list[dict[str, str]]]:
    """(system text, alternating user/assistant turns)."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in request.messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": m.role, "content": m.content})
    return system, turns


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        timeout: float = DEFAULT_TIMEOUT_S,
        sdk_max_retries: int = 0,
        send_temperature: bool = True,
        client: Any = None,
    ) -> None:
        import anthropic

        self._anthropic = anthropic
        self.model = model
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.send_temperature = send_temperature
        if client is None:
            key = resolve_api_key(api_key, api_key_env, self.base_url, self.name)
            client = anthropic.Anthropic(
                api_key=key, base_url=self.base_url, timeout=timeout, max_retries=sdk_max_retries
            )
        self._client = client

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        system, turns = split_system(request)
        if not turns:
            raise LLMError("anthropic: a request needs at least one user message")
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": turns,
            "max_tokens": request.max_tokens,
        }
        if system:
            params["system"] = system
        if request.stop:
            params["stop_sequences"] = list(request.stop)
        body = dict(request.extra)
        if self.send_temperature:
            body.setdefault("temperature", request.temperature)
        if body:
            params["extra_body"] = body
        return params

    def _status_error(self, e: Any) -> LLMError:
        status = getattr(e, "status_code", None)
        msg = describe_status_error(self.name, status, str(e))
        if is_transient_status(status):
            return TransientLLMError(msg, retry_after_s(e.response.headers))
        if status == 400 and "temperature" in str(e) and self.send_temperature:
            msg += " (this model may reject temperature: pass send_temperature=False)"
        return LLMError(msg)

    def complete(self, request: LLMRequest) -> LLMResponse:
        a = self._anthropic
        try:
            resp = self._client.messages.create(**self._params(request))
        except a.APIConnectionError as e:  # includes APITimeoutError
            raise TransientLLMError(f"anthropic: {type(e).__name__}: {e}") from e
        except a.APIStatusError as e:
            raise self._status_error(e) from e
        except a.AnthropicError as e:
            raise LLMError(f"anthropic: {type(e).__name__}: {e}") from e
        text = "".join(
            getattr(block, "text", "") or ""
            for block in (resp.content or [])
            if getattr(block, "type", None) == "text"
        )
        usage = getattr(resp, "usage", None)
        return LLMResponse(
            content=text,
            usage=Usage(
                int(getattr(usage, "input_tokens", 0) or 0),
                int(getattr(usage, "output_tokens", 0) or 0),
            ),
            provider=self.name,
            model=getattr(resp, "model", None) or request.model or self.model,
            request_id=request.key(),
            finish_reason=getattr(resp, "stop_reason", None),
        )
