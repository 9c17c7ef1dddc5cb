"""How long a GPU left idle takes to time a kernel at its steady speed again, and what brings it
back: after ``--idle`` seconds with nothing queued, the candidate is called back to back for
``--seconds`` under the evaluator's per-call protocol (flush, cover, events: ``timing.loop._gpu_call``),
or with ``--gap-ms`` of host time between calls (the GPU idle, as during the worker's checks),
optionally after a heater (``--heat memory|spin`` for ``--heat-ms``). Prints the per-call time
against the seconds since the GPU woke, in buckets, with the SM clock read (NVML) about every
0.25 s of that busy time; nothing polls the GPU while it idles (an ``nvidia-smi -lms`` loop kept an
H100 at full clocks and 130 W through a "idle" minute). Usage (GPU)::

    python benchmarks/idle_recovery.py PROBLEM CANDIDATE --idle 60 --seconds 6 [--heat memory --heat-ms 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from kernelsearch.evaluator.timing import loop as timing
from kernelsearch.evaluator.worker import common
from kernelsearch.problems.loader import load_module


def heat(kind: str, ms: float) -> None:
    """Keep the GPU busy ``ms`` of wall time: memory traffic (a large fill) or a compute spin."""
    buf = torch.empty(256 << 18, device="cuda") if kind == "memory" else None
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        if buf is not None:
            for _ in range(20):
                buf.fill_(1.0)
        else:
            timing._spin(200_000)
        torch.cuda.synchronize()


def _sm_clock() -> int:
    try:
        return int(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - NVML missing: no clock column
        return -1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--heat", choices=("none", "memory", "spin"), default="none")
    ap.add_argument("--heat-ms", type=float, default=1000.0)
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="host pause between calls, the GPU idle (the worker's checks between timed calls)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    problem = load_module(args.problem, device="cuda", name="ks_reference_problem")
    cand = common.load_module_plain(args.candidate, "ks_recovery_candidate")
    model = common.make_model(cand.ModelNew, problem, 7, "cuda")
    x = common.make_inputs(problem, 1, "cuda")
    flush = timing.Flusher("cuda")
    with torch.no_grad():
        model(*x)
    torch.cuda.synchronize()
    time.sleep(args.idle)
    t0 = time.perf_counter()
    if args.heat != "none":
        heat(args.heat, args.heat_ms)
    flush.rewarm(2000.0)
    spin = timing.spin_cycles(50.0)
    side = timing.SideStreams()
    calls: list[tuple[float, float]] = []
    clocks: list[tuple[float, int]] = []
    with torch.no_grad():
        while time.perf_counter() - t0 < args.seconds:
            out, ms, _late = timing._gpu_call(model, x, flush, spin, side)
            calls.append((time.perf_counter() - t0, ms))
            del out
            if args.gap_ms:
                time.sleep(args.gap_ms / 1000)
            if not clocks or calls[-1][0] - clocks[-1][0] > 0.25:
                clocks.append((calls[-1][0], _sm_clock()))
    buckets: dict[float, list[float]] = {}
    for t, ms in calls:
        edge = next(e for e in (0.1, 0.25, 0.5, 1, 2, 3, 4, 6, 8, 12, 1e9) if t < e)
        buckets.setdefault(edge, []).append(ms)
    print(f"gap {args.gap_ms:g} ms, idle {args.idle:.0f} s, heat {args.heat} {args.heat_ms if args.heat != 'none' else 0:.0f} ms: "
          + "  ".join(f"<{e:g}s:{statistics.median(v):.3f}(n{len(v)})" for e, v in buckets.items()))
    print("SM MHz at s:", " ".join(f"{t:.1f}:{c}" for t, c in clocks[:12]))
    if args.json:
        args.json.write_text(json.dumps({"calls": calls, "clocks": clocks,
                                         "args": {k: str(v) for k, v in vars(args).items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
