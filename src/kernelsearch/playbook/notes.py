"""The playbook's notes: Markdown files with a small front-matter, shipped as package data.

Front-matter (between `---` lines): `id`, `title`, `tags` and `backends` (comma-separated),
and the note's exemplar kernel: `exemplar` (a file stem under `seedbank/exemplars/`) and
`exemplar_problem` (the problem it solves; see `playbook.exemplars`). Notes are read with
importlib.resources, so an installed wheel has them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kernelsearch.playbook.exemplars import Exemplar, exemplar_of

# "on": notes, their exemplars cited, and in prompts that ask for code the source of the first
# exemplar written for another problem than the searched one; "notes": the same without any exemplar source; "off": nothing
MODES = ("on", "notes", "off")


@dataclass(frozen=True)
class Note:
    id: str
    title: str
    tags: frozenset[str]
    backends: frozenset[str]
    body: str
    exemplar: str = ""  # seedbank/exemplars/<exemplar>.py
    exemplar_problem: str = ""


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

    if bool(meta.get("exemplar")) != bool(meta.get("exemplar_problem")):
        raise ValueError(f"{name}: exemplar and exemplar_problem go together")
    return Note(meta["id"], meta["title"], split(meta["tags"]), split(meta["backends"]), body.strip(),
                meta.get("exemplar", ""), meta.get("exemplar_problem", ""))


@cache
def load_notes() -> dict[str, Note]:
    """Every built-in note by id, in file-name order."""
    root = resources.files("kernelsearch.playbook") / "notes"
    notes = [parse(f.read_text(encoding="utf-8"), f.name)
             for f in sorted(root.iterdir(), key=lambda f: f.name) if f.name.endswith(".md")]
    return {n.id: n for n in notes}


# An exemplar's source goes into a prompt that asks for code when it is at most
# this long (the longest, the wgmma GEMM, is ~16.5k characters, ~5k tokens); the others are cited.
EXEMPLAR_CHARS = 18_000


def render(choices: list[Any], code: bool = False, problem: str = "") -> str:
    """The prompt section for the chosen notes (``Choice``s), ending in a blank line; empty
    when there are none, so a template's ``$playbook`` (written just before the next heading)
    then adds nothing. Each note cites its exemplar kernel; with ``code`` (prompts that ask for
    a kernel: implement, refine, crossover) the first exemplar written for another problem than
    ``problem`` comes with its source: an exemplar of the searched problem itself is a finished
    answer, and a search that is handed it measures copying, not search."""
    if not choices:
        return ""
    parts = ["## Technique notes (our playbook: use them where they fit, mind the pitfalls)"]
    shown = False
    for c in choices:
        part = f"### {c.note.title}\n\n_Why here: {c.reason}._\n\n{c.note.body}"
        ex = exemplar_of(c.note)
        if ex is not None:
            cite = f"**Exemplar:** `seedbank/exemplars/{ex.name}.py`, a minimal kernel of ours for the problem `{ex.problem}`"
            source = ex.source() if code and not shown and ex.problem != problem else ""
            if source and len(source) <= EXEMPLAR_CHARS:
                shown = True
                ticks = "````" if "```" in source else "```"
                part += (f"\n\n{cite}; its source (written for that problem: adapt it, do not assume the "
                         f"shapes or dtypes match yours):\n\n{ticks}python\n{source.rstrip()}\n{ticks}")
            else:
                part += f"\n\n{cite}."
        parts.append(part)
    return "\n\n".join(parts) + "\n\n"


def exemplars() -> list[Exemplar]:
    """Every note's exemplar, in the notes' order."""
    return [e for n in load_notes().values() if (e := exemplar_of(n)) is not None]
