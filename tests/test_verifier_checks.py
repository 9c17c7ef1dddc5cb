"""Unit tests of the verifier's layers, without worker processes: static screen rules, output
fingerprints, the worker's per-call guards, the judge's vacuity guard, the parent's protocol
and roofline checks. The red-team corpus (test_redteam.py) runs them end to end."""

from __future__ import annotations

import threading
import time
import types

import pytest
import torch
from conftest import DATA

from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.judge.compare import compare
from kernelsearch.evaluator.screen.native import defined_kernels, native_compute, native_reject
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.timing.loop import time_calls
from kernelsearch.evaluator.verdict.protocol import protocol_violation
from kernelsearch.evaluator.verdict.roofline import floor, impossible
from kernelsearch.evaluator.worker.fingerprint import fingerprint
from kernelsearch.evaluator.worker.guards import CallGuard, GuardViolation
from kernelsearch.evaluator.worker.integrity import Integrity
from kernelsearch.evaluator.worker.launches import ComputeObserver, ExtensionCalls, GraphReplays
from kernelsearch.problems.loader import load_problem

HEAD = "import torch\nimport torch.nn as nn\n"


def _model(body: str, pre: str = "") -> str:
    return HEAD + pre + "class ModelNew(nn.Module):\n    def forward(self, x):\n" + body


@pytest.mark.parametrize("src, reason", [
    (_model("        return x", "import time\ntime.perf_counter = lambda: 0.0\n"), "assigns to time.perf_counter"),
    (_model("        return x", "import time as t\nclock = t\nclock.sleep = None\n"), "assigns to time.sleep"),
    (_model("        setattr(torch.cuda, 'synchronize', lambda: None)\n        return x"), "setattr() on torch.cuda"),
    (_model("        return x", "class T(torch.Tensor):\n    pass\n"), "subclasses torch.Tensor"),
    (_model("        return torch.Tensor._make_subclass(torch.Tensor, x)"), "_make_subclass"),
    (_model("        return x", "from torch.overrides import TorchFunctionMode\n"), "torch function mode"),
    (_model("        x.__class__ = torch.nn.Parameter\n        return x"), "__class__"),
    (_model("        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            y = x * 2\n        return y"),
     "side stream"),
    (_model("        if x.shape[-1] == 4096:\n            return x\n        raise ValueError"), "shape dispatch"),
    (_model("        b, n = x.shape\n        return x if n != 1024 else x * 2"), "shape dispatch"),
    (_model("        if tuple(x.shape) in ((16, 4096),):\n            return x\n        return x"), "shape dispatch"),
    (_model("        return open('/etc/passwd').read()"), "accesses files"),
    (_model("        torch.save(x, 'x.pt')\n        return x"), "accesses files"),
    (_model("        return x", "import tempfile\nf = tempfile.NamedTemporaryFile()\n"), "accesses files (tempfile)"),
    (_model("        return x", "from tempfile import mkstemp as m\nfd = m()\n"), "accesses files (tempfile)"),
    # a directory made, but not the one handed to the build: file access
    (_model("        return x", "import os\nfrom torch.utils.cpp_extension import load_inline\nos.makedirs('other')\n"
            "ext = load_inline(name='e', cpp_sources='', build_directory='exts')\n"), "calls os.makedirs()"),
    (_model("        import os\n        os.system('ls')\n        return x"), "runs other programs"),
    (_model("        return x", "import socket\n"), "network"),
    (_model("        return x", "import ctypes\n"), "ctypes"),
    (_model("        import sys\n        sys._getframe(1)\n        return x"), "_getframe"),
    (_model("        return x", "P = '/proc/self/mem'\n"), "/proc"),
    (_model("        torch.jit.fork(lambda: x)\n        return x"), "background work"),
    (_model("        return x * torch.initial_seed()"), "random-number state"),
    (_model("        return getattr(torch, 'mat' + 'mul')(x, x)"), "computed name"),
    (_model("        eval('x')\n        return x"), "eval"),
    (_model("        return x.__dict__"), "introspects"),
    (_model("        try:\n            return ext.f(x)\n        except RuntimeError:\n            return torch.matmul(x, x)"),
     "exception handler"),
    (_model("        return x", "import ks_reference_problem\n"), "harness's own copy"),
])
def test_screen_rejects(src, reason):
    assert reason in screen(src).reject


