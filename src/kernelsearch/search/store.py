"""The run's state, all of it in the run directory's archive (`RUN_DIR/run.sqlite`).

Each step of a run is one committed transaction (a round planned, an answer received, a
candidate proposed, a candidate evaluated), so a run killed at any instant, even by SIGKILL,
resumes from these rows alone: nothing finished is lost and nothing is done twice. The
evaluator's own tables (problems, candidates, evaluations, baselines) are used as they are;
migration 2 in `archive.db` adds runs, rounds, llm_calls, ideas and lineage.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.llm.base import LLMRequest
from kernelsearch.llm.extract import Idea
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult
from kernelsearch.search.calls import playbook_json
from kernelsearch.search.config import RunConfig
from kernelsearch.search.ranking import (
    Baseline,
    eligible_sql,
    pct_of,
    pooled_baselines,
    ranked_time_sql,
)

DB_NAME = "run.sqlite"
LOCK_NAME = "run.lock"
PROBLEM_DIR = "problem"


class RunBusy(RuntimeError):
    """Another session holds the run: two sessions would propose and evaluate the same round."""


class RunLock:
    """An exclusive lock on a run directory for one session; the OS drops it if the process dies."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunBusy(f"{self.path.parent}: another kernelsearch session is working on this run") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class RunRow:
    id: str
    problem_id: str
    strategy: str
    config: RunConfig
    status: str  # running | paused | waiting | stopped | finished
    stop_reason: str | None
    stop_detail: str | None
    elapsed_s: float
    created_at: float


@dataclass
class RoundRow:
    round: int
    kind: str  # seed | llm
    status: str  # proposing | proposed | evaluated
    plan: dict[str, Any]
    best_candidate_id: str | None = None
    best_speedup: float | None = None


@dataclass
class Member:
    """A correct kernel of the run: what selection, seeding and reports rank (by ``ms``;
    speedups are against the run's pooled baseline, see `search.ranking`)."""

    candidate_id: str
    round: int
    origin: str  # llm | seed
    speedup: float  # vs eager, the run's pooled baseline
    speedup_vs_compile: float | None
    idea_id: int | None
    parent_ids: list[str] = field(default_factory=list)
    ms: float | None = None  # the time it is ranked by (ranking.ranked_time_sql)
    floor_ms: float | None = None  # its evaluation's roofline floor (evaluator/timing/ceilings.py)

    @property
    def pct_of_floor(self) -> float | None:
        """Its ranked time against the roofline floor (what --target-floor compares)."""
        return pct_of(self.floor_ms, self.ms)


@dataclass
class IdeaRow:
    id: int
    round: int
    text: str
    family: str
    parent_ids: list[str]
    outcome: str = ""


@dataclass
class LedgerItem:
    """One line of the ideas ledger shown to the model (`format_ledger` reads these names)."""

    idea: str
    family: str
    result: str


@dataclass
class LLMUsage:
    calls: int = 0  # answered by a provider, in any session of the run
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def run_dirs(root: str | Path) -> list[Path]:
    """The run directories ``root`` names: itself when it holds a run, else the ones right under
    it (``run`` on a suite or a directory of problems makes one per problem), sorted; empty when
    neither. Every command that takes RUN_DIR finds its runs here."""
    root = Path(root)
    if RunStore.exists(root):
        return [root]
    return sorted(d for d in root.iterdir() if RunStore.exists(d)) if root.is_dir() else []


class NoRun(LookupError):
    """The directory holds no run: no archive, or one killed before its run row was committed."""


