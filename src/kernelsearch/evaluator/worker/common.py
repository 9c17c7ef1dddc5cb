"""What every role of the worker process shares: the message channel to the parent, models and
inputs made from seeds (the same way in the candidate's process and the judge's), the device's
name. The roles import it (candidate and judge, and the ceilings and lint roles that
``__main__`` dispatches by name); it imports none of them, so no role imports the entry point.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


class Channel:
    def __init__(self, fd: int):
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **payload: Any) -> None:
        self.f.write(json.dumps({"event": event, **payload}, default=_jsonable) + "\n")
        self.f.flush()


def _jsonable(x: Any) -> Any:
    if isinstance(x, float):
        return x
    return str(x)


def _tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def _seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def make_inputs(module, seed: int, device: str, distribution: str = "normal") -> list:
    """Same seed, same device, same inputs: in the candidate's process and in the judge's."""
    import torch

    from kernelsearch.evaluator.worker.distributions import transform

    _seeded(seed)
    with torch.device(device):
        inputs = transform(list(module.get_inputs()), distribution)
    _hide_seed()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def _hide_seed() -> None:
    """Reseed at random once inputs exist, so that torch.initial_seed() inside forward says
    nothing about the seeds of the inputs still to come."""
    import secrets

    _seeded(secrets.randbits(62))


def _size_device(job: dict) -> str:
    """Which device's sizes to use: "small_sizes" runs a GPU job at the CPU size (sanitizers)."""
    return "cpu" if job.get("small_sizes") else job["device"]


def make_model(cls, module, seed: int, device: str):
    """``cls`` built from the problem's init inputs under ``seed``, in the mode the problem runs
    in (``in_eval_mode``); the forward runs under no_grad either way."""
    import torch

    from kernelsearch.problems.loader import set_mode

    _seeded(seed)
    with torch.device(device):
        model = cls(*module.get_init_inputs())
    return set_mode(model.to(device), module)


def _device_name(device: str) -> str:
    import platform

    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} cores)"


def _timing_inputs(problem, job: dict, tcfg) -> tuple[list, object]:
    """The timed loop's inputs, the same way for candidate and baselines: a fresh set per call
    from its own seed when the job carries one seed per call, else a few sets rotated."""
    device, dist, seeds = job["device"], job.get("distribution", "normal"), job["timing_seeds"]
    if tcfg.fresh_inputs and len(seeds) >= tcfg.warmup + tcfg.max_reps:
        return [], lambda k: make_inputs(problem, seeds[k], device, dist)
    return [make_inputs(problem, s, device, dist) for s in seeds], None


def load_module_plain(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
