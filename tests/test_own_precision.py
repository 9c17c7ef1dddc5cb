"""A problem's own precision where it declares none: the dtype its floating tensors share
(read on the meta device), else fp32 with the mixture stated. A bf16 problem stays bf16 up to the
candidate; an explicit --precision casts it as KernelBench's does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA

from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.problems.own_precision import infer_precision
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

OWN = DATA / "own_precision"
BF16, MIXED = OWN / "bf16_linear.py", OWN / "mixed_linear.py"


def _candidate(expect: str) -> Candidate:
    src = (OWN / "_expects_dtype.py").read_text().replace("EXPECT = torch.bfloat16", f"EXPECT = torch.{expect}")
    return Candidate.from_source(src, name=f"expects_{expect}")


def test_sources_of_a_problems_own_precision(tmp_path):
    bf16 = load_problem(BF16)
    assert (bf16.precision, bf16.own_precision, bf16.precision_source, bf16.precision_note) == (
        "bf16", "bf16", "inferred", "")
    assert (bf16.atol, bf16.rtol) == (1e-2, 1e-2)  # the tolerance follows the inferred precision
    assert (bf16.at("fp32").atol, bf16.at("fp32").precision_source) == (1e-4, "inferred")
    mixed = load_problem(MIXED)
    assert (mixed.precision, mixed.precision_source) == ("fp32", "default")
    assert "mixed dtypes" in mixed.precision_note
    assert "parameters bfloat16" in mixed.precision_note and "inputs float32" in mixed.precision_note
    plain = load_problem(DATA / "weights" / "linear_gelu.py")
    assert (plain.precision, plain.precision_source, plain.precision_note) == ("fp32", "inferred", "")
    declared = tmp_path / "declared.py"
    declared.write_text(BF16.read_text() + '\nPRECISION = "fp16"\n')
    assert (load_problem(declared).precision, load_problem(declared).precision_source) == ("fp16", "declared")


def _module(**attrs):
    import types

    return types.SimpleNamespace(**attrs)


def test_inference_rules_integers_none_float64_and_meta_failures():
    import torch
    import torch.nn as nn

    precisions = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    ints = _module(Model=lambda: nn.Identity(), get_init_inputs=lambda: [],
                   get_inputs=lambda: [torch.arange(4), torch.ones(2, dtype=torch.bool)])
    assert infer_precision(ints, precisions, "fp32").__dict__ == {"precision": "fp32", "source": "default", "note": ""}
    half = _module(Model=lambda: nn.Identity(), get_init_inputs=lambda: [],
                   get_inputs=lambda: [torch.randn(4, dtype=torch.float16), torch.arange(4)])
    assert infer_precision(half, precisions, "fp32").precision == "fp16"
    f64 = _module(Model=lambda: nn.Linear(2, 2, dtype=torch.float64), get_init_inputs=lambda: [],
                  get_inputs=lambda: [torch.randn(2, dtype=torch.float64)])
    got = infer_precision(f64, precisions, "fp32")
    assert (got.precision, got.source) == ("fp32", "default") and "float64" in got.note

    def needs_data():
        return nn.Linear(int(torch.randn(()).abs().item()) + 1, 2)

    meta = infer_precision(_module(Model=needs_data, get_init_inputs=lambda: [], get_inputs=lambda: []),
                           precisions, "fp32")
    assert (meta.precision, meta.source) == ("fp32", "default") and "meta device" in meta.note


@pytest.mark.parametrize("path,precision,expect", [
    (BF16, None, "bfloat16"),     # its own, inferred: no cast
    (BF16, "fp32", "float32"),    # an explicit choice casts, as KernelBench's --precision
    (MIXED, None, "float32"),     # a mixture: fp32, everything cast
])
def test_inputs_reach_the_candidate_at_the_problems_precision(path, precision, expect, cpu_config, archive):
    problem = load_problem(path)
    res = evaluate(problem, _candidate(expect), cpu_config.with_(precision=precision), archive)
    assert res.status is Status.CORRECT, res.reason
    assert res.precision == {"bfloat16": "bf16", "float32": "fp32"}[expect]
    # the wrong expectation fails on its assert: the dtype really is the one the verdict names
    other = "float32" if expect == "bfloat16" else "bfloat16"
    bad = evaluate(problem, _candidate(other), cpu_config.with_(precision=precision), archive)
    assert bad.status is Status.RUNTIME_ERROR and "AssertionError" in bad.reason, bad.reason
    assert f"torch.{expect}" in bad.reason, bad.reason


def test_problems_shows_where_its_precision_came_from():
    out = subprocess.run([sys.executable, "-m", "kernelsearch", "problems", str(OWN), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {d["name"]: d for d in json.loads(out.stdout)}
    assert (rows["bf16_linear"]["precision"], rows["bf16_linear"]["precision_source"]) == ("bf16", "inferred")
    assert rows["mixed_linear"]["precision_source"] == "default" and "mixed" in rows["mixed_linear"]["precision_note"]
    table = subprocess.run([sys.executable, "-m", "kernelsearch", "problems", str(BF16)],
                           capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                            "COLUMNS": "250"})
    assert "bf16 inferred" in table.stdout, table.stdout


def test_eval_bench_and_run_state_a_mixture_on_stderr(capsys):
    from kernelsearch.cli.common import note_precision

    mixed, bf16 = load_problem(MIXED), load_problem(BF16)
    note_precision([mixed, bf16])
    err = capsys.readouterr().err
    assert "mixed_linear runs at fp32: mixed dtypes" in err and "bf16_linear" not in err
    note_precision([mixed], "bf16")  # an explicit choice needs no explanation
    assert capsys.readouterr().err == ""
