"""The evaluator: screen, build, check and time one candidate in isolated worker processes.

Its worker roles are registered here, so that any parent that starts one (anything under
``kernelsearch.evaluator`` imports this first) can name its function to the worker.
"""

from kernelsearch.records.protocol import Kind, Role, register_role

_W = "kernelsearch.evaluator"
register_role(Role(
    "candidate", f"{_W}.worker.candidate:run_candidate",
    frozenset({Kind.PHASE, Kind.BUILT, Kind.HANDOVER, Kind.PARAMS, Kind.TRIAL, Kind.INPLACE, Kind.OBSERVED, Kind.STREAM_ORDER,
               Kind.TIMING, Kind.PROFILE, Kind.DONE}),
    # torch._dynamo (through integrity) is most of a worker's start-up: imported while it waits
    preload=("torch.utils.cpp_extension", "torch.profiler", f"{_W}.worker.guards", f"{_W}.timing.loop",
             f"{_W}.handover.outputs", f"{_W}.worker.streams"),
    shim=True))
register_role(Role("build", f"{_W}.worker.candidate:run_build", frozenset({Kind.PHASE, Kind.BUILT, Kind.DONE}),
                   preload=("torch.utils.cpp_extension",)))
register_role(Role(
    "judge", f"{_W}.judge.run:run_judge",
    frozenset({Kind.PHASE, Kind.INFO, Kind.PARAMS, Kind.CHECK, Kind.BASELINE, Kind.DONE}),
    preload=(f"{_W}.worker.guards", f"{_W}.timing.loop", f"{_W}.handover.outputs", f"{_W}.judge.compare"),
    shim=True))
register_role(Role("ceilings", f"{_W}.timing.ceilings:run_measure", frozenset({Kind.CEILINGS, Kind.DONE})))
