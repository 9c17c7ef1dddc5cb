"""Throughput: our evaluation pipeline against a naive serial loop, on one fixed candidate set.

The set comes from the seed bank: originals, duplicates (an exact copy and a reformatted one:
other comments and blanks in the Python and the C++), failures (a compiler error, a wrong
result, a crash) and a slow build (the same kernel plus heavy template code). Both halves
evaluate the same candidates with the same settings, in this one process:

- serial: for each candidate, ``evaluate`` with a fresh build directory (no build cache, no
  dedup): build, check and time, one after another. Baselines are cached per problem in the
  archive as ``evaluate`` always does (torch.compile's, when asked for; eager is timed in every
  evaluation), and the device's roofline ceilings are measured once
  before either half (untimed) and shared, so only what the pipeline adds differs.
- pipeline: the executor (``--executor``, default local) from an empty build cache: builds in
  a pool, identical candidates once, failed builds answered without a lane, one lane per GPU.

It prints wall seconds and candidates per hour for each, their ratio, and each candidate's
status and speedup under both: statuses must be equal, and two speedups agree when their
ranges (speedup times one plus or minus its spread, ``metrics.fastp.speedup_spread``) overlap. Usage:

    python benchmarks/throughput.py --device cpu --set small          # a few minutes on 2 cores
    python benchmarks/throughput.py --device cuda                     # one GPU: serial about 6 min
    python benchmarks/throughput.py --device cuda --gpus 0,1 --set full   # both GPUs
    python benchmarks/throughput.py --only serial --json s.json       # halves in separate calls,
    python benchmarks/throughput.py --only pipeline --against s.json  # ratio printed by the second
    python benchmarks/throughput.py --only serial --part 1/2 --json s1.json   # the serial half in
    python benchmarks/throughput.py --only serial --part 2/2 --json s2.json   # parts (its walls add
    python benchmarks/throughput.py --only pipeline --against s1.json s2.json # up), for call limits
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelsearch.archive import Archive
from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.screen.normalise import normalised_hash
from kernelsearch.evaluator.timing.ceilings import ceilings
from kernelsearch.executors import make_executor
from kernelsearch.executors.base import Job
from kernelsearch.metrics.fastp import speedup_spread
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate

# GPU shapes: ~128 MiB per tensor, so outputs are quick to check (the suite's are 1-4 GiB)
GPU_SIZES = {
    "02_softmax": {"batch_size": 1024, "dim": 32768},
    "03_layernorm": {"batch": 4, "seq": 2048, "dim": 4096},
    "05_sum_reduction": {"batch_size": 32, "dim1": 1024, "dim2": 1024},
    "06_gelu": {"batch_size": 2048, "dim": 16384},
    "09_residual_rmsnorm": {"batch": 4, "seq": 2048, "dim": 4096},
}

HEAVY = r"""
#include <regex>
#include <string>
// heavy template instantiation: the same kernel, a slower build
namespace ks_slow_build {
bool m0(const std::string& s) { return std::regex_match(s, std::regex("(a|b)*c+[0-9]{2,}")); }
bool m1(const std::wstring& s) { return std::regex_match(s, std::wregex(L"(x|y)+z?")); }
bool m2(const std::string& s) { return std::regex_search(s, std::regex("[[:alpha:]]+", std::regex::icase)); }
std::string m3(const std::string& s) { return std::regex_replace(s, std::regex("a+"), "b"); }
}
"""


@dataclass
class Item:
    label: str
    kind: str  # original, duplicate, failure, slow-build
    problem: str  # suite name
    candidate: Candidate


def _after_first_include(source: str, text: str) -> str:
    m = re.search(r"#include <[^>\n]+>[^\n]*\n", source)
    if m is None:
        raise ValueError("no #include to insert after")
    return source[: m.end()] + text + source[m.end():]


def reformatted(source: str) -> str:
    """Other comments and blanks, same program (checked by the normalised hash)."""
    out = "# reformatted by benchmarks/throughput.py: comments and blank lines only\n" + source
    out = _after_first_include(out, "\n// a comment the compiler ignores\n\n")
    out = re.sub(r"(?m)^(\s*)(return [^\n]*;)$", r"\1\2   /* same */", out, count=2)
    out = out.replace("\nclass ModelNew", "\n\n# the model\nclass ModelNew", 1)
    return out


def compile_error(source: str) -> str:
    return _after_first_include(source, "static_assert(sizeof(int) == 0, \"deliberate compile error\");\n")


def slow_build(source: str) -> str:
    return _after_first_include(source, HEAVY)


def torch_candidate(body: str, name: str) -> Candidate:
    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
           "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
           f"    def forward(self, x):\n{body}")
    return Candidate.from_source(src, backend="torch", name=name)


def gelu_crash_cuda(source: str) -> str:
    """The CUDA GELU seed writing far out of bounds: an illegal memory access."""
    out = source.replace("if (t < n) y[t] = gelu_erf(x[t]);", "y[t + (1LL << 40)] = gelu_erf(x[t]);")
    if out == source:
        raise ValueError("crash transform did not apply")
    return out


def candidate_set(device: str, size: str) -> list[Item]:
    backend = "cpp" if device == "cpu" else "cuda"
    seed = lambda name: Candidate.from_file(SEEDBANK_DIR / backend / f"{name}.py")  # noqa: E731
    gelu, second = seed("06_gelu"), seed("09_residual_rmsnorm" if device == "cuda" else "05_sum_reduction")
    p2 = "09_residual_rmsnorm" if device == "cuda" else "05_sum_reduction"
    items = [
        Item("gelu", "original", "06_gelu", gelu),
        Item("gelu (exact copy)", "duplicate", "06_gelu", Candidate(gelu.source, gelu.backend, "gelu_copy")),
        Item("gelu (reformatted)", "duplicate", "06_gelu",
             Candidate(reformatted(gelu.source), gelu.backend, "gelu_reformatted")),
        Item(p2.split("_", 1)[1], "original", p2, second),
        Item(f"{p2.split('_', 1)[1]} (exact copy)", "duplicate", p2, Candidate(second.source, second.backend, "second_copy")),
        Item("gelu (compile error)", "failure", "06_gelu",
             Candidate(compile_error(gelu.source), gelu.backend, "gelu_compile_error")),
        Item("gelu (wrong: tanh form)", "failure", "06_gelu",
             torch_candidate("        return F.gelu(x, approximate='tanh')\n", "gelu_wrong")),
        Item("gelu (slow build)", "slow-build", "06_gelu", Candidate(slow_build(gelu.source), gelu.backend, "gelu_slow")),
    ]
    if device == "cuda":
        items.append(Item("gelu (crash: illegal address)", "failure", "06_gelu",
                          Candidate(gelu_crash_cuda(gelu.source), gelu.backend, "gelu_crash")))
    else:
        items.append(Item("gelu (crash: raises)", "failure", "06_gelu",
                          torch_candidate("        raise RuntimeError('deliberate crash')\n", "gelu_crash")))
    if size == "full":
        sm, ln = seed("02_softmax"), seed("03_layernorm")
        items += [
            Item("softmax", "original", "02_softmax", sm),
            Item("softmax (reformatted)", "duplicate", "02_softmax", Candidate(reformatted(sm.source), sm.backend, "sm_ref")),
            Item("layernorm", "original", "03_layernorm", ln),
            Item("layernorm (slow build)", "slow-build", "03_layernorm", Candidate(slow_build(ln.source), ln.backend, "ln_slow")),
            Item("layernorm (compile error)", "failure", "03_layernorm",
                 Candidate(compile_error(ln.source), ln.backend, "ln_err")),
            Item("gelu (exact copy 2)", "duplicate", "06_gelu", Candidate(gelu.source, gelu.backend, "gelu_copy2")),
        ]
        if device == "cuda":
            tr = Candidate.from_file(SEEDBANK_DIR / "triton" / "06_gelu.py")
            items.append(Item("gelu (triton)", "original", "06_gelu", tr))
    for it in items:  # the duplicates must really be duplicates, and only them
        if it.kind == "duplicate":
            base = next(o for o in items if o.kind == "original" and o.problem == it.problem)
            assert normalised_hash(it.candidate.source, it.candidate.backend) == \
                normalised_hash(base.candidate.source, base.candidate.backend), it.label
    return items


def problem_files(items: list[Item], device: str, work: Path) -> dict[str, Path]:
    """The suite's problems; on the GPU a copy with smaller inputs (GPU_SIZES)."""
    out = {}
    for name in sorted({it.problem for it in items}):
        src = load_problem(name)
        if device == "cuda" and name in GPU_SIZES:
            d = work / "problems"
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{name}.py"
            lines = "".join(f"{k} = {v!r}\n" for k, v in GPU_SIZES[name].items())
            path.write_text(src.source + "\n\n# benchmarks/throughput.py: smaller inputs\n" + lines)
            out[name] = path
        else:
            out[name] = src.path
    return out


