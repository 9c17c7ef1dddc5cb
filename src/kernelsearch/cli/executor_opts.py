"""Command-line options that say where evaluations run (kernelsearch.executors)."""

from __future__ import annotations

import argparse
from typing import Any

from kernelsearch.executors import EXECUTORS


def _gpu_list(text: str) -> list[int] | None:
    if text.strip().lower() in ("", "all"):
        return None
    try:
        gpus = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--gpus: a comma-separated list of GPU indices, not {text!r}") from e
    if not gpus or min(gpus) < 0 or len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"--gpus: distinct non-negative indices, not {text!r}")
    return gpus


def add_executor_options(p: Any) -> None:
    """--executor, --ray-address, --gpus, --lanes (``-j/--build-jobs`` is added by each command)."""
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: a build pool on this machine's cores and one evaluation lane per GPU; "
                        "ray: build and evaluation tasks on a Ray cluster (pip install 'kernelsearch[ray]')")
    p.add_argument("--ray-address", default=None,
                   help="Ray cluster to join (e.g. auto or ray://host:10001); default: start a local Ray")
    p.add_argument("--gpus", type=_gpu_list, default=None, metavar="LIST",
                   help="local executor: visible GPU indices to evaluate on, e.g. 0,1 (default: all)")
    p.add_argument("--lanes", type=int, default=None,
                   help="CPU device: evaluations at a time, each on its own cores (default 1)")


def executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """make_executor's keyword arguments from the parsed options."""
    if args.lanes is not None and args.lanes < 1:
        raise ValueError("--lanes must be at least 1")
    opts: dict[str, Any] = {"lanes": args.lanes}
    if args.executor == "local":
        opts["gpus"] = args.gpus
    else:
        opts["ray_address"] = args.ray_address
    return opts
