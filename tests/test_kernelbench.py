"""Running over KernelBench: problems that cannot load or cannot fit get a specific reason, the
sweep (benchmarks/kernelbench_sweep.py) judges each problem's reference as a candidate and
resumes, and the baselines table reads KernelBench's timing format. The problems are small
KernelBench-style files in tests/data/kernelbench, written for these tests."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import DATA, ROOT

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator import feasibility
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.feasibility import MemoryNeed, fit_reason, memory_need
from kernelsearch.lint.linter import lint
from kernelsearch.problems.describe import ProblemDescription, TensorInfo, describe
from kernelsearch.problems.loader import load_problem, load_problems
from kernelsearch.records.result import Status

KB = DATA / "kernelbench"
LEVEL1 = KB / "KernelBench" / "level1"


def _script(name: str):
    """A benchmarks/ script as a module (registered, as its dataclasses need)."""
    mod_name = f"ks_bench_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_einops(monkeypatch):
    """einops missing whether or not this machine has it (None in sys.modules stops its import)."""
    monkeypatch.setitem(sys.modules, "einops", None)


def test_missing_module_hint_names_the_kernelbench_extra(no_einops):
    problems, failures = load_problems(LEVEL1)
    assert [f.name for f in failures] == ["3_Needs_einops"]
    assert "pip install einops" in failures[0].hint
    assert "kernelsearch[kernelbench]" in failures[0].hint
    assert "3_Needs_einops" not in [p.name for p in problems]


def test_kernelbench_extra_lists_what_its_problems_import():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"einops", "transformers"} <= set(extras["kernelbench"])


def test_forward_peak_counts_intermediates_alive_together():
    desc = describe(load_problem(LEVEL1 / "2_Tiny_linear_tanh.py"), "cuda")
    out = sum(o.nbytes for o in desc.outputs)
    # the linear layer's output and tanh's are alive at once
    assert desc.forward_peak_bytes == 2 * out


def test_memory_need_adds_the_evaluators_copies():
    desc = ProblemDescription("p", "cuda", inputs=[TensorInfo([10], "float32", 1000), 3],
                              outputs=[TensorInfo([5], "float32", 400)], param_bytes=50, forward_peak_bytes=900)
    need = memory_need(desc, EvalConfig(device="cuda"))
    assert need == MemoryNeed(inputs=1000, outputs=400, params=50, forward=900, handover=400 * (5 + 2 + 2),
                              order_check=True)
    assert need.candidate == 50 + 3 * 1000 + 400 + 900  # trial 0: inputs, clones, determinism copy
    assert "x3 (the inputs, clones" in need.breakdown()
    # an output 8 times its input (a conv): the stream-order check's snapshot beside 2 kept outputs
    wide = MemoryNeed(inputs=100, outputs=800, params=0, forward=800, handover=0, order_check=True)
    assert wide.candidate == 100 + 3 * 800 + 800
    assert "outputs 0 MB x3" in wide.breakdown() and "snapshot" in wide.breakdown()
    assert MemoryNeed(100, 800, 0, 800, 0).candidate == 2 * 100 + 2 * 800 + 800  # no such check on the CPU
    assert need.judge == 50 + 1000 + 400 + 900 + 5 * 8 * (400 // 4)  # + the comparison's float64 slices


def test_a_problem_too_large_is_crashed_before_any_worker_starts():
    problem = load_problem(LEVEL1 / "4_Huge_shift.py")
    t0 = time.monotonic()
    res = evaluate(problem, _reference_candidate(problem), EvalConfig(device="cpu"))
    assert res.status == Status.CRASHED
    assert res.reason.startswith("does not fit in memory: inputs ")
    assert "need ~" in res.reason and "TB in the candidate's worker" in res.reason
    assert not any(k.startswith("candidate") for k in res.phase_s)  # no worker ran
    assert time.monotonic() - t0 < 30


def _reference_candidate(problem):
    return _script("kernelbench_sweep").reference_candidate(problem)


def test_gpu_figure_decides_on_cuda(monkeypatch):
    problem = load_problem(LEVEL1 / "1_Tiny_scale_add.py")
    config = EvalConfig(device="cuda")
    monkeypatch.setattr(feasibility, "gpu_memory", lambda cfg: (80 << 30, "Roomy GPU"))
    assert fit_reason(problem, config) == ""
    monkeypatch.setattr(feasibility, "gpu_memory", lambda cfg: (feasibility.CUDA_RESERVE + 4096, "Tiny GPU"))
    why = fit_reason(problem, config)
    assert why.startswith("does not fit in GPU memory: inputs ")
    assert "the GPU (Tiny GPU) has" in why and "kept for the CUDA context" in why


def test_lint_reports_the_fit_reason_without_running_the_reference():
    [report] = lint([load_problem(LEVEL1 / "4_Huge_shift.py")], "cpu")
    [finding] = report.findings
    assert finding.code == "run-error"
    assert finding.message.startswith("does not fit in memory")


def test_reference_candidate_passes_the_screen_marked_as_fallback():
    from kernelsearch.evaluator.screen.python import screen

    sc = screen(_reference_candidate(load_problem(LEVEL1 / "2_Tiny_linear_tanh.py")).source)
    assert not sc.reject and not sc.syntax_error
    assert "torch_fallback" in sc.flags


def test_sweep_judges_each_problem_and_resumes(tmp_path, no_einops):
    sweep = _script("kernelbench_sweep")
    kb = tmp_path / "kb"
    shutil.copytree(KB, kb)
    out = tmp_path / "out"
    base = ["--kernelbench", str(kb), "--levels", "1", "--device", "cpu", "--out", str(out),
            "--home", str(tmp_path / "home"), "--no-compile", "--trials", "2"]

    def evaluations() -> int:
        with Archive(out / "archive.sqlite") as a:
            return a.count("evaluations")

    assert sweep.main(base + ["--part", "2/2", "--no-lint"]) == 0  # files 2 and 4, not linted
    rows = json.loads((out / "sweep-cpu.json").read_text())["rows"]
    assert [r["key"] for r in rows] == ["level1/2_Tiny_linear_tanh.py", "level1/4_Huge_shift.py"]
    assert not any(r["linted"] for r in rows)
    assert evaluations() == 2

    assert sweep.main(base) == 0  # the rest: 1 evaluated, 3 fails to load, 2 and 4 skipped but linted now
    assert evaluations() == 3
    rows = {r["key"]: r for r in json.loads((out / "sweep-cpu.json").read_text())["rows"]}
    tiny = rows["level1/1_Tiny_scale_add.py"]
    assert tiny["status"] == "correct" and "torch_fallback" in tiny["flags"]
    assert tiny["eager_ms"] > 0 and tiny["compile_ms"] is None
    assert rows["level1/2_Tiny_linear_tanh.py"]["status"] == "correct"
    assert rows["level1/3_Needs_einops.py"]["status"] == "load_failed"
    assert "kernelsearch[kernelbench]" in rows["level1/3_Needs_einops.py"]["hint"]
    huge = rows["level1/4_Huge_shift.py"]
    assert huge["status"] == "crashed" and huge["reason"].startswith("does not fit in memory")
    assert huge["linted"] and any(line.startswith("run-error: does not fit") for line in huge["lint"])
    assert all(r["linted"] for r in rows.values() if r["status"] != "load_failed")

    # too large for the machine is a finding, not a failed lint: it is not linted again (its
    # message names the memory available then, which differs from call to call on a loaded host)
    earlier = {**huge, "lint": [huge["lint"][0].split(";")[0] + "; the host has 9.1 GB available"]}
    with (out / "results-cpu.jsonl").open("a") as f:
        f.write(json.dumps(earlier) + "\n")
    lines = (out / "results-cpu.jsonl").read_text().splitlines()
    assert sweep.main(base) == 0  # all judged: nothing evaluated, nothing appended
    assert evaluations() == 3
    assert (out / "results-cpu.jsonl").read_text().splitlines() == lines

    failed = {**tiny, "lint": ["run-error: the lint worker failed: the reference used more memory than the worker limit"]}
    with (out / "results-cpu.jsonl").open("a") as f:  # a lint that failed to run is run again
        f.write(json.dumps(failed) + "\n")
    assert sweep.main(base) == 0
    assert evaluations() == 3
    rows = {r["key"]: r for r in json.loads((out / "sweep-cpu.json").read_text())["rows"]}
    assert rows["level1/1_Tiny_scale_add.py"] == tiny


def test_sweep_table_prints_hints_as_written(no_einops):
    """A hint naming the extra (kernelsearch[kernelbench]) is text, not rich markup to swallow."""
    import io

    from rich.console import Console

    sweep = _script("kernelbench_sweep")
    item = sweep.Item(1, LEVEL1 / "3_Needs_einops.py")
    _, error, hint = sweep.load(item)
    out = io.StringIO()
    Console(file=out, width=400).print(sweep.table([sweep.failed_row(item, error, hint, "cpu")], "cpu"))
    assert f"(hint: {hint})" in out.getvalue() and "pip install 'kernelsearch[kernelbench]')" in out.getvalue()


def test_sweep_parts_split_every_level(tmp_path):
    sweep = _script("kernelbench_sweep")
    parts = [sweep.select(KB, [1], [], (k, 3)) for k in (1, 2, 3)]
    keys = [it.key for part in parts for it in part]
    assert sorted(keys) == sorted(it.key for it in sweep.select(KB, [1], [], (1, 1)))
    assert len(set(keys)) == len(keys)
    assert [it.key for it in sweep.select(KB, [1], ["Huge"], (1, 1))] == ["level1/4_Huge_shift.py"]


def _their_format(level_rows: dict[str, dict[str, float]]) -> dict:
    """A timing file in KernelBench's layout: level -> problem file -> statistics in ms."""
    return {level: {name: {"mean": ms, "std": ms / 100, "min": ms * 0.99, "max": ms * 1.2, "num_trials": 100,
                           "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"} for name, ms in rows.items()}
            for level, rows in level_rows.items()}


