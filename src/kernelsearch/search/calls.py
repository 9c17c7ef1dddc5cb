"""The run's `llm_calls` table, used as the LLM client's response cache.

Every answer is committed here the moment it arrives (from the client's worker threads, hence
a short-lived connection per operation), before any candidate is made of it. On resume the
same prompt is rebuilt from the stored plan, finds its answer here, and the provider is not
asked again: nothing paid for is lost and nothing is asked twice.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from kernelsearch.llm.base import LLMRequest, LLMResponse, Usage


def playbook_json(request: LLMRequest) -> str | None:
    """The notes the proposer put into this request's prompt (its metadata), as stored."""
    notes = request.metadata.get("playbook")
    return None if notes is None else json.dumps(notes)


class RunCallLog:
    """A `ResponseCache` over one run's rows of `llm_calls` (keyed by run and request key)."""

    def __init__(self, db_path: str | Path, run_id: str, timeout: float = 60.0) -> None:
        self.db_path = Path(db_path)
        self.run_id = run_id
        self.timeout = timeout

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=self.timeout)
        db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def get(self, key: str) -> LLMResponse | None:
        with closing(self._connect()) as db:
            row = db.execute(
                """SELECT answer, input_tokens, output_tokens, latency_s, cost_usd, provider, model, finish_reason
                   FROM llm_calls WHERE run_id=? AND request_key=? AND answer IS NOT NULL""",
                (self.run_id, key),
            ).fetchone()
        if row is None:
            return None
        return LLMResponse(content=row[0], usage=Usage(row[1], row[2]), latency_s=row[3] or 0.0, cost_usd=row[4],
                           provider=row[5] or "", model=row[6] or "", request_id=key, finish_reason=row[7])

    def put(self, key: str, request: LLMRequest, response: LLMResponse) -> None:
        meta, now = request.metadata, time.time()
        row = (
            self.run_id, meta.get("round"), meta.get("slot"), meta.get("purpose"), key,
            json.dumps(request.to_dict(), ensure_ascii=False), response.content, response.finish_reason,
            response.usage.input_tokens, response.usage.output_tokens, response.cost_usd, response.latency_s,
            response.provider, response.model or request.model, "answered", now, now, playbook_json(request),
        )
        with closing(self._connect()) as db, db:
            db.execute(
                """INSERT INTO llm_calls(run_id, round, slot, purpose, request_key, request, answer, finish_reason,
                       input_tokens, output_tokens, cost_usd, latency_s, provider, model, outcome, created_at, updated_at,
                       playbook)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(run_id, request_key) DO UPDATE SET answer=excluded.answer,
                       finish_reason=excluded.finish_reason, input_tokens=excluded.input_tokens,
                       output_tokens=excluded.output_tokens, cost_usd=excluded.cost_usd,
                       latency_s=excluded.latency_s, provider=excluded.provider, model=excluded.model,
                       outcome='answered', note='', updated_at=excluded.updated_at
                   WHERE llm_calls.answer IS NULL""",
                row,
            )