@pytest.mark.parametrize("src", [
    _model("        return x", "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.benchmark = True\n"),
    _model("        if x.numel() == 0 or x.shape[0] == 1:\n            return x\n        return x if x.shape[-1] <= 4096 else x"),
    _model("        if x.dim() != 2 or x.shape[-1] % 4:\n            raise ValueError('2-D, multiple of 4')\n        return x"),
    _model("        s = torch.cuda.Stream()\n        s.wait_stream(torch.cuda.current_stream())\n"
           "        with torch.cuda.stream(s):\n            y = x * 2\n"
           "        torch.cuda.current_stream().wait_stream(s)\n        return y"),
    _model("        self.cache = x\n        out = x.clone()\n        out.foo = 1\n        return out"),
    _model("        try:\n            return ext.f(x)\n        except RuntimeError as e:\n            raise ValueError('bad') from e"),
    _model("        import os\n        return x if os.environ.get('X') else x"),
    # a directory made for load_inline's build_directory (as published kernels do); the sandbox
    # decides where it may be written
    _model("        return x", "import os\nfrom torch.utils.cpp_extension import load_inline\nd = 'exts'\n"
           "os.makedirs(d, exist_ok=True)\next = load_inline(name='e', cpp_sources='', build_directory=d)\n"),
    _model("        return x", "import os, tempfile\nfrom torch.utils.cpp_extension import load_inline\n"
           "d = os.path.join(tempfile.mkdtemp(), 'ext')\nos.makedirs(d, exist_ok=True)\n"
           "ext = load_inline(name='e', cpp_sources='', build_directory=d)\n"),
])
def test_screen_accepts(src):
    assert screen(src).reject == ""


def test_native_rules():
    launch = "k<<<1, 1, 0, s>>>(p);"
    assert "side CUDA stream" in native_reject(["auto s = at::cuda::getStreamFromPool(); " + launch])
    assert native_reject(["auto s = at::cuda::getStreamFromPool(); " + launch + " cudaStreamWaitEvent(m, e, 0);"]) == ""
    assert native_reject(["// getStreamFromPool in a comment\n" + launch]) == ""
    assert "L2" in native_reject(["attr.accessPolicyWindow.num_bytes = n;"])
    assert native_compute(["return at::matmul(a, b);", "cublasSgemm(h, ...);"]) == ["at::matmul", "cublasSgemm"]
    assert native_compute(["auto y = torch::empty_like(x); y.copy_(x);"]) == []
    src = "__global__ void __launch_bounds__(256) foo(float* x) {}\ntemplate <int N> __global__ void bar(int n) {}"
    assert defined_kernels([src], "@triton.jit\ndef baz(x_ptr):\n    pass\n") == ["bar", "baz", "foo"]
    src = "__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2) ln_cluster(float* x) {}"
    assert defined_kernels([src], "") == ["ln_cluster"]


