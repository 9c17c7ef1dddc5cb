"""Worker process entry point: ``python -m kernelsearch.evaluator.worker FD``.

Two roles, always in separate processes, the candidate's first:

- ``candidate``: builds (imports) the candidate, runs it on the correctness seeds and the
  timed loop, writes its raw outputs as tensor files and reports raw timings. It decides
  nothing. Everything here runs beside untrusted code and may be forged by it.
- ``judge``: runs only the reference. It recomputes the same inputs from the same seeds,
  compares the candidate's output files with the reference outputs, and times the eager and
  torch.compile baselines. The reference's outputs never exist in a process the candidate ran in.

Messages go to the parent as JSON lines on a private pipe (the file descriptor in argv), not
on stdout, which the candidate is free to fill with noise.

The roles are in ``worker/candidate.py`` and ``judge/run.py``, what they share in
``worker/common.py``; ``main`` here only dispatches.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from kernelsearch.evaluator.judge.run import run_judge
from kernelsearch.evaluator.worker.candidate import build, run_candidate
from kernelsearch.evaluator.worker.common import Channel, _tail
from kernelsearch.evaluator.worker.streamshim import ENV as _SHIM_ENV
from kernelsearch.evaluator.worker.streamshim import preload as _preload_shim

# torch and the checks are imported lazily, inside main and the roles (whose modules import only
# the standard library at their top), so that an ImportError still reaches the parent as a message.


# What each role imports before it reads its job (argv[2]): a worker started ahead of its job
# (sandbox.process.Worker) spends its wait here. torch._dynamo (through integrity) alone took ~4 s of
# a 10 s start on the lent H100. Nothing here runs candidate code.
_PRELOAD = {
    "candidate": ("torch.utils.cpp_extension", "torch.profiler", "kernelsearch.evaluator.worker.guards",
                  "kernelsearch.evaluator.timing.loop", "kernelsearch.evaluator.handover.outputs",
                  "kernelsearch.evaluator.worker.streams"),
    "judge": ("kernelsearch.evaluator.worker.guards", "kernelsearch.evaluator.timing.loop",
              "kernelsearch.evaluator.handover.outputs", "kernelsearch.evaluator.judge.compare"),
    "build": ("torch.utils.cpp_extension",),
}


def main(argv: list[str]) -> int:
    ch = Channel(int(argv[1]))
    try:
        if len(argv) > 2 and argv[2] in ("candidate", "judge"):  # before torch: the shim precedes the CUDA libraries
            _preload_shim(os.environ.get(_SHIM_ENV, ""))
        import importlib

        import torch

        for name in _PRELOAD.get(argv[2] if len(argv) > 2 else "", ()):
            importlib.import_module(name)

        job = json.loads(sys.stdin.read())
        if job.get("device") == "cpu" and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        if job["role"] == "candidate":
            run_candidate(job, ch)
        elif job["role"] == "build":
            if build(job, ch) is not None:
                ch.send("done")
        elif job["role"] == "judge":
            run_judge(job, ch)
        elif job["role"] == "ceilings":  # the device's roofline ceilings: evaluator/timing/ceilings.py
            __import__("kernelsearch.evaluator.timing.ceilings", fromlist=["run_measure"]).run_measure(job, ch)
        elif job["role"] == "lint":  # the problem linter: kernelsearch.problems.lint_worker
            __import__("kernelsearch.problems.lint_worker", fromlist=["run_lint"]).run_lint(job, ch)
        else:
            ch.send("error", phase="setup", kind="runtime_error", message=f"unknown role {job['role']!r}")
    except BaseException as e:  # noqa: BLE001
        from kernelsearch.evaluator.worker.common import ProblemInputsError

        if isinstance(e, ProblemInputsError):  # the problem's input functions raised (the judge's role)
            ch.send("error", phase="harness", kind="problem_error", message=str(e))
        else:
            ch.send("error", phase="harness", kind="harness_error", message=f"{type(e).__name__}: {e}"[:4000],
                    traceback=_tail(traceback.format_exc()))
    finally:
        try:
            ch.f.flush()
        except Exception:  # noqa: BLE001
            pass
    sys.stdout.flush()
    # Skip interpreter teardown: extension destructors and CUDA contexts can hang or crash
    # there, and everything worth keeping has been sent.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