def test_baselines_table_from_saved_json(tmp_path, capsys):
    base = _script("kernelbench_baselines")
    timing = tmp_path / "kb" / "results" / "timing" / "H100_Modal"
    timing.mkdir(parents=True)
    (timing / base.EAGER_FILE).write_text(json.dumps(_their_format(
        {"level1": {"1_A.py": 2.0, "2_B.py": 1.0}, "level2": {"1_C.py": 4.0}})))
    (timing / base.COMPILE_FILE).write_text(json.dumps(_their_format({"level1": {"1_A.py": 1.0}})))
    ours = {"rows": [
        {"key": "level1/1_A.py", "status": "correct", "eager_ms": 2.1, "compile_ms": 1.5,
         "device_name": "NVIDIA H100 80GB HBM3"},
        {"key": "level1/2_B.py", "status": "crashed", "reason": "does not fit in GPU memory: ...",
         "eager_ms": None, "compile_ms": None},
    ]}
    (tmp_path / "ours.json").write_text(json.dumps(ours))

    theirs = base.load_theirs(timing / base.EAGER_FILE)
    assert set(theirs) == {"level1/1_A.py", "level1/2_B.py", "level2/1_C.py"}
    rows = {r.key: r for r in base.compare(theirs, base.load_theirs(timing / base.COMPILE_FILE),
                                            base.load_ours(tmp_path / "ours.json"))}
    a = rows["level1/1_A.py"]
    assert a.eager_ratio == pytest.approx(2.1 / 2.0) and a.compile_ratio == pytest.approx(1.5)
    assert a.flag and a.note == ""  # compile 50 % slower: flagged, no known cause
    assert not rows["level1/2_B.py"].flag and rows["level1/2_B.py"].note.startswith("ours crashed")
    assert rows["level2/1_C.py"].note == "not in our sweep"

    out = tmp_path / "rows.json"
    assert base.main(["--kernelbench", str(tmp_path / "kb"), "--ours", str(tmp_path / "ours.json"),
                      "--json", str(out)]) == 0
    saved = {r["key"]: r for r in json.loads(out.read_text())}
    assert saved["level1/1_A.py"]["flag"] is True
    assert "level 1" in capsys.readouterr().out


