"""``kernelsearch audit``: the real pipeline on the CPU over a small release of kernels written
here (honest and cheating), as a directory of pairs and as JSONL rows mapped by --fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.audit.classify import CLASS_NAMES, CLASSES, classify_code, classify_reason
from kernelsearch.audit.sources import Entry, parse_fields, read_rows, safe_name, select
from kernelsearch.cli.main import main

SCALE_ADD = (DATA / "problems" / "scale_add.py").read_text()

# a problem whose reference ignores its second input: the linter flags it (unused-input)
IGNORES_B = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a * 2


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []
'''

HEAD = "import torch\nimport torch.nn as nn\n\n\n"

# name -> (candidate source for scale_add, expected status, expected class, words of the reason)
CANDIDATES = {
    "honest_cpp": ('''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
torch::Tensor audit_scale_add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const float* x = a.data_ptr<float>();
    const float* y = b.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) o[i] = x[i] + x[i] + y[i];
    return out;
}
"""
ext = load_inline(name="audit_scale_add", cpp_sources=SRC, functions=["audit_scale_add"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.audit_scale_add(a.contiguous(), b.contiguous())
''', "correct", "none", "checks passed"),
    "py_fallback": (HEAD + "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a + a + b\n",
                    "correct", "torch_fallback", "checks passed"),
    "wrong": (HEAD + "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a * 3 + b\n",
              "incorrect", "wrong_values", "outside atol"),
    "reuse": (HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, a, b):
        if self.buf is None:
            self.buf = torch.empty_like(a)
        torch.add(a + a, b, out=self.buf)
        return self.buf
''', "rejected", "output_reuse", "output buffer reused"),
    "mutates": (HEAD + "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a.mul_(2).add_(b)\n",
                "incorrect", "input_mutation", "modified its input"),
    "opens_file": (HEAD + '''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        with open("/etc/hostname") as f:
            self.host = f.read()

    def forward(self, a, b):
        return a + a + b
''', "rejected", "forbidden_access", "accesses files"),
    "never_loads": (HEAD + '''from torch.utils.cpp_extension import load_inline


def build():
    return load_inline(name="never_built", cpp_sources="int f() { return 1; }", functions=["f"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a + a + b
''', "rejected", "never_ran_kernel", "never built or loaded"),
    "threads": (HEAD + '''import threading


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a + a + b
''', "rejected", "thread", "threading"),
}

EVAL = ["--device", "cpu", "--confirm", "0", "--no-compile", "--max-reps", "10", "--trials", "3"]


