"""Precision modes and KernelBench's way of building models: problems evaluated at fp32, fp16 or
bf16 with the tolerance that goes with it, and a candidate's own weights matching the reference's
when it makes them as the reference's modules do (legacy constructor, torch.empty + init)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import baseline_key, evaluate
from kernelsearch.evaluator.verdict.weights import init_difference
from kernelsearch.problems.describe import describe
from kernelsearch.problems.loader import ProblemError, load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult, Status

WEIGHTS = DATA / "weights"
PROBLEM = WEIGHTS / "linear_gelu.py"


def _problem_file(tmp_path, extra: str) -> str:
    src = (DATA / "problems" / "scale_add.py").read_text() + "\n" + extra
    path = tmp_path / "p.py"
    path.write_text(src)
    return str(path)


def test_tolerance_follows_the_precision_unless_the_problem_sets_its_own(tmp_path):
    plain = load_problem(PROBLEM)
    assert (plain.precision, plain.atol, plain.rtol) == ("fp32", 1e-4, 1e-4)
    assert (plain.at("bf16").atol, plain.at("fp16").rtol) == (1e-2, 1e-2)
    assert plain.at(None) is plain and plain.at("fp32") is plain
    own = load_problem(_problem_file(tmp_path, 'PRECISION = "fp16"\nATOL = 3e-3\nRTOL = 4e-3\n'))
    assert (own.precision, own.atol, own.rtol) == ("fp16", 3e-3, 4e-3)
    # calibrated for fp16: at another precision, that precision's default applies
    assert (own.at("fp32").atol, own.at("bf16").rtol) == (1e-4, 1e-2)
    with pytest.raises(ProblemError, match="PRECISION must be one of"):
        load_problem(_problem_file(tmp_path, 'PRECISION = "fp8"\n'))
    with pytest.raises(ProblemError, match="unknown precision"):
        plain.at("int8")


def test_config_numerics_user_tolerance_over_both():
    problem = load_problem(PROBLEM)
    at, atol, rtol = EvalConfig(precision="bf16").numerics(problem)
    assert (at.precision, atol, rtol) == ("bf16", 1e-2, 1e-2)
    at, atol, rtol = EvalConfig(precision="bf16", atol=0.5).numerics(problem)
    assert (atol, rtol) == (0.5, 1e-2)


def test_description_and_baseline_key_at_the_precision():
    problem = load_problem(PROBLEM)
    fp32, bf16 = describe(problem, "cpu"), describe(problem.at("bf16"), "cpu")
    assert fp32.inputs[0].dtype == "float32" and bf16.inputs[0].dtype == "bfloat16"
    assert bf16.min_bytes * 2 == fp32.min_bytes  # the floor is set by what a bf16 kernel moves
    keys = {baseline_key(problem, EvalConfig(precision=p)) for p in (None, "fp32", "bf16", "fp16")}
    assert len(keys) == 3  # None is the problem's own, fp32


@pytest.mark.parametrize("name,precision,status", [
    ("legacy_ctor", None, Status.CORRECT),
    ("empty_init", None, Status.CORRECT),
    ("randn_weights", None, Status.INCORRECT),
    ("fp32_inside", "bf16", Status.CORRECT),
])
def test_weights_made_as_the_module_makes_them_match(name, precision, status, cpu_config, archive):
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(WEIGHTS / f"{name}.py")
    res = evaluate(problem, cand, cpu_config.with_(precision=precision), archive)
    assert res.status is status, res.reason
    assert res.precision == (precision or "fp32")
    assert (res.atol, res.rtol) == ((1e-2, 1e-2) if precision == "bf16" else (1e-4, 1e-4))
    if status is Status.INCORRECT:
        assert "weights differ from Model's" in res.reason and "768x1024" not in res.reason
        assert "80x96" in res.reason  # the CPU sizes' weight
    stored = EvalResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert stored.precision == res.precision


def test_bf16_outputs_compared_at_bf16(cpu_config, archive):
    """The reference runs in bf16 too: a candidate that returns float32 where the reference
    returns bf16 is caught (dtype), and one computing at bf16 passes the 1e-2 tolerance."""
    problem = load_problem(PROBLEM)
    src = (WEIGHTS / "fp32_inside.py").read_text().replace(".to(x.dtype)", "")
    res = evaluate(problem, Candidate.from_source(src, name="fp32_out"), cpu_config.with_(precision="bf16"), archive)
    assert res.status is not Status.CORRECT
    assert "dtype" in res.reason or "bfloat16" in res.reason, res.reason


def test_init_difference_hint_only_for_shared_shapes_with_other_values():
    ref = [[[8, 4], 1.5, 9.0], [[8], 0.25, 2.0]]
    assert init_difference(ref, ref) == ""
    assert init_difference([[[3, 3], 1.0, 1.0]], ref) == ""  # no shape in common: no claim
    hint = init_difference([[[8, 4], -2.0, 7.0], [[8], 0.25, 2.0]], ref)
    assert "1 of its 2 tensors" in hint and "8x4" in hint
    assert init_difference("forged", ref) == "" and init_difference([["x"]], ref) == ""


def test_cli_precision_flag_and_json_fields(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "kernelsearch", "eval", str(PROBLEM), str(WEIGHTS / "legacy_ctor.py"), "--device", "cpu",
         "--precision", "bf16", "--json", "--no-compile", "--no-profile", "--max-reps", "10", "--trials", "2",
         "--archive", str(tmp_path / "a.sqlite")],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert (d["precision"], d["atol"], d["rtol"]) == ("bf16", 1e-2, 1e-2)
    assert d["status"] == "correct", d["reason"]
    bad = subprocess.run([sys.executable, "-m", "kernelsearch", "eval", str(PROBLEM), str(WEIGHTS / "legacy_ctor.py"),
                          "--precision", "fp8"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "fp8" in bad.stderr


def test_old_runs_keep_their_tolerance():
    from kernelsearch.search.config import RunConfig

    made = RunConfig(strategy="single", llm="replay:x", problem_name="p", backend="cpp")
    d = made.to_dict()
    d["eval"].pop("precision")
    old = RunConfig.from_dict(d)
    assert (old.eval.atol, old.eval.rtol, old.eval.precision) == (1e-2, 1e-2, None)
    new = RunConfig.from_dict(made.to_dict())
    assert (new.eval.atol, new.eval.precision) == (None, None)


def test_prompts_state_precision_and_tolerance():
    from kernelsearch.llm.prompts import PromptLibrary, numerics_text

    text = numerics_text("bf16", 1e-2, 1e-2)
    assert "torch.bfloat16" in text and "atol=0.01" in text
    msgs = PromptLibrary().messages("implement", {"problem_name": "p", "problem_source": "x", "backend": "cuda",
                                                  "idea": "i", "numerics": text})
    assert any("torch.bfloat16" in m.content for m in msgs)
