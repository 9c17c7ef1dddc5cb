"""Will a problem fit in the device's memory? Asked before any worker starts.

A KernelBench problem sized for one GPU can need more than another has, and the evaluator
holds several copies of its tensors at once. Started anyway, its worker dies of an
out-of-memory error (or the host's OOM killer) after a minute of start-up, with a reason that
names neither the problem's sizes nor the device's limit. This check reads the sizes from
``problems/describe.py`` (run on the meta device: no memory) and turns an evaluation that cannot
fit into an early ``crashed`` verdict that says what would be needed and what there is.

What each worker holds at its peak (the two run one after the other, never at once; see
``worker/candidate.py`` and ``judge/run.py``):

- candidate worker: parameters; in correctness trial 0 the inputs, their clones for the
  mutation check and the determinism run's fresh copy (3 x inputs), trial 0's output kept for
  the after-the-call fingerprint check, and the forward's working memory (its own output
  included); in later trials 2 x inputs and 2 kept outputs plus the forward; on CUDA, in the
  stream-order check, fresh inputs, the 2 kept outputs, the forward and its output's snapshot
  (a conv whose 8.6 GB output is 8 times its input ran out of GPU memory there when this was
  left out, and when the check kept one call's snapshot during the next call). The timed loop
  holds as much (fresh inputs, one kept output, the forward, the 2 spot copies): on CUDA the
  same phase covers it; on the CPU it is not counted yet.
- judge: parameters, one set of inputs, the candidate's output read back, the reference's
  forward (its output included) and the comparison's float64 temporaries of one slice.
- on CUDA both also hold the parameters in host memory while the model is built on the CPU.

The forward's working memory is the peak of the tensors one forward has alive at once, traced
on meta; where that trace is missing, the outputs stand for it. Both roles also need a CUDA
context and workspace (``CUDA_RESERVE``). On the CPU the limit is the worker's memory cap
(``Limits.memory_bytes``; the judge has twice that) or the host's available memory, whichever
is less. The outputs handed from the candidate to the judge go in device memory as far as it has
room beside the larger worker (``device_handover_budget``), the rest as files, which must fit in
the scratch space (``sandbox/scratch.py``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.sandbox.scratch import SHM, available_memory
from kernelsearch.problems.describe import ProblemDescription, TensorInfo, describe_cached
from kernelsearch.problems.loader import Problem

CUDA_RESERVE = 1 << 30  # per process: CUDA context, cuBLAS/cuDNN workspaces, allocator slack
CPU_RESERVE = 512 << 20  # per process: the interpreter, torch's libraries
HANDOVER_MARGIN = 2 << 30  # GPU memory left free beside outputs handed over in device memory
FILE_SLACK = 64 << 20  # an output file's header and alignment, beyond its tensors' bytes
COMPARE_SLICE = 1 << 26  # elements the judge compares at once (judge/compare.py, CHUNK)


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes of a problem's tensors and what each worker holds at its peak (reserve excluded)."""

    inputs: int
    outputs: int
    params: int
    forward: int  # the forward's working memory, its output included
    handover: int  # output files written for the judge
    order_check: bool = False  # the stream-order check runs (CUDA)

    @property
    def candidate(self) -> int:
        return self.params + max(n for _, n in self._phases())

    def _phases(self) -> list[tuple[str, int]]:
        """The candidate worker's phases and what each holds besides the parameters."""
        phases = [("trial0", 3 * self.inputs + self.outputs + self.forward),
                  ("later", 2 * self.inputs + 2 * self.outputs + self.forward)]
        if self.order_check:
            phases.append(("order", self.inputs + 3 * self.outputs + self.forward))
        return phases

    @property
    def judge(self) -> int:
        # the comparison's float64 temporaries, one slice at a time (judge/compare.py)
        compare = 5 * 8 * min(self.outputs // 4, COMPARE_SLICE)
        return self.params + self.inputs + self.outputs + self.forward + compare

    def breakdown(self) -> str:
        """The candidate worker's peak in its parts, for the reason."""
        phase = max(self._phases(), key=lambda p: p[1])[0]
        n_in, n_out, what = {
            "trial0": (3, 1, "the inputs, clones for the mutation check, the determinism run"),
            "later": (2, 2, "the inputs, clones for the mutation check"),
            "order": (1, 3, "the inputs of the stream-order check; its output's snapshot among the outputs"),
        }[phase]
        return (f"inputs {_gb(self.inputs)} x{n_in} ({what}) + outputs {_gb(self.outputs)} x{n_out} kept + "
                f"the forward's working memory {_gb(self.forward)} + parameters {_gb(self.params)}")


def _gb(n: int) -> str:
    if n >= 1e12:
        return f"{n / 1e12:.1f} TB"
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def handover_files(config: EvalConfig) -> int:
    """Output files the candidate worker writes for the judge: one per trial, the determinism
    run, the stream-order check's snapshot and each timed spot check."""
    return config.trials + 2 + config.timing.spot_checks


def memory_need(desc: ProblemDescription, config: EvalConfig) -> MemoryNeed | None:
    """What the evaluation holds, from a problem's description; None where it is unknown."""
    if desc.error or not desc.outputs:
        return None
    inputs = sum(i.nbytes for i in desc.inputs if isinstance(i, TensorInfo))
    outputs = sum(o.nbytes for o in desc.outputs)
    forward = max(desc.forward_peak_bytes or 0, outputs)
    handover = outputs * handover_files(config)
    return MemoryNeed(inputs, outputs, desc.param_bytes, forward, handover, order_check=config.device == "cuda")


def output_file_limit(need: MemoryNeed | None, config: EvalConfig) -> int:
    """The largest file the candidate's worker may write: the configured cap, raised to hold one
    trial's outputs (header and alignment too) where they are larger. Those files are the
    evaluation's own, and their total was checked against the scratch space; without the raise,
    an 8 GiB output failed with "File too large" when it went as a file."""
    if need is None:
        return config.limits.file_bytes
    return max(config.limits.file_bytes, need.outputs + FILE_SLACK)


def device_handover_budget(need: MemoryNeed | None, config: EvalConfig) -> int:
    """Bytes of outputs the candidate's worker may hand to the judge in device memory
    (evaluator/handover). Handed outputs stay on the GPU until the judge has read them, beside
    either worker, so the budget is what the GPU has beyond the larger worker's peak, the CUDA
    reserve and a margin. 0 off CUDA, with ``handover="files"``, or where sizes are unknown."""
    if config.device != "cuda" or config.handover != "auto" or need is None:
        return 0
    gpu = gpu_memory(config)
    if gpu is None:
        return 0
    # and one output's worth for the allocator's fragmentation: beside 40 GiB handed over, a
    # worker with 8 GiB outputs held 7.9 GiB reserved but unusable and ran out of memory
    room = gpu[0] - CUDA_RESERVE - max(need.candidate, need.judge) - HANDOVER_MARGIN - need.outputs
    # each output's allocation is rounded up to the driver's granularity (2 MiB on an H100)
    return max(0, min(room, need.handover + handover_files(config) * (2 << 20)))


def gpu_memory(config: EvalConfig) -> tuple[int, str] | None:
    """Total memory of the GPU the evaluation runs on, and its name. From the device's
    properties: asking for the free memory would make a CUDA context in this process."""
    import torch

    if not torch.cuda.is_available():
        return None
    index = config.gpu if config.gpu is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return int(props.total_memory), str(props.name)


def _scratch_free() -> int:
    """The most free space of a place the handover files may go (default temp dir or /dev/shm)."""
    best = 0
    for place in (tempfile.gettempdir(), str(SHM)):
        try:
            best = max(best, shutil.disk_usage(place).free)
        except OSError:
            continue
    return best


def fit_reason(problem: Problem, config: EvalConfig) -> str:
    """Why the problem cannot be evaluated on ``config.device`` for want of memory; "" when it
    fits or its sizes are unknown (the workers then find out)."""
    need = memory_need(describe_cached(problem.at(config.precision), config.device), config)
    if need is None:
        return ""
    if config.device == "cuda":
        # both models are built on the CPU first (worker/common.py make_model), as KernelBench builds them
        host = min(config.limits.memory_bytes, available_memory() or config.limits.memory_bytes)
        if need.params + CPU_RESERVE > host:
            return (f"does not fit in host memory: its parameters ({_gb(need.params)}) are built on the CPU before "
                    f"they move to the GPU, as KernelBench builds them; the worker may hold {_gb(host)}")
        gpu = gpu_memory(config)
        if gpu is not None:
            total, name = gpu
            room = total - CUDA_RESERVE
            for role, n in (("the candidate's worker", need.candidate), ("the judge", need.judge)):
                if n > room:
                    return (f"does not fit in GPU memory: {need.breakdown()} need ~{_gb(n)} in {role}; "
                            f"the GPU ({name}) has {_gb(total)}, {_gb(CUDA_RESERVE)} of it kept for the "
                            "CUDA context")
    else:
        host = available_memory()
        cap = config.limits.memory_bytes
        for role, n, limit in (("the candidate's worker", need.candidate, cap),
                               ("the judge", need.judge, 2 * cap)):
            room = min(limit, host) if host is not None else limit
            if n + CPU_RESERVE > room:
                what = (f"the worker's memory limit is {_gb(limit)}" if host is None or limit <= host
                        else f"the host has {_gb(host)} available")
                return (f"does not fit in memory: {need.breakdown()} need ~{_gb(n + CPU_RESERVE)} in {role}; "
                        f"{what}")
    free = _scratch_free()
    if need.handover - device_handover_budget(need, config) > free:
        return (f"does not fit on disk: the {handover_files(config)} output files handed to "
                f"the judge need {_gb(need.handover)}; the largest scratch space has {_gb(free)} free")
    return ""
