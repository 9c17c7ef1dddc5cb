"""Handing outputs from the candidate's worker to the judge: per output, and per evaluation.

Per output (``--gib``): seconds to hand one GPU tensor over and back onto the GPU, as a tensor
file (the codec: a mapped file, page-locked chunks) in the default temporary directory and in
/dev/shm, and in device memory (evaluator/handover: an exported allocation, then a copy out).
Per evaluation (``--evaluate``): a problem whose output has that size (y = 2x + 1 in fp32),
its reference as the candidate, evaluated with ``handover="files"`` and ``"auto"``: the
evaluation's seconds, where they went, and how the outputs went.

    python benchmarks/handover.py --gib 2 8 --evaluate
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.handover import vmm
from kernelsearch.evaluator.handover.codec import read_tensors, write_tensors
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate

PROBLEM = '''"""Handover benchmark: y = 2x + 1 over a {rows}x{cols} fp32 tensor ({gib:g} GiB output)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1


rows, cols = {rows}, {cols}
CPU_SIZES = {{"rows": 64, "cols": 64}}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''
CANDIDATE = '''import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2 + 1
'''


def _timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _through_file(t: torch.Tensor, place: Path) -> tuple[float, float, bool]:
    with tempfile.TemporaryDirectory(dir=place) as tmp:
        p = Path(tmp) / "out.kst"
        w = _timed(lambda: write_tensors(p, t))
        got: list[torch.Tensor] = []
        r = _timed(lambda: got.extend(read_tensors(p, "cuda")))
        return w, r, bool(torch.equal(got[0], t))


def _one_size(t: torch.Tensor, table: Table, gib: float) -> None:
    places = [Path(tempfile.gettempdir())] + ([Path("/dev/shm")] if Path("/dev/shm").is_dir() else [])
    for place in places:
        w, r, same = _through_file(t, place)
        table.add_row(f"{gib:g}", f"file in {place}", f"{w:.2f}", f"{r:.2f}", str(same))
    box: list[vmm.Exported] = []
    w = _timed(lambda: box.append(vmm.export_copy([t])))
    e = box[0]
    back: list[torch.Tensor] = []
    try:
        r = _timed(lambda: back.extend(vmm.import_copy(e.fd, e.size, [(t.dtype, list(t.shape), t.numel() * t.element_size(), 0)])))
    finally:
        os.close(e.fd)
    table.add_row(f"{gib:g}", "device memory", f"{w:.3f}", f"{r:.3f}", str(torch.equal(back[0], t)))


def per_output(gibs: list[float], console: Console) -> None:
    table = Table(title="Seconds to hand one output over (out of the worker + into the judge)")
    for col in ("GiB", "way", "out", "in", "equal"):
        table.add_column(col)
    for gib in gibs:
        _one_size(torch.randn(int(gib * (1 << 30)) // 4, device="cuda"), table, gib)
        torch.cuda.empty_cache()
    console.print(table)


def per_evaluation(gibs: list[float], console: Console) -> None:
    table = Table(title="One evaluation (reference as candidate, 5 trials), by handover")
    for col in ("GiB out", "handover", "status", "eval s", "candidate run s", "judge check s", "outputs went"):
        table.add_column(col)
    with tempfile.TemporaryDirectory() as tmp:
        for gib in gibs:
            cols = 1 << 16
            rows = int(gib * (1 << 30)) // 4 // cols
            path = Path(tmp) / f"handover_{gib:g}gib.py"
            path.write_text(PROBLEM.format(rows=rows, cols=cols, gib=gib))
            problem = load_problem(path)
            for mode in ("files", "auto"):
                config = EvalConfig(device="cuda", compile_baseline=False, handover=mode)
                r = evaluate(problem, Candidate(CANDIDATE, "torch", f"ref_{mode}"), config)
                ph = r.phase_s
                table.add_row(f"{gib:g}", mode, r.status.value, f"{r.eval_s:.1f}",
                              f"{ph.get('candidate run', 0):.1f}", f"{ph.get('judge check', 0):.1f}",
                              r.handover + (f" ({r.reason[:60]})" if r.status.value != "correct" else ""))
                console.print(f"{gib:g} GiB, {mode}: {r.status.value} in {r.eval_s:.1f} s, phases "
                              f"{ {k: round(v, 1) for k, v in ph.items()} }")
    console.print(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, nargs="+", default=[2.0])
    ap.add_argument("--evaluate", action="store_true", help="also time whole evaluations, files against auto")
    ap.add_argument("--no-per-output", action="store_true")
    args = ap.parse_args()
    console = Console(width=160)
    if not args.no_per_output:
        per_output(args.gib, console)
    if args.evaluate:
        per_evaluation(args.gib, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