def test_times_compile_in_parallel_then_time_each_problem_and_resume(tmp_path):
    """kernelbench_times.py on the CPU: real warm-up and timing processes, the judge's caches."""
    times = _script("kernelbench_times")
    out, home = tmp_path / "out", tmp_path / "home"
    args = ["--kernelbench", str(KB), "--levels", "1", "--device", "cpu", "--only", "1_Tiny,2_Tiny,3_Needs",
            "--out", str(out), "--home", str(home), "--parallel", "2", "--chunk", "1"]
    # the loader runs in this process, the timing in fresh ones: hide einops from both
    blocker = tmp_path / "no_einops"
    (blocker / "einops").mkdir(parents=True)
    (blocker / "einops" / "__init__.py").write_text("raise ImportError('einops hidden for this test')\n")
    env = {"PYTHONPATH": f"{blocker}:{ROOT / 'src'}"}
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench_times.py"), *args],
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = times.read_done(out / "times-cpu.jsonl")
    assert set(rows) == {"level1/1_Tiny_scale_add.py", "level1/2_Tiny_linear_tanh.py", "level1/3_Needs_einops.py"}
    assert "failed to load" in rows["level1/3_Needs_einops.py"]["error"]
    for key in ("level1/1_Tiny_scale_add.py", "level1/2_Tiny_linear_tanh.py"):
        r = rows[key]
        assert r["eager_ms"] > 0 and r["compile_ms"] > 0 and not r["warm_error"], r
        assert r["eager"]["n"] >= 10
    assert any((home / "judge-cache" / "inductor").iterdir())  # the warm-up filled the judge's cache
    lines = (out / "times-cpu.jsonl").read_text()
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench_times.py"), *args],
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and json.loads(res.stdout)["timed_now"] == 0
    assert (out / "times-cpu.jsonl").read_text() == lines  # nothing timed twice

    base = _script("kernelbench_baselines")
    sweep = {"level1/1_Tiny_scale_add.py": {"key": "level1/1_Tiny_scale_add.py", "status": "correct",
                                             "eager_ms": rows["level1/1_Tiny_scale_add.py"]["eager_ms"] * 2}}
    merged, agree = base.with_times(sweep, rows)
    assert merged["level1/1_Tiny_scale_add.py"]["compile_ms"] == rows["level1/1_Tiny_scale_add.py"]["compile_ms"]
    assert merged["level1/1_Tiny_scale_add.py"]["status"] == "correct"  # the sweep's verdict stays
    assert agree == [pytest.approx(0.5)]
    assert "failed to load" in merged["level1/3_Needs_einops.py"]["compile_error"]


