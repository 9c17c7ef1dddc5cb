"""benchmarks/kernelbench_parity.py on the CPU: the bundled parity candidates say their problem;
`prepare` lays out pairs from a small KernelBench-style tree (tests/data/kernelbench); `run`
drives a stand-in for KernelBench's eval_kernel_against_ref (a fresh process per pair, resumed
without redoing a verdict) and the real `kernelsearch bench` on CPU-sized torch candidates;
`report` puts canned verdicts side by side with and without a note."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, ROOT
from test_kernelbench import _script

KB_FAKE = DATA / "kernelbench"

# Stands in for KernelBench's src/kernelbench/eval.py: the same entry point and arguments, a
# pydantic-like result (model_dump), and what it was called with in the metadata.
FAKE_EVAL = '''
import json
import torch


class Result:
    def __init__(self, **kw):
        self.kw = kw

    def model_dump(self):
        return self.kw


def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42, num_correct_trials=1,
                            num_perf_trials=10, measure_performance=False, verbose=False, build_dir=None,
                            precision=torch.float32, **kw):
    ref_ctx, new_ctx = {}, {}
    exec(original_model_src, ref_ctx)
    try:
        exec(custom_model_src, new_ctx)
    except Exception as e:
        return Result(compiled=False, metadata={"compilation_error_name": type(e).__name__,
                                                "compilation_error": str(e)})
    torch.manual_seed(seed_num)
    init = ref_ctx["get_init_inputs"]()
    with torch.no_grad():
        torch.manual_seed(seed_num)
        ref = ref_ctx["Model"](*init).to(precision)
        torch.manual_seed(seed_num)
        new = new_ctx["ModelNew"](*init).to(precision)
        xs = [x.to(precision) for x in ref_ctx["get_inputs"]()]
        ok = torch.allclose(ref(*xs), new(*xs), atol=1e-2, rtol=1e-2)
    md = {"called_with": json.dumps({"trials": num_correct_trials, "perf": measure_performance,
                                     "precision": str(precision), "build_dir": build_dir})}
    if not ok:
        md["correctness_issue"] = "Output mismatch"
    return Result(compiled=True, correctness=ok, metadata=md)
'''

LEGACY = '''"""parity: problem=level1/2_Tiny_linear_tanh.py
nn.Linear's weights by the legacy constructor and its own init.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features_in, features_out):
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(features_out, features_in))
        self.bias = nn.Parameter(torch.Tensor(features_out))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(features_in)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return torch.tanh(F.linear(x, self.weight, self.bias))
