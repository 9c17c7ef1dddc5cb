"""Response cache keyed by `LLMRequest.key()`: re-runs cost nothing and give the same answers.

The key already holds `sample_index` for temperature > 0, so best-of-N sampling gets N
distinct entries. `SQLiteCache` is one file shared safely by processes and threads (WAL
journal, a busy timeout, a fresh connection per operation); the first answer stored for a key
wins, so everyone who read it keeps seeing the same one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Protocol

from kernelsearch.archive.db import enable_wal
from kernelsearch.llm.base import LLMRequest, LLMResponse

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    created REAL NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    request TEXT NOT NULL
)
"""


class ResponseCache(Protocol):
    def get(self, key: str) -> LLMResponse | None: ...

    def put(self, key: str, request: LLMRequest, response: LLMResponse) -> None: ...


def _stored(response: LLMResponse) -> LLMResponse:
    """What to keep: the answer as first received, not this call's cache flags."""
    d = response.to_dict()
    d["cached"] = False
    return LLMResponse.from_dict(d)


class MemoryCache:
    """In-process cache, for tests and one-shot runs."""

    def __init__(self) -> None:
        self._data: dict[str, LLMResponse] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> LLMResponse | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, request: LLMRequest, response: LLMResponse) -> None:
        with self._lock:
            self._data.setdefault(key, _stored(response))

    def __len__(self) -> int:
        return len(self._data)


class SQLiteCache:
    def __init__(self, path: str | os.PathLike[str], timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db:
            enable_wal(db, self.timeout)  # retried: processes may create the file together
            with db:
                db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout)
        db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: no corruption, fewer fsyncs
        return db

    def get(self, key: str) -> LLMResponse | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return LLMResponse.from_dict(json.loads(row[0])) if row else None

    def put(self, key: str, request: LLMRequest, response: LLMResponse) -> None:
        row = (
            key,
            time.time(),
            response.provider,
            response.model or request.model,
            json.dumps(_stored(response).to_dict(), ensure_ascii=False),
            json.dumps(request.to_dict(), ensure_ascii=False),
        )
        with closing(self._connect()) as db, db:
            db.execute("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?)", row)

    def __len__(self) -> int:
        with closing(self._connect()) as db:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
