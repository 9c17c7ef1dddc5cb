"""benchmarks/kernelbench_throughput.py on the CPU: the bundled candidate set is what its files
say; `prepare` lays a small plan out for KernelBench's script and for `kernelsearch bench`; `run`
drives a stand-in for KernelBench's script (its command line, environment, results file, the
budget) and the real `kernelsearch bench` on two CPU-sized problems; `report` puts the verdicts
side by side. The problems are the small KernelBench-style files in tests/data/kernelbench."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, ROOT
from test_kernelbench import _script

KB_FAKE = DATA / "kernelbench"

# Stands in for KernelBench's scripts/eval_from_generations.py: takes the same pydra-style
# key=value arguments, judges each kernel file of runs_dir/run_name (a "BUG" marks a wrong one),
# writes eval_results.json in KernelBench's format and prints results the way it does.
STUB_SCRIPT = '''
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
time.sleep(float(os.environ.get("KBTP_STUB_SLEEP", "0")))
run_dir = os.path.join(args["runs_dir"], args["run_name"])
results = {}
for f in sorted(os.listdir(run_dir)):
    if not f.endswith("_kernel.py"):
        continue
    pid = f.split("_")[3]
    ok = "BUG" not in open(os.path.join(run_dir, f)).read()
    md = {} if ok else {"correctness_issue": "Output mismatch", "max_difference": ["0.5"],
                        "correctness_trials": "(0 / 5)"}
    results[pid] = [{"sample_id": 0, "compiled": True, "correctness": ok, "metadata": md,
                     "runtime": 1.25 if ok else -1.0, "runtime_stats": {}}]
    print(f"[Eval Result] Problem ID: {pid}, Sample ID: 0")
    print(f"compiled=True correctness={ok} metadata={md} runtime=1.25 runtime_stats={{}} "
          "ref_runtime=2.5 ref_runtime_stats={}")
json.dump(results, open(os.path.join(run_dir, "eval_results.json"), "w"))
print("ARGS " + json.dumps(args))
print("ENV " + json.dumps({k: os.environ.get(k, "") for k in ("PYTHONPATH", "LITELLM_LOCAL_MODEL_COST_MAP")}))
'''

WRONG = '''"""kbtp: kind=wrong expect=incorrect
tanh of the linear layer, scaled by 1.5 (a deliberate BUG).
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features_in, features_out):
        super().__init__()
        self.proj = nn.Linear(features_in, features_out)

    def forward(self, x):
        return 1.5 * torch.tanh(self.proj(x))