'''

RANDN = LEGACY.replace("torch.Tensor(features_out, features_in)", "torch.randn(features_out, features_in)").replace(
    "nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))", "")


@pytest.fixture(scope="module")
def par():
    return _script("kernelbench_parity")


@pytest.fixture
def fake_kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    shutil.copytree(KB_FAKE, kb)
    pkg = kb / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "eval.py").write_text(FAKE_EVAL)
    return kb


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path]:
    """A throughput-style set (one reference) and two parity candidates for one problem."""
    kbtp = tmp_path / "kbtp"
    kbtp.mkdir()
    (kbtp / "references.txt").write_text("level1/1_Tiny_scale_add.py\n")
    parity = tmp_path / "parity"
    parity.mkdir()
    (parity / "legacy_linear.py").write_text(LEGACY)
    (parity / "randn_linear.py").write_text(RANDN)
    return kbtp, parity


def _prepare(par, kb: Path, sets: tuple[Path, Path], work: Path) -> dict:
    kbtp, parity = sets
    assert par.main(["prepare", "--kernelbench", str(kb), "--kbtp", str(kbtp), "--candidates", str(parity),
                     "--work", str(work)]) == 0
    return json.loads((work / "manifest.json").read_text())


def test_bundled_parity_candidates_name_their_problem(par):
    files = sorted(par.PARITY.glob("*.py"))
    assert len(files) >= 8
    for f in files:
        text = f.read_text()
        level, problem = par.parity_problem(text)
        assert level in (1, 2) and problem.endswith(".py"), f
        tree = ast.parse(text)
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), f
        assert "cuda_sources=" in text or "cpp_sources=" in text, f  # p12: C++ only, calling ATen
    pairs = par.read_pairs(par.throughput().CANDIDATES, par.PARITY)
    assert len(pairs) >= 30 + 8 and len({p.name for p, _ in pairs}) == len(pairs)
    kb = ROOT / ".ext" / "kernelbench" / "KernelBench"
    if kb.is_dir():  # the problems exist in the KernelBench checkout, where there is one
        for p, _ in pairs:
            assert (kb / f"level{p.level}" / p.problem).is_file(), p


def test_prepare_lays_out_pairs(par, fake_kb, sets, tmp_path):
    work = tmp_path / "work"
    pairs = {p["name"]: p for p in _prepare(par, fake_kb, sets, work)["pairs"]}
    assert set(pairs) == {"1_Tiny_scale_add", "legacy_linear", "randn_linear"}
    assert pairs["1_Tiny_scale_add"]["origin"] == "kbtp:reference"
    assert (pairs["legacy_linear"]["origin"], pairs["legacy_linear"]["problem"]) == ("parity", "2_Tiny_linear_tanh.py")
    problem = (KB_FAKE / "KernelBench" / "level1" / "2_Tiny_linear_tanh.py").read_text()
    for name in ("legacy_linear", "randn_linear"):  # one problem, a copy under each pair's name
        assert (work / "ks" / "problems" / f"{name}.py").read_text() == problem
    assert (work / "ks" / "solutions" / "legacy_linear.py").read_text() == LEGACY
    assert "self.ref = Model(*args, **kwargs)" in (work / "ks" / "solutions" / "1_Tiny_scale_add.py").read_text()
    assert (work / "kernelbench" / "src" / "kernelbench" / "eval.py").read_text() == FAKE_EVAL
    (sets[1] / "no_header.py").write_text("class ModelNew: pass\n")
    with pytest.raises(SystemExit, match="no 'parity: problem="):
        par.read_pairs(None, sets[1])


def test_kernelbench_side_runs_each_pair_in_its_own_process_and_resumes(par, fake_kb, sets, tmp_path, capsys):
    work, out = tmp_path / "work", tmp_path / "out"
    _prepare(par, fake_kb, sets, work)
    argv = ["run", "--work", str(work), "--out", str(out), "--harness", "kernelbench", "--precision", "fp32,bf16",
            "--kb-jobs", "2"]
    assert par.main(argv) == 0
    for prec, dtype in (("fp32", "torch.float32"), ("bf16", "torch.bfloat16")):
        rows = {r["name"]: r for r in par._jsonl(out / f"kernelbench-{prec}.jsonl")}
        assert {n: r["verdict"] for n, r in rows.items()} == {
            "1_Tiny_scale_add": "correct", "legacy_linear": "correct", "randn_linear": "incorrect"}, rows
        assert "Output mismatch" in rows["randn_linear"]["reason"]
        called = json.loads(json.loads((work / "kbresults" / prec / "legacy_linear.json").read_text())
                            ["result"]["metadata"]["called_with"])
        assert called == {"trials": 5, "perf": False, "precision": dtype,
                          "build_dir": str((work / "kbbuild" / "legacy_linear").resolve())}
    capsys.readouterr()
    assert par.main(argv) == 0  # resumed: nothing left
    assert "all 3 done already" in capsys.readouterr().out
    assert len(par._jsonl(out / "kernelbench-fp32.jsonl")) == 3
    again = tmp_path / "again"  # a later call told about the first one's results
    assert par.main([*argv[:4], str(again), *argv[5:], "--done", str(out)]) == 0
    assert not (again / "kernelbench-fp32.jsonl").exists()


def test_kernelsearch_side_on_the_cpu(par, fake_kb, sets, tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    _prepare(par, fake_kb, sets, work)
    rc = par.main(["run", "--work", str(work), "--out", str(out), "--harness", "kernelsearch", "--precision", "fp32",
                   "--device", "cpu", "--only", "1_Tiny_scale_add,legacy_linear"])
    assert rc == 0, (out / "kernelsearch-fp32.log").read_text()[-3000:]
    rows = {r["name"]: r for r in par._jsonl(out / "kernelsearch-fp32.jsonl")}
    assert set(rows) == {"1_Tiny_scale_add", "legacy_linear"}
    assert rows["1_Tiny_scale_add"]["verdict"] == "correct" and "torch_fallback" in rows["1_Tiny_scale_add"]["flags"]
    assert rows["legacy_linear"]["verdict"] == "correct", rows["legacy_linear"]
    assert all(r["precision"] == "fp32" for r in rows.values())
    assert (work / "ksarch-fp32" / "archive.sqlite").is_file()


def test_report_side_by_side_with_notes(par, tmp_path, capsys):
    pairs = [{"name": n, "origin": o, "level": 1, "problem": f"{n}.py"}
             for n, o in (("a", "parity"), ("b", "kbtp:custom"), ("c", "parity"))]
    d = tmp_path / "run"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"pairs": pairs}))

    def write(harness: str, prec: str, verdicts: dict[str, tuple[str, str]]) -> None:
        with (d / f"{harness}-{prec}.jsonl").open("w") as f:
            for name, (verdict, reason) in verdicts.items():
                f.write(json.dumps({"name": name, "verdict": verdict, "reason": reason}) + "\n")

    write("kernelbench", "fp32", {"a": ("correct", ""), "b": ("incorrect", "Output mismatch"), "c": ("correct", "")})
    write("kernelsearch", "fp32", {"a": ("correct", ""), "b": ("incorrect", "max abs error 0.5"), "c": ("crashed", "")})
    write("kernelbench", "bf16", {"a": ("runtime_error", "BFloat16 did not match Float"), "b": ("incorrect", "")})
    write("kernelsearch", "bf16", {"a": ("correct", ""), "b": ("runtime_error", "expected Float"), "c": ("correct", "")})
    notes = tmp_path / "notes.txt"
    notes.write_text("# why\na@bf16: KernelBench's allclose refuses two dtypes\n")
    assert par.main(["report", "--from", str(d), "--notes", str(notes), "--out", str(tmp_path / "r.md")]) == 0
    text = capsys.readouterr().out
    assert (tmp_path / "r.md").read_text().strip() == text.strip()
    head = next(ln for ln in text.splitlines() if ln.startswith("| candidate"))
    assert "fp32 KernelBench" in head and "bf16 kernelsearch" in head and head.endswith("why they differ |")
    row = {ln.split("|")[1].strip(): ln for ln in text.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert "| correct | correct | yes |" in row["a"] and "**no**" in row["a"]
    assert "allclose refuses two dtypes" in row["a"]
    assert "**no note**" in row["b"]  # bf16: incorrect against runtime_error, unexplained
    assert "| correct | crashed | **no** |" in row["c"]  # crashed is KernelBench's runtime_error: still differs
    assert "| not run | correct | - |" in row["c"]  # KernelBench has no bf16 verdict for c
    assert "- fp32: 3 judged by both, 2 the same, 1 different (0 with a note)" in text  # crashed = runtime_error
    assert "- bf16: 2 judged by both, 0 the same, 2 different (1 with a note)" in text
    assert "differences without a note: b@bf16, c@fp32" in text
    assert par.main(["report", "--from", str(d), "--notes", str(notes), "--strict"]) == 1
