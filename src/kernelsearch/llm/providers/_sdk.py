"""Helpers shared by the HTTP providers: which failures are worth retrying, and API keys."""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Mapping

from kernelsearch.llm.base import LLMError

# 408 request timeout, 409 conflict (lock contention), 425 too early, 429 rate limit.
_TRANSIENT_4XX = frozenset({408, 409, 425, 429})

# Placeholder key for local OpenAI-compatible servers (vLLM, SGLang, Ollama) that ignore it.
LOCAL_KEY = "not-needed"


def is_transient_status(status: int | None) -> bool:
    return status is not None and (status in _TRANSIENT_4XX or status >= 500)


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after seconds or date)."""
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def resolve_api_key(
    api_key: str | None, api_key_env: str, base_url: str | None, provider: str
) -> str:
    """Explicit key, else the named env var; a custom base_url may run without a key."""
    if api_key:
        return api_key
    key = os.environ.get(api_key_env)
    if key:
        return key
    if base_url:
        return LOCAL_KEY
    raise LLMError(
        f"{provider}: no API key: set {api_key_env}, or name the variable that holds the key "
        "(--api-key-env NAME on the command line; api_key_env=NAME in Python)"
    )


def describe_status_error(provider: str, status: int | None, message: str) -> str:
    return f"{provider}: HTTP {status}: {message}"
