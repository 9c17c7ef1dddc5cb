"""The problem linter: run each reference in a worker and report what makes it unfit to judge
against (``linter``, the parent side; ``worker``, its worker role, registered here)."""

from kernelsearch.records.protocol import Kind, Role, register_role

register_role(Role("lint", "kernelsearch.lint.worker:run_lint",
                   frozenset({Kind.PHASE, Kind.FINDING, Kind.LINTED, Kind.DONE})))
