"""What building models on the CPU costs: for each problem file, the seconds to build ``Model`` as
the evaluator builds it (``make_model``: on the CPU after the seed, then moved to the device, as
KernelBench builds it) against building it directly under ``with torch.device(device)``, with
its parameter bytes and the host memory the process peaked at. Prints a table.

    python benchmarks/construction_cost.py .ext/kernelbench/KernelBench/level3/2_ShallowWideMLP.py ... --device cuda
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path


def _timed(build, device: str) -> float:
    import torch

    t0 = time.perf_counter()
    model = build()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    import torch

    from kernelsearch.evaluator.worker.common import make_model, seeded
    from kernelsearch.problems.loader import load_module

    print("| problem | parameters | on the CPU, then moved (s) | on the device (s) | peak host RSS (GB) |")
    print("|---|---|---|---|---|")
    for path in args.problems:
        module = load_module(path, device=args.device)

        def direct(module=module):
            seeded(7)
            with torch.device(args.device):
                return module.Model(*module.get_init_inputs())

        _timed(direct, args.device)  # the first build pays for CUDA's and cuBLAS's start
        device_s = _timed(direct, args.device)
        cpu_s = _timed(lambda module=module: make_model(module.Model, module, 7, args.device), args.device)
        with torch.device("meta"):
            n = sum(p.numel() * p.element_size() for p in module.Model(*module.get_init_inputs()).parameters())
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"| {path.stem} | {n / 1e9:.2f} GB | {cpu_s:.2f} | {device_s:.2f} | {rss:.1f} |", flush=True)


if __name__ == "__main__":
    main()
