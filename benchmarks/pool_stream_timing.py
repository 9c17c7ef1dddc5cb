"""Side-stream timing across fresh processes: the five calls of
``tests/test_timing_gpu.py::test_work_on_any_stream_is_timed`` (half a millisecond of work on a
pool stream, on one the host then waits for, on a raw blocking stream, on a joined stream, on
the current stream), timed by the evaluator's loop in ``--procs`` fresh processes for each way
of holding the side streams (torch's pool, as a test process does; the stream shim, as the
candidate workers do) and each probe (``held``: the probe call holds the side streams behind its
spin as the timed calls do; ``unheld``: the probe as it was before, which let a call that waits
for its own side stream pass as one that does not). Prints, per process, each call's median,
the late calls and whether the probe sent it to the plain loop. Usage:

    python benchmarks/pool_stream_timing.py --procs 3 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = ("pool stream", "pool stream, host waits", "raw blocking stream", "joined stream", "current stream")


def child(sides_kind: str, probe: str) -> dict:
    """One process: every case once, in order; what the loop decided and measured."""
    if sides_kind == "shim":
        from kernelsearch.evaluator.timing import streamshim

        streamshim.preload(os.environ[streamshim.ENV])
    import ctypes
    import statistics

    import torch

    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.timing import loop

    if sides_kind == "shim":
        assert loop.side_streams().__class__.__name__ == "_ShimSides", "the shim did not load"
    probed: list[bool] = []
    original = loop._waits_for_gpu

    def watched(call, side=None):
        out, waited = original(call, side if probe == "held" else None)
        probed.append(waited)
        return out, waited

    loop._waits_for_gpu = watched
    cfg = TimingConfig(warmup=3, warmup_ms=20.0, min_reps=20, max_reps=20, flush_cache=True, cover_launch_us=50.0)
    x = torch.zeros(16, device="cuda")
    loop.time_calls(lambda: x.add(1), [[]], "cuda", cfg)  # a warm GPU: spin cycles are calibrated at its clock
    cycles = loop.spin_cycles(500.0)
    rows = []
    for where in CASES:
        if where == "raw blocking stream":
            with open("/proc/self/maps") as maps:
                lib = next(line.split()[-1] for line in maps if "libcudart.so" in line)
            handle = ctypes.c_void_p()
            assert ctypes.CDLL(lib).cudaStreamCreate(ctypes.byref(handle)) == 0
            side = torch.cuda.ExternalStream(handle.value)
        else:
            side = torch.cuda.Stream()

        def call(where=where, side=side):
            cur = torch.cuda.current_stream()
            if where == "current stream":
                torch.cuda._sleep(cycles)
                return x.add(1)
            if where == "joined stream":
                side.wait_stream(cur)
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
            if where == "joined stream":
                cur.wait_stream(side)
            if where == "pool stream, host waits":
                side.synchronize()
            return x.add(1)

        sides = loop.SideStreams if sides_kind == "pool" else loop.side_streams
        run = loop.time_calls(call, [[]], "cuda", cfg, sides=sides)
        rows.append({"case": where, "median_ms": statistics.median(run.samples_ms), "late": run.late,
                     "plain": probed[-1], "max_ms": max(run.samples_ms)})
    return {"sides": sides_kind, "probe": probe, "rows": rows}


def _cell(row: dict) -> str:
    late = f" L{row['late']}" if row["late"] else ""
    return f"{row['median_ms']:.3f}{' P' if row['plain'] else ''}{late}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--child", nargs=2, metavar=("SIDES", "PROBE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    from kernelsearch.evaluator.builds.stream_shim import shim_path
    from kernelsearch.evaluator.timing.streamshim import ENV

    env = {**os.environ, ENV: str(shim_path(Path(tempfile.mkdtemp())))}
    results = []
    for proc in range(args.procs):
        for sides_kind in ("pool", "shim"):
            for probe in (("unheld", "held") if proc % 2 == 0 else ("held", "unheld")):
                run = subprocess.run([sys.executable, __file__, "--child", sides_kind, probe], env=env,
                                     capture_output=True, text=True, timeout=300)
                if run.returncode != 0:
                    print(f"process {proc} {sides_kind}/{probe} failed: {run.stderr[-1500:]}", file=sys.stderr)
                    continue
                out = json.loads(run.stdout.strip().splitlines()[-1])
                out["proc"] = proc
                results.append(out)
                if args.json:
                    Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"{'proc':>4} {'sides':5} {'probe':7} " + " ".join(f"{c[:22]:>24}" for c in CASES))
    for r in results:
        cells = [_cell(x) for x in r["rows"]]
        print(f"{r['proc']:>4} {r['sides']:5} {r['probe']:7} " + " ".join(f"{c:>24}" for c in cells))
    print("median ms per call; P: the probe sent it to the plain loop; Lk: k late calls")


if __name__ == "__main__":
    main()