def config_for(device: str, compile_baseline: bool) -> EvalConfig:
    return EvalConfig(
        device=device, trials=5, compile_baseline=compile_baseline,
        timing=TimingConfig(warmup=2, min_reps=5, max_reps=30, budget_s=2.0, input_sets=2, spot_checks=1),
        limits=Limits(build_timeout_s=900, run_timeout_s=300),
    )


def run_serial(items: list[Item], problems: dict, config: EvalConfig, work: Path, console: Console,
               part: tuple[int, int] = (1, 1)) -> dict:
    """The naive loop; ``part`` (k, n) evaluates only the k-th of n contiguous slices."""
    k, n = part
    lo, hi = (k - 1) * len(items) // n, k * len(items) // n
    results = []
    t0 = time.monotonic()
    with Archive(work / "serial.sqlite") as archive:
        for i, it in enumerate(items[lo:hi], start=lo):
            cfg = config.with_(home=work / "serial" / f"{i:02d}")  # a fresh build cache each time
            _share_ceilings(work, cfg.home)
            t = time.monotonic()
            r = evaluate(load_problem(problems[it.problem]), it.candidate, cfg, archive)
            console.print(f"  serial   {it.label:34s} {r.status.value:14s} {time.monotonic() - t:6.1f} s")
            results.append(r)
    half = _half("serial", items[lo:hi], results, time.monotonic() - t0, {})
    half["indices"] = list(range(lo, hi))
    return half