def test_every_build_in_a_file_is_screened():
    """A benign first load_inline does not hide what a second one compiles; a source built with
    + reads as one string."""
    src = HEAD + ("from torch.utils.cpp_extension import load_inline\n"
                  "a = load_inline(name='a', cpp_sources='int f() { return 0; }', functions=['f'])\n"
                  "PART = 'auto s = at::cuda::getStreamFromPool(); '\n"
                  "b = load_inline(name='b', cpp_sources=PART + 'k<<<1, 1, 0, s>>>(p);', functions=['g'])\n"
                  "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert "side CUDA stream" in screen(src).reject


def test_screen_marks_compiled_library_compute():
    src = HEAD + "from torch.utils.cpp_extension import load_inline\nSRC = 'torch::Tensor f(torch::Tensor a) " \
                 "{ return at::matmul(a, a); }'\next = load_inline(name='m', cpp_sources=SRC, functions=['f'])\n" \
                 "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    res = screen(src)
    assert res.reject == "" and res.flags == ["torch_fallback"] and "at::matmul" in res.notes[-1]


def test_fingerprint_is_exact_and_order_free():
    x = torch.randn(5000)
    fp = fingerprint(x)
    assert fingerprint(x.clone()) == fp and fingerprint([x, x]) == fp + fp
    y = x.clone()
    y[4321] = torch.nextafter(y[4321], torch.tensor(float("inf")))  # one ulp
    assert fingerprint(y) != fp
    swapped = x.clone()
    swapped[[0, 1]] = x[[1, 0]]
    assert fingerprint(swapped) != fp
    assert fingerprint(torch.empty(0)) == (0, 0, 0, 0)
    assert fingerprint(x[1:]) == fingerprint(x[1:].clone())  # a view at an odd offset
    assert fingerprint(x.half()) != fingerprint(x.half().clone().add_(1))


def test_compare_guards_vacuous_tolerance():
    ref = torch.softmax(torch.randn(16, 16384), dim=-1)  # every value < 0.01
    zeros = torch.zeros_like(ref)
    assert compare("t", [zeros], [ref], 1e-2, 1e-2).ok  # the elementwise check alone is vacuous
    strict = compare("t", [zeros], [ref], 1e-2, 1e-2, guard_vacuous=True)
    assert not strict.ok and "all-zeros" in strict.reason
    assert compare("t", [ref.bfloat16().float()], [ref], 1e-2, 1e-2, guard_vacuous=True).ok
    big = torch.randn(1000)  # not vacuous: the guard leaves a 5% error to the elementwise check
    assert not compare("t", [big * 1.05], [big], 1e-2, 1e-2, guard_vacuous=True).ok
    assert compare("t", [big * 1.005], [big], 1e-2, 1e-2, guard_vacuous=True).ok


def test_integrity_names_a_replaced_function(monkeypatch):
    snap = Integrity()
    assert len(snap) > 100 and snap.changed() == ""
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    assert snap.changed() == "time.perf_counter_ns"
    monkeypatch.undo()
    monkeypatch.setattr(torch.Tensor, "clone", lambda self: self)
    assert snap.changed() == "Tensor.clone"
    monkeypatch.undo()
    assert snap.changed() == ""


def test_guard_rejects_threads_left_running():
    guard = CallGuard("cpu", "torch", first_call_allowance=0)
    guard.install()
    stop = threading.Event()
    guard.before()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()
    with pytest.raises(GuardViolation, match="still running after it returned"):
        guard.after(torch.zeros(3), "trial 0")
    stop.set()
    worker.join()
    guard.before()  # a thread joined before return is fine
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    guard.after(torch.zeros(3), "trial 1")


def test_guard_rejects_subclasses_and_late_writes():
    guard = CallGuard("cpu", "torch")
    guard.install()
    guard.before()
    lazy = torch.zeros(3).as_subclass(type("Lazy", (torch.Tensor,), {}))
    with pytest.raises(GuardViolation, match="Tensor subclass"):
        guard.after(lazy, "trial 0")
    out = torch.zeros(1000)
    guard.before()
    fp = guard.after(out, "trial 1")
    stop = threading.Event()

    def keep_writing() -> None:  # work still going on after "forward" returned
        v = 0.0
        while not stop.is_set():
            v += 1.0
            out.fill_(v)
            time.sleep(0.0002)

    late = threading.Thread(target=keep_writing)
    late.start()
    with pytest.raises(GuardViolation, match="changed after forward returned"):
        guard.settle(out, fp, "trial 1")
    stop.set()
    late.join()
    kept = torch.zeros(10)
    guard.keep(kept, fingerprint(kept), "trial 2")
    kept += 1
    guard.before()
    with pytest.raises(GuardViolation, match="output of trial 2 changed during trial 3"):
        guard.after(torch.zeros(3), "trial 3")


def test_guard_requires_the_extension_to_run():
    guard = CallGuard("cpu", "cpp")
    guard.install()
    guard.before()
    with pytest.raises(GuardViolation, match="never built or loaded"):
        guard.after(torch.zeros(3), "trial 0")
    ext = guard.launches
    assert isinstance(ext, ExtensionCalls)
    module = types.SimpleNamespace(sqrt=__import__("math").sqrt)
    ext.loads += 1
    ext._wrap(module)
    guard.before()
    with pytest.raises(GuardViolation, match="never called its compiled kernel"):
        guard.after(torch.zeros(3), "trial 1")
    guard.before()
    assert module.sqrt(4.0) == 2.0
    guard.after(torch.zeros(3), "trial 2")


class _Graph:
    """Stands in for torch.cuda.CUDAGraph (the CPU build cannot capture): the methods the
    counter hooks, with a replay that runs what was "captured"."""

    def capture_begin(self):
        self.work = []

    def capture_end(self):
        pass

    def replay(self):
        for fn in self.work:
            fn()


def test_graph_replay_counts_the_launches_it_captured():
    ext = ExtensionCalls()
    hooked = GraphReplays(ext, graph_class=_Graph).install()
    assert {name for _, name in hooked} == {"capture_begin", "capture_end", "replay"}
    kernel = ext._counting(lambda: None)
    own, foreign = _Graph(), _Graph()
    own.capture_begin()
    kernel()  # the candidate's own function, called while capturing
    kernel()
    own.capture_end()
    foreign.capture_begin()  # a graph of other work: no call of the candidate's functions
    foreign.capture_end()
    before = ext.count
    own.replay()
    assert ext.count == before + 2
    foreign.replay()
    assert ext.count == before + 2


def test_compute_observer_sees_compute_not_plumbing():
    x = torch.randn(8, 8)
    with ComputeObserver() as obs:
        y = x.contiguous().view(64).clone()
        torch.empty_like(y)
        _ = x.shape, x.numel(), x[0]
    assert dict(obs.seen) == {}
    with ComputeObserver() as obs:
        _ = x * 2 + x
        x.matmul(x)
    assert obs.seen["Tensor.mul"] == 1 and obs.seen["Tensor.add"] == 1 and obs.seen["Tensor.matmul"] == 1


def test_time_calls_fresh_inputs_and_spot_copies():
    made: list[int] = []

    def inputs_for(i: int) -> list:
        made.append(i)
        return [torch.full((4,), float(i))]

    cfg = TimingConfig(warmup=2, warmup_ms=0.0, min_reps=5, max_reps=5, budget_s=5.0, flush_cache=False)
    seen: list[torch.Tensor] = []
    run = time_calls(lambda x: x * 2, [], "cpu", cfg, spot_checks=2, inputs_for=inputs_for, after=seen.append)
    assert made == list(range(7)) and len(seen) == 7 and len(run.samples_ms) == 5
    assert len(run.spot_outputs) == 2
    for k, out in run.spot_outputs:
        assert k >= 2 and torch.equal(out, torch.full((4,), 2.0 * k))


def _messages(trials: int = 2, spots=None, samples: int = 5, extra: list | None = None) -> list[dict]:
    spots = [{"file": "timed0.kst", "input_set": 3}] if spots is None else spots
    msgs = [{"event": "phase", "phase": "build"}, {"event": "built"}, {"event": "phase", "phase": "run"}]
    msgs += [{"event": "trial", "index": i} for i in range(trials)] + [{"event": "observed"}]
    msgs += [{"event": "timing", "samples_ms": [1.0] * samples, "spots": spots}] + (extra or []) + [{"event": "done"}]
    return msgs


def test_protocol_catches_forged_reports():
    cfg = TimingConfig(warmup=1, min_reps=5, max_reps=20, spot_checks=1)
    n = cfg.warmup + cfg.max_reps
    assert protocol_violation(_messages(), 2, cfg, n) == ""
    forged = _messages(extra=[{"event": "timing", "samples_ms": [1e-6] * 5, "spots": []}])
    assert "2 'timing' reports" in protocol_violation(forged, 2, cfg, n)
    assert "trials" in protocol_violation(_messages(trials=1), 2, cfg, n)
    assert "spot-checked" in protocol_violation(_messages(spots=[]), 2, cfg, n)
    assert "warm-up" in protocol_violation(_messages(spots=[{"file": "timed0.kst", "input_set": 0}]), 2, cfg, n)
    assert "output file" in protocol_violation(_messages(spots=[{"file": "../x", "input_set": 2}]), 2, cfg, n)
    assert "samples" in protocol_violation(_messages(samples=500), 2, cfg, n)
    assert "after 'done'" in protocol_violation(_messages() + [{"event": "trial", "index": 9}], 2, cfg, n)


def test_roofline_floor():
    problem = load_problem(DATA / "problems" / "scale_add.py")
    f = floor(problem, "cuda", "NVIDIA H100 80GB HBM3")
    assert f is not None and f.ms == pytest.approx(3 * 4 * (1 << 24) / 5e12 * 1e3)
    assert "impossible timing" in impossible([1.0, f.ms / 2], problem, "cuda", "NVIDIA H100 80GB HBM3")
    assert impossible([f.ms * 1.5] * 3, problem, "cuda", "NVIDIA H100 80GB HBM3") == ""
    matmul = load_problem("01_matmul")
    assert "TFLOP/s" in floor(matmul, "cpu").why  # compute-bound: the FLOPs set the floor


def test_bench_reports_marked_results_apart():
    from kernelsearch.bench import BenchSummary
    from kernelsearch.records.result import EvalResult, Status, TimingStats

    def result(name: str, flags: list[str]) -> EvalResult:
        r = EvalResult(problem=name, problem_id=name, candidate_id=name, backend="cpp", device="cpu",
                       status=Status.CORRECT, reason="", flags=flags)
        r.candidate_timing = TimingStats.from_samples([1.0])
        r.eager_timing = TimingStats.from_samples([2.0])
        return r

    problems = [load_problem("02_softmax"), load_problem("06_gelu")]
    summary = BenchSummary("cpu", [(problems[0], result("a", [])), (problems[1], result("b", ["torch_fallback"]))])
    d = summary.to_dict()
    assert d["fast_p"]["eager"]["1.0"] == 1.0 and d["fast_p_own_kernels"]["eager"]["1.0"] == 0.5
    assert d["torch_fallback_marked"] == ["06_gelu"]


def test_warm_up_lasts_at_least_warmup_ms():
    """Warm-up goes on (the warm-up inputs again) until ``warmup_ms`` has passed, so a device
    left idle (a GPU at low clocks after a long build) is busy before the first timed call;
    the timed calls and their inputs are unchanged."""
    import time

    import torch

    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.timing.loop import time_calls

    seen: list[int] = []

    def fn(x):
        seen.append(int(x.item()))
        time.sleep(0.002)
        return x

    cfg = TimingConfig(warmup=2, warmup_ms=80.0, min_reps=5, max_reps=5, flush_cache=False)
    run = time_calls(fn, [], "cpu", cfg, inputs_for=lambda i: [torch.tensor(i)])
    warm, timed = seen[:-5], seen[-5:]
    assert len(warm) >= 15 and set(warm) == {0, 1}  # ~80 ms of 2 ms calls, only warm-up inputs
    assert timed == [2, 3, 4, 5, 6] and len(run.samples_ms) == 5
    seen.clear()
    time_calls(fn, [], "cpu", TimingConfig(warmup=2, warmup_ms=0.0, min_reps=5, max_reps=5, flush_cache=False),
               inputs_for=lambda i: [torch.tensor(i)])
    assert seen == [0, 1, 2, 3, 4, 5, 6]


def test_compare_a_slice_at_a_time_gives_the_whole_tensors_figures(monkeypatch):
    """The judge compares huge outputs a slice at a time (float64 temporaries of whole 6 GiB
    outputs ran it out of GPU memory); every figure and reason is the one whole tensors give."""
    import torch

    from kernelsearch.evaluator.judge import compare as cmp

    g = torch.Generator().manual_seed(0)
    ref = torch.randn(7, 13, 11, generator=g)
    near = ref + 1e-4 * torch.randn(ref.shape, generator=g)
    off = near.clone()
    off[3, 5, 2] += 1.0
    off[6, 0, 9] -= 2.0
    inf_ref = ref.clone()
    inf_ref[1, 1, 1] = float("inf")
    inf_out = near.clone()
    inf_out[1, 1, 1] = float("inf")
    nan_out = near.clone()
    nan_out[2, 2, 2] = float("nan")
    tiny = torch.full((50, 40), 1e-5) + 1e-7 * torch.randn(50, 40, generator=g)
    ints = torch.arange(1000).reshape(10, 100)
    ints_off = ints.clone()
    ints_off[4, 7] += 3
    cases = [([near], [ref], False), ([off], [ref], False), ([inf_out], [inf_ref], False), ([nan_out], [ref], False),
             ([torch.zeros_like(tiny)], [tiny], True), ([ints_off], [ints], False), ([off, near], [ref, ref], False)]
    whole = [cmp.compare("t", o, r, 1e-2, 1e-2, guard_vacuous=v) for o, r, v in cases]
    monkeypatch.setattr(cmp, "CHUNK", 97)  # many slices, none aligned to a row
    sliced = [cmp.compare("t", o, r, 1e-2, 1e-2, guard_vacuous=v) for o, r, v in cases]
    for w, s in zip(whole, sliced, strict=True):
        assert (w.ok, w.reason, w.mismatches, w.numel) == (s.ok, s.reason, s.mismatches, s.numel)
        assert w.max_abs_error == pytest.approx(s.max_abs_error) and w.norm_error == pytest.approx(s.norm_error)
    assert [w.ok for w in whole] == [True, False, True, False, False, False, False]
    assert "first at index (3, 5, 2)" in whole[1].reason and "NaN" in whole[3].reason
    assert "vacuous" in whole[4].reason and "first at index (4, 7)" in whole[5].reason
