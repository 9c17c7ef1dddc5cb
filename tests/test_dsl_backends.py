"""The CuTe DSL (``cute``) and TileLang (``tilelang``) backends: detection, the static screen on
their kernels, the launch counters, prompts, seed bank and CLI choices (CPU, run in CI), and
the seed kernels judged on a GPU (``gpu``; skipped with a reason where the DSL is missing)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from kernelsearch.bench import SEEDBANK_DIR, solutions_dir
from kernelsearch.evaluator.screen.native import defined_kernels
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.worker.launches import CuteLaunches, DslLaunches, TileLangLaunches
from kernelsearch.llm.prompts import PromptLibrary
from kernelsearch.records.candidate import DEVICE_BACKENDS, Candidate, detect_backend

REDTEAM = Path(__file__).parent / "redteam"
SEEDS = {"cute": SEEDBANK_DIR / "cute" / "02_softmax.py",
         "tilelang": SEEDBANK_DIR / "tilelang" / "09_residual_rmsnorm.py"}
HONEST = {"cute": REDTEAM / "honest" / "h_cute_scale_add.py",
          "tilelang": REDTEAM / "honest" / "h_tilelang_scale_add.py"}
DSL_MODULE = {"cute": "cutlass.cute", "tilelang": "tilelang"}
KERNEL = "\nclass ModelNew:\n    def forward(self, x):\n        return x\n"


@pytest.mark.parametrize("imports, backend", [
    ("import cutlass\nimport cutlass.cute as cute\n", "cute"),
    ("import cutlass.cute as cute\n", "cute"),
    ("from cutlass.cute.runtime import from_dlpack\n", "cute"),
    ("import tilelang\nimport tilelang.language as T\n", "tilelang"),
    ("from tilelang import language as T\n", "tilelang"),
    ("import triton\n", "triton"),
    ("import torch\n", "torch"),
])
def test_detects_the_dsl_imported(imports, backend):
    assert detect_backend(imports + KERNEL) == backend
    assert detect_backend(imports + "def broken(:\n") == backend  # the text fallback


def test_cuda_sources_win_and_dsls_run_on_cuda_only():
    src = "import tilelang\nfrom torch.utils.cpp_extension import load_inline\nm = load_inline(cuda_sources='')\n"
    assert detect_backend(src) == "cuda"
    assert {"cute", "tilelang"} <= set(DEVICE_BACKENDS["cuda"])
    assert not {"cute", "tilelang"} & set(DEVICE_BACKENDS["cpu"])


@pytest.mark.parametrize("path", [*SEEDS.values(), *HONEST.values()], ids=lambda p: p.stem)
def test_screen_accepts_honest_dsl_kernels(path):
    """Seeds and honest items pass the static screen unflagged and name no kernel the profiler
    would have to find (DSL kernels are checked by counting launches)."""
    source = path.read_text()
    res = screen(source)
    assert res.reject == "" and res.flags == [], (res.reject, res.notes)
    assert res.kernels == []
    assert Candidate.from_file(path).backend in ("cute", "tilelang")


def test_bare_jit_is_triton_only_where_triton_is_imported():
    tl = "import tilelang\nfrom tilelang import jit\n@jit\ndef rmsnorm(n):\n    pass\n"
    tr = "import triton\nfrom triton import jit\n@jit\ndef add_kernel(x):\n    pass\n"
    assert defined_kernels([], tl) == []
    assert defined_kernels([], tr) == ["add_kernel"]


class _Launcher:
    def run(self, n: int) -> int:
        return n + 1


class _FakeLaunches(DslLaunches):
    HOOKS = (("ks_fake_dsl", "_Launcher", "run"), ("ks_fake_dsl", "Missing", "run"),
             ("ks_no_such_dsl", "X", "run"))
    LABEL = "fake kernels"


def test_dsl_launch_counter_hooks_what_exists(monkeypatch):
    """The counter wraps the launch method, skips classes and packages that are not there, and
    hands back what it replaced for the integrity check to watch."""
    mod = types.ModuleType("ks_fake_dsl")
    mod._Launcher = type("_Launcher", (_Launcher,), {"run": _Launcher.run})
    monkeypatch.setitem(sys.modules, "ks_fake_dsl", mod)
    counter = _FakeLaunches()
    hooked = counter.install()
    assert hooked == [(mod._Launcher, "run")]
    assert mod._Launcher().run(1) == 2 and mod._Launcher().run(2) == 3
    assert counter.count == 2 and counter.loads == 1 and counter.functions == ["fake kernels"]


def test_guard_counts_dsl_launches_on_cuda_only():
    from kernelsearch.evaluator.worker.guards import CallGuard

    assert isinstance(CallGuard("cuda", "cute").launches, CuteLaunches)
    assert isinstance(CallGuard("cuda", "tilelang").launches, TileLangLaunches)
    assert CallGuard("cpu", "tilelang").launches is None


@pytest.mark.parametrize("backend, words", [("cute", ["cute.compile", "@cute.kernel", "current_stream"]),
                                            ("tilelang", ["@tilelang.jit", "T.prim_func", "T.Kernel"])])
def test_prompt_notes_for_each_dsl(backend, words):
    lib = PromptLibrary()
    notes = lib._value("backend_notes", None, {"backend": backend})
    assert notes and all(w in notes for w in words), notes


@pytest.mark.parametrize("backend", ["cute", "tilelang"])
def test_seedbank_and_cli_accept_the_dsls(backend):
    from kernelsearch.cli.main import build_parser

    assert solutions_dir(f"seedbank:{backend}", "cuda") == SEEDBANK_DIR / backend
    parser = build_parser()
    args = parser.parse_args(["eval", "02_softmax", str(SEEDS["cute"]), "--backend", backend])
    assert args.backend == backend
    args = parser.parse_args(["run", "02_softmax", "--strategy", "refine", "--llm", "exchange:x",
                              "--out", "r", "--backend", backend])
    assert args.backend == backend


def _needs(backend: str) -> None:
    try:
        found = importlib.util.find_spec(DSL_MODULE[backend]) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        extra = "cute" if backend == "cute" else "tilelang"
        pytest.skip(f"{DSL_MODULE[backend]} is not installed (pip install -e '.[{extra}]')")


@pytest.mark.gpu
@pytest.mark.parametrize("backend, problem", [("cute", "02_softmax"), ("tilelang", "09_residual_rmsnorm")])
def test_seed_kernel_is_correct_on_gpu(backend, problem, tmp_path):
    """The seed kernel of each DSL is judged correct, unflagged: its launches were counted and
    nothing it calls reads as PyTorch compute."""
    _needs(backend)
    from kernelsearch.archive import Archive
    from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
    from kernelsearch.evaluator.evaluate import evaluate
    from kernelsearch.problems.loader import load_problem

    home = Path(os.environ.get("KERNELSEARCH_HOME", tmp_path))
    cfg = EvalConfig(device="cuda", trials=3, compile_baseline=False, home=home,
                     timing=TimingConfig(warmup=3, min_reps=10, max_reps=30, budget_s=3.0, spot_checks=2),
                     limits=Limits(build_timeout_s=900, run_timeout_s=300))
    cand = Candidate.from_file(SEEDS[backend])
    assert cand.backend == backend
    with Archive(tmp_path / "archive.sqlite") as archive:
        r = evaluate(load_problem(problem), cand, cfg, archive)
    detail = (r.status.value, r.reason, r.flags, r.errors, r.build_log[-1500:], r.output_excerpt[-1500:])
    assert r.status.value == "correct", detail
    assert "torch_fallback" not in r.flags, detail
