"""Worker process entry point: ``python -m kernelsearch.evaluator.worker FD ROLE SHIM [MODULE ...]``.

Every role runs in a process of its own, the candidate's first:

- ``candidate``: builds (imports) the candidate, runs it on the correctness seeds and the
  timed loop, writes its raw outputs as tensor files and reports raw timings. It decides
  nothing. Everything here runs beside untrusted code and may be forged by it.
- ``judge``: runs only the reference. It recomputes the same inputs from the same seeds,
  compares the candidate's output files with the reference outputs, and times the eager and
  torch.compile baselines. The reference's outputs never exist in a process the candidate ran in.
- ``build``, ``ceilings`` and roles registered by other packages (the problem linter's ``lint``).

Messages go to the parent as JSON lines on a private pipe (the file descriptor in argv), not
on stdout, which the candidate is free to fill with noise; ``kernelsearch.records.protocol`` says
what they are. The roles are registered there by their owners (``kernelsearch.evaluator`` for its
own); the parent puts the role's function (``"entry"``) in the job (a typed one, ``kernelsearch.records.jobs``, parsed and checked here before its role
sees it), and names in argv what to
import while the job is awaited (MODULE ...) and whether to load the stream shim first (SHIM
"1"). ``main`` here knows no role by name: it only calls the function the job names.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from kernelsearch.evaluator.timing.streamshim import ENV as _SHIM_ENV
from kernelsearch.evaluator.timing.streamshim import preload as _preload_shim
from kernelsearch.evaluator.worker.common import tail
from kernelsearch.records.jobs import Job, JobError
from kernelsearch.records.jobs import parse as parse_job
from kernelsearch.records.protocol import Channel, Kind

# torch and the checks are imported lazily, inside main and the roles (whose modules import only
# the standard library at their top), so that an ImportError still reaches the parent as a message.


def main(argv: list[str]) -> int:
    ch = Channel(int(argv[1]))
    try:
        if len(argv) > 3 and argv[3] == "1":  # before torch: the shim precedes the CUDA libraries
            _preload_shim(os.environ.get(_SHIM_ENV, ""))
        import importlib

        import torch

        # what the role imports before it reads its job: a worker started ahead of its job
        # (sandbox.process.Worker) spends its wait here. Nothing here runs candidate code.
        for name in argv[4:]:
            importlib.import_module(name)

        job, entry, kind, why = _read_job(json.loads(sys.stdin.read()))
        if job is None:
            ch.send(Kind.ERROR, phase="setup", kind=kind, message=why[:4000])
        else:
            if job.device == "cpu" and os.environ.get("OMP_NUM_THREADS", "").isdigit():
                torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
            module, function = entry.split(":", 1)
            getattr(importlib.import_module(module), function)(job, ch)
    except BaseException as e:  # noqa: BLE001
        from kernelsearch.evaluator.worker.common import from_problem

        if from_problem(e):  # the problem's input functions raised (the judge's role)
            ch.send(Kind.ERROR, phase="harness", kind="problem_error", message=str(e))
        else:
            ch.send(Kind.ERROR, phase="harness", kind="harness_error", message=f"{type(e).__name__}: {e}"[:4000],
                    traceback=tail(traceback.format_exc()))
    finally:
        try:
            ch.f.flush()
        except Exception:  # noqa: BLE001
            pass
    sys.stdout.flush()
    # Skip interpreter teardown: extension destructors and CUDA contexts can hang or crash
    # there, and everything worth keeping has been sent.
    os._exit(0)


def _read_job(raw: object) -> tuple[Job | None, str, str, str]:
    """(job, its role's function, "", "") for a job its role has, else (None, "", error kind,
    why): an unknown role, or a malformed job (the harness's bug: records/jobs.py says why)."""
    entry = raw.get("entry") if isinstance(raw, dict) else None
    if not isinstance(entry, str) or ":" not in entry or not entry.startswith("kernelsearch."):
        role = raw.get("role") if isinstance(raw, dict) else None
        return None, "", "runtime_error", f"unknown role {role!r}"
    try:
        return parse_job(raw), entry, "", ""
    except JobError as e:
        return None, "", "harness_error", f"malformed job: {e}"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