def run_cli(args: list[str], capsys) -> dict:
    assert main(args + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_directory_source(tmp_path: Path, capsys):
    """Every candidate judged, classified and reported; lint findings in the rows; claims read."""
    src = tmp_path / "release"
    (src / "problems").mkdir(parents=True)
    (src / "solutions").mkdir()
    for name, (code, *_rest) in CANDIDATES.items():
        (src / "problems" / f"{name}.py").write_text(SCALE_ADD)
        (src / "solutions" / f"{name}.py").write_text(code)
    (src / "problems" / "ignores_b.py").write_text(IGNORES_B)
    (src / "solutions" / "ignores_b.py").write_text(HEAD + "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
                                                    "        return a + a\n")
    (src / "problems" / "unsolved.py").write_text(SCALE_ADD)  # no solution: no_kernel
    (src / "claims.json").write_text(json.dumps({n: 3.0 for n in CANDIDATES} | {"wrong": {"eager": 9.0}}))
    html = tmp_path / "audit.html"
    doc = run_cli(["audit", str(src), *EVAL, "--archive", str(tmp_path / "a.sqlite"), "-o", str(html)], capsys)
    assert set(doc) == {"summary", "kernels"}
    kernels = {k["name"]: k for k in doc["kernels"]}
    for k in doc["kernels"]:
        assert list(k)[:10] == ["name", "status", "reason", "code", "class", "flags", "claimed_speedup",
                                "speedup_vs_eager", "speedup_vs_compile", "lint"]
        assert k["class"] in CLASS_NAMES
    for name, (_, status, cls, words) in CANDIDATES.items():
        k = kernels[name]
        assert (k["status"], k["class"]) == (status, cls), (name, k["reason"])
        assert words in k["reason"], (name, k["reason"])
        # the class is the code's (these classes are one code each); a correct kernel has none
        assert k["code"] == ("" if status == "correct" else cls), (name, k["code"])
        assert classify_code(k["status"], k["code"], "reworded", k["flags"]) == cls
        # the legacy phrase rules (rows without a code) agree on the real reason, as stored
        assert classify_reason(k["status"], k["reason"], k["flags"]) == cls
    assert kernels["wrong"]["claimed_speedup"] == 9.0 and kernels["honest_cpp"]["claimed_speedup"] == 3.0
    assert kernels["honest_cpp"]["speedup_vs_eager"] is not None and not kernels["honest_cpp"]["torch_fallback"]
    assert kernels["py_fallback"]["torch_fallback"] and "torch_fallback" in kernels["py_fallback"]["flags"]
    assert kernels["unsolved"]["class"] == "no_kernel" and kernels["unsolved"]["status"] == "not_evaluated"
    assert any(line.startswith("unused-input") for line in kernels["ignores_b"]["lint"]), kernels["ignores_b"]
    s = doc["summary"]
    assert s["kernels"] == len(CANDIDATES) + 2 and s["by_class"]["torch_fallback"] == 2
    assert s["claimed_faster"] == len(CANDIDATES)
    assert s["verified_fast_p"]["0.0"] == pytest.approx(3 / s["kernels"])  # honest_cpp, py_fallback, ignores_b
    assert s["verified_fast_p_own_kernels"]["0.0"] == pytest.approx(1 / s["kernels"])
    assert s["claimed_fast_p"]["1.0"] == pytest.approx(len(CANDIDATES) / s["kernels"])
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "output_reuse" in page and "honest_cpp" in page
    assert "<script src" not in page and "plotly" not in page.lower()
    # the state sits next to -o, one line per judged kernel
    lines = (tmp_path / "audit.html.state" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == len(CANDIDATES) + 1


def _row(level: int, task: int, code: str | None, score: float | None = 2.0) -> dict:
    return {"level_id": level, "task_id": task, "ref_code": SCALE_ADD, "custom_code": code, "score_default": score,
            "other": "ignored"}


def test_jsonl_fields_bad_rows_selection_and_resume(tmp_path: Path, capsys):
    lines = [json.dumps(_row(1, 1, CANDIDATES["wrong"][0], 4.0)),
             json.dumps(_row(1, 2, CANDIDATES["mutates"][0])),
             "{not json",
             json.dumps({"level_id": 1, "task_id": 4, "ref_code": SCALE_ADD}),  # no custom_code field
             json.dumps(_row(2, 5, None, None)),  # no kernel published
             json.dumps(_row(2, 6, CANDIDATES["py_fallback"][0], 1.5)),
             json.dumps(_row(2, 7, 42)),  # kernel not a string
             ]
    release = tmp_path / "release.jsonl"
    release.write_text("\n".join(lines) + "\n")
    state = tmp_path / "state"
    base = ["audit", str(release), "--fields", "name=level_id+task_id,ref=ref_code,kernel=custom_code,"
            "claimed=score_default", "--state", str(state), "--archive", str(tmp_path / "a.sqlite"), "--no-lint", *EVAL]
    first = run_cli(base + ["--limit", "2"], capsys)
    assert [k["name"] for k in first["kernels"]] == ["1_1", "1_2"]
    assert [k["class"] for k in first["kernels"]] == ["wrong_values", "input_mutation"]
    rows_file = state / "rows.jsonl"
    before = rows_file.read_text().splitlines()
    assert len(before) == 2 and {json.loads(x)["name"] for x in before} == {"1_1", "1_2"}
    # --report-only evaluates nothing: what the state holds, the rest not judged and left out of
    # the summary's figures (claims included)
    report = run_cli(base + ["--report-only"], capsys)
    assert rows_file.read_text().splitlines() == before
    statuses = {k["name"]: k["status"] for k in report["kernels"]}
    assert statuses["1_1"] == "incorrect" and statuses["2_6"] == "not_judged"
    assert report["summary"]["not_judged"] == 1 and report["summary"]["claimed_faster"] == 2  # 1_1, 1_2

    full = run_cli(base, capsys)  # resumes: 1_1 and 1_2 are not evaluated again
    after = rows_file.read_text().splitlines()
    assert after[:2] == before and len(after) == 3 and json.loads(after[2])["name"] == "2_6"
    kernels = {k["name"]: k for k in full["kernels"]}
    assert list(kernels) == ["1_1", "1_2", "row3", "1_4", "2_5", "2_6", "2_7"]
    assert kernels["1_1"] == {**first["kernels"][0]}
    assert kernels["row3"]["class"] == "bad_row" and "not valid JSON" in kernels["row3"]["reason"]
    assert kernels["1_4"]["class"] == "bad_row" and "custom_code" in kernels["1_4"]["reason"]
    assert kernels["2_5"]["class"] == "no_kernel"
    assert kernels["2_7"]["class"] == "bad_row" and "not a string" in kernels["2_7"]["reason"]
    assert kernels["2_6"]["class"] == "torch_fallback" and kernels["2_6"]["claimed_speedup"] == 1.5
    assert full["summary"]["by_status"]["not_evaluated"] == 4
    assert full["summary"]["claimed_faster"] == 3  # 1_1, 1_2, 2_6 (bad rows carry no claim)
    # --only, from the state alone (nothing evaluated)
    only = run_cli(base + ["--only", "2_6,1_1"], capsys)
    assert [k["name"] for k in only["kernels"]] == ["1_1", "2_6"]
    assert rows_file.read_text().splitlines() == after
    # the terminal tables
    assert main(base + ["--only", "1_1"]) == 0
    out = capsys.readouterr().out
    assert "wrong_values" in out and "claimed" in out and "own kernels only" in out


def test_a_failing_kernel_is_saved_before_the_chunk_is_confirmed(tmp_path: Path, monkeypatch, cpu_config):
    """A run killed while it confirms the correct kernels of a chunk has saved the failing ones."""
    import kernelsearch.bench as bench
    from kernelsearch.audit.run import AuditState, Options, run_audit
    from kernelsearch.audit.sources import materialise, read_source

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "confirm", killed)
    release = tmp_path / "release.jsonl"
    release.write_text("".join(json.dumps(_row(1, k, CANDIDATES[name][0])) + "\n"
                               for k, name in enumerate(("py_fallback", "wrong", "mutates"))))
    state = AuditState(tmp_path / "state")
    entries = materialise(read_source(release, "name=level_id+task_id,ref=ref_code,kernel=custom_code"), state.root)
    with pytest.raises(KeyboardInterrupt):
        run_audit(entries, cpu_config, None, state, Options(confirm=1, chunk=8, lint=False, progress=False))
    saved = [json.loads(x) for x in state.path.read_text().splitlines()]
    assert sorted((r["name"], r["class"]) for r in saved) == [("1_1", "wrong_values"), ("1_2", "input_mutation")]


def test_select_sample_is_reproducible():
    entries = [Entry(f"k{i}") for i in range(20)]
    a = [e.name for e in select(entries, sample=5, seed=3)]
    assert a == [e.name for e in select(entries, sample=5, seed=3)]
    assert a != [e.name for e in select(entries, sample=5, seed=4)]
    assert a == sorted(a, key=lambda n: int(n[1:]))  # kept in source order
    assert [e.name for e in select(entries, limit=2)] == ["k0", "k1"]
    assert [e.name for e in select(entries, only=["k3", "k9"], limit=1)] == ["k3"]


def test_rows_fields_and_names():
    fields = parse_fields("name=level_id+task_id,ref=ref_code,kernel=custom_code,claimed=score_default")
    assert fields["name"] == ["level_id", "task_id"] and fields["claimed_compile"] == ["claimed_compile"]
    with pytest.raises(ValueError):
        parse_fields("ref=a+b")
    with pytest.raises(ValueError):
        parse_fields("bogus=x")
    assert safe_name("a/b c..py") == "a_b_c..py" and safe_name("../x") == "_x"
    rows = [{"level_id": 1, "task_id": 2, "ref_code": "x", "custom_code": "y", "score_default": "fast"},
            {"level_id": 1, "task_id": 3, "ref_code": "x", "custom_code": "y", "score_default": "1.5"},
            {"level_id": 1, "task_id": 3, "ref_code": "x", "custom_code": "z"},
            [1, 2]]
    out = read_rows(rows, fields)
    assert out[0].error_class == "bad_row" and "not a number" in out[0].error
    assert out[1].claimed == 1.5 and not out[1].error and out[1].texts == ("x\n", "y\n")
    assert out[2].error_class == "bad_row" and "taken" in out[2].error
    assert out[3].error_class == "bad_row" and out[3].name == "row4"


# rows without a code (written before codes): the legacy phrase rules. Reason strings the evaluator writes (verdict/decide.py, worker/guards.py, worker/streams.py,
# screen/python.py, screen/native.py, verdict/roofline.py, verdict/protocol.py) -> class
REASONS = [
    ("rejected", "the output of trial 0 changed during trial 1 (output buffer reused, or work deferred into a later "
     "call)", "output_reuse"),
    ("rejected", "uses PyTorch compute on the forward path: forward path calls PyTorch compute: torch.matmul",
     "torch_fallback"),
    ("rejected", "uses PyTorch compute on the forward path (seen while it ran: aten::mm x3)", "torch_fallback"),
    ("rejected", "ModelNew subclasses the reference Model", "torch_fallback"),
    ("rejected", "forward falls back to PyTorch compute in an exception handler", "exception_fallback"),
    ("rejected", "calls open(): accesses files", "forbidden_access"),
    ("rejected", "imports socket: opens network connections", "forbidden_access"),
    ("rejected", "calls os.system(): runs other programs or processes", "forbidden_access"),
    ("rejected", "assigns to os.environ: patches a module (timer, torch or harness) at run time", "forbidden_access"),
    ("rejected", "uses sys._getframe: inspects the harness's stack frames (sys._getframe)", "forbidden_access"),
    ("rejected", "uses .__dict__: introspects the interpreter or the harness", "forbidden_access"),
    ("rejected", "refers to '/proc/self/maps': reads process memory or state from /proc", "forbidden_access"),
    ("rejected", "uses torch.initial_seed: reads the harness's random-number state (predicting inputs)",
     "forbidden_access"),
    ("runtime_error", "forward: PermissionError: [Errno 13] Permission denied: '/root/x'", "forbidden_access"),
    ("rejected", "trial 0: forward never called its compiled kernel (k); the work was done some other way",
     "never_ran_kernel"),
    ("rejected", "trial 0: the candidate declares a cpp kernel but never built or loaded one; forward runs no "
     "kernel of its own", "never_ran_kernel"),
    ("rejected", "none of the kernels it defines (k) ran on the forward path; the GPU ran ampere_sgemm",
     "never_ran_kernel"),
    ("rejected", "stream-order call: forward returned with work on a side stream (one of torch's pool streams) "
     "that the caller's stream does not wait for", "stream_race"),
    ("incorrect", "stream-order call: outside atol", "stream_race"),
    ("rejected", "C++ source uses a side CUDA stream (cudaStreamCreate) and never synchronises it with the "
     "caller's stream: work would escape the timer", "stream_race"),
    ("rejected", "trial 2: the output changed after forward returned (deferred work on another stream or thread)",
     "stream_race"),
    ("rejected", "timed call 3: 1 thread(s) started during forward were still running after it returned (work "
     "outside the timed region)", "thread"),
    ("rejected", "imports threading: starts threads (work after the timer stops)", "thread"),
    ("rejected", "uses torch.jit.fork: starts background work (torch.jit.fork runs after forward returns)", "thread"),
    ("rejected", "impossible timing: a timed call took 0.001 ms, under the cuda floor of 0.01 ms (8 MB at 4 TB/s); "
     "not scored", "impossible_time"),
    ("rejected", "timed at 0.1 ms (median), but its kernels kept the GPU busy for 1 ms in a profiled call: work "
     "escaped the timer", "impossible_time"),
    ("incorrect", "forward modified its input argument(s) [0]", "input_mutation"),
    ("incorrect", "trial0: 12 of 4096 elements outside atol=0.0001, rtol=0.0001 (max abs error 1.0)",
     "wrong_values"),
    ("compile_error", "build failed: error: expected ';' before '}' token", "build_failure"),
    ("compile_error", "Python syntax error at line 3: invalid syntax", "build_failure"),
    ("runtime_error", "correctness: RuntimeError: bad block size", "runtime_error"),
    ("timeout", "run did not finish within 30 s (phase: correctness)", "timeout"),
    ("crashed", "worker killed by SIGSEGV (segmentation fault) during correctness", "crashed"),
    ("crashed", "the judge (reference) failed: boom", "problem_error"),
    ("crashed", "the problem's get_inputs() raised ValueError: no", "problem_error"),
    ("rejected", "trial 0: forward returned a Tensor subclass (Lazy); only plain tensors are accepted",
     "tensor_subclass"),
    ("rejected", "class Lazy subclasses torch.Tensor: a Tensor subclass can defer or fake work", "tensor_subclass"),
    ("rejected", "time.perf_counter_ns was replaced during trial 0 (monkey-patching the timer, torch or the harness)",
     "patching"),
    ("rejected", "assigns to torch.equal: patches a module (timer, torch or harness) at run time", "patching"),
    ("rejected", "the result channel carries 2 'timing' reports (forged by the candidate)", "forged_report"),
    ("rejected", "the timing report names input set 'x', which the harness did not give it (forged)",
     "forged_report"),
    ("rejected", "C++ source sets an L2 persisting-cache window (accessPolicyWindow): inputs stay cached between "
     "timed calls", "cache_warming"),
    ("rejected", "hard-coded shape dispatch in forward: compares x.shape[0] with 4096 (a path taken only at the "
     "benchmarked size)", "shape_dispatch"),
    ("rejected", "a cuda candidate cannot run on the cpu device", "other"),
    ("rejected", "no class ModelNew defined", "other"),
]


@pytest.mark.parametrize(("status", "reason", "cls"), REASONS)
def test_classify_reasons(status: str, reason: str, cls: str):
    assert classify_reason(status, reason) == cls


def test_classify_correct_and_the_table():
    assert classify_reason("correct", "5 checks passed", []) == "none"
    assert classify_reason("correct", "5 checks passed", ["torch_fallback"]) == "torch_fallback"
    assert len(set(CLASS_NAMES)) == len(CLASSES)
    assert {c for *_, c in REASONS} | {"none", "bad_row", "no_kernel"} <= set(CLASS_NAMES)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()
    for name in CLASS_NAMES:  # every class documented
        assert f"`{name}`" in docs, name
