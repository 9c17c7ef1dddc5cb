"""Read a release into entries: a directory of KernelBench-style pairs, or JSON / JSONL rows
mapped by ``--fields``.

Selected rows are materialised as files (``STATE/problems/NAME.py``, ``STATE/solutions/NAME.py``)
because the evaluator loads problems and candidates from files. A row that cannot be read
becomes an entry with an error (class ``bad_row`` or ``no_kernel``) instead of stopping the
run: a release of thousands of rows has a few broken ones, and the audit says which.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIELD_KEYS = ("name", "ref", "kernel", "claimed", "claimed_compile")
REQUIRED_KEYS = ("name", "ref", "kernel")
DEFAULT_FIELDS = {"name": "name", "ref": "ref", "kernel": "kernel", "claimed": "claimed",
                  "claimed_compile": "claimed_compile"}
# a directory source may carry its claims beside the pairs: {"NAME": 2.5} or {"NAME": {"eager": 2.5, "compile": 1.1}}
CLAIMS_FILE = "claims.json"


class SourceError(ValueError):
    """The source as a whole cannot be read (not a directory or a JSON file, bad --fields)."""


@dataclass
class Entry:
    """One kernel to audit. ``error`` set: not evaluated, ``error_class`` says why."""

    name: str
    problem: Path | None = None
    kernel: Path | None = None
    claimed: float | None = None
    claimed_compile: float | None = None
    error: str = ""
    error_class: str = ""
    # a row's sources, written to files by ``materialise`` once the entries are selected
    texts: tuple[str, str] | None = None


def parse_fields(spec: str | None) -> dict[str, list[str]]:
    """``name=level_id+task_id,ref=ref_code,...`` -> {"name": ["level_id", "task_id"], ...};
    keys not given keep their default field names."""
    out = {k: [v] for k, v in DEFAULT_FIELDS.items()}
    for part in filter(None, (s.strip() for s in (spec or "").split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in FIELD_KEYS or not value.strip():
            raise SourceError(f"--fields: expected KEY=FIELD[+FIELD...] with KEY one of {', '.join(FIELD_KEYS)}, "
                              f"not {part!r}")
        names = [v.strip() for v in value.split("+")]
        if any(not n for n in names) or (key != "name" and len(names) > 1):
            raise SourceError(f"--fields: {part!r}: only name may join several fields with '+'")
        out[key] = names
    return out


def safe_name(text: str) -> str:
    """A file-safe name: letters, digits, ``_ - .``; anything else becomes ``_``."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", text.strip()).strip(".")
    return name[:120] or "_"


def read_source(source: Path, fields: str | None) -> list[Entry]:
    """The entries of ``source`` in its own order (rows' sources held until ``materialise``)."""
    if source.is_dir():
        return read_directory(source)
    if not source.is_file():
        raise SourceError(f"{source}: not a directory of problems/ and solutions/, nor a JSON or JSONL file")
    return read_rows(_rows(source), parse_fields(fields))


def read_directory(root: Path) -> list[Entry]:
    """``problems/NAME.py`` paired with ``solutions/NAME.py`` (no solution: ``no_kernel``; a
    solution with no problem: ``bad_row``); claims from ``claims.json`` where there is one."""
    probs, sols = root / "problems", root / "solutions"
    if not probs.is_dir() or not sols.is_dir():
        raise SourceError(f"{root}: a directory source holds problems/NAME.py and solutions/NAME.py")
    claims: dict[str, Any] = {}
    if (root / CLAIMS_FILE).is_file():
        try:
            claims = json.loads((root / CLAIMS_FILE).read_text())
        except ValueError as e:
            raise SourceError(f"{root / CLAIMS_FILE}: not JSON: {e}") from e
        if not isinstance(claims, dict):
            raise SourceError(f"{root / CLAIMS_FILE}: expected an object of name -> claimed speedup")
    names = sorted({p.stem for p in probs.glob("*.py")} | {p.stem for p in sols.glob("*.py")})
    out = []
    for name in names:
        e = Entry(name, probs / f"{name}.py", sols / f"{name}.py")
        claim = claims.get(name)
        eager, comp = (claim.get("eager"), claim.get("compile")) if isinstance(claim, dict) else (claim, None)
        e.claimed, why = _number(eager, "claims.json")
        e.claimed_compile, why2 = _number(comp, "claims.json")
        if not e.problem.is_file():
            e.problem, e.error, e.error_class = None, f"solutions/{name}.py has no problems/{name}.py", "bad_row"
        elif not e.kernel.is_file():
            e.kernel, e.error, e.error_class = None, f"no solutions/{name}.py", "no_kernel"
        elif why or why2:
            e.error, e.error_class = why or why2, "bad_row"
        out.append(e)
    return out


