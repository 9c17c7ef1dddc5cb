"""Price table: defaults, user JSON files, unknown models cost None."""

from __future__ import annotations

import json

import pytest

from kernelsearch.llm.base import LLMError, Usage
from kernelsearch.llm.pricing import DEFAULT_PRICES, PriceTable, cost

U = Usage(input_tokens=2_000_000, output_tokens=1_000_000)


def test_defaults_and_name_variants():
    t = PriceTable.load(use_env=False)
    gpt4o = DEFAULT_PRICES["gpt-4o"]
    assert t.cost("gpt-4o", U) == pytest.approx(2 * gpt4o.input_per_mtok + gpt4o.output_per_mtok)
    assert t.lookup("gpt-4o-2024-08-06") == gpt4o
    assert t.lookup("openai/GPT-4o") == gpt4o
    assert t.lookup("claude-sonnet-4-20250514") == DEFAULT_PRICES["claude-sonnet-4"]
    assert t.lookup("gpt-4o-mini") == DEFAULT_PRICES["gpt-4o-mini"]


def test_unknown_model_costs_none_not_zero():
    t = PriceTable.load(use_env=False)
    assert t.cost("Qwen/Qwen2.5-Coder-32B-Instruct", U) is None
    assert t.cost("o3-mini", U) is None  # no loose prefix matching
    assert t.cost(None, U) is None


def test_user_json_extends_and_overrides(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(
        json.dumps(
            {
                "my-local-model": [0, 0],
                "gpt-4o": {"input": 1.0, "output": 2.0},
                "Custom-Big": {"input_per_mtok": 5, "output_per_mtok": 20},
            }
        )
    )
    t = PriceTable.load(f, use_env=False)
    assert t.cost("my-local-model", U) == 0.0
    assert t.cost("gpt-4o", U) == pytest.approx(4.0)
    assert t.cost("custom-big", U) == pytest.approx(30.0)
    assert t.cost("gpt-4.1", U) is not None  # defaults kept


def test_env_file_then_path_file(tmp_path, monkeypatch):
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"a": [1, 1], "b": [1, 1]}))
    path_file = tmp_path / "path.json"
    path_file.write_text(json.dumps({"b": [3, 3]}))
    monkeypatch.setenv("KERNELSEARCH_PRICES", str(env_file))
    t = PriceTable.load(path_file)
    assert t.cost("a", U) == pytest.approx(3.0)
    assert t.cost("b", U) == pytest.approx(9.0)
    assert cost("a", U) == pytest.approx(3.0)  # module-level helper reads the env file too


def test_bad_price_file(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"m": {"input": 1}}))
    with pytest.raises(LLMError, match="bad.json: m"):
        PriceTable.load(f, use_env=False)
    f.write_text("[1, 2]")
    with pytest.raises(LLMError, match="JSON object"):
        PriceTable.load(f, use_env=False)
