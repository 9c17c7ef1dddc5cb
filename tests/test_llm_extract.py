"""Extraction of code and ideas from messy model answers."""

import ast
import json

import pytest
from conftest import DATA

from kernelsearch.llm.extract import (
    FAMILIES,
    Idea,
    cut_by_length,
    extract_code,
    extract_ideas,
    find_code_blocks,
    normalize_family,
    read_ideas,
)

# Answers of each kind (closed fence; last fence never closed with the answer ended normally,
# cut at the token limit, or with code that does not parse), in the replay format.
RECORDED = {r["name"]: r for r in (json.loads(line) for line in (DATA / "answers" / "fences.jsonl").open()
                                   if line.strip() and not line.startswith("#"))}
CODE_ANSWERS = sorted(n for n in RECORDED if not n.startswith("ideas"))
IDEAS_ANSWERS = sorted(n for n in RECORDED if n.startswith("ideas"))

GOOD = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
SKETCH = "class ModelNew(nn.Module):\n    pass  # sketch\n"


def test_takes_last_complete_block_defining_model_new():
    text = (
        "First a sketch:\n```python\n" + SKETCH + "```\n"
        "A helper:\n```python\ndef helper():\n    return 1\n```\n"
        "Final version:\n```py\n" + GOOD + "```\nDone."
    )
    r = extract_code(text)
    assert r.outcome == "ok"
    assert r.code == GOOD
    assert "2 blocks" in r.note


def test_ignores_blocks_without_model_new():
    text = "```python\n" + GOOD + "```\nAnd usage:\n```python\nm = ModelNew()\nprint(m)\n```\n"
    assert extract_code(text).code == GOOD


def test_no_block_is_no_code():
    r = extract_code("I think you should use shared memory tiling. class ModelNew is hard.")
    assert r.outcome == "no_code"
    assert r.code is None


def test_blocks_without_model_new_is_no_code():
    r = extract_code("```python\ndef f():\n    pass\n```\n```cuda\n__global__ void k() {}\n```\n")
    assert r.outcome == "no_code"
    assert "2 code block" in r.note


def test_truncated_final_block():
    r = extract_code(
        "Here it is:\n```python\nimport torch\nclass ModelNew(nn.Module):\n    def forw"
    )
    assert r.outcome == "truncated"
    assert r.code is None
    assert "line 2" in r.note


def test_truncated_final_block_after_complete_one_uses_earlier():
    text = "```python\n" + GOOD + "```\nImproved:\n```python\nclass ModelNew(nn.Module):\n    def f"
    r = extract_code(text)
    assert r.outcome == "ok"
    assert r.code == GOOD
    assert "cut off" in r.note


def test_crlf_tildes_and_language_tag_with_extra_words():
    crlf = ('~~~python title="model_new.py" linenums\r\n' + GOOD + "~~~\r\n").replace("\n", "\r\n")
    r = extract_code("Answer:\r\n" + crlf)
    assert r.outcome == "ok"
    assert r.code == GOOD


def test_bare_fence_and_longer_fences():
    text = "````\n" + GOOD + "```\nnot the end\n````\n"
    r = extract_code(text)
    assert r.outcome == "ok"
    assert "not the end" in r.code


def test_indented_fence_in_a_list_is_dedented():
    body = "".join("   " + line + "\n" for line in GOOD.splitlines())
    r = extract_code("1. Code:\n   ```python\n" + body + "   ```\n")
    assert r.code == GOOD


def test_prefers_python_tag_over_other_tags():
    text = "```python\n" + GOOD + "```\n```text\nclass ModelNew(nn.Module):\n    pass\n```\n"
    assert extract_code(text).code == GOOD


def test_unfenced_whole_python_answer_is_accepted():
    r = extract_code(GOOD)
    assert r.outcome == "ok" and r.code == GOOD


def test_length_finish_reason_turns_no_code_into_truncated():
    r = extract_code("Let me think about this step by step. First", finish_reason="length")
    assert r.outcome == "truncated"


def test_inline_triple_backticks_are_not_fences():
    blocks = find_code_blocks("Use ```x``` inline.\n```python\nclass ModelNew:\n    pass\n```\n")
    assert len(blocks) == 1 and blocks[0].closed


def test_ideas_from_fenced_json():
    text = """Here are my ideas:
```json
[
  {"idea": "Tile the matmul in shared memory", "family": "memory_hierarchy"},
  {"idea": "Use cp.async double buffering", "family": "Async latency"},
  {"idea": "Use bf16 tensor cores", "family": "precission"},
  {"idea": "Unroll the inner loop", "family": "instruction-efficiency"},
  {"idea": "Raise occupancy with 128-thread blocks", "family": "occupancy/parallelism"},
  {"idea": "Remove the branch in the inner loop", "family": "control flow"},
  {"idea": "Something odd", "family": "astrology"}
]
```"""
    ideas = extract_ideas(text)
    assert [i.family for i in ideas] == [*FAMILIES, "other"]
    assert ideas[0] == Idea("Tile the matmul in shared memory", "memory_hierarchy")


def test_ideas_from_bare_json_object_and_dedup():
    text = 'Sure! {"ideas": [{"title": "Fuse", "description": "fuse bias and relu", "category": "memory"}, {"title": "Fuse", "description": "fuse bias and relu", "category": "memory"}, "Use warp shuffles (family: instruction_efficiency)"]} Hope it helps.'
    ideas = extract_ideas(text)
    assert ideas == [
        Idea("Fuse: fuse bias and relu", "memory_hierarchy"),
        Idea("Use warp shuffles", "instruction_efficiency"),
    ]


