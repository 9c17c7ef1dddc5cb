"""Retries: backoff growth, cap, jitter, what is and is not retried."""

from __future__ import annotations

import random

import pytest

from kernelsearch.llm.base import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    PendingResponse,
    Provider,
    TransientLLMError,
)
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.retry import RetryPolicy


class Flaky(Provider):
    name = "flaky"
    model = "m"

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return LLMResponse(content="finally", provider=self.name, model=request.model)


REQ = LLMRequest(model="m", messages=(Message("user", "hi"),))


def test_flaky_provider_succeeds_after_retries():
    sleeps: list[float] = []
    provider = Flaky([TransientLLMError("429"), TransientLLMError("503"), TransientLLMError("x")])
    policy = RetryPolicy(base_delay_s=0.5, jitter=0.0, sleep=sleeps.append)
    client = LLMClient(provider, retry=policy)
    assert client.complete(REQ).content == "finally"
    assert provider.calls == 4
    assert sleeps == [0.5, 1.0, 2.0]
    assert client.totals.calls == 1 and client.totals.failed_calls == 0


def test_gives_up_after_max_attempts_with_the_last_error():
    sleeps: list[float] = []
    provider = Flaky([TransientLLMError(f"fail {i}") for i in range(10)])
    client = LLMClient(provider, retry=RetryPolicy(max_attempts=3, sleep=sleeps.append))
    with pytest.raises(TransientLLMError, match="fail 2"):
        client.complete(REQ)
    assert provider.calls == 3 and len(sleeps) == 2
    assert client.totals.failed_calls == 1


def test_permanent_errors_and_pending_are_not_retried():
    for error in (LLMError("bad request"), PendingResponse("abc", "/tmp/abc.json")):
        provider = Flaky([error])
        sleeps: list[float] = []
        with pytest.raises(type(error)):
            LLMClient(provider, retry=RetryPolicy(sleep=sleeps.append)).complete(REQ)
        assert provider.calls == 1 and sleeps == []


def test_delay_is_capped_and_jittered():
    policy = RetryPolicy(base_delay_s=1, max_delay_s=10, jitter=0.5, rng=random.Random(0))
    for attempt in range(1, 12):
        nominal = min(10, 2 ** (attempt - 1))
        d = policy.delay(attempt)
        assert nominal * 0.5 <= d <= nominal
    assert policy.delay(3, TransientLLMError("slow", retry_after=30)) == 10  # capped
    assert policy.delay(1, TransientLLMError("slow", retry_after=4)) == 4


def test_on_retry_hook_sees_each_retry():
    seen = []
    policy = RetryPolicy(
        jitter=0, sleep=lambda s: None, on_retry=lambda a, d, e: seen.append((a, d, str(e)))
    )
    assert policy.call(_fails_once()) == "ok"
    assert seen == [(1, 1.0, "once")]


def _fails_once():
    state = {"n": 0}

    def fn():
        state["n"] += 1
        if state["n"] == 1:
            raise TransientLLMError("once")
        return "ok"

    return fn
