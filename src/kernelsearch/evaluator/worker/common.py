"""What every role of the worker process shares: models and inputs made from seeds (the same way
in the candidate's process and the judge's). The message channel to the parent is
``kernelsearch.records.protocol.Channel`` and the device's name ``timing.device``; both are
re-exported here for the roles. No role is imported here, so no role imports the entry point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernelsearch.evaluator.timing.device import device_name  # noqa: F401 - for the roles
from kernelsearch.problems.loader import cast_floating, torch_dtype
from kernelsearch.records.protocol import Channel  # noqa: F401 - for the roles


def tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


class ProblemInputsError(Exception):
    """The problem's get_inputs() or get_init_inputs() raised: the problem's fault, not the
    candidate's; both workers report it as kind "problem_error" (a ``crashed`` verdict)."""


def problem_call(module, name: str) -> list:
    """``module.<name>()`` as a list, its exception a ProblemInputsError naming the function."""
    try:
        return list(getattr(module, name)())
    except Exception as e:  # noqa: BLE001 - whatever the problem's code raised
        raise ProblemInputsError(f"the problem's {name}() raised {type(e).__name__}: {e}"[:4000]) from e


def from_problem(e: BaseException) -> bool:
    """Whether ``e`` is a ProblemInputsError raised by ``problem_call`` itself: the class is
    importable, so a candidate's forward could raise one to have its failure blamed on the problem."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return isinstance(e, ProblemInputsError) and tb is not None and tb.tb_frame.f_code is problem_call.__code__


def make_inputs(module, seed: int, device: str, distribution: str = "normal", precision: str | None = None) -> list:
    """Same seed, same device, same inputs: in the candidate's process and in the judge's. Drawn
    on the device (both sides draw the same ones), then floating tensors cast to ``precision``."""
    import torch

    from kernelsearch.evaluator.worker.distributions import transform

    seeded(seed)
    with torch.device(device):
        inputs = transform(problem_call(module, "get_inputs"), distribution)
    _hide_seed()
    return [cast_floating(x.to(device), precision) if isinstance(x, torch.Tensor) else x for x in inputs]


def _hide_seed() -> None:
    """Reseed at random once inputs exist, so that torch.initial_seed() inside forward says
    nothing about the seeds of the inputs still to come."""
    import secrets

    seeded(secrets.randbits(62))


def make_model(cls, module, seed: int, device: str, precision: str | None = None):
    """``cls`` built as KernelBench builds Model and ModelNew: the init inputs drawn after the
    seed, the module made on the CPU after the seed again, then moved to ``device`` and its
    floating parameters and buffers cast to ``precision``; in the mode the problem runs in
    (``in_eval_mode``). On the CPU, weights a module makes with the legacy constructor
    (``torch.Tensor(n, m)``, always on the CPU) come from the same generator as an ``nn``
    module's, so a kernel that initialises them as its module does gets the reference's
    weights; under ``with torch.device("cuda")`` they did not. The forward runs under no_grad
    either way."""
    import torch

    from kernelsearch.problems.loader import set_mode

    seeded(seed)
    init = [cast_floating(x.to(device), precision) if isinstance(x, torch.Tensor) else x
            for x in problem_call(module, "get_init_inputs")]
    seeded(seed)
    with torch.device("cpu"), torch.no_grad():
        model = cls(*init)
    model = model.to(device)
    if precision is not None:
        model = model.to(torch_dtype(precision))
    return set_mode(model, module)


def param_digest(model) -> list[list]:
    """Shape, sum and sum of magnitudes of each floating parameter and buffer: enough for the
    parent to tell a candidate whose weights were made differently from the reference's (a
    hint in an ``incorrect`` reason, never part of a verdict)."""
    import torch

    out = []
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point() and t.numel():
                d = t.detach().double()
                out.append([list(t.shape), float(d.sum()), float(d.abs().sum())])
    return out[:512]


def timing_inputs(problem, seeds: list[int], device: str, tcfg, dist: str = "normal",
                  precision: str | None = None) -> tuple[list, object]:
    """The timed loop's inputs from the job's timing seeds, the same way for candidate and
    baselines: a fresh set per call from its own seed when there is one seed per call, else a
    few sets rotated."""
    if tcfg.fresh_inputs and len(seeds) >= tcfg.warmup + tcfg.max_reps:
        return [], lambda k: make_inputs(problem, seeds[k], device, dist, precision)
    return [make_inputs(problem, s, device, dist, precision) for s in seeds], None


def load_module_plain(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
