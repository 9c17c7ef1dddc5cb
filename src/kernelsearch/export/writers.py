"""Write exported rows as JSON Lines or Parquet.

Both formats carry the same columns (``rows.SCHEMA``). Parquet gets an explicit Arrow schema
so that files from different runs concatenate even when a column is null throughout one of
them. Files are written to a temporary name and renamed, so a killed export leaves no half file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelsearch.export.rows import LINEAGE_FIELDS, SCHEMA, Column

FORMATS = ("jsonl", "parquet")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


class ExportError(Exception):
    """A problem the user can fix (unknown format, pyarrow missing), said in one line."""


def format_for(path: str | Path, fmt: str | None = None) -> str:
    """The format named by ``fmt``, else by the file's suffix."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}; use jsonl or parquet")
        return fmt
    if str(path) == "-":
        return "jsonl"
    found = _SUFFIXES.get(Path(path).suffix.lower())
    if found is None:
        raise ExportError(f"{path}: cannot tell the format from the suffix; "
                          "name it .jsonl or .parquet, or pass --format jsonl|parquet")
    return found


def write(rows: Iterable[dict[str, Any]], path: str | Path, fmt: str | None = None) -> int:
    """Write ``rows`` to ``path`` (``-``: standard output, JSON Lines only); returns the count."""
    fmt = format_for(path, fmt)
    if fmt == "parquet":
        return write_parquet(rows, path)
    return write_jsonl(rows, path)


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    if str(path) == "-":
        return _jsonl_to(rows, sys.stdout)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        n = _jsonl_to(rows, f)
    os.replace(tmp, path)
    return n


def _jsonl_to(rows: Iterable[dict[str, Any]], f: Any) -> int:
    n = 0
    for row in rows:
        f.write(json.dumps({c.name: row.get(c.name) for c in SCHEMA}, ensure_ascii=False, allow_nan=False))
        f.write("\n")
        n += 1
    return n


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ExportError("writing Parquet needs pyarrow: pip install 'kernelsearch[export]' "
                          "(or write JSON Lines: -o FILE.jsonl)") from None
    return pa


def arrow_schema() -> Any:
    """The Arrow schema of ``SCHEMA``; lineage is a list of structs."""
    pa = _pyarrow()

    def typ(c: Column) -> Any:
        scalar = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
        if c.type in scalar:
            return scalar[c.type]
        if c.type == "list<string>":
            return pa.list_(pa.string())
        if c.type == "list<lineage>":
            return pa.list_(pa.struct([pa.field(f.name, typ(f)) for f in LINEAGE_FIELDS]))
        raise ValueError(f"column {c.name}: unknown type {c.type}")

    return pa.schema([pa.field(c.name, typ(c)) for c in SCHEMA])


def write_parquet(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    pa = _pyarrow()
    import pyarrow.parquet as pq

    if str(path) == "-":
        raise ExportError("Parquet cannot go to standard output; give a file name")
    schema = arrow_schema()
    data = [{c.name: row.get(c.name) for c in SCHEMA} for row in rows]
    table = pa.Table.from_pylist(data, schema=schema)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return len(data)
