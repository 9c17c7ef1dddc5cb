"""Cache keys, the SQLite cache across processes, and the client's totals and budgets."""

from __future__ import annotations

import multiprocessing

import pytest

from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Message, Provider, Usage
from kernelsearch.llm.cache import MemoryCache, SQLiteCache
from kernelsearch.llm.client import Budget, BudgetExceeded, LLMClient
from kernelsearch.llm.pricing import Price, PriceTable


class Counting(Provider):
    name = "counting"
    model = "priced-model"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        return LLMResponse(
            content=f"answer {self.calls}",
            usage=Usage(1000, 500),
            provider=self.name,
            model=request.model,
        )


PRICES = PriceTable({"priced-model": Price(2.0, 10.0)})


def _req(text="q", temperature=0.0, sample_index=0, model=""):
    return LLMRequest(
        model=model,
        messages=(Message("user", text),),
        temperature=temperature,
        sample_index=sample_index,
    )


def test_key_is_stable_and_canonical():
    a = LLMRequest(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        temperature=1,
        extra={"b": 1, "a": 2},
    )
    b = LLMRequest(
        model="m",
        messages=(Message("user", "x"),),
        temperature=1.0,
        extra={"a": 2, "b": 1},
        metadata={"purpose": "not part of the key"},
    )
    assert a.key() == b.key()
    assert len(a.key()) == 64
    assert a.key() != LLMRequest(model="m2", messages=a.messages, temperature=1).key()
    assert LLMRequest.from_dict(b.to_dict()).key() == b.key()


def test_sample_index_separates_samples_only_when_sampling():
    hot = {_req(temperature=0.8, sample_index=i, model="m").key() for i in range(4)}
    cold = {_req(temperature=0.0, sample_index=i, model="m").key() for i in range(4)}
    assert len(hot) == 4 and len(cold) == 1


def test_cache_hit_avoids_provider(tmp_path):
    provider = Counting()
    cache = SQLiteCache(tmp_path / "c.sqlite")
    client = LLMClient(provider, cache=cache, pricing=PRICES)
    first = client.complete(_req())
    assert not first.cached and first.model == "priced-model"
    assert first.cost_usd == pytest.approx((1000 * 2 + 500 * 10) / 1e6)
    assert first.request_id == _req(model="priced-model").key()

    again = LLMClient(provider, cache=SQLiteCache(tmp_path / "c.sqlite"), pricing=PRICES)  # new run
    second = again.complete(_req())
    assert provider.calls == 1
    assert second.cached and second.content == first.content and second.cost_usd == 0.0
    assert second.usage == first.usage
    assert again.totals.cached_calls == 1 and again.totals.calls == 0 and again.totals.cost_usd == 0


def test_best_of_n_gets_distinct_answers_then_cached(tmp_path):
    provider = Counting()
    cache = MemoryCache()
    client = LLMClient(provider, cache=cache, pricing=PRICES)
    reqs = [_req(temperature=1.0, sample_index=i) for i in range(3)]
    first = [r.content for r in client.complete_many(reqs, max_workers=3)]
    assert sorted(first) == ["answer 1", "answer 2", "answer 3"]
    assert [r.content for r in client.complete_many(reqs)] == first
    assert provider.calls == 3 and len(cache) == 3


def test_totals_and_unknown_cost():
    provider = Counting()
    client = LLMClient(provider, pricing=PriceTable({}))
    r = client.complete(_req(model="local-qwen"))
    assert r.cost_usd is None
    t = client.totals
    assert (t.calls, t.input_tokens, t.output_tokens, t.unpriced_calls, t.cost_usd) == (
        1,
        1000,
        500,
        1,
        0.0,
    )


def test_budget_stops_further_calls():
    client = LLMClient(Counting(), pricing=PRICES, budget=Budget(max_cost_usd=0.012))
    client.complete(_req("a"))
    client.complete(_req("b"))  # 0.014 spent: over after this one
    with pytest.raises(BudgetExceeded, match="spent"):
        client.complete(_req("c"))
    calls = LLMClient(Counting(), pricing=PRICES, budget=Budget(max_calls=1))
    calls.complete(_req("a"))
    assert isinstance(calls.complete_many([_req("b")])[0], BudgetExceeded)


def test_request_without_model_needs_a_provider_model():
    provider = Counting()
    provider.model = None
    with pytest.raises(LLMError, match="no model"):
        LLMClient(provider).complete(_req())


def _hammer(path: str, worker: int) -> None:
    cache = SQLiteCache(path)
    for i in range(25):
        req = LLMRequest(model="m", messages=(Message("user", f"{worker}-{i}"),))
        cache.put(req.key(), req, LLMResponse(content=f"{worker}-{i}"))
        shared = LLMRequest(model="m", messages=(Message("user", f"shared-{i}"),))
        cache.put(shared.key(), shared, LLMResponse(content=f"shared by {worker}"))
        assert cache.get(shared.key()) is not None


def test_sqlite_cache_is_safe_across_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    SQLiteCache(path)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    procs = [ctx.Process(target=_hammer, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    cache = SQLiteCache(path)
    assert len(cache) == 4 * 25 + 25
    req = LLMRequest(model="m", messages=(Message("user", "3-7"),))
    assert cache.get(req.key()).content == "3-7"
