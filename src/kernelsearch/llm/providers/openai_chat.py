"""`openai:MODEL`: chat completions through the official `openai` SDK.

Works with OpenAI and any OpenAI-compatible server (vLLM, SGLang, Ollama, DeepSeek,
OpenRouter): pass `base_url` (or set OPENAI_BASE_URL) and, where the server wants a key of
its own, `api_key_env="DEEPSEEK_API_KEY"`. A custom base_url may run without a key.

The SDK's own retries are off by default (`sdk_max_retries=0`) so that `RetryPolicy` is the
one place that decides how often and how long to wait.
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


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = DEFAULT_TIMEOUT_S,
        sdk_max_retries: int = 0,
        max_tokens_param: str | None = None,
        send_temperature: bool = True,
        client: Any = None,
    ) -> None:
        """`max_tokens_param`: OpenAI's own API wants "max_completion_tokens" (reasoning
        models reject max_tokens); compatible servers want "max_tokens". Default: pick by
        whether a base_url is set. `send_temperature=False` for models that reject it."""
        import openai

        self._openai = openai
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if max_tokens_param is None:
            max_tokens_param = "max_tokens" if self.base_url else "max_completion_tokens"
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise LLMError(f"openai: bad max_tokens_param {max_tokens_param!r}")
        self.max_tokens_param = max_tokens_param
        self.send_temperature = send_temperature
        if client is None:
            key = resolve_api_key(api_key, api_key_env, self.base_url, self.name)
            client = openai.OpenAI(
                api_key=key, base_url=self.base_url, timeout=timeout, max_retries=sdk_max_retries
            )
        self._client = client

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [m.to_dict() for m in request.messages],
            self.max_tokens_param: request.max_tokens,
        }
        if self.send_temperature:
            params["temperature"] = request.temperature
        if request.stop:
            params["stop"] = list(request.stop)
        if request.extra:
            # extra_body passes any server-specific field through untouched.
            params["extra_body"] = dict(request.extra)
        return params

    def complete(self, request: LLMRequest) -> LLMResponse:
        try:
            resp = self._client.chat.completions.create(**self._params(request))
        except self._openai.APIConnectionError as e:  # includes APITimeoutError
            raise TransientLLMError(f"openai: {type(e).__name__}: {e}") from e
        except self._openai.APIStatusError as e:
            msg = describe_status_error(self.name, e.status_code, str(e))
            if is_transient_status(e.status_code):
                raise TransientLLMError(msg, retry_after_s(e.response.headers)) from e
            raise LLMError(msg) from e
        except self._openai.OpenAIError as e:
            raise LLMError(f"openai: {type(e).__name__}: {e}") from e
        if not getattr(resp, "choices", None):
            raise LLMError(f"openai: answer without choices from {request.model or self.model}")
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        return LLMResponse(
            content=choice.message.content or "",
            usage=Usage(
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
            ),
            provider=self.name,
            model=getattr(resp, "model", None) or request.model or self.model,
            request_id=request.key(),
            finish_reason=choice.finish_reason,
        )