def merge_serial(parts: list[dict], n_items: int) -> dict:
    """Serial halves run in parts (``--part``), as one: walls add up, results by index."""
    results: list = [None] * n_items
    for p in parts:
        for i, r in zip(p.get("indices", range(n_items)), p["results"], strict=True):
            results[i] = r
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        raise SystemExit(f"the serial parts given lack candidates {missing}")
    wall = sum(p["wall_s"] for p in parts)
    return {"name": "serial", "wall_s": wall, "candidates": n_items, "per_hour": 3600 * n_items / wall,
            "stats": {}, "results": results, "parts": len(parts)}


def run_pipeline(items: list[Item], problems: dict, config: EvalConfig, work: Path, console: Console,
                 executor: str, gpus: list[int] | None, build_jobs: int | None, ray_address: str | None,
                 dedup: bool = True) -> dict:
    home = work / "pipeline-home"
    shutil.rmtree(home, ignore_errors=True)  # an empty build cache at the start
    _share_ceilings(work, home)
    cfg = config.with_(home=home)
    t0 = time.monotonic()
    opts: dict = {"gpus": gpus, "build_jobs": build_jobs} if executor == "local" else {"ray_address": ray_address}
    opts["dedup"] = dedup
    jobs = [Job(load_problem(problems[it.problem]), it.candidate, cfg, tag=it.label) for it in items]
    with Archive(work / "pipeline.sqlite") as archive, make_executor(executor, archive, **opts) as ex:
        def show(fin) -> None:
            dup = f" (duplicate of {fin.result.duplicate_of})" if fin.result.duplicate_of else ""
            console.print(f"  pipeline {fin.job.tag:34s} {fin.result.status.value:14s} "
                          f"at {time.monotonic() - t0:6.1f} s{dup}")

        results = ex.evaluate_many(jobs, on_result=show)
        stats = ex.stats.to_dict()
    return _half("pipeline", items, results, time.monotonic() - t0, stats)


def measure_ceilings(config: EvalConfig, work: Path) -> None:
    """The device's ceilings, once, before the clocks start (a user's home keeps them)."""
    from kernelsearch.evaluator.evaluate import host_device_name

    ceilings(config.with_(home=work / "shared"), host_device_name(config.device))


def _share_ceilings(work: Path, home: Path) -> None:
    src = work / "shared" / "ceilings"
    if src.is_dir():
        shutil.copytree(src, home / "ceilings", dirs_exist_ok=True)


def agree(a: dict, b: dict) -> bool | None:
    """Two speedups agree when their ranges overlap (None: not both measured)."""
    sa, sb = a.get("speedup_vs_eager"), b.get("speedup_vs_eager")
    if sa is None or sb is None or a.get("spread") is None or b.get("spread") is None:
        return None
    return abs(sa - sb) <= sa * a["spread"] + sb * b["spread"]


def _half(name: str, items: list[Item], results: list, wall: float, stats: dict) -> dict:
    return {
        "name": name, "wall_s": wall, "candidates": len(items), "per_hour": 3600 * len(items) / wall,
        "stats": stats,
        "results": [{"label": it.label, "kind": it.kind, "status": r.status.value, "reason": r.reason,
                     "speedup_vs_eager": r.speedup_vs_eager, "spread": speedup_spread(r), "gpu": r.gpu,
                     "duplicate_of": r.duplicate_of, "eval_s": r.eval_s, "candidate_ms": r.candidate_ms,
                     "eager_ms": r.eager_ms, "phase_s": r.phase_s}
                    for it, r in zip(items, results, strict=True)],
    }