def _rows(path: Path) -> list[Any]:
    """A JSON array, a JSON object holding one list of rows, or JSONL (one object a line; a line
    that is not JSON stays a string, reported as a bad row)."""
    text = path.read_text()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
        rows: list[Any] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                rows.append(f"line {n} is not valid JSON: {e}")
        return rows
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        lists = [v for v in doc.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
        if all(k in doc for k in ("ref", "kernel")) or len(lists) == 0:
            return [doc]  # one JSONL line, or one row on its own
        raise SourceError(f"{path}: a JSON object with {len(lists)} lists; expected one list of rows")
    raise SourceError(f"{path}: expected JSON rows (an array, an object holding a list, or JSONL)")


def read_rows(rows: list[Any], fields: dict[str, list[str]]) -> list[Entry]:
    """Entries from rows, in order; a name taken by an earlier row makes a ``bad_row``."""
    out: list[Entry] = []
    seen: set[str] = set()
    for i, row in enumerate(rows, 1):
        e = _entry(i, row, fields)
        if e.name in seen:
            e.error, e.error_class, e.name = f"row {i}: the name {e.name!r} is taken by an earlier row", "bad_row", \
                f"{e.name}__row{i}"
        seen.add(e.name)
        if not e.error:
            e.texts = (row_text(row, fields["ref"][0]), row_text(row, fields["kernel"][0]))
        out.append(e)
    return out


def materialise(entries: list[Entry], state: Path) -> list[Entry]:
    """Write the selected rows' sources to ``state/problems`` and ``state/solutions``."""
    for e in entries:
        if e.texts is not None and not e.error:
            e.problem = _write(state / "problems" / f"{e.name}.py", e.texts[0])
            e.kernel = _write(state / "solutions" / f"{e.name}.py", e.texts[1])
    return entries


def _entry(i: int, row: Any, fields: dict[str, list[str]]) -> Entry:
    if not isinstance(row, dict):
        why = row if isinstance(row, str) else f"row {i} is a {type(row).__name__}, not an object"
        return Entry(f"row{i}", error=why, error_class="bad_row")
    missing = [f for k in REQUIRED_KEYS for f in fields[k] if f not in row]
    parts = [row.get(f) for f in fields["name"]]
    name = safe_name("_".join(str(p) for p in parts if p is not None)) if all(
        isinstance(p, (str, int)) and not isinstance(p, bool) for p in parts) else f"row{i}"
    e = Entry(name)
    if missing:
        e.error, e.error_class = f"row {i}: missing field(s) {', '.join(missing)}", "bad_row"
        return e
    if row[fields["kernel"][0]] is None:
        e.error, e.error_class = f"row {i}: field {fields['kernel'][0]} is null (no kernel published)", "no_kernel"
        return e
    for key in ("ref", "kernel"):
        f = fields[key][0]
        if not isinstance(row[f], str):
            e.error, e.error_class = f"row {i}: field {f} is {type(row[f]).__name__}, not a string", "bad_row"
            return e
    if name in ("_", ""):
        e.error, e.error_class = f"row {i}: empty name", "bad_row"
        return e
    e.claimed, why = _number(row.get(fields["claimed"][0]), fields["claimed"][0])
    e.claimed_compile, why2 = _number(row.get(fields["claimed_compile"][0]), fields["claimed_compile"][0])
    if why or why2:
        e.error, e.error_class = f"row {i}: {why or why2}", "bad_row"
    elif not row[fields["ref"][0]].strip():
        e.error, e.error_class = f"row {i}: field {fields['ref'][0]} is empty (no problem)", "bad_row"
    elif not row[fields["kernel"][0]].strip():
        e.error, e.error_class = f"row {i}: field {fields['kernel'][0]} is empty (no kernel published)", "no_kernel"
    return e


def row_text(row: dict, field: str) -> str:
    text = row[field]
    return text if text.endswith("\n") else text + "\n"


def _number(value: Any, field: str) -> tuple[float | None, str]:
    """A claimed speedup (None: no claim), or why it is not a number."""
    if value is None or value == "":
        return None, ""
    if isinstance(value, bool):
        return None, f"field {field} is a bool, not a speedup"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None, f"field {field} is {value!r}, not a number"
    return (x, "") if x == x else (None, "")


def _write(path: Path, text: str) -> Path:
    """Write only when the content changed (a rerun keeps files and their times)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def select(entries: list[Entry], only: list[str] | None = None, sample: int | None = None, seed: int = 0,
           limit: int | None = None) -> list[Entry]:
    """``only`` these names, then a reproducible random ``sample`` (kept in source order), then
    the first ``limit``."""
    if only:
        wanted = set(only)
        entries = [e for e in entries if e.name in wanted]
    if sample is not None and sample < len(entries):
        keep = set(random.Random(seed).sample(range(len(entries)), sample))
        entries = [e for i, e in enumerate(entries) if i in keep]
    if limit is not None:
        entries = entries[:limit]
    return entries