class RunStore:
    """A handle on the run of one run directory: every method reads or writes that run.

    ``RunStore(run_dir)`` opens the directory's run and never creates an archive (`NoRun`
    when there is none); `create` makes the run. A directory holds one run; an archive that
    holds several (an earlier version's Python API allowed it) opens on its oldest run, the one
    `show` always reported.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        if not self.exists(self.dir):
            raise NoRun(f"{self.dir}: not a run directory (no {DB_NAME} with a run)")
        self._open()
        row = self.conn.execute("SELECT id FROM runs ORDER BY created_at, rowid LIMIT 1").fetchone()
        if row is None:  # deleted between the check and the open
            self.close()
            raise NoRun(f"{self.dir}: not a run directory (no {DB_NAME} with a run)")
        self.run_id: str = row[0]

    def _open(self) -> None:
        self.archive = Archive(self.dir / DB_NAME)
        self.conn = self.archive.conn

    @classmethod
    def create(cls, run_dir: str | Path, problem: Problem, config: RunConfig, seeds: list[Candidate]) -> RunStore:
        """Make the directory's run (the run row, its problem, and the user's seed kernels as
        round 0, in one transaction) and return its handle. The directory must hold no run."""
        if cls.exists(run_dir):
            raise FileExistsError(f"{run_dir}: already holds a run")
        store = cls.__new__(cls)
        store.dir = Path(run_dir)
        store._open()
        store.run_id = uuid.uuid4().hex[:12]
        now = time.time()
        with store.archive.tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO problems(id, name, path, level, source, created_at) VALUES (?,?,?,?,?,?)",
                (problem.id, problem.name, str(problem.path), problem.level, problem.source, now),
            )
            c.execute(
                "INSERT INTO runs(id, problem_id, strategy, config, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?)",
                (store.run_id, problem.id, config.strategy, json.dumps(config.to_dict()), "running", now, now),
            )
            if seeds:
                c.execute(
                    "INSERT INTO rounds(run_id, round, kind, status, plan, started_at, proposed_at) VALUES (?,?,?,?,?,?,?)",
                    (store.run_id, 0, "seed", "proposed", json.dumps({"seeds": [s.id for s in seeds]}), now, now),
                )
            for s in seeds:
                cls._insert_candidate(c, store.run_id, problem.id, s, 0, "seed", [], None, None, None, now)
        return store

    @property
    def db_path(self) -> Path:
        return self.dir / DB_NAME

    @staticmethod
    def exists(run_dir: str | Path) -> bool:
        """True when the directory holds a run (an archive killed before its run row was
        committed does not count: starting the run again there is fine)."""
        path = Path(run_dir) / DB_NAME
        if not path.is_file():
            return False
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as c:
                return c.execute("SELECT COUNT(*) FROM runs").fetchone()[0] > 0
        except sqlite3.Error:
            return False

    def close(self) -> None:
        self.archive.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the run ------------------------------------------------------------------------
    def run(self) -> RunRow:
        """The run's row as it stands now (its config and status change during a session)."""
        row = self.conn.execute("SELECT * FROM runs WHERE id=?", (self.run_id,)).fetchone()
        if row is None:
            raise NoRun(f"{self.db_path}: no run {self.run_id}")
        return RunRow(
            id=row["id"], problem_id=row["problem_id"], strategy=row["strategy"],
            config=RunConfig.from_dict(json.loads(row["config"])), status=row["status"],
            stop_reason=row["stop_reason"], stop_detail=row["stop_detail"],
            elapsed_s=float(row["elapsed_s"]), created_at=float(row["created_at"]),
        )

    def problem_source(self, problem_id: str) -> tuple[str, str]:
        row = self.conn.execute("SELECT name, source FROM problems WHERE id=?", (problem_id,)).fetchone()
        return row["name"], row["source"]

    def set_status(self, status: str, reason: str | None = None, detail: str | None = None) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE runs SET status=?, stop_reason=?, stop_detail=?, updated_at=? WHERE id=?",
                      (status, reason, detail, time.time(), self.run_id))

    def set_config(self, config: RunConfig) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE runs SET config=?, updated_at=? WHERE id=?",
                      (json.dumps(config.to_dict()), time.time(), self.run_id))

    def add_elapsed(self, seconds: float) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE runs SET elapsed_s = elapsed_s + ? WHERE id=?", (max(0.0, seconds), self.run_id))

    # -- rounds -------------------------------------------------------------------------
    def rounds(self) -> list[RoundRow]:
        rows = self.conn.execute("SELECT * FROM rounds WHERE run_id=? ORDER BY round", (self.run_id,))
        return [RoundRow(r["round"], r["kind"], r["status"], json.loads(r["plan"]), r["best_candidate_id"],
                         r["best_speedup"]) for r in rows]

    def last_round(self) -> RoundRow | None:
        rounds = self.rounds()
        return rounds[-1] if rounds else None

    def llm_rounds(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM rounds WHERE run_id=? AND kind='llm'", (self.run_id,)).fetchone()[0])

    def start_round(self, n: int, plan: dict[str, Any]) -> None:
        with self.archive.tx() as c:
            c.execute("INSERT INTO rounds(run_id, round, kind, status, plan, started_at) VALUES (?,?,?,?,?,?)",
                      (self.run_id, n, "llm", "proposing", json.dumps(plan), time.time()))

    def mark_proposed(self, n: int) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE rounds SET status='proposed', proposed_at=? WHERE run_id=? AND round=? AND status='proposing'",
                      (time.time(), self.run_id, n))

    def finish_round(self, n: int) -> None:
        """Mark the round evaluated, with its fastest kernel (its speedup against the run's
        pooled baseline as it stands now) and every idea's outcome so far."""
        base = self.baseline()
        problem_id, device = self.key()
        best = self.conn.execute(
            f"""SELECT l.candidate_id, {ranked_time_sql()} AS ranked_ms
                FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id
                WHERE l.run_id=? AND l.round=? AND e.status='correct' AND e.problem_id=? AND e.device=?
                  AND {self.eligible()}
                ORDER BY ranked_ms IS NULL, ranked_ms, l.created_at, l.rowid LIMIT 1""",
            (self.run_id, n, problem_id, device)).fetchone()
        outcomes = {i.id: self.idea_result(i.id, base) for i in self.ideas()}
        with self.archive.tx() as c:
            c.execute("UPDATE rounds SET status='evaluated', evaluated_at=?, best_candidate_id=?, best_speedup=? "
                      "WHERE run_id=? AND round=?",
                      (time.time(), best[0] if best else None, base.speedups(best[1])[0] if best else None, self.run_id, n))
            c.executemany("UPDATE ideas SET outcome=? WHERE id=?", [(o, i) for i, o in outcomes.items()])

    # -- LLM calls ----------------------------------------------------------------------
    def call(self, key: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM llm_calls WHERE run_id=? AND request_key=?", (self.run_id, key)).fetchone()
        return dict(row) if row else None

    def calls(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM llm_calls WHERE run_id=? ORDER BY id", (self.run_id,))]

    def set_outcome(self, key: str, outcome: str, note: str = "", candidate_id: str | None = None) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE llm_calls SET outcome=?, note=?, candidate_id=COALESCE(?, candidate_id), updated_at=? "
                      "WHERE run_id=? AND request_key=?", (outcome, note, candidate_id, time.time(), self.run_id, key))

    def record_error(self, request: LLMRequest, error: Exception) -> None:
        """A failed call: kept for the record, and asked again on resume (no answer stored)."""
        meta, now = request.metadata, time.time()
        with self.archive.tx() as c:
            c.execute(
                """INSERT INTO llm_calls(run_id, round, slot, purpose, request_key, request, outcome, note, created_at,
                       updated_at, playbook)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(run_id, request_key) DO UPDATE SET outcome='error', note=excluded.note,
                   updated_at=excluded.updated_at WHERE answer IS NULL""",
                (self.run_id, meta.get("round"), meta.get("slot"), meta.get("purpose"), request.key(),
                 json.dumps(request.to_dict()), "error", f"{type(error).__name__}: {error}"[:2000], now, now,
                 playbook_json(request)),
            )

    def answered_requests(self) -> list[LLMRequest]:
        rows = self.conn.execute("SELECT request FROM llm_calls WHERE run_id=? AND answer IS NOT NULL ORDER BY id", (self.run_id,))
        return [LLMRequest.from_dict(json.loads(r[0])) for r in rows]

    def usage(self) -> LLMUsage:
        r = self.conn.execute(
            """SELECT COUNT(answer), SUM(answer IS NULL), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                      COALESCE(SUM(cost_usd), 0), SUM(answer IS NOT NULL AND cost_usd IS NULL)
               FROM llm_calls WHERE run_id=?""", (self.run_id,)).fetchone()
        return LLMUsage(int(r[0] or 0), int(r[1] or 0), int(r[2]), int(r[3]), float(r[4]), int(r[5] or 0))

    # -- ideas --------------------------------------------------------------------------
    def add_ideas(self, n: int, call_id: int, parent_ids: list[str], ideas: list[Idea]) -> list[IdeaRow]:
        """Store the ideas of one answer; asking again (on resume) returns the same rows."""
        now = time.time()
        with self.archive.tx() as c:
            c.executemany(
                "INSERT OR IGNORE INTO ideas(run_id, round, llm_call_id, idx, text, family, parent_ids, created_at) "
                "VALUES (?,?,?,?,?,?,?,?)",
                [(self.run_id, n, call_id, i, idea.text, idea.family, json.dumps(parent_ids), now) for i, idea in enumerate(ideas)],
            )
        rows = self.conn.execute("SELECT * FROM ideas WHERE llm_call_id=? ORDER BY idx", (call_id,))
        return [self._idea(r) for r in rows]

    def ideas(self, before_round: int | None = None) -> list[IdeaRow]:
        q, args = "SELECT * FROM ideas WHERE run_id=?", [self.run_id]
        if before_round is not None:
            q += " AND round < ?"
            args.append(before_round)
        return [self._idea(r) for r in self.conn.execute(q + " ORDER BY id", args)]

    def idea(self, idea_id: int) -> IdeaRow | None:
        row = self.conn.execute("SELECT * FROM ideas WHERE id=?", (idea_id,)).fetchone()
        return self._idea(row) if row else None

    @staticmethod
    def _idea(r: Any) -> IdeaRow:
        return IdeaRow(r["id"], r["round"], r["text"], r["family"], json.loads(r["parent_ids"]), r["outcome"])

    def idea_result(self, idea_id: int, base: Baseline | None = None) -> str:
        """How an idea did, in words a model can use: "2 kernels, 1 correct, best 1.43x (parent 1.10x)";
        its fastest kernel and the parent, against the run's pooled baseline (``base``: that
        baseline, when the caller has it)."""
        base = self.baseline() if base is None else base
        rows = self.conn.execute(
            f"""SELECT l.status, e.status AS verdict, {ranked_time_sql()} AS ranked_ms, e.reason, l.parent_ids,
                       {self.eligible()} AS eligible
                FROM lineage l LEFT JOIN evaluations e ON e.id = l.evaluation_id
                WHERE l.run_id=? AND l.idea_id=?""", (self.run_id, idea_id)).fetchall()
        if not rows:
            return "no kernel came of it"
        done = [r for r in rows if r["status"] == "evaluated"]
        if not done:
            return f"{len(rows)} kernel(s), not evaluated yet"
        correct = [r for r in done if r["verdict"] == "correct"]
        head = f"{len(rows)} kernel(s), {len(correct)} correct"
        ranked = [r for r in correct if r["eligible"]]
        if len(ranked) < len(correct):  # the model should learn that PyTorch's speed does not count
            head += f" ({len(correct) - len(ranked)} held out: PyTorch/ATen did the work)"
            if not ranked:
                return head
        correct = ranked
        if correct:
            fastest = min((r["ranked_ms"] for r in correct if r["ranked_ms"]), default=None)
            best = base.speedups(fastest)[0] or 0.0
            parents = json.loads(correct[0]["parent_ids"])
            ref = self.speedup(parents[0], base) if parents else None
            return head + f", best {best:.2f}x vs eager" + (f" (parent {ref:.2f}x)" if ref else "")
        why = "; ".join(sorted({f"{r['verdict']}: {(r['reason'] or '')[:80]}" for r in done}))
        return f"{head} ({why})"

    def ledger(self, before_round: int, limit: int = 40) -> list[LedgerItem]:
        """Ideas of earlier rounds with their results: fixed once those rounds are evaluated,
        so a prompt rebuilt on resume is the same prompt (and hits the stored answer)."""
        base = self.baseline(before_round=before_round)
        items = [LedgerItem(i.text, i.family, self.idea_result(i.id, base))
                 for i in self.ideas(before_round=before_round)]
        return items[-limit:]

    # -- candidates and lineage ---------------------------------------------------------
    @staticmethod
    def _insert_candidate(c: Any, run_id: str, problem_id: str, cand: Candidate, n: int, origin: str,
                          parents: list[str], idea_id: int | None, call_id: int | None, model: str | None,
                          now: float) -> bool:
        c.execute("INSERT OR IGNORE INTO candidates(id, problem_id, backend, name, source, created_at) VALUES (?,?,?,?,?,?)",
                  (cand.id, problem_id, cand.backend, cand.name, cand.source, now))
        cur = c.execute(
            """INSERT OR IGNORE INTO lineage(run_id, candidate_id, round, origin, parent_ids, idea_id, llm_call_id,
               model, status, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)""",
            (run_id, cand.id, n, origin, json.dumps(parents), idea_id, call_id, model, "pending", now),
        )
        return cur.rowcount > 0

    def add_proposal(self, problem_id: str, cand: Candidate, n: int, parents: list[str],
                     idea_id: int | None, request_key: str, model: str | None, note: str = "",
                     outcome: str = "ok") -> bool:
        """The candidate an answer produced, its lineage and the call's outcome (``outcome``:
        ``ok``, or ``unclosed_fence`` for code read from a block never closed), atomically.
        False when this run already has the same code (a duplicate is not evaluated again)."""
        now = time.time()
        with self.archive.tx() as c:
            row = c.execute("SELECT id FROM llm_calls WHERE run_id=? AND request_key=?", (self.run_id, request_key)).fetchone()
            call_id = row[0] if row else None
            new = self._insert_candidate(c, self.run_id, problem_id, cand, n, "llm", parents, idea_id, call_id, model, now)
            if not new:
                outcome = "duplicate"
                note = (note + "; " if note else "") + f"same code as candidate {cand.id}, already in this run"
            c.execute("UPDATE llm_calls SET outcome=?, note=?, candidate_id=?, updated_at=? WHERE run_id=? AND request_key=?",
                      (outcome, note, cand.id, now, self.run_id, request_key))
        return new

    def candidate(self, candidate_id: str) -> Candidate:
        row = self.conn.execute("SELECT source, backend, name FROM candidates WHERE id=?", (candidate_id,)).fetchone()
        if row is None:
            raise LookupError(f"no candidate {candidate_id}")
        return Candidate(source=row["source"], backend=row["backend"], name=row["name"] or "candidate")

    def lineage(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM lineage WHERE run_id=? ORDER BY round, created_at, rowid", (self.run_id,))]

    def pending(self) -> list[Candidate]:
        rows = self.conn.execute("SELECT candidate_id FROM lineage WHERE run_id=? AND status='pending' "
                                 "ORDER BY round, created_at, rowid", (self.run_id,)).fetchall()
        return [self.candidate(r[0]) for r in rows]

    def count_proposed(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM lineage WHERE run_id=? AND origin='llm'", (self.run_id,)).fetchone()[0])

    def count_evaluated(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM lineage WHERE run_id=? AND status='evaluated'", (self.run_id,)).fetchone()[0])

    def evaluation_of(self, candidate_id: str, device: str) -> int | None:
        """The id of an evaluation this candidate already has on this device (kept across a kill)."""
        row = self.conn.execute("SELECT MAX(id) FROM evaluations WHERE candidate_id=? AND device=?",
                                (candidate_id, device)).fetchone()
        return row[0] if row and row[0] is not None else None

    def mark_evaluated(self, candidate_id: str, evaluation_id: int) -> None:
        with self.archive.tx() as c:
            c.execute("UPDATE lineage SET status='evaluated', evaluation_id=?, evaluated_at=? "
                      "WHERE run_id=? AND candidate_id=?", (evaluation_id, time.time(), self.run_id, candidate_id))

    def result(self, candidate_id: str) -> EvalResult | None:
        row = self.conn.execute(
            "SELECT e.record FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id WHERE l.run_id=? AND l.candidate_id=?",
            (self.run_id, candidate_id)).fetchone()
        return EvalResult.from_dict(json.loads(row[0])) if row else None

    # -- ranking (see search.ranking) ---------------------------------------------------
    def key(self) -> tuple[str, str]:
        """(problem_id, device) of the run: its kernels are ranked against each other only there."""
        run = self.run()
        return run.problem_id, run.config.eval.device

    def baseline(self, before_round: int | None = None) -> Baseline:
        """The run's pooled baseline on its problem and device (``before_round``: from the
        rounds before that one only)."""
        return pooled_baselines(self.conn, self.run_id, before_round).get(self.key(), Baseline())

    def eligible(self) -> str:
        """The run's rule for which correct kernels it may rank (`ranking.eligible_sql` under
        its --torch-fallback policy), an SQL condition over the evaluation row ``e``."""
        return eligible_sql(self.run().config.torch_fallback)

    def held_out(self) -> list[str]:
        """Correct kernels of the run that its policy keeps out of every ranking (marked
        torch_fallback, under --torch-fallback mark), in the order they were proposed."""
        problem_id, device = self.key()
        return [r[0] for r in self.conn.execute(
            f"""SELECT l.candidate_id FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id
                WHERE l.run_id=? AND e.status='correct' AND e.problem_id=? AND e.device=?
                  AND NOT ({self.eligible()})
                ORDER BY l.round, l.created_at, l.rowid""", (self.run_id, problem_id, device))]

    def members(self, base: Baseline | None = None) -> list[Member]:
        """Every correct kernel of the run that it may rank (`eligible`: not PyTorch's work,
        unless the run allows that), fastest first (by its own time, never by its
        evaluation's own speedup, which eager's noise moves); a kernel whose latest
        re-verification failed is left out (it keeps its evaluation row and the verification
        says why). Speedups are against the run's pooled baseline (or ``base``)."""
        base = self.baseline() if base is None else base
        problem_id, device = self.key()
        rows = self.conn.execute(
            f"""SELECT l.candidate_id, l.round, l.origin, l.idea_id, l.parent_ids, {ranked_time_sql()} AS ranked_ms,
                       json_extract(e.record, '$.roofline.floor_ms') AS floor_ms
                FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id
                WHERE l.run_id=? AND e.status='correct' AND e.problem_id=? AND e.device=?
                  AND {self.eligible()}
                  AND COALESCE((SELECT v.ok FROM verifications v WHERE v.candidate_id = l.candidate_id
                                ORDER BY v.id DESC LIMIT 1), 1) = 1
                ORDER BY ranked_ms IS NULL, ranked_ms, l.created_at, l.rowid""", (self.run_id, problem_id, device))
        out = []
        for r in rows:
            eager, compiled = base.speedups(r["ranked_ms"])
            floor = r["floor_ms"] if isinstance(r["floor_ms"], (int, float)) and r["floor_ms"] > 0 else None
            out.append(Member(r["candidate_id"], r["round"], r["origin"], eager or 0.0, compiled, r["idea_id"],
                              json.loads(r["parent_ids"]), r["ranked_ms"], floor))
        return out

    def best(self) -> Member | None:
        m = self.members()
        return m[0] if m else None

    def ranked_ms(self, candidate_id: str) -> float | None:
        """The time a kernel of this run is ranked by; None unless it was judged correct here."""
        problem_id, device = self.key()
        row = self.conn.execute(
            f"""SELECT {ranked_time_sql()} FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id
                WHERE l.run_id=? AND l.candidate_id=? AND e.status='correct' AND e.problem_id=? AND e.device=?""",
            (self.run_id, candidate_id, problem_id, device)).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def speedup(self, candidate_id: str, base: Baseline | None = None) -> float | None:
        """A correct kernel's speedup vs eager against the run's pooled baseline (or ``base``)."""
        base = self.baseline() if base is None else base
        return base.speedups(self.ranked_ms(candidate_id))[0]

    def figure(self, candidate_id: str, base: Baseline | None = None) -> tuple[float | None, float | None]:
        """The speedups (vs eager, vs torch.compile) that every report shows for a correct kernel
        of the run (live progress, `show`'s table and best line, `best`): its passing
        confirmation's own A/B figure where it has one (evaluator/confirm.py), else its ranked
        time against the run's pooled baseline (or ``base``). Ranking itself goes by time."""
        ms = self.ranked_ms(candidate_id)
        if ms is None:
            return None, None
        conf = self.archive.confirmation(candidate_id, self.key()[1])
        if conf is not None and conf.get("ok") and conf.get("speedup_vs_eager") is not None:
            return conf["speedup_vs_eager"], conf.get("speedup_vs_compile")
        return (self.baseline() if base is None else base).speedups(ms)

    def parent_uses(self) -> dict[str, int]:
        """How often each candidate has been a parent in this run (evolve's over-use penalty)."""
        uses: dict[str, int] = {}
        for (raw,) in self.conn.execute("SELECT parent_ids FROM lineage WHERE run_id=?", (self.run_id,)):
            for p in json.loads(raw):
                uses[p] = uses.get(p, 0) + 1
        return uses