@pytest.mark.gpu
def test_times_on_the_gpu_with_the_judges_shim_and_caches(tmp_path):
    """kernelbench_times.py on CUDA: both baselines timed, the stream shim loaded, warm caches."""
    times = _script("kernelbench_times")
    out = tmp_path / "out"
    args = ["--kernelbench", str(KB), "--levels", "1", "--only", "1_Tiny,2_Tiny", "--out", str(out),
            "--home", str(tmp_path / "home")]
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench_times.py"), *args],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "no stream shim" not in res.stderr
    rows = times.read_done(out / "times-cuda.jsonl")
    assert len(rows) == 2
    for r in rows.values():
        assert r["eager_ms"] > 0 and r["compile_ms"] > 0 and not r["warm_error"], r
    assert any((tmp_path / "home" / "judge-cache" / "inductor").iterdir())  # the warm-up filled the judge's cache
    held = _eager_only(times, tmp_path, "cuda")
    assert all(r["hold_gib"] == 1 for r in held.values())


def _eager_only(times, tmp_path, device: str) -> dict:
    out = tmp_path / "eager"
    args = ["--kernelbench", str(KB), "--levels", "1", "--only", "1_Tiny,2_Tiny", "--out", str(out), "--device", device,
            "--home", str(tmp_path / "home"), "--no-compile", "--hold-gib", "1"]
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench_times.py"), *args],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "(0 compiled, 0 failed)" in res.stderr
    rows = times.read_done(out / f"times-{device}.jsonl")
    assert sorted(rows) == ["level1/1_Tiny_scale_add.py", "level1/2_Tiny_linear_tanh.py"]
    for r in rows.values():
        assert r["eager_ms"] > 0 and "compile_ms" not in r and "compile_error" not in r and not r["warm_error"], r
    return rows


def test_times_eager_only_skips_the_compiler(tmp_path):
    _eager_only(_script("kernelbench_times"), tmp_path, "cpu")


_BN_PROBLEM = '''
import torch
import torch.nn as nn
{flag}

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(x) * 2.0

def get_inputs():
    return [torch.rand(8, 4, 16, 16) * 3 + 1]

def get_init_inputs():
    return [4]
'''

_RUNNING_STATS = '''
import torch.nn as nn
import torch.nn.functional as F

class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        b = self.bn
        return F.batch_norm(x, b.running_mean, b.running_var, b.weight, b.bias, False, 0.0, b.eps) * 2.0
'''


@pytest.mark.parametrize(("flag", "running_stats_pass"), [("", False), ("EVAL_MODE = True", True)])
def test_modules_run_as_constructed_unless_the_problem_asks_for_eval_mode(tmp_path, cpu_config, archive,
                                                                          flag, running_stats_pass):
    """KernelBench runs Model as constructed (training mode: a batch norm normalises with the
    batch's statistics); so does the harness, for Model and ModelNew alike, unless the problem
    sets EVAL_MODE = True. A kernel that uses the running statistics is wrong in training mode
    and right in eval mode; the reference as its own candidate is right in both."""
    from kernelsearch.records.candidate import Candidate

    path = tmp_path / "bn_scale.py"
    path.write_text(_BN_PROBLEM.format(flag=flag))
    problem = load_problem(path)
    ref = evaluate(problem, _reference_candidate(problem), cpu_config, archive)
    assert ref.status is Status.CORRECT, ref.reason
    stats = evaluate(problem, Candidate.from_source(_RUNNING_STATS, backend="torch", name="running"), cpu_config,
                     archive)
    assert (stats.status is Status.CORRECT) is running_stats_pass, (stats.status, stats.reason)
    if not running_stats_pass:
        assert stats.status is Status.INCORRECT
