"""The one entry point the search uses: cache, retries, latency, cost and running totals.

A cached answer costs nothing and counts as a cached call, not toward tokens or spend;
its `usage` still shows the tokens it took the first time. Budgets are checked before each
uncached call, so concurrent calls may overshoot a limit by what is already in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kernelsearch.llm.base import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    PendingResponse,
    Provider,
)
from kernelsearch.llm.cache import ResponseCache
from kernelsearch.llm.pricing import PriceTable
from kernelsearch.llm.retry import RetryPolicy


@dataclass
class Totals:
    calls: int = 0  # answered by the provider
    cached_calls: int = 0
    failed_calls: int = 0
    pending_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # known costs only; see unpriced_calls
    unpriced_calls: int = 0
    latency_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Budget:
    max_cost_usd: float | None = None
    max_tokens: int | None = None  # input + output
    max_calls: int | None = None

    def exceeded(self, totals: Totals) -> str | None:
        """Why no further call is allowed, or None."""
        if self.max_cost_usd is not None and totals.cost_usd >= self.max_cost_usd:
            return f"spent ${totals.cost_usd:.4f} of ${self.max_cost_usd:.4f}"
        if self.max_tokens is not None and totals.total_tokens >= self.max_tokens:
            return f"used {totals.total_tokens} of {self.max_tokens} tokens"
        if self.max_calls is not None and totals.calls >= self.max_calls:
            return f"made {totals.calls} of {self.max_calls} calls"
        return None


class BudgetExceeded(LLMError):
    pass


class LLMClient:
    def __init__(
        self,
        provider: Provider,
        cache: ResponseCache | None = None,
        retry: RetryPolicy | None = None,
        pricing: PriceTable | None = None,
        budget: Budget | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.retry = retry if retry is not None else RetryPolicy()
        self.pricing = pricing if pricing is not None else PriceTable.load()
        self.budget = budget
        self._clock = clock
        self._totals = Totals()
        self._lock = threading.Lock()

    @property
    def totals(self) -> Totals:
        """A snapshot of the running totals."""
        with self._lock:
            return replace(self._totals)

    def request(
        self,
        messages: Sequence[Message] | str,
        *,
        system: str | None = None,
        model: str | None = None,
        **fields: Any,
    ) -> LLMRequest:
        """Build a request for this client's provider (a str is one user message)."""
        msgs = [Message("user", messages)] if isinstance(messages, str) else list(messages)
        if system is not None:
            msgs.insert(0, Message("system", system))
        return LLMRequest(model=model or self.provider.model or "", messages=tuple(msgs), **fields)

    def _resolve(self, request: LLMRequest) -> LLMRequest:
        if request.model:
            return request
        if not self.provider.model:
            raise LLMError(f"request names no model and provider {self.provider.name!r} has none")
        return replace(request, model=self.provider.model)

    def _cost(self, response: LLMResponse, request: LLMRequest) -> float | None:
        if response.cost_usd is not None or not self.provider.priced:
            return response.cost_usd
        c = self.pricing.cost(response.model, response.usage)
        return c if c is not None else self.pricing.cost(request.model, response.usage)

    def complete(self, request: LLMRequest) -> LLMResponse:
        request = self._resolve(request)
        key = request.key()
        t0 = self._clock()
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                with self._lock:
                    self._totals.cached_calls += 1
                return replace(
                    hit, cached=True, cost_usd=0.0, latency_s=self._clock() - t0, request_id=key
                )
        if self.budget is not None:
            with self._lock:
                why = self.budget.exceeded(self._totals)
            if why:
                raise BudgetExceeded(f"LLM budget exhausted: {why}")
        try:
            response = self.retry.call(lambda: self.provider.complete(request))
        except PendingResponse:
            with self._lock:
                self._totals.pending_calls += 1
            raise
        except LLMError:
            with self._lock:
                self._totals.failed_calls += 1
            raise
        response = replace(
            response,
            latency_s=self._clock() - t0,
            cost_usd=self._cost(response, request),
            cached=False,
            provider=response.provider or self.provider.name,
            model=response.model or request.model,
            request_id=key,
        )
        if self.cache is not None:
            self.cache.put(key, request, response)
        with self._lock:
            t = self._totals
            t.calls += 1
            t.input_tokens += response.usage.input_tokens
            t.output_tokens += response.usage.output_tokens
            t.latency_s += response.latency_s
            if response.cost_usd is None:
                t.unpriced_calls += 1
            else:
                t.cost_usd += response.cost_usd
        return response

    def complete_many(
        self, requests: Iterable[LLMRequest], max_workers: int = 4
    ) -> list[LLMResponse | LLMError]:
        """Answer several requests (best-of-N, a batch of ideas) in parallel.

        A failed request leaves its LLMError in its slot, so one bad sample does not sink the
        rest. If any are pending (exchange), all others are finished and cached first, then
        one PendingResponse is raised naming every pending request in `more`.
        """
        reqs = list(requests)
        results: list[LLMResponse | LLMError | PendingResponse] = []

        def one(r: LLMRequest) -> LLMResponse | LLMError | PendingResponse:
            try:
                return self.complete(r)
            except (LLMError, PendingResponse) as e:
                return e

        if max_workers <= 1 or len(reqs) <= 1:
            results = [one(r) for r in reqs]
        else:
            with ThreadPoolExecutor(max_workers=max_workers) as pool:
                results = list(pool.map(one, reqs))
        pending = [r for r in results if isinstance(r, PendingResponse)]
        if pending:
            first = pending[0]
            raise PendingResponse(first.request_id, first.path, more=tuple(pending[1:]))
        return [r for r in results if not isinstance(r, PendingResponse)]


def make_client(
    spec: str,
    *,
    cache_path: str | None = None,
    prices_path: str | None = None,
    retry: RetryPolicy | None = None,
    budget: Budget | None = None,
    **provider_options: Any,
) -> LLMClient:
    """Provider spec + a SQLite cache file (optional) -> a ready client."""
    from kernelsearch.llm.cache import SQLiteCache
    from kernelsearch.llm.registry import make_provider

    return LLMClient(
        make_provider(spec, **provider_options),
        cache=SQLiteCache(cache_path) if cache_path else None,
        retry=retry,
        pricing=PriceTable.load(prices_path),
        budget=budget,
    )