def _speedup(r: dict) -> str:
    if r.get("speedup_vs_eager") is None:
        return "-"
    spread = r.get("spread")
    return f"{r['speedup_vs_eager']:.2f}" + (f" ±{100 * spread:.0f}%" if spread is not None else "")


def report(serial: dict | None, pipeline: dict | None, console: Console, device_line: str) -> dict:
    t = Table(title=f"Throughput ({device_line})")
    for col in ("", "candidates", "wall s", "candidates/hour", "GPU lanes used"):
        t.add_column(col)
    for h in (serial, pipeline):
        if h is not None:
            lanes = ", ".join(h["stats"].get("lanes_used", [])) if h["stats"] else "-"
            t.add_row(h["name"], str(h["candidates"]), f"{h['wall_s']:.1f}", f"{h['per_hour']:.0f}", lanes or "-")
    summary: dict = {"serial": serial, "pipeline": pipeline}
    if serial and pipeline:
        ratio = serial["wall_s"] / pipeline["wall_s"]
        t.add_row("ratio", "", "", f"{ratio:.2f}x", "")
        summary["ratio"] = ratio
    console.print(t)
    if serial and pipeline:
        s = Table(title="Per candidate")
        for col in ("candidate", "kind", "serial", "pipeline", "same", "speedup serial", "speedup pipeline",
                    "within spread"):
            s.add_column(col)
        same, within = True, True
        for a, b in zip(serial["results"], pipeline["results"], strict=True):
            eq = a["status"] == b["status"]
            ok = agree(a, b)
            same &= eq
            within &= ok is not False
            s.add_row(a["label"], a["kind"], a["status"], b["status"] + (" (dup)" if b["duplicate_of"] else ""),
                      "yes" if eq else "NO", _speedup(a), _speedup(b), {None: "-", True: "yes", False: "NO"}[ok])
        console.print(s)
        console.print(f"statuses {'all equal' if same else 'DIFFER'}; speedups "
                      f"{'all within spread' if within else 'NOT all within spread'}; "
                      f"pipeline stats: {pipeline['stats']}")
        summary["statuses_equal"], summary["speedups_within_spread"] = same, within
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    ap.add_argument("--set", dest="size", choices=["small", "full"], default="small")
    ap.add_argument("--gpus", default=None, help="local executor: GPU indices, e.g. 0,1 (default all)")
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("-j", "--build-jobs", type=int, default=None)
    ap.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (off: quicker)")
    ap.add_argument("--no-dedup", action="store_true", help="pipeline without dedup (to measure what it saves)")
    ap.add_argument("--only", choices=["serial", "pipeline"], default=None)
    ap.add_argument("--against", type=Path, nargs="+", default=None,
                    help="JSON of the other half (from --only ... --json); serial parts may be several")
    ap.add_argument("--part", default="1/1", help="with --only serial: K/N, the K-th of N slices of the set")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temp dir, removed)")
    args = ap.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None
    console = Console()
    work = args.work or Path(tempfile.mkdtemp(prefix="ks-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    items = candidate_set(device, args.size)
    problems = problem_files(items, device, work)
    config = config_for(device, args.compile_baseline)
    from kernelsearch.evaluator.evaluate import host_device_name

    device_line = f"{device}: {host_device_name(device)}"
    if device == "cuda":
        device_line += f", {torch.cuda.device_count()} GPU(s) visible"
    console.print(f"{len(items)} candidates ({args.size} set) on {device_line}; work dir {work}")
    serial = pipeline = None
    others = [json.loads(p.read_text()) for p in args.against or []]
    part = tuple(int(x) for x in args.part.split("/"))
    if len(part) != 2 or not 1 <= part[0] <= part[1] or (part != (1, 1) and args.only != "serial"):
        ap.error("--part K/N needs 1 <= K <= N and --only serial")
    measure_ceilings(config, work)
    try:
        if args.only in (None, "serial"):
            serial = run_serial(items, problems, config, work, console, part)
        if args.only in (None, "pipeline"):
            pipeline = run_pipeline(items, problems, config, work, console, args.executor, gpus, args.build_jobs,
                                    args.ray_address, dedup=not args.no_dedup)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    serial_parts = [o["serial"] for o in others if o.get("serial")]
    if serial is None and serial_parts:
        serial = merge_serial(serial_parts, len(items))
    pipeline = pipeline or next((o["pipeline"] for o in others if o.get("pipeline")), None)
    if part != (1, 1):  # one part alone: its own table, no ratio
        pipeline = None
    summary = report(serial, pipeline, console, device_line)
    summary.update(device=device_line, set=args.size, executor=args.executor, dedup=not args.no_dedup)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    return 0 if summary.get("statuses_equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
