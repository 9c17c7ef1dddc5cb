"""How a run ranks its kernels, and the speedups it reports for them.

Every evaluation re-times eager PyTorch in its own judge process, and the archive keeps that
evaluation's own ratio (``evaluations.speedup_vs_eager``) as data. Ranking by it lets baseline
noise choose the winner: the kernel whose eager happened to be timed slow comes out on top
(the winner's curse). So within a run, kernels of one problem on one device are ranked by their
own time (`ranked_time_sql`, ascending), and the speedups the run reports (round best, best so
far, `show`, budgets, progress, prompts) are against one pooled baseline of the run: the median
eager (and torch.compile) time over every evaluation of the run on that problem and device that
timed one, whatever its verdict (`pooled_baselines`). The reference's time does not depend on
the candidate it was timed next to, so every such timing is a sample of the same quantity, and
more samples make a steadier median. One baseline for all kernels keeps the order of their times.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any

from kernelsearch.records.choices import RUN_FALLBACK_POLICIES as FALLBACK_POLICIES
from kernelsearch.records.choices import TORCH_FALLBACK as FALLBACK_FLAG

Key = tuple[str, str]  # (problem_id, device): kernels are compared only within one

# A run's --torch-fallback: "mark" (default) keeps marked kernels out of its ranking, "allow"
# ranks them like any other, "reject" has the evaluator reject them (records.choices).


def eligible_sql(policy: str, e: str = "e") -> str:
    """The one rule for which correct kernels a run may rank, as an SQL condition over the
    evaluation row ``e``: every ranking (best, round best, members: branch's top-k, evolve's
    parents, prompts' "best so far", `verify`'s and confirmation's leaders, export) ANDs it in.
    A kernel marked torch_fallback is PyTorch's speed, not the search's: it is held out unless
    the run's policy is ``allow``. (``flags`` is the JSON list the evaluator wrote.)"""
    if policy not in FALLBACK_POLICIES:
        raise ValueError(f"unknown torch-fallback policy {policy!r}")
    return "1" if policy == "allow" else f"instr({e}.flags, '\"{FALLBACK_FLAG}\"') = 0"


def ranked_time_sql(e: str = "e") -> str:
    """The time a candidate is ranked by, as an SQL expression over its evaluation row ``e``:
    its confirmed time where it has a passing confirmation on that device (the median over
    fresh processes, evaluator/confirm.py), else the evaluation's median time. Every ranking
    query selects this (as ``ranked_ms``) and orders by it."""
    return (f"COALESCE((SELECT c.median_ms FROM confirmations c WHERE c.candidate_id = {e}.candidate_id "
            f"AND c.device = {e}.device AND c.ok = 1 ORDER BY c.id DESC LIMIT 1), {e}.candidate_ms)")


def ranked_time(row: Mapping[str, Any]) -> float | None:
    """The ranked time of a row selected with ``ranked_time_sql() AS ranked_ms`` (or, for a
    hand-built row, its ``candidate_ms``)."""
    v = row["ranked_ms"] if "ranked_ms" in row.keys() else row["candidate_ms"]
    return float(v) if v is not None and v > 0 else None


def run_speedup(baseline_ms: float | None, ms: float | None) -> float | None:
    """A kernel's speedup against the run's pooled baseline."""
    return baseline_ms / ms if baseline_ms and ms else None


def pct_of(reference_ms: float | None, ms: float | None) -> float | None:
    """100 * reference_ms / ms: a kernel's % of the roofline floor (reference: the floor's time)
    or of the library kernel (reference: the pooled eager time, for problems whose eager is
    one library call); above 100 beats it."""
    s = run_speedup(reference_ms, ms)
    return None if s is None else 100.0 * s


def pct_text(pct: float) -> str:
    """How every report writes a percentage of the floor or of the library kernel: "12.3%"."""
    return f"{pct:.1f}%"


@dataclass(frozen=True)
class Figure:
    """A correct kernel's speedups as every report shows them, and what they are: confirmed
    (the median over fresh processes, each against the eager timed beside it) or from its single
    evaluation, against the run's pooled baseline."""

    vs_eager: float | None
    vs_compile: float | None
    confirmed: bool = False
    processes: int = 0  # confirmed: the fresh processes timed
    pooled: int = 0  # single evaluation: the eager timings in the pooled baseline
    spread: float | None = None  # confirmed: relative spread of the speedup over the processes

    @property
    def basis(self) -> str:
        """The few words each report puts beside the figure."""
        if self.confirmed:
            return f"confirmed over {self.processes} processes"
        return "single evaluation, vs the run's pooled eager"

    @property
    def short(self) -> str:
        """The basis in a word or two, for the live status line."""
        return "confirmed" if self.confirmed else "single evaluation"

    def text(self) -> str:
        """"0.08x vs eager (confirmed over 3 processes)"; "-" when there is none."""
        return "-" if self.vs_eager is None else f"{self.vs_eager:.2f}x vs eager ({self.basis})"


@dataclass(frozen=True)
class Baseline:
    """The pooled baseline of one problem on one device in a run."""

    eager_ms: float | None = None
    compile_ms: float | None = None
    evaluations: int = 0  # eager timings pooled

    def speedups(self, ms: float | None) -> tuple[float | None, float | None]:
        """(vs eager, vs torch.compile) of a kernel that takes ``ms``."""
        return run_speedup(self.eager_ms, ms), run_speedup(self.compile_ms, ms)


def pool(rows: Iterable[Mapping[str, Any]]) -> dict[Key, Baseline]:
    """Median eager_ms and compile_ms per (problem_id, device) over the rows that timed them."""
    eager: dict[Key, list[float]] = {}
    compiled: dict[Key, list[float]] = {}
    for r in rows:
        key = (r["problem_id"], r["device"])
        for name, into in (("eager_ms", eager), ("compile_ms", compiled)):
            if r[name] is not None and r[name] > 0:
                into.setdefault(key, []).append(float(r[name]))
    return {k: Baseline(median(eager[k]) if k in eager else None,
                        median(compiled[k]) if k in compiled else None, len(eager.get(k, [])))
            for k in eager.keys() | compiled.keys()}


@dataclass(frozen=True)
class Ranked:
    """A correct kernel in its run's ranking."""

    candidate_id: str
    key: Key
    ms: float | None  # the time it is ranked by
    speedup_vs_eager: float | None  # against the pooled baseline of its key
    speedup_vs_compile: float | None


def rank(rows: Iterable[Mapping[str, Any]], baselines: Mapping[Key, Baseline] | None = None) -> dict[Key, list[Ranked]]:
    """Rows of evaluations (candidate_id, problem_id, device, status, candidate_ms or
    ranked_ms, eager_ms, compile_ms): the correct ones per (problem_id, device), fastest first,
    with speedups against the pooled baseline (by default pooled from the same rows)."""
    rows = list(rows)
    base = pool(rows) if baselines is None else baselines
    out: dict[Key, list[Ranked]] = {}
    for r in rows:
        if r["status"] != "correct":
            continue
        key, ms = (r["problem_id"], r["device"]), ranked_time(r)
        out.setdefault(key, []).append(Ranked(r["candidate_id"], key, ms, *base.get(key, Baseline()).speedups(ms)))
    for ranked in out.values():
        ranked.sort(key=lambda x: (x.ms is None, x.ms or 0.0))  # stable: ties keep the rows' order
    return out


def pooled_baselines(conn: sqlite3.Connection, run_id: str, before_round: int | None = None) -> dict[Key, Baseline]:
    """The run's pooled baselines, from the evaluations its lineage points to (each candidate's
    evaluation in this run). ``before_round``: only rounds before it, a baseline that stays
    fixed while that round is proposed (its prompts are rebuilt the same on resume)."""
    q = ("SELECT e.problem_id, e.device, e.eager_ms, e.compile_ms FROM lineage l "
         "JOIN evaluations e ON e.id = l.evaluation_id WHERE l.run_id=?")
    args: list[Any] = [run_id]
    if before_round is not None:
        q += " AND l.round < ?"
        args.append(before_round)
    return pool(conn.execute(q, args))
