"""SQLite archive. The only state: every printed number traces back to rows here.

WAL mode and one short transaction per write, so a process killed at any moment leaves the
file consistent and readers never block the writer. Later features add tables through
``MIGRATIONS``; a file written by an older version is upgraded on open.

An ``Archive`` may be shared by threads (the local executor's evaluation lanes write their
results as they finish): each thread gets its own connection to the file, and SQLite's
locking orders the writers. Any number of processes may open the same file at once, a fresh
one included: the WAL switch is retried, migrations run once (``_migrate``), rows that two
processes may both write are inserted idempotently, and writers wait up to
``BUSY_TIMEOUT_S`` for each other.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Baselines, EvalResult, TimingStats

MIGRATIONS: list[str] = [
    # 1: the evaluator's tables
    """
    CREATE TABLE problems (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, path TEXT, level INTEGER,
        source TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE TABLE candidates (
        id TEXT PRIMARY KEY, problem_id TEXT NOT NULL REFERENCES problems(id),
        backend TEXT NOT NULL, name TEXT, source TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        candidate_id TEXT NOT NULL REFERENCES candidates(id),
        problem_id TEXT NOT NULL REFERENCES problems(id),
        device TEXT NOT NULL, device_name TEXT, torch_version TEXT,
        status TEXT NOT NULL, reason TEXT NOT NULL,
        candidate_ms REAL, eager_ms REAL, compile_ms REAL,
        speedup_vs_eager REAL, speedup_vs_compile REAL,
        max_abs_error REAL, norm_error REAL, flags TEXT NOT NULL DEFAULT '[]',
        record TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE INDEX evaluations_by_candidate ON evaluations(candidate_id);
    CREATE INDEX evaluations_by_problem ON evaluations(problem_id, status);
    CREATE TABLE baselines (
        key TEXT PRIMARY KEY, problem_id TEXT NOT NULL, device TEXT NOT NULL,
        device_name TEXT, torch_version TEXT, eager TEXT, compile TEXT,
        compile_error TEXT, created_at REAL NOT NULL
    );
    """,
    # 2: the search loop (kernelsearch.search): runs, rounds, LLM calls, ideas, lineage.
    # Every step of a run is one committed row here, so a killed run resumes from these alone.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, problem_id TEXT NOT NULL REFERENCES problems(id),
        strategy TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL,
        stop_reason TEXT, stop_detail TEXT, elapsed_s REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, updated_at REAL NOT NULL
    );
    CREATE TABLE rounds (
        run_id TEXT NOT NULL REFERENCES runs(id), round INTEGER NOT NULL,
        kind TEXT NOT NULL, status TEXT NOT NULL, plan TEXT NOT NULL,
        best_candidate_id TEXT, best_speedup REAL,
        started_at REAL NOT NULL, proposed_at REAL, evaluated_at REAL,
        PRIMARY KEY (run_id, round)
    );
    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id), round INTEGER, slot INTEGER, purpose TEXT,
        request_key TEXT NOT NULL, request TEXT NOT NULL, answer TEXT, finish_reason TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL, latency_s REAL, provider TEXT, model TEXT,
        outcome TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', candidate_id TEXT,
        created_at REAL NOT NULL, updated_at REAL NOT NULL,
        UNIQUE (run_id, request_key)
    );
    CREATE INDEX llm_calls_by_round ON llm_calls(run_id, round);
    CREATE TABLE ideas (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id), round INTEGER NOT NULL,
        llm_call_id INTEGER NOT NULL REFERENCES llm_calls(id), idx INTEGER NOT NULL,
        text TEXT NOT NULL, family TEXT NOT NULL, parent_ids TEXT NOT NULL DEFAULT '[]',
        outcome TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
        UNIQUE (llm_call_id, idx)
    );
    CREATE TABLE lineage (
        run_id TEXT NOT NULL REFERENCES runs(id),
        candidate_id TEXT NOT NULL REFERENCES candidates(id),
        round INTEGER NOT NULL, origin TEXT NOT NULL, parent_ids TEXT NOT NULL DEFAULT '[]',
        idea_id INTEGER REFERENCES ideas(id), llm_call_id INTEGER REFERENCES llm_calls(id),
        model TEXT, status TEXT NOT NULL, evaluation_id INTEGER REFERENCES evaluations(id),
        created_at REAL NOT NULL, evaluated_at REAL,
        PRIMARY KEY (run_id, candidate_id)
    );
    CREATE INDEX lineage_by_round ON lineage(run_id, round, status);
    """,
    # 3: re-verification of winners; a failed one takes a kernel out of every ranking
    """
    CREATE TABLE verifications (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        candidate_id TEXT NOT NULL REFERENCES candidates(id),
        problem_id TEXT NOT NULL, device TEXT NOT NULL,
        ok INTEGER NOT NULL, reason TEXT NOT NULL, record TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE INDEX verifications_by_candidate ON verifications(candidate_id)
    """,
    # 4: dedup across runs (executors): the latest evaluation of a normalised source
    # (evaluator/screen/normalise.py) per problem, device and evaluation settings
    """
    CREATE TABLE dedup (
        norm_hash TEXT NOT NULL, problem_id TEXT NOT NULL, device TEXT NOT NULL, config_key TEXT NOT NULL,
        candidate_id TEXT NOT NULL, evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
        created_at REAL NOT NULL,
        PRIMARY KEY (norm_hash, problem_id, device, config_key)
    )
    """,
    # 5: confirmed timings (evaluator/confirm.py): the figure published for a kernel, pooled
    # over several fresh processes, each timed next to its eager baseline
    """
    CREATE TABLE confirmations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        candidate_id TEXT NOT NULL, problem_id TEXT NOT NULL, device TEXT NOT NULL,
        ok INTEGER NOT NULL, processes INTEGER NOT NULL, median_ms REAL, rel_spread REAL,
        eager_ms REAL, speedup_vs_eager REAL, speedup_vs_compile REAL,
        record TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE INDEX confirmations_by_candidate ON confirmations(candidate_id, device);
    """,
    # 6: which playbook notes (kernelsearch.playbook) went into each LLM call's prompt: JSON
    # [{"id", "reason"}]; NULL for calls made before the playbook or with it off
    """
    ALTER TABLE llm_calls ADD COLUMN playbook TEXT
    """,
    # 7: the verdict's code (records/codes.py): "" for a correct kernel; NULL for the rows an
    # older version wrote, whose reasons the audit classifies by phrase (audit/classify.py),
    # the only place phrase matching is left. No code is guessed into old rows: a stored code
    # is always one a check set
    """
    ALTER TABLE evaluations ADD COLUMN code TEXT
    """,
]


# How long a writer waits for another's transaction (SQLite's busy handler). Transactions here
# are one short statement or a few, so this is only reached by something stuck.
BUSY_TIMEOUT_S = 60.0


def enable_wal(conn: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Put the file in WAL mode (it stays so; later calls read the mode and change nothing).

    On a fresh file opened by several processes at once, the switch can fail at once with
    "database is locked": it must promote a lock the statement already holds, and SQLite
    answers BUSY there without calling the busy handler, since waiting could deadlock. So retry,
    with a short random back-off, until one of them has switched the file."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.002, 0.02))


class Archive:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread off only so close() may close every thread's connection; each
        # connection is used by the thread that opened it
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise sqlite3.ProgrammingError("the archive is closed")
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        """Bring the file up to the latest schema, once, however many processes open it at once.

        Each process that opens a fresh file reads version 0; were each to run the scripts, all
        but the first would fail ("table problems already exists"). So the version is read
        again inside one write transaction (BEGIN IMMEDIATE: the others wait for the lock, then
        see the work done and run nothing), and the scripts and the new version commit
        together, so a killed migration leaves the old schema, never half of a new one."""
        if self.schema_version() >= len(MIGRATIONS):
            return  # up to date: no write lock taken
        with self.tx() as c:
            version = int(c.execute("PRAGMA user_version").fetchone()[0])
            for script in MIGRATIONS[version:]:
                for stmt in filter(str.strip, script.split(";")):
                    c.execute(stmt)
            if version < len(MIGRATIONS):
                c.execute(f"PRAGMA user_version={len(MIGRATIONS)}")

    # -- writes -------------------------------------------------------------------------
    def add_problem(self, p: Problem) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO problems(id, name, path, level, source, created_at) VALUES (?,?,?,?,?,?)",
                (p.id, p.name, str(p.path), p.level, p.source, time.time()),
            )

    def add_candidate(self, cand: Candidate, problem: Problem) -> None:
        self.add_problem(problem)
        with self.tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO candidates(id, problem_id, backend, name, source, created_at) VALUES (?,?,?,?,?,?)",
                (cand.id, problem.id, cand.backend, cand.name, cand.source, time.time()),
            )

    def add_evaluation(self, r: EvalResult) -> int:
        with self.tx() as c:
            cur = c.execute(
                """INSERT INTO evaluations(candidate_id, problem_id, device, device_name, torch_version,
                   status, reason, candidate_ms, eager_ms, compile_ms, speedup_vs_eager, speedup_vs_compile,
                   max_abs_error, norm_error, flags, record, created_at, code)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    r.candidate_id, r.problem_id, r.device, r.device_name, r.torch_version,
                    r.status.value, r.reason, r.candidate_ms, r.eager_ms, r.compile_ms,
                    r.speedup_vs_eager, r.speedup_vs_compile, _finite(r.max_abs_error), _finite(r.norm_error),
                    json.dumps(r.flags), json.dumps(r.to_dict(), default=str), time.time(), r.code,
                ),
            )
            return int(cur.lastrowid)

    def put_baseline(self, key: str, problem_id: str, device: str, device_name: str, torch_version: str,
                     baselines: Baselines) -> Baselines | None:
        """Cache a problem's baselines; return the ones cached under ``key`` afterwards.

        The first complete entry stays: processes that measured the same baselines at the same
        time do not replace each other's, so every evaluation that reads the cache, now or
        later, gets the same ``torch.compile`` timing (the caller uses what this returns)."""
        eager, compiled, compile_error = baselines
        with self.tx() as c:
            c.execute(
                """INSERT INTO baselines(key, problem_id, device, device_name, torch_version,
                   eager, compile, compile_error, created_at) VALUES (?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(key) DO UPDATE SET device_name=excluded.device_name,
                   torch_version=excluded.torch_version, eager=excluded.eager,
                   compile=excluded.compile, compile_error=excluded.compile_error,
                   created_at=excluded.created_at WHERE baselines.eager IS NULL""",
                (key, problem_id, device, device_name, torch_version,
                 json.dumps(eager.to_dict()) if eager else None,
                 json.dumps(compiled.to_dict()) if compiled else None, compile_error, time.time()),
            )
            return self.get_baseline(key)

    def add_verification(self, candidate_id: str, problem_id: str, device: str, ok: bool, reason: str,
                         record: dict) -> int:
        with self.tx() as c:
            cur = c.execute(
                """INSERT INTO verifications(candidate_id, problem_id, device, ok, reason, record, created_at)
                   VALUES (?,?,?,?,?,?,?)""",
                (candidate_id, problem_id, device, int(ok), reason, json.dumps(record, default=str), time.time()),
            )
            return int(cur.lastrowid)

    def add_confirmation(self, candidate_id: str, problem_id: str, device: str, record: dict) -> int:
        """``record``: ``Confirmation.to_dict()``; the latest one for a kernel is its published figure."""
        with self.tx() as c:
            cur = c.execute(
                """INSERT INTO confirmations(candidate_id, problem_id, device, ok, processes, median_ms, rel_spread,
                   eager_ms, speedup_vs_eager, speedup_vs_compile, record, created_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                (candidate_id, problem_id, device, int(bool(record.get("ok"))), int(record.get("processes") or 0),
                 _finite(record.get("median_ms")), _finite(record.get("rel_spread")),
                 _finite(record.get("eager_median_ms")), _finite(record.get("speedup_vs_eager")),
                 _finite(record.get("speedup_vs_compile")), json.dumps(record, default=str), time.time()),
            )
            return int(cur.lastrowid)

    def confirmation(self, candidate_id: str, device: str) -> dict | None:
        """The latest confirmation record of a kernel on a device, or None."""
        row = self.conn.execute("SELECT record FROM confirmations WHERE candidate_id=? AND device=? "
                                "ORDER BY id DESC LIMIT 1", (candidate_id, device)).fetchone()
        return json.loads(row["record"]) if row else None

    def put_dedup(self, norm_hash: str, problem_id: str, device: str, config_key: str, candidate_id: str,
                  evaluation_id: int) -> None:
        """Remember which evaluation a normalised source got under these settings."""
        with self.tx() as c:
            c.execute(
                """INSERT OR REPLACE INTO dedup(norm_hash, problem_id, device, config_key, candidate_id,
                   evaluation_id, created_at) VALUES (?,?,?,?,?,?,?)""",
                (norm_hash, problem_id, device, config_key, candidate_id, evaluation_id, time.time()),
            )

    def find_dedup(self, norm_hash: str, problem_id: str, device: str, config_key: str) -> EvalResult | None:
        """An earlier result for the same normalised source and settings, or None."""
        row = self.conn.execute(
            """SELECT e.record FROM dedup d JOIN evaluations e ON e.id = d.evaluation_id
               WHERE d.norm_hash=? AND d.problem_id=? AND d.device=? AND d.config_key=?""",
            (norm_hash, problem_id, device, config_key)).fetchone()
        return EvalResult.from_dict(json.loads(row["record"])) if row else None

    def latest_evaluation_id(self, candidate_id: str, device: str) -> int | None:
        row = self.conn.execute("SELECT MAX(id) FROM evaluations WHERE candidate_id=? AND device=?",
                                (candidate_id, device)).fetchone()
        return row[0] if row and row[0] is not None else None

    def baselines(self, problem_id: str) -> dict[str, Baselines]:
        """Every cached baseline of a problem by key (shipped to remote workers, which have no archive)."""
        keys = [r["key"] for r in self.conn.execute("SELECT key FROM baselines WHERE problem_id=?", (problem_id,))]
        return {k: b for k in keys if (b := self.get_baseline(k)) is not None}

    def verification(self, candidate_id: str) -> tuple[bool, str] | None:
        """The latest re-verification of a candidate, if any: (ok, reason)."""
        row = self.conn.execute("SELECT ok, reason FROM verifications WHERE candidate_id=? ORDER BY id DESC LIMIT 1",
                                (candidate_id,)).fetchone()
        return (bool(row["ok"]), row["reason"]) if row else None

    # -- reads --------------------------------------------------------------------------
    def get_baseline(self, key: str) -> Baselines | None:
        row = self.conn.execute("SELECT eager, compile, compile_error FROM baselines WHERE key=?", (key,)).fetchone()
        if row is None or row["eager"] is None:
            return None
        load = lambda s: TimingStats.from_dict(json.loads(s)) if s else None  # noqa: E731
        return Baselines(load(row["eager"]), load(row["compile"]), row["compile_error"] or "")

    def evaluations(self, problem_id: str | None = None) -> list[EvalResult]:
        q, args = "SELECT record FROM evaluations", ()
        if problem_id:
            q, args = q + " WHERE problem_id=?", (problem_id,)
        return [EvalResult.from_dict(json.loads(r["record"])) for r in self.conn.execute(q + " ORDER BY id", args)]

    def count(self, table: str) -> int:
        if table not in ("problems", "candidates", "evaluations", "baselines", "verifications", "dedup"):
            raise ValueError(table)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def integrity_ok(self) -> bool:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _finite(x: float | None) -> float | None:
    if x is None or x != x or x in (float("inf"), float("-inf")):
        return None
    return x
