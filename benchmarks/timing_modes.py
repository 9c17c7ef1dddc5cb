"""Why one kernel times differently from one process to the next: the same candidate timed
under several protocols inside one process, with the device addresses of its input and output.

Run it in several fresh processes (a shell loop). A protocol that is fast in every process
while another is slow in some says the slow mode is the protocol's doing; a protocol whose time
follows where the input and output sit says it is their placement. Protocols:

- ``plain``: one fixed input, the L2 flushed once before each call, events around it (what a
  hand-written script does).
- ``worker``: the candidate worker's own code (``run_candidate``: correctness trials with
  poisoned memory, then the timed loop with fresh inputs and the guards' checks), in-process.
- ``fixed`` / ``fresh`` / ``fresh+kept``: the timed loop alone with three fixed input sets, with
  fresh inputs per call, and with fresh inputs while the previous call's output is kept alive
  (as the guards keep it).
- ``offset``: the plain protocol with the input placed at offsets into one large buffer.
- ``probe``: is a slow process slow at everything? The bandwidth of a 2 GiB fill and copy,
  the kernel in the timed loop (4 ms cover), the SM and memory clocks and throttle reasons read
  once under load, then the kernel again after 8 GiB more is held (other physical pages).
- ``sides``: the same timed loop with torch's pool streams held and joined (as the evaluator
  does) and with none, alternating, two rounds, every sample kept: whether the slow first loop
  (probe: 0.53-0.60 ms against 0.306 for the CRFM LayerNorm) is the 128 streams' waits.
- ``cover``: the timed loop (fresh inputs, the previous output kept, a 3 ms host pause before
  each call as the guards' checks make) with the memory traffic before each call (``rewarm_us``)
  at 1, 2, 4 and 8 ms, in three interleaved rounds, without the loop's own growth of the cover
  after a late call: whether the kernel's time depends on how long the GPU was kept busy first.

Usage (GPU)::

    python benchmarks/timing_modes.py PROBLEM CANDIDATE [--json FILE] [--only plain,worker]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.timing import loop as timing_mod
from kernelsearch.evaluator.worker import candidate, common
from kernelsearch.problems.loader import load_module
from kernelsearch.records.jobs import CandidateJob
from kernelsearch.records.protocol import Kind

MB = 1 << 20


class _Capture:
    """Stands in for the worker's pipe to the parent: keeps what it is sent."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def send(self, event: str, **payload) -> None:
        self.events.append((event, payload))

    def first(self, event: str) -> dict:
        return next((p for e, p in self.events if e == event), {})


def _summary(samples: list[float], layouts: list[tuple[int, int]] | None = None) -> dict:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), 0, max(samples)]
    med = statistics.median(samples)
    row = {"median_ms": med, "min_ms": min(samples), "max_ms": max(samples),
           "iqr_rel": (q[2] - q[0]) / med, "n": len(samples), "samples_ms": samples}
    if layouts:
        # the output's offset from the input, in MiB, per call: the placement the allocator chose
        rel = [(o - i) / MB for i, o in layouts]
        row["out_minus_in_mib"] = rel
        row["in_mod_2mib_kib"] = [(i % (2 * MB)) / 1024 for i, _ in layouts]
    return row


def _flush_buf() -> torch.Tensor:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(max(2 * l2, 64 * MB) // 4, device="cuda")


def plain(model, x: list, calls: int = 30) -> dict:
    buf, samples, layouts = _flush_buf(), [], []
    with torch.no_grad():
        for _ in range(3):
            model(*x)
        for _ in range(calls):
            buf.fill_(1.0)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            out = model(*x)
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e))
            layouts.append((x[0].data_ptr(), out.data_ptr()))
            del out
    return _summary(samples, layouts)


def _logged(fn, layouts: list):
    def call(*args):
        out = fn(*args)
        layouts.append((args[0].data_ptr(), out.data_ptr()))
        return out
    return call


def loop(model, problem, seeds: list[int], mode: str) -> dict:
    cfg = TimingConfig()
    layouts: list = []
    kept: list = []

    def keep(out):  # the guards keep the last timed output alive until the next call is over
        kept[:] = [out]

    fresh = mode != "fixed"
    sets = [] if fresh else [common.make_inputs(problem, s, "cuda") for s in seeds[:3]]
    run = timing_mod.time_calls(_logged(model, layouts), sets, "cuda", cfg,
                                inputs_for=(lambda k: common.make_inputs(problem, seeds[k], "cuda")) if fresh else None,
                                after=keep if mode == "fresh+kept" else None)
    kept.clear()
    return {**_summary(run.samples_ms, layouts), "late": run.late}