def test_ideas_from_numbered_list():
    text = """Ideas:
1. [memory_hierarchy] Load tiles of A and B into shared memory.
2) **Occupancy**: launch 256 threads per block
   and give each thread four outputs.
3. Use fast exp intrinsics (family: instruction efficiency)
4. Something without a family

That's all."""
    ideas = extract_ideas(text)
    assert ideas == [
        Idea("Load tiles of A and B into shared memory.", "memory_hierarchy"),
        Idea(
            "launch 256 threads per block and give each thread four outputs.",
            "occupancy_parallelism",
        ),
        Idea("Use fast exp intrinsics", "instruction_efficiency"),
        Idea("Something without a family", "other"),
    ]


def test_ideas_skip_json_that_is_not_ideas():
    text = "Shapes are [4096, 4096].\n1. Use vectorised float4 loads (family: memory hierarchy)"
    assert extract_ideas(text) == [Idea("Use vectorised float4 loads", "memory_hierarchy")]


def test_normalize_family_spellings():
    assert normalize_family("Memory-Hierarchy") == "memory_hierarchy"
    assert normalize_family("memroy_hierarchy") == "memory_hierarchy"
    assert normalize_family("occupancy & parallelism") == "occupancy_parallelism"
    assert normalize_family("latency hiding") == "async_latency"
    assert normalize_family("") == "other"
    assert normalize_family(None) == "other"
    assert normalize_family("weather") == "other"


# ---- a last fence never closed -----------------------------------------------------------

def test_finish_reasons_that_mean_the_token_limit():
    for reason in ("length", "max_tokens", "MAX_TOKENS", "max_output_tokens", "max-output-tokens", " Length ",
                   "model_context_window_exceeded"):
        assert cut_by_length(reason), reason
    for reason in (None, "", "stop", "end_turn", "STOP", "stop_sequence", "tool_calls", "content_filter"):
        assert not cut_by_length(reason), reason


@pytest.mark.parametrize("name", CODE_ANSWERS)
def test_recorded_code_answers(name):
    rec = RECORDED[name]
    r = extract_code(rec["content"], rec["finish_reason"])
    assert r.outcome == rec["expect"], r.note
    if rec["expect"] in ("ok", "unclosed_fence"):
        assert "class ModelNew" in r.code and "```" not in r.code
        ast.parse(r.code)  # the Python file, C++ source strings and all
        assert ("unclosed_fence" in r.note) == (rec["expect"] == "unclosed_fence")
    else:
        assert r.code is None


def test_unclosed_fence_after_a_closed_sketch_takes_the_last_block():
    text = "A sketch:\n```python\n" + SKETCH + "```\nThe final file:\n```python\n" + GOOD
    r = extract_code(text, "stop")
    assert (r.outcome, r.code) == ("unclosed_fence", GOOD)
    assert "line 7" in r.note and "2 blocks" in r.note
    # the same answer cut at the token limit falls back to the complete sketch, as before
    r = extract_code(text, "length")
    assert (r.outcome, r.code) == ("ok", SKETCH) and "cut off" in r.note


def test_unclosed_fence_cut_by_the_token_limit_stays_truncated_even_if_it_parses():
    rec = RECORDED["unclosed_max_tokens_parses"]
    body = find_code_blocks(rec["content"])[-1].body
    ast.parse(body)  # the cut happened to fall between two statements
    r = extract_code(rec["content"], rec["finish_reason"])
    assert r.outcome == "truncated" and r.code is None
    assert "token limit" in r.note and "'max_tokens'" in r.note


def test_unclosed_fence_whose_code_does_not_parse_is_rejected_with_the_reason():
    rec = RECORDED["unclosed_stop_syntax_error"]
    r = extract_code(rec["content"], rec["finish_reason"])
    assert (r.outcome, r.code) == ("truncated", None)
    assert "never closed" in r.note and "does not parse" in r.note and "SyntaxError at line 40" in r.note
    assert rec["content"].split("\n")[39].strip() == "def forward(self, a, b)"


@pytest.mark.parametrize("name", IDEAS_ANSWERS)
def test_recorded_ideas_answers(name):
    rec = RECORDED[name]
    r = read_ideas(rec["content"], rec["finish_reason"])
    assert r.outcome == rec["expect"], r.note
    if rec["expect"] in ("ideas", "unclosed_fence"):
        assert [i.family for i in r.ideas] == ["memory_hierarchy", "occupancy_parallelism", "instruction_efficiency"]
    else:
        assert r.ideas == [] and extract_ideas(rec["content"], rec["finish_reason"]) == []


def test_unclosed_ideas_json_reasons():
    rec = RECORDED["ideas_unclosed_invalid_stop"]
    note = read_ideas(rec["content"], rec["finish_reason"]).note
    assert "never closed and does not parse" in note and "line 11" in note
    rec = RECORDED["ideas_unclosed_length"]
    assert "token limit" in read_ideas(rec["content"], rec["finish_reason"]).note
    # nothing is salvaged from inside a cut block, but a list before it still counts
    text = "1. Tile in shared memory (family: memory hierarchy)\n\n```json\n[{\"idea\": \"Unro"
    r = read_ideas(text, "length")
    assert r.outcome == "ideas" and r.ideas == [Idea("Tile in shared memory", "memory_hierarchy")]
    assert "token limit" in r.note
