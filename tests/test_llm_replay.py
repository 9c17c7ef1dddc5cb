"""The replay provider: keyed answers, ordered hand-written answers, clear errors."""

from __future__ import annotations

import json

import pytest

from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Message, Usage
from kernelsearch.llm.providers.replay import ReplayProvider, append_record
from kernelsearch.llm.registry import make_provider


def _req(text: str, model: str = "gpt-4o", temperature: float = 0.0, sample_index: int = 0):
    return LLMRequest(
        model=model,
        messages=(Message("user", text),),
        temperature=temperature,
        sample_index=sample_index,
    )


def _write(path, *lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_key_lookup_first_then_keyless_in_order_per_model(tmp_path):
    keyed = _req("exact question")
    f = _write(
        tmp_path / "r.jsonl",
        "# hand-written answers",
        {"content": "first for gpt-4o", "model": "gpt-4o"},
        {"content": "first for claude", "model": "claude-sonnet-4"},
        "",
        {"content": "second for gpt-4o", "model": "gpt-4o"},
        {
            "key": keyed.key(),
            "content": "keyed answer",
            "usage": {"input_tokens": 5, "output_tokens": 6},
        },
    )
    p = make_provider(f"replay:{f}")
    r = p.complete(keyed)
    assert r.content == "keyed answer" and r.usage == Usage(5, 6) and r.cost_usd == 0.0
    assert p.complete(keyed).content == "keyed answer"  # keyed answers repeat
    assert p.complete(_req("q1", model="claude-sonnet-4")).content == "first for claude"
    assert p.complete(_req("q1")).content == "first for gpt-4o"
    assert p.complete(_req("q2")).content == "second for gpt-4o"
    assert p.complete(_req("q1")).content == "first for gpt-4o"  # same question, same answer
    with pytest.raises(LLMError, match="no answer"):
        p.complete(_req("q3"))


def test_match_contains_and_model(tmp_path):
    f = _write(
        tmp_path / "r.jsonl",
        {"match": {"contains": "ideas"}, "content": "IDEAS"},
        {"match": {"contains": ["implement", "softmax"]}, "content": "CODE softmax"},
        {"match": {"model": "other-model"}, "content": "OTHER"},
        {"content": "ANY"},
    )
    p = ReplayProvider(f)
    assert p.complete(_req("please implement softmax")).content == "CODE softmax"
    assert p.complete(_req("give me ideas")).content == "IDEAS"
    assert p.complete(_req("something")).content == "ANY"
    assert p.complete(_req("x", model="other-model")).content == "OTHER"


def test_keyed_entry_with_match_serves_as_fallback(tmp_path):
    f = _write(
        tmp_path / "r.jsonl", {"key": "0" * 64, "match": {"contains": "softmax"}, "content": "old"}
    )
    assert ReplayProvider(f).complete(_req("softmax, edited prompt")).content == "old"


def test_keyed_entry_without_match_is_not_a_fallback(tmp_path):
    f = _write(tmp_path / "r.jsonl", {"key": "0" * 64, "content": "only for that key"})
    with pytest.raises(LLMError, match="0 unused fallback"):
        ReplayProvider(f).complete(_req("anything"))


def test_samples_are_distinct_requests(tmp_path):
    f = _write(tmp_path / "r.jsonl", {"content": "a"}, {"content": "b"})
    p = ReplayProvider(f)
    got = [p.complete(_req("q", temperature=1.0, sample_index=i)).content for i in range(2)]
    assert got == ["a", "b"]


def test_record_then_replay_exactly(tmp_path):
    f = tmp_path / "rec" / "r.jsonl"
    reqs = [_req("one"), _req("two", temperature=0.7, sample_index=1)]
    for i, r in enumerate(reqs):
        append_record(f, r, LLMResponse(content=f"answer {i}", usage=Usage(1, 2)))
    p = ReplayProvider(f)
    assert [p.complete(r).content for r in reversed(reqs)] == ["answer 1", "answer 0"]


def test_malformed_file_names_line(tmp_path):
    f = _write(tmp_path / "bad.jsonl", {"content": "ok"}, "{broken")
    with pytest.raises(LLMError, match=r"bad.jsonl:2"):
        ReplayProvider(f)
    g = _write(tmp_path / "bad2.jsonl", {"text": "no content field"})
    with pytest.raises(LLMError, match="content"):
        ReplayProvider(g)
    with pytest.raises(LLMError, match="cannot read"):
        ReplayProvider(tmp_path / "missing.jsonl")


def test_format_is_documented_in_formats_md(tmp_path):
    """docs/formats.md documents the file: its example loads, and its field table names exactly
    the fields a recorded line has, plus "match"."""
    import re

    from conftest import ROOT

    doc = (ROOT / "docs" / "formats.md").read_text().split("## Recorded answers (`--llm replay:FILE`)", 1)[1]
    doc = doc.split("\n## ", 1)[0]
    example = re.search(r"```jsonl\n(.*?)\n```\n", doc, re.S).group(1)
    entries = ReplayProvider(_write(tmp_path / "doc.jsonl", example)).entries
    assert len(entries) == 4 and entries[2].usage == Usage(1200, 800) and entries[3].finish_reason == "length"
    fields = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
    r = LLMRequest(model="m", messages=(Message("user", "q"),), metadata={"round": 0})
    append_record(tmp_path / "rec.jsonl", r, LLMResponse(content="a", usage=Usage(1, 2), finish_reason="stop"))
    assert fields == set(json.loads((tmp_path / "rec.jsonl").read_text())) | {"match"}