'''


@pytest.fixture(scope="module")
def tp():
    return _script("kernelbench_throughput")


@pytest.fixture
def fake_kb(tmp_path: Path) -> Path:
    """The small KernelBench tree plus a stand-in harness (the files prepare requires)."""
    kb = tmp_path / "kb"
    shutil.copytree(KB_FAKE, kb)
    (kb / "scripts").mkdir()
    (kb / "scripts" / "eval_from_generations.py").write_text(STUB_SCRIPT)
    pkg = kb / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    for f in ("__init__.py", "eval.py", "timing.py", "compile.py"):
        (pkg / f).write_text("")
    return kb


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    """Two candidates: the reference of 1_Tiny_scale_add and a wrong 2_Tiny_linear_tanh."""
    cands = tmp_path / "cands"
    (cands / "level1").mkdir(parents=True)
    (cands / "level1" / "2_Tiny_linear_tanh.py").write_text(WRONG)
    (cands / "references.txt").write_text("# the reference as candidate\nlevel1/1_Tiny_scale_add.py\n")
    return cands


def _prepare(tp, kb: Path, cands: Path, work: Path) -> dict:
    assert tp.main(["prepare", "--kernelbench", str(kb), "--candidates", str(cands), "--work", str(work)]) == 0
    return json.loads((work / "manifest.json").read_text())


def test_bundled_candidates_are_the_described_set(tp):
    plan = tp.read_plan(tp.CANDIDATES)
    entries = [e for e, _ in plan]
    kinds = {k: sum(e.kind == k for e in entries) for k in tp.KINDS}
    assert kinds == {"reference": 12, "custom": 10, "compile_error": 3, "wrong": 6}
    assert len({e.name for e in entries}) == len(entries) >= 30
    assert {e.level for e in entries} == {1, 2}
    for e, text in plan:
        assert e.expect == tp.EXPECT[e.kind]
        if text is not None:  # every custom and compile_error candidate is a CUDA load_inline
            tree = ast.parse(text)
            assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), e.key
            if e.kind in ("custom", "compile_error"):
                assert "cuda_sources=" in text, e.key


def test_bundled_references_exist_in_kernelbench(tp):
    kb = ROOT / ".ext" / "kernelbench"
    if not (kb / "KernelBench" / "level1").is_dir():
        pytest.skip("no KernelBench checkout in .ext/kernelbench")
    for e, _ in tp.read_plan(tp.CANDIDATES):
        assert (kb / "KernelBench" / f"level{e.level}" / e.file).is_file(), e.key


def test_prepare_lays_out_both_harnesses(tp, fake_kb, plan, tmp_path):
    work = tmp_path / "work"
    manifest = _prepare(tp, fake_kb, plan, work)
    entries = {e["name"]: e for e in manifest["entries"]}
    assert set(entries) == {"1_Tiny_scale_add", "2_Tiny_linear_tanh"}
    ref, wrong = entries["1_Tiny_scale_add"], entries["2_Tiny_linear_tanh"]
    assert (ref["kind"], ref["expect"], ref["backend"]) == ("reference", "correct", "torch")
    assert (wrong["kind"], wrong["expect"], wrong["source"]) == ("wrong", "incorrect", str(plan / "level1" / "2_Tiny_linear_tanh.py"))
    # KernelBench: its harness, a dataset of exactly the chosen problems, one sample each
    kbw = work / "kernelbench"
    assert (kbw / "scripts" / "eval_from_generations.py").read_text() == STUB_SCRIPT
    assert sorted(p.name for p in (kbw / "KernelBench" / "level1").iterdir()) == ["1_Tiny_scale_add.py", "2_Tiny_linear_tanh.py"]
    run_dir = kbw / "runs" / "kbtp_level1"
    assert sorted(p.name for p in run_dir.iterdir()) == ["level_1_problem_1_sample_0_kernel.py",
                                                         "level_1_problem_2_sample_0_kernel.py"]
    ref_src = (run_dir / "level_1_problem_1_sample_0_kernel.py").read_text()
    assert ref_src.startswith((KB_FAKE / "KernelBench" / "level1" / "1_Tiny_scale_add.py").read_text())
    assert "self.ref = Model(*args, **kwargs)" in ref_src
    assert (run_dir / "level_1_problem_2_sample_0_kernel.py").read_text() == WRONG
    # kernelsearch: problems and candidates paired by file name, the same texts
    for e in manifest["entries"]:
        assert (work / e["ks_problem"]).read_text() == (KB_FAKE / "KernelBench" / "level1" / e["file"]).read_text()
        assert (work / e["ks_solution"]).read_text() == (work / e["kb_kernel"]).read_text()


def test_prepare_refuses_two_candidates_for_one_problem(tp, fake_kb, plan, tmp_path):
    (plan / "references.txt").write_text("level1/2_Tiny_linear_tanh.py\n")
    with pytest.raises(SystemExit, match="two candidates for 2_Tiny_linear_tanh"):
        tp.read_plan(plan)


def test_kernelbench_half_drives_the_script_and_reads_its_results(tp, fake_kb, plan, tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    _prepare(tp, fake_kb, plan, work)
    (work / "kernelbench" / "cache" / "stale").mkdir(parents=True)  # an earlier run's builds
    rc = tp.main(["run", "--work", str(work), "--out", str(out), "--harness", "kernelbench",
                  "--kb-site", "/carried/site", "--kb-workers", "3", "--no-warmup", "--budget-s", "120"])
    assert rc == 0
    kb = json.loads((out / "kernelbench.json").read_text())
    assert not (work / "kernelbench" / "cache" / "stale").exists()  # cold
    log = (out / "kernelbench.log").read_text()
    args = json.loads(log.split("ARGS ", 1)[1].splitlines()[0])
    assert args["dataset_src"] == "local" and args["level"] == "1" and args["num_gpu_devices"] == "1"
    assert args["build_cache"] == "True" and args["num_cpu_workers"] == "3" and args["timeout"] == "300"
    assert args["gpu_arch"] == "['Hopper']" and args["run_name"] == "kbtp_level1"
    env = json.loads(log.split("ENV ", 1)[1].splitlines()[0])
    assert env["PYTHONPATH"].split(":")[0] == "/carried/site"
    assert env["PYTHONPATH"].split(":")[1].endswith("kernelbench/src")
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    rows = {r["key"]: r for r in kb["results"]}
    assert rows["level1/1_Tiny_scale_add.py"]["verdict"] == "correct"
    assert rows["level1/1_Tiny_scale_add.py"]["runtime_ms"] == 1.25
    assert rows["level1/1_Tiny_scale_add.py"]["ref_runtime_ms"] == 2.5
    assert rows["level1/2_Tiny_linear_tanh.py"]["verdict"] == "incorrect"
    assert "Output mismatch" in rows["level1/2_Tiny_linear_tanh.py"]["reason"]
    assert kb["judged"] == 2 and not kb["stopped"] and kb["candidates_per_hour"] > 0
    assert kb["raw"]["1"]["1"][0]["compiled"] is True


@pytest.mark.parametrize("limit", [["--budget-s", "2"], ["--budget-s", "0", "--stop-by-s", "2"]])
def test_kernelbench_half_stops_at_the_budget(tp, fake_kb, plan, tmp_path, monkeypatch, limit):
    work, out = tmp_path / "work", tmp_path / "out"
    _prepare(tp, fake_kb, plan, work)
    monkeypatch.setenv("KBTP_STUB_SLEEP", "60")
    tp.main(["run", "--work", str(work), "--out", str(out), "--harness", "kernelbench", "--no-warmup", *limit])
    kb = json.loads((out / "kernelbench.json").read_text())
    assert kb["stopped"] and kb["levels"]["1"]["stopped"] and kb["wall_s"] < 30
    assert kb["judged"] == 0
    assert {r["verdict"] for r in kb["results"]} == {"not_run"}


def test_verdicts_map_kernelbench_results(tp):
    assert tp.kb_verdict(None)[0] == "not_run"
    assert tp.kb_verdict({"compiled": False, "metadata": {"compilation_error_name": "RuntimeError",
                                                          "compilation_error": "Error building extension"}}) == (
        "compile_error", "RuntimeError: Error building extension")
    assert tp.kb_verdict({"compiled": False, "metadata": {"error": "Evaluation timed out"}})[0] == "timeout"
    assert tp.kb_verdict({"compiled": True, "correctness": False,
                          "metadata": {"runtime_error": "illegal memory access", "runtime_error_name": "torch.AcceleratorError"}})[0] == "runtime_error"
    assert tp.kb_verdict({"compiled": True, "correctness": True, "metadata": {"excessive_speedup": True}}) == (
        "correct", "excessive_speedup flagged")
    log = ("===== KernelBench level 2\n[  1.00] [Eval Result] Problem ID: 18, Sample ID: 0\n"
           "[  1.00] compiled=True correctness=True metadata={} runtime=0.15 runtime_stats={} ref_runtime=2.7 x\n")
    assert tp._kb_ref_runtimes(log) == {(2, 18): 2.7}


def test_difference_says_why(tp):
    vacuous = {"verdict": "incorrect", "reason": "the elementwise tolerance is vacuous here (an all-zeros ...)"}
    assert "normalised error" in tp.difference("wrong", {"verdict": "correct"}, vacuous)
    loose = tp.difference("custom", {"verdict": "incorrect", "reason": "Output mismatch"},
                          {"verdict": "correct", "max_abs_error": 3e-4, "atol": 0.01, "rtol": 0.01})
    assert "atol = rtol = 0.0001" in loose and "atol 0.01, rtol 0.01" in loose
    same_tol = tp.difference("custom", {"verdict": "incorrect", "reason": "Output mismatch"},
                             {"verdict": "correct", "reason": "9 checks passed", "atol": 1e-4, "rtol": 1e-4})
    assert "tolerance is" not in same_tol and "9 checks passed" in same_tol  # not blamed on a tolerance
    assert tp.difference("custom", {"verdict": "correct"}, {"verdict": "correct"}) == ""
    assert "KernelBench gave no verdict" in tp.difference("custom", {"verdict": "not_run"}, {"verdict": "correct"})


def test_kernelsearch_half_and_report_on_the_cpu(tp, fake_kb, plan, tmp_path, capsys):
    """The real `kernelsearch bench` from a cold home on two CPU-sized problems, then the report
    beside the stand-in KernelBench's verdicts."""
    work, out = tmp_path / "work", tmp_path / "out"
    _prepare(tp, fake_kb, plan, work)
    rc = tp.main(["run", "--work", str(work), "--out", str(out), "--harness", "kernelbench,kernelsearch",
                  "--device", "cpu", "--no-warmup", "--budget-s", "400"])
    assert rc == 0, (out / "kernelsearch.log").read_text()[-3000:]
    ks = json.loads((out / "kernelsearch.json").read_text())
    rows = {r["key"]: r for r in ks["results"]}
    ref, wrong = rows["level1/1_Tiny_scale_add.py"], rows["level1/2_Tiny_linear_tanh.py"]
    assert ref["verdict"] == "correct" and "torch_fallback" in ref["flags"], ref
    assert wrong["verdict"] == "incorrect", wrong
    assert ks["judged"] == 2 and not ks["stopped"]
    assert "--confirm" in ks["command"] and "--no-compile" in ks["command"]
    assert (work / "kshome" / "archive.sqlite").is_file()  # its own, fresh home
    # what a bench stopped at the budget (no JSON printed) leaves: the verdicts in its archive
    entries = json.loads((work / "manifest.json").read_text())["entries"]
    blank = [{"key": e["key"], "level": e["level"], "verdict": "not_run", "flags": []} for e in entries]
    judged, again = tp.ks_from_archive(entries, work / "kshome", blank)
    assert judged == 2 and [r["verdict"] for r in again] == [rows[e["key"]]["verdict"] for e in entries]
    capsys.readouterr()
    assert tp.main(["report", "--from", str(out), "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "| KernelBench `eval_from_generations.py` |" in text and "| `kernelsearch bench` |" in text
    assert "**" in text  # the ratio row
    line = next(ln for ln in text.splitlines() if ln.startswith("| level1/2_Tiny_linear_tanh.py"))
    assert "| wrong | incorrect | incorrect | incorrect" in line
    merged = json.loads((tmp_path / "r.json").read_text())
    assert merged["kernelsearch"]["judged"] == 2 and "raw" not in merged["kernelsearch"]


def test_wheels_prints_one_pinned_download(tp, capsys):
    assert tp.main(["wheels", "--print", "--dest", "somewhere"]) == 0
    cmd = capsys.readouterr().out.strip()
    assert "--no-deps" in cmd and "--python-version 3.12" in cmd and "-d somewhere" in cmd
    pins = list(tp.WHEELS)
    assert all("==" in w for w in pins) and len({w.split("==")[0] for w in pins}) == len(pins)
    for name in ("pydra-config", "modal", "litellm", "openai", "pydantic", "python-dotenv"):
        assert any(w.startswith(name + "==") for w in pins), name



def test_report_merges_a_kernelbench_level_rerun_in_a_later_call(tp, tmp_path, capsys):
    """Level 2 was cut at the budget in the first call and run again, alone, in a second one:
    the report takes level 1 from the first and level 2 from the second, and adds their walls."""
    entries = [{"key": f"level{lv}/{n}_P.py", "name": f"{n}_P", "level": lv, "file": f"{n}_P.py", "problem_id": n,
                "kind": "custom", "expect": "correct"} for lv, n in ((1, 1), (2, 1), (2, 2))]

    def kb(levels, results):
        return {"harness": "kernelbench", "settings": {}, "levels": levels, "results": results,
                "wall_s": sum(v["wall_s"] for v in levels.values()), "stopped": any(v["stopped"] for v in levels.values()),
                "judged": sum(r["verdict"] != "not_run" for r in results)}

    def row(key, lv, verdict):
        return {"key": key, "level": lv, "verdict": verdict, "reason": ""}

    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"entries": entries}))
    (first / "kernelbench.json").write_text(json.dumps(kb(
        {"1": {"wall_s": 100.0, "stopped": False, "judged": 1}, "2": {"wall_s": 50.0, "stopped": True, "judged": 1}},
        [row("level1/1_P.py", 1, "correct"), row("level2/1_P.py", 2, "incorrect"), row("level2/2_P.py", 2, "not_run")])))
    (second / "kernelbench.json").write_text(json.dumps(kb(
        {"2": {"wall_s": 80.0, "stopped": False, "judged": 2}},
        [row("level2/1_P.py", 2, "correct"), row("level2/2_P.py", 2, "correct")])))
    _, merged, ks = tp._load_runs([first, second])
    assert merged["wall_s"] == 180.0 and merged["judged"] == 3 and not merged["stopped"] and not ks
    assert {r["key"]: r["verdict"] for r in merged["results"]} == {
        "level1/1_P.py": "correct", "level2/1_P.py": "correct", "level2/2_P.py": "correct"}
    assert merged["candidates_per_hour"] == 60.0
    assert tp.main(["report", "--from", str(first), "--from", str(second)]) == 0
    assert "| `kernelsearch bench` | not run |" in capsys.readouterr().out
