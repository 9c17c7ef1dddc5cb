"""The file exchange provider: answered by a thread, pending across runs, malformed answers."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from kernelsearch.llm.base import DEFAULT_TIMEOUT_S, LLMError, LLMRequest, Message, PendingResponse
from kernelsearch.llm.cache import SQLiteCache
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.providers.exchange import (
    ANSWER_FORMAT,
    ExchangeProvider,
    resume_instructions,
    wait_text,
    write_json_atomic,
)
from kernelsearch.llm.registry import make_provider


def _request(text: str = "make softmax fast", sample_index: int = 0) -> LLMRequest:
    return LLMRequest(
        model="human",
        messages=(Message("system", "you write kernels"), Message("user", text)),
        temperature=0.8,
        sample_index=sample_index,
        metadata={"purpose": "implement"},
    )


def _answer(root: Path, request_id: str, payload: object) -> None:
    write_json_atomic(root / "responses" / f"{request_id}.json", payload)


def test_answered_by_a_thread(tmp_path):
    seen: list[dict] = []

    def responder() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            files = (
                list((tmp_path / "requests").glob("*.json"))
                if (tmp_path / "requests").exists()
                else []
            )
            if files:
                req = json.loads(files[0].read_text())
                seen.append(req)
                _answer(
                    tmp_path,
                    req["id"],
                    {
                        "content": "answer to " + req["messages"][-1]["content"],
                        "usage": {"input_tokens": 3, "output_tokens": 4},
                    },
                )
                return
            time.sleep(0.005)

    t = threading.Thread(target=responder)
    t.start()
    provider = make_provider(f"exchange:{tmp_path}", timeout=5, poll_interval=0.01)
    r = provider.complete(_request())
    t.join()
    assert r.content == "answer to make softmax fast"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (3, 4)
    req = seen[0]
    assert req["id"] == _request().key() == r.request_id
    assert req["model"] == "human" and req["temperature"] == 0.8
    assert req["messages"][1] == {"role": "user", "content": "make softmax fast"}
    assert req["metadata"] == {"purpose": "implement"}
    assert not list((tmp_path / "requests").glob("*.tmp"))


def test_timeout_then_later_run_picks_up_answer(tmp_path):
    first = ExchangeProvider(tmp_path, timeout=0)
    with pytest.raises(PendingResponse) as info:
        first.complete(_request())
    pending = info.value
    assert pending.request_id == _request().key()
    assert pending.path == tmp_path / "requests" / f"{pending.request_id}.json"
    assert pending.path.exists()
    mtime = pending.path.stat().st_mtime_ns

    # Asking again before an answer exists does not rewrite or duplicate the request.
    with pytest.raises(PendingResponse):
        ExchangeProvider(tmp_path, timeout=0.05, poll_interval=0.01).complete(_request())
    assert pending.path.stat().st_mtime_ns == mtime
    assert len(list((tmp_path / "requests").iterdir())) == 1

    _answer(tmp_path, pending.request_id, {"content": "late answer"})
    later = ExchangeProvider(tmp_path, timeout=0)  # a new run
    assert later.complete(_request()).content == "late answer"
    assert len(list((tmp_path / "requests").iterdir())) == 1


def test_distinct_samples_get_distinct_requests(tmp_path):
    provider = ExchangeProvider(tmp_path, timeout=0)
    ids = set()
    for i in range(3):
        with pytest.raises(PendingResponse) as info:
            provider.complete(_request(sample_index=i))
        ids.add(info.value.request_id)
    assert len(ids) == 3


def test_client_complete_many_reports_all_pending_then_caches(tmp_path):
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    root = tmp_path / "ex"
    client = LLMClient(ExchangeProvider(root, timeout=0), cache=cache)
    reqs = [_request(sample_index=i) for i in range(3)]
    with pytest.raises(PendingResponse) as info:
        client.complete_many(reqs)
    pending = [info.value, *info.value.more]
    assert {p.request_id for p in pending} == {r.key() for r in reqs}
    assert client.totals.pending_calls == 3

    for p in pending:
        _answer(root, p.request_id, {"content": f"answer {p.request_id[:6]}"})
    again = LLMClient(ExchangeProvider(root, timeout=0), cache=cache)
    answers = again.complete_many(reqs)
    assert [a.content for a in answers] == [f"answer {r.key()[:6]}" for r in reqs]
    assert all(a.cost_usd is None for a in answers)  # nobody knows what a person costs

    for f in (root / "responses").iterdir():
        f.unlink()
    third = LLMClient(ExchangeProvider(root, timeout=0), cache=cache)
    assert [a.cached for a in third.complete_many(reqs)] == [True, True, True]


def test_malformed_response_names_the_file(tmp_path):
    provider = ExchangeProvider(tmp_path, timeout=0, malformed_grace_s=0)
    request = _request()
    path = tmp_path / "responses" / f"{request.key()}.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(LLMError, match=str(path)):
        provider.complete(request)
    path.write_text(json.dumps({"text": "wrong field"}))
    with pytest.raises(LLMError, match='needs a string "content"'):
        provider.complete(request)
    path.write_text(json.dumps({"content": "x", "usage": {"input_tokens": "many"}}))
    with pytest.raises(LLMError, match="usage"):
        provider.complete(request)


def test_half_written_response_is_waited_for(tmp_path):
    provider = ExchangeProvider(tmp_path, timeout=1, poll_interval=0.01, malformed_grace_s=5)
    request = _request()
    path = tmp_path / "responses" / f"{request.key()}.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"content": "hal')

    def finish() -> None:
        time.sleep(0.05)
        path.write_text('{"content": "half then whole"}')

    t = threading.Thread(target=finish)
    t.start()
    assert provider.complete(request).content == "half then whole"
    t.join()


def test_refusal(tmp_path):
    request = _request()
    _answer(tmp_path, request.key(), {"error": "I won't write that"})
    with pytest.raises(LLMError, match="refuses"):
        ExchangeProvider(tmp_path, timeout=0).complete(request)


def test_request_file_is_written_atomically(tmp_path, monkeypatch):
    calls: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src, dst):
        calls.append((str(src), str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    with pytest.raises(PendingResponse) as info:
        ExchangeProvider(tmp_path, timeout=0).complete(_request())
    assert calls and calls[0][1] == str(info.value.path)
    assert calls[0][0].endswith(".tmp")


def test_first_question_says_where_and_how_long_at_once(tmp_path):
    """A run that waits on the exchange says so at once, once: the directories and the wait
    (the default 600 s, which --help and docs state)."""
    said: list[str] = []
    provider = ExchangeProvider(tmp_path, timeout=0, announce=said.append)
    for text in ("first", "second"):
        with pytest.raises(PendingResponse):
            provider.complete(_request(text))
    assert len(said) == 1 and str(tmp_path / "requests") in said[0] and str(tmp_path / "responses") in said[0]
    assert "does not wait" in said[0]
    assert ExchangeProvider(tmp_path).timeout == DEFAULT_TIMEOUT_S == 600.0 and "600 s" in wait_text(600.0)
    from kernelsearch.cli.main import build_parser

    run_help = next(a for a in build_parser()._actions if a.dest == "command").choices["run"].format_help()
    assert "default 600" in " ".join(run_help.split())


def test_answer_format_and_resume_text_are_one_text(tmp_path):
    """The README.txt an exchange directory gets and docs/search.md give the same answer
    format and the same resume instructions, the provider's."""
    provider = ExchangeProvider(tmp_path, timeout=0, announce=lambda _: None)
    with pytest.raises(PendingResponse):
        provider.complete(_request())
    readme = (tmp_path / "README.txt").read_text()
    docs = (Path(__file__).resolve().parents[1] / "docs" / "search.md").read_text()
    assert ANSWER_FORMAT in readme and ANSWER_FORMAT in docs
    assert resume_instructions() in " ".join(readme.split()) and resume_instructions() in " ".join(docs.split())
