"""The problem linter: each planted flaw gets its code, the bundled suite is clean on the CPU,
and the command line reports findings with exit 0 (2 only for a malformed problem)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA
from test_cli import ks

from kernelsearch.lint.linter import CHECKS, SEVERITIES, cached_lint, lint, lint_warnings
from kernelsearch.problems.loader import load_problem, resolve_problems

LINT = DATA / "problems" / "lint"


@pytest.fixture(scope="module")
def reports() -> dict:
    """One lint of the whole directory (one worker, restarted after the crashing problem)."""
    return {r.name: r for r in lint(resolve_problems(LINT), "cpu", timeout_s=120)}


@pytest.mark.parametrize("name, code, words", [
    ("constant_output", "constant-output", "the same for 3 different input draws"),
    ("ignores_input", "unused-input", "input 1"),
    ("ignores_weight", "unused-parameter", "parameter bias"),
    ("zeros_pass", "zeros-pass", "all-zeros output passes atol=0.01"),
    ("mean_pass", "mean-pass", "the reference's mean"),
    ("nondeterministic", "nondeterministic", "two runs on the same inputs differ"),
    ("raises", "run-error", "running forward: RuntimeError: reference is broken"),
    ("crashes", "run-error", "SIGABRT"),
])
def test_planted_flaw_is_flagged(reports, name, code, words):
    hits = [f for f in reports[name].findings if f.code == code]
    assert hits, reports[name].findings
    assert any(words in f.message for f in hits), hits
    assert all(f.severity == CHECKS[f.code][0] for f in reports[name].findings)


def test_flags_only_what_is_planted(reports):
    assert not any(f.code == "unused-input" and "input 0" in f.message for f in reports["ignores_input"].findings)
    assert not any("weight" in f.message for f in reports["ignores_weight"].findings)
    assert [f.code for f in reports["ignores_weight"].findings] == ["unused-parameter"]
    assert [f.code for f in reports["nondeterministic"].findings] == ["nondeterministic"]
    assert [f.code for f in reports["crashes"].findings] == ["run-error"]
    assert [f.code for f in reports["raises"].findings] == ["run-error"]


def test_bundled_suite_is_clean_on_cpu():
    found = [(r.name, f) for r in lint(resolve_problems("suite"), "cpu") for f in r.findings]
    assert not [x for x in found if x[1].severity != "info"], found


def test_lint_warnings_are_cached(tmp_path):
    problems = [load_problem(LINT / "ignores_input.py"), load_problem("01_matmul")]
    lines = lint_warnings(problems, "cpu", home=tmp_path)
    assert len(lines) == 1 and lines[0].startswith("problem ignores_input: unused-input:")
    assert len(list((tmp_path / "lint").glob("*.json"))) == 2
    again = cached_lint(problems, "cpu", tmp_path / "lint", "no-such-torch")  # other key: re-linted
    assert [f.code for f in again[0].findings] == ["unused-input"]
    assert lint_warnings(problems, "cpu", home=tmp_path) == lines


def test_cli_prints_findings_exit_0():
    r = ks("lint", str(LINT / "ignores_input.py"), "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert "ignores_input" in r.stdout and "unused-input: input 1" in r.stdout
    assert "1 problem(s) linted on cpu, 1 flagged" in r.stdout


def test_cli_json_shape():
    r = ks("lint", str(LINT / "zeros_pass.py"), "--device", "cpu", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["device"] == "cpu" and set(d["counts"]) == set(SEVERITIES)
    (p,) = d["problems"]
    assert set(p) == {"name", "path", "device", "findings"} and p["name"] == "zeros_pass"
    assert all(set(f) == {"code", "severity", "message"} for f in p["findings"])
    assert "zeros-pass" in [f["code"] for f in p["findings"]]
    assert d["counts"]["error"] == sum(f["severity"] == "error" for f in p["findings"])


def test_cli_malformed_problem_exit_2():
    r = ks("lint", str(DATA / "problems" / "missing_inputs.py"), "--device", "cpu")
    assert r.returncode == 2 and "missing get_inputs" in r.stderr and "Traceback" not in r.stderr


def test_bench_warns_about_flagged_problem(tmp_path):
    probs, sols = tmp_path / "problems", tmp_path / "solutions"
    probs.mkdir()
    sols.mkdir()
    (probs / "ignores_input.py").write_text((LINT / "ignores_input.py").read_text())
    (sols / "ignores_input.py").write_text(
        "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a * 2\n")
    r = ks("bench", str(probs), str(sols), "--device", "cpu", "--json", "--no-compile",
           "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 0, r.stderr
    assert "warning: problem ignores_input: unused-input" in r.stderr
    assert json.loads(r.stdout)["problems"] == 1


def test_hang_times_out_and_the_rest_go_on(tmp_path):
    src = (LINT / "raises.py").read_text()
    (tmp_path / "a_hangs.py").write_text(src.replace('raise RuntimeError("reference is broken")', "while True:\n            pass"))
    (tmp_path / "b_ok.py").write_text((DATA / "problems" / "scale_add.py").read_text())
    hang, ok = lint(resolve_problems(tmp_path), "cpu", timeout_s=15)
    assert [f.code for f in hang.findings] == ["run-error"] and "within 15 s" in hang.findings[0].message
    assert ok.findings == []


PROBE = """
import resource, sys
from pathlib import Path
import torch
from kernelsearch.lint.worker import lint_reference
torch.randn(1 << 20)  # the allocator's own start-up is not the lint's
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
found = list(lint_reference(Path(sys.argv[1]), "cpu", 1e-2, 1e-2, "probe"))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024, [f.code for f in found])
"""


def test_lint_holds_a_few_tensors_not_every_draw(tmp_path):
    """KernelBench's largest references take 6-8 GiB per tensor: the lint must hold about as many
    tensors as one evaluation does (two input sets, the first output, one draw in flight), not
    every draw and float64 copies of them (14x the tensor's size here before; 80 GiB ran out)."""
    n = 1 << 25
    (tmp_path / "big_relu.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        f"        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn({n})]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    r = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "big_relu.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    grown, codes = r.stdout.split(" ", 1)
    assert codes.strip() == "[]"
    assert int(grown) / (4 * n) < 8, f"peak grew by {int(grown) / (4 * n):.1f} tensors' worth"


@pytest.mark.gpu
def test_lint_on_the_gpu_flags_the_planted_flaws_and_brief_references():
    reports = {r.name: r for r in lint(resolve_problems(LINT), "cuda", timeout_s=120)}
    planted = {"constant_output": "constant-output", "ignores_input": "unused-input",
               "ignores_weight": "unused-parameter", "zeros_pass": "zeros-pass", "mean_pass": "mean-pass",
               "nondeterministic": "nondeterministic", "raises": "run-error", "crashes": "run-error"}
    for name, code in planted.items():
        assert code in [f.code for f in reports[name].findings], (name, reports[name].findings)
    assert "too-fast" in [f.code for f in reports["ignores_weight"].findings]  # microseconds on a GPU
