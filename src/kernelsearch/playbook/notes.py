"""The playbook's notes: Markdown files with a small front-matter, shipped as package data.

Front-matter (between `---` lines): `id`, `title`, `tags` and `backends` (comma-separated).
Notes are read with importlib.resources, so an installed wheel has them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

MODES = ("on", "off")


@dataclass(frozen=True)
class Note:
    id: str
    title: str
    tags: frozenset[str]
    backends: frozenset[str]
    body: str


def parse(text: str, name: str = "<note>") -> Note:
    """One note file; a missing front-matter field is an error (a note must say where it fits)."""
    head, sep, body = text.removeprefix("---\n").partition("\n---\n")
    if not text.startswith("---\n") or not sep:
        raise ValueError(f"{name}: a playbook note starts with a --- front-matter block")
    meta = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip()
    missing = [k for k in ("id", "title", "tags", "backends") if not meta.get(k)]
    if missing:
        raise ValueError(f"{name}: front-matter lacks {', '.join(missing)}")

    def split(v: str) -> frozenset[str]:
        return frozenset(t.strip() for t in v.split(",") if t.strip())

    return Note(meta["id"], meta["title"], split(meta["tags"]), split(meta["backends"]), body.strip())


@cache
def load_notes() -> dict[str, Note]:
    """Every built-in note by id, in file-name order."""
    root = resources.files("kernelsearch.playbook") / "notes"
    notes = [parse(f.read_text(encoding="utf-8"), f.name)
             for f in sorted(root.iterdir(), key=lambda f: f.name) if f.name.endswith(".md")]
    return {n.id: n for n in notes}


def render(choices: list[Any]) -> str:
    """The prompt section for the chosen notes (``Choice``s), ending in a blank line; empty
    when there are none, so a template's ``$playbook`` (written just before the next heading)
    then adds nothing."""
    if not choices:
        return ""
    parts = ["## Technique notes (our playbook: use them where they fit, mind the pitfalls)"]
    for c in choices:
        parts.append(f"### {c.note.title}\n\n_Why here: {c.reason}._\n\n{c.note.body}")
    return "\n\n".join(parts) + "\n\n"