def _bandwidth(work, nbytes: int, reps: int = 5) -> float:
    """GB/s of ``work``, the median over ``reps`` calls."""
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        work()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return nbytes / statistics.median(times) / 1e6


def _clocks_under_load() -> str:
    import subprocess

    buf = torch.empty(1 << 28, device="cuda")
    for _ in range(400):  # ~0.5 s of fills queued, then the query while they run
        buf.fill_(1.0)
    q = subprocess.run(["nvidia-smi", "--query-gpu=pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                        "clocks_event_reasons.active", "--format=csv,noheader"], capture_output=True, text=True)
    torch.cuda.synchronize()
    return q.stdout.strip() or q.stderr.strip()[:200]


def probe(model, problem, seeds: list[int]) -> dict:
    import time

    n = 1 << 29  # 2 GiB of float32
    bufs = [torch.empty(n, device="cuda"), torch.empty(n, device="cuda")]
    out: dict = {"fill_gbs": _bandwidth(lambda: bufs[0].fill_(1.0), 4 * n),
                 "copy_gbs": _bandwidth(lambda: bufs[1].copy_(bufs[0]), 8 * n)}
    bufs.clear()
    out["clocks"] = _clocks_under_load()

    def timed() -> tuple[float, int]:
        run = timing_mod.time_calls(model, [], "cuda", TimingConfig(rewarm_us=4000.0, min_reps=20, max_reps=20),
                                    inputs_for=lambda k: common.make_inputs(problem, seeds[k % len(seeds)], "cuda"),
                                    before=lambda: time.sleep(0.003))
        return statistics.median(run.samples_ms), run.late

    out["kernel_ms"], out["kernel_late"] = timed()
    bufs.append(torch.empty(1 << 31, device="cuda"))  # 8 GiB held: the next allocations land on other pages
    out["kernel_ms_moved"], out["kernel_late_moved"] = timed()
    out["fill_gbs_after"] = _bandwidth(lambda: bufs[0][:n].fill_(1.0), 4 * n)
    bufs.clear()
    return out


class _NoSides(timing_mod.SideStreams):
    """Holds and joins nothing: the caller's stream alone."""

    def __init__(self) -> None:
        super().__init__()
        self.streams, self._joins = [], []


def sides(model, problem, seeds: list[int], rounds: int = 2) -> list[dict]:
    import time

    real, rows = timing_mod.SideStreams, []

    def noop(*args):  # an empty call: what the window costs with nothing in it
        return args[0]

    try:
        for r in range(rounds):
            for held in (True, False):
                for label, fn in (("kernel", model), ("empty", noop)):
                    timing_mod.SideStreams = real if held else _NoSides
                    run = timing_mod.time_calls(fn, [], "cuda", TimingConfig(min_reps=20, max_reps=20),
                                                inputs_for=lambda k: common.make_inputs(problem, seeds[k % len(seeds)],
                                                                                        "cuda"),
                                                before=lambda: time.sleep(0.003))
                    rows.append({"round": r, "held": held, "call": label,
                                 "median_ms": statistics.median(run.samples_ms), "late": run.late,
                                 "samples_ms": [round(x, 4) for x in run.samples_ms]})
    finally:
        timing_mod.SideStreams = real
    return rows


def cover(model, problem, seeds: list[int], rounds: int = 3) -> dict:
    import time

    kept: list = []

    def keep(out):
        kept[:] = [out]

    grow, timing_mod._MAX_COVER = timing_mod._MAX_COVER, 1  # the cover stays as set: late calls kept
    rows: dict[str, list] = {}
    try:
        for _ in range(rounds):
            for us in (1000.0, 2000.0, 4000.0, 8000.0):
                cfg = TimingConfig(rewarm_us=us, min_reps=20, max_reps=20)
                run = timing_mod.time_calls(model, [], "cuda", cfg,
                                            inputs_for=lambda k: common.make_inputs(problem, seeds[k % len(seeds)], "cuda"),
                                            before=lambda: time.sleep(0.003), after=keep)
                kept.clear()
                rows.setdefault(f"{us / 1000:g} ms", []).append(
                    {"median_ms": statistics.median(run.samples_ms), "late": run.late})
    finally:
        timing_mod._MAX_COVER = grow
    return rows


def in_worker(problem_path: Path, cand_path: Path, seeds: list[int]) -> dict:
    """The candidate worker's run, in this process: its timed samples and the placements."""
    layouts: list = []
    real = timing_mod.time_calls

    def logged_time_calls(fn, *a, **kw):
        return real(_logged(fn, layouts), *a, **kw)

    timing_mod.time_calls = logged_time_calls
    try:
        with tempfile.TemporaryDirectory() as tmp:
            job = CandidateJob(device="cuda", problem_path=str(problem_path), init_seed=7, timing_seeds=seeds,
                               timing=asdict(TimingConfig()), out_dir=tmp, candidate_path=str(cand_path),
                               trial_seeds=[11, 12, 13, 14, 15], backend="cuda")
            ch = _Capture()
            candidate.run_candidate(job, ch)
    finally:
        timing_mod.time_calls = real
    t = ch.first(Kind.TIMING)
    if not t:
        return {"error": ch.first(Kind.ERROR)}
    return {**_summary(t["samples_ms"], layouts[-len(t["samples_ms"]):]), "late": t.get("late")}


def offsets(model, problem, seed: int) -> list[dict]:
    x0 = common.make_inputs(problem, seed, "cuda")
    n = x0[0].numel()
    pool = torch.empty(n + 256 * MB // 4, device="cuda")
    rows = []
    for off in (0, 4 << 10, 64 << 10, 1 * MB, 2 * MB, 4 * MB, 16 * MB, 64 * MB, 128 * MB, 192 * MB):
        x = pool[off // 4: off // 4 + n].view_as(x0[0])
        x.copy_(x0[0])
        r = plain(model, [x, *x0[1:]], calls=15)
        rows.append({"offset_kib": off // 1024, **{k: v for k, v in r.items() if k != "samples_ms"}})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="plain,worker,plain2,fixed,fresh,fresh+kept,offset")
    args = ap.parse_args()
    want = args.only.split(",")
    problem = load_module(args.problem, device="cuda", name="ks_reference_problem")
    seeds = list(range(100, 100 + TimingConfig().warmup + TimingConfig().max_reps))
    result: dict = {"device": torch.cuda.get_device_name(0)}
    cand = common.load_module_plain(args.candidate, "ks_modes_candidate")
    model = common.make_model(cand.ModelNew, problem, 7, "cuda")
    x = common.make_inputs(problem, 1, "cuda")
    if "plain" in want:
        result["plain"] = plain(model, x)
    if "worker" in want:
        result["worker"] = in_worker(args.problem, args.candidate, seeds)
    if "plain2" in want:
        result["plain2"] = plain(model, x)
    del x
    for mode in ("fixed", "fresh", "fresh+kept"):
        if mode in want:
            result[mode] = loop(model, problem, seeds, mode)
    if "offset" in want:
        result["offset"] = offsets(model, problem, 1)
    if "cover" in want:
        result["cover"] = cover(model, problem, seeds)
    if "sides" in want:
        result["sides"] = sides(model, problem, seeds)
    if "probe" in want:
        result["probe"] = probe(model, problem, seeds)
    if args.json:
        args.json.write_text(json.dumps(result))
    for k, v in result.items():
        if isinstance(v, dict) and "median_ms" in v:
            rel = v.get("out_minus_in_mib") or [0]
            print(f"{k:11s} median {v['median_ms']:.4f} ms  min {v['min_ms']:.4f}  max {v['max_ms']:.4f}  "
                  f"iqr {100 * v['iqr_rel']:.1f}%  n {v['n']}  out-in MiB {sorted(set(round(r) for r in rel))[:6]}")
        elif k == "sides":
            for r in v:
                print(f"sides round {r['round']} held={r['held']!s:5s} {r['call']:6s} median {r['median_ms']:.4f} late {r['late']} "
                      f"samples {r['samples_ms'][:6]}...")
        elif k == "cover":
            for label, runs in v.items():
                print(f"cover {label:6s} " + "  ".join(f"{r['median_ms']:.4f} (late {r['late']})" for r in runs))
        elif k == "offset":
            print("offset     " + "  ".join(f"{r['offset_kib']}K:{r['median_ms']:.3f}" for r in v))
        elif isinstance(v, dict):
            print(k, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
