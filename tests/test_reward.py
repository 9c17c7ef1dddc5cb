"""`kernelsearch.reward`: the real evaluator behind an RL reward, on the CPU with plain-PyTorch
candidates (no build), a red-team exploit, and raw model answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT
from search_support import PROBLEM, code_answer, torch_source

import kernelsearch
from kernelsearch import Reward, RewardSpec, reward
from kernelsearch.metrics.fastp import speedup_spread
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.result import EvalResult, Status, TimingStats

FAST = torch_source("torch.add(b, a, alpha=2)")
WRONG = torch_source("a * 3 + b")
CHEAT = ROOT / "tests" / "redteam" / "exploits" / "d_patch_perf_counter.py"  # problem: scale_add


def test_correct_kernel_gets_bonus_plus_speedup(cpu_config, archive):
    spec = RewardSpec(fallback_speedup=True)  # FAST is plain PyTorch: marked torch_fallback
    r = reward(load_problem(PROBLEM), FAST, config=cpu_config, archive=archive, spec=spec)
    assert isinstance(r, Reward) and r.status == "correct" and r.source == FAST
    assert "torch_fallback" in r.result.flags
    sp = r.result.speedup_vs_eager
    assert sp is not None and sp > 0
    assert r.reward == pytest.approx(0.3 + 1.0 * min(sp, 10.0))
    assert r.why.startswith(f"correct, {sp:.2f}x vs eager")
    assert archive.count("evaluations") == 1  # recorded like any evaluation
    # by default PyTorch's work earns the bonus for correctness, not its speed
    value, why = RewardSpec().score(r.result)
    assert value == pytest.approx(0.3) and "torch_fallback" in why

    # the same verdict under other specs: a cap, a weight, the noise margin
    assert RewardSpec(speedup_cap=0.5, fallback_speedup=True).score(r.result)[0] == pytest.approx(0.3 + min(sp, 0.5))
    assert RewardSpec(correct_bonus=1.0, speed_weight=0.0).score(r.result)[0] == pytest.approx(1.0)
    spread = speedup_spread(r.result, "eager")  # the kernel's plus eager's IQR/median, as fast_p counts it
    value, why = RewardSpec(margin=True, fallback_speedup=True).score(r.result)
    assert value == pytest.approx(0.3 + min(sp * (1 - min(spread, 1.0)), 10.0))
    assert value <= r.reward and "noise margin" in why


def test_wrong_kernel_scores_zero(cpu_config):
    r = reward(str(PROBLEM), WRONG, device="cpu", config=cpu_config)
    assert (r.reward, r.status, r.code) == (0.0, "incorrect", "wrong_values")
    assert r.why.startswith("incorrect: trial")
    assert RewardSpec(failure=-0.1).score(r.result)[0] == -0.1


def test_detected_cheat_gets_the_penalty(cpu_config):
    r = reward(PROBLEM, CHEAT.read_text(), config=cpu_config)
    assert (r.reward, r.status, r.code) == (-1.0, "rejected", "patching")
    assert "cheat" in r.why and "perf_counter_ns" in r.why
    assert RewardSpec(rejected=-5.0).score(r.result)[0] == -5.0


def test_raw_model_answer_with_a_code_block(cpu_config):
    text = code_answer(FAST, prose="A sketch first:\n```python\ndef helper():\n    pass\n```\nThe final file:")
    r = reward(PROBLEM, text, config=cpu_config)
    assert r.source == FAST  # the block defining ModelNew, not the sketch
    assert r.status == "correct"
    assert r.reward == pytest.approx(0.3)  # plain PyTorch: marked torch_fallback, no speed credit


@pytest.mark.parametrize("text, why", [
    ("I would rather describe the approach in words: fuse the two ops.", "no fenced code block"),
    ("Here:\n```python\nprint('hello')\n```\n", "none defines class ModelNew"),
    ("```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n", "never closed"),
    ("   \n", "empty"),
])
def test_answer_without_code_scores_zero(text, why):
    r = reward("softmax", text)  # a bundled problem by name; nothing is evaluated
    assert (r.reward, r.status, r.result, r.source) == (0.0, "no_code", None, None)
    assert r.why.startswith("no code: ") and why in r.why
    assert reward("softmax", text, spec=RewardSpec(failure=-0.2)).reward == -0.2


def _result(status: Status, eager: float = 4.0, cand: float = 1.0, **kw) -> EvalResult:
    return EvalResult(problem="p", problem_id="x", candidate_id="c", backend="cpp", device="cpu",
                      status=status, reason="why", eager_timing=TimingStats.from_samples([eager]),
                      candidate_timing=TimingStats.from_samples([cand]), **kw)


def test_spec_maps_every_status():
    spec = RewardSpec()
    for st in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.INCORRECT, Status.TIMEOUT, Status.CRASHED):
        assert spec.score(_result(st)) == (0.0, f"{st.value}: why")
    assert spec.score(_result(Status.REJECTED))[0] == -1.0
    assert spec.score(_result(Status.CORRECT))[0] == pytest.approx(4.3)
    value, why = spec.score(_result(Status.CORRECT, eager=50.0))
    assert value == pytest.approx(10.3) and "capped at 10x" in why
    no_baseline = _result(Status.CORRECT)
    no_baseline.eager_timing = None
    assert spec.score(no_baseline)[0] == 0.3
    fallback = _result(Status.CORRECT, flags=["torch_fallback"])
    assert spec.score(fallback)[0] == 0.3
    assert RewardSpec(fallback_speedup=True).score(fallback)[0] == pytest.approx(4.3)
    # a noisy kernel (IQR/median 2/3, eager without spread): its speedup counts as speedup * (1 - spread)
    noisy = _result(Status.CORRECT, eager=6.0)
    noisy.candidate_timing = TimingStats.from_samples([1.0, 1.0, 2.0, 2.0])
    spread = noisy.candidate_timing.rel_spread
    assert 0 < spread < 1
    assert RewardSpec(margin=True).score(noisy)[0] == pytest.approx(0.3 + 4.0 * (1 - spread))


def test_import_stays_cheap():
    code = ("import sys, kernelsearch; assert 'torch' not in sys.modules and 'kernelsearch.rl' not in sys.modules;"
            " assert kernelsearch.reward.__module__ == 'kernelsearch.rl'; print('ok')")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert kernelsearch.RewardSpec is RewardSpec
