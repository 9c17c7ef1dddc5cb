"""The code blocks of the README and docs/*.md, read with sybil, and how each one is run.

A fenced block is code by its language: `python` runs as a Python script, `bash` runs as a
bash script (`set -euo pipefail`), `console` runs each `$ ` line and compares what follows it
with what the command printed. A `text` block (or one with no language) that directly follows a
code block, with only blank lines between, is that block's printed output; any other text,
json, jsonl or bibtex block is not code. Every block runs alone, in a fresh directory that
links the repository's tracked top-level entries (so `tests/data/...` resolves as from the
repository root while `runs/...` it writes stays out of the checkout), with the checkout's
`src` on PYTHONPATH and `kernelsearch` meaning `python -m kernelsearch.cli.main`.

sybil's `<!-- skip: next "reason" -->` (or `skip: start` ... `skip: end`) before a block skips
it with that reason in pytest's output; the comment is invisible in the rendered page.

Output is compared with a tolerant match (`output_mismatch`): every number matches any number,
runs of whitespace and of one box-drawing character count as one, a line `...` stands for any
lines (none included) and `...` inside a line for any text, as in doctest's ELLIPSIS.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Example, Region
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = {"python": "python", "bash": "bash", "console": "console"}
OUTPUT = {"text", ""}
NOT_CODE = OUTPUT | {"json", "jsonl", "bibtex"}
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    """One code block: its language, source, 1-based line of the opening fence, and the output
    block after it (None: no printed output is claimed)."""

    language: str
    source: str
    line: int
    expected: str | None


def fenced_blocks(document: Document) -> list[tuple[Region, str]]:
    """Every fenced block of a document with its language, in document order."""
    lexer = FencedCodeBlockLexer(language=r"[\w+-]*")
    return sorted(((r, r.lexemes["language"]) for r in lexer(document)), key=lambda x: x[0].start)


class CodeBlockParser:
    """Yields a region per code block, carrying a `Block`; the output block after it is read
    into the Block, not made a region of its own."""

    def __init__(self, run: Callable[[Example], str | None]) -> None:
        self.run = run

    def __call__(self, document: Document):
        blocks = fenced_blocks(document)
        for i, (region, language) in enumerate(blocks):
            if language not in CODE:
                continue
            expected = None
            if i + 1 < len(blocks):
                after, after_language = blocks[i + 1]
                if after_language in OUTPUT and not document.text[region.end:after.start].strip():
                    expected = str(after.lexemes["source"])
            line = document.text.count("\n", 0, region.start) + 1
            region.parsed = Block(language, str(region.lexemes["source"]), line, expected)
            region.evaluator = self.run
            yield region


def parse(path: Path, run: Callable[[Example], str | None]) -> Document:
    """The document with its code-block and skip regions."""
    return Document.parse(str(path), CodeBlockParser(run), SkipParser())


def blocks_of(path: Path) -> list[Block]:
    return [ex.parsed for ex in parse(path, lambda ex: None) if isinstance(ex.parsed, Block)]


def skip_directives(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, action, reason) of each sybil skip directive of a document."""
    return [(ex.line, *ex.parsed) for ex in parse(path, lambda ex: None)
            if not isinstance(ex.parsed, Block)]


# -- running a block --------------------------------------------------------------------------

SHELL_PRELUDE = 'kernelsearch() { "$KS_PYTHON" -m kernelsearch.cli.main "$@"; }\n'


def sandbox(tmp: Path) -> Path:
    """A directory that looks like the repository root for reading (links to its tracked
    top-level entries) and keeps what a block writes."""
    try:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True,
                               text=True, check=True).stdout.split()
        top = sorted({n.split("/")[0] for n in names})
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: all but .git
        top = sorted(p.name for p in ROOT.iterdir() if p.name != ".git")
    for name in top:
        if (ROOT / name).exists():
            (tmp / name).symlink_to(ROOT / name)
    return tmp


def block_env() -> dict[str, str]:
    env = {**os.environ, "KS_PYTHON": sys.executable}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_block(block: Block, where: Path, doc_name: str) -> str | None:
    """Runs one block in `where`; None when it ran and printed what the page says, else why not."""
    if block.language == "console":
        return _run_console(block, where)
    if block.language == "python":
        # padded so that a traceback's line numbers are the page's
        script = where / f"{doc_name}-{block.line}.py"
        script.write_text("\n" * block.line + block.source)
        cmd = [sys.executable, str(script)]
    else:
        script = where / f"{doc_name}-{block.line}.sh"
        script.write_text("set -euo pipefail\n" + SHELL_PRELUDE + block.source)
        cmd = ["bash", str(script)]
    out = subprocess.run(cmd, cwd=where, env=block_env(), capture_output=True, text=True,
                         timeout=BLOCK_TIMEOUT_S)
    if out.returncode != 0:
        return f"exit status {out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    if block.expected is not None:
        return output_mismatch(block.expected, out.stdout)
    return None


def console_commands(source: str) -> list[tuple[str, str]]:
    """(command, expected output) for each `$ ` line of a console block; a command's line ending
    in a backslash goes on to the next line."""
    pairs: list[tuple[str, list[str]]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            pairs.append((cmd, []))
        elif pairs:
            pairs[-1][1].append(line)
        i += 1
    return [(cmd, "\n".join(out)) for cmd, out in pairs]


def _run_console(block: Block, where: Path) -> str | None:
    commands = console_commands(block.source)
    if not commands:
        return "a console block without a `$ ` command"
    for cmd, expected in commands:
        out = subprocess.run(["bash", "-c", "set -euo pipefail\n" + SHELL_PRELUDE + cmd], cwd=where,
                             env=block_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=BLOCK_TIMEOUT_S)
        if out.returncode != 0:
            return f"`{cmd}`: exit status {out.returncode}\n{out.stdout}"
        why = output_mismatch(expected, out.stdout)
        if why:
            return f"`{cmd}`: {why}"
    return None


# -- the tolerant match -----------------------------------------------------------------------

NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?(?:\d+(?:[.,]\d+)*|\.\d+)(?:[eE][-+]?\d+)?")
BOX_RUN = re.compile(r"([\u2500-\u257f])\1+")
ELLIPSIS = "..."


def normalise(line: str) -> str:
    """A line with each number as N and each run of spaces or of one box character as one."""
    line = NUMBER.sub("N", line)
    line = BOX_RUN.sub(r"\1", line)
    return " ".join(line.split())


def _line_pattern(expected: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in expected.split(ELLIPSIS)]
    return re.compile(".*".join(parts) + r"\Z", re.DOTALL)


def output_mismatch(expected: str, actual: str) -> str | None:
    """None when `actual` matches `expected` tolerantly (see the module's docstring), else a
    message naming the first expected line that found no match."""
    want = [normalise(x) for x in expected.splitlines() if x.strip()]
    got = [normalise(x) for x in actual.splitlines() if x.strip()]
    if _match(want, got):
        return None
    # the longest prefix of expected lines that matches, to point at the line that does not
    k = max(n for n in range(len(want) + 1) if _match([*want[:n], ELLIPSIS], got))
    return (f"printed output differs from the page at its line {k + 1}: expected\n"
            f"  {want[k] if k < len(want) else '(end of output)'}\n"
            f"--- printed (normalised)\n" + "\n".join(got))


def _match(want: list[str], got: list[str]) -> bool:
    """Line-wise match with `...` lines as wildcards over any number of lines."""
    memo: dict[tuple[int, int], bool] = {}

    def m(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[i, j]
        if i == len(want):
            r = j == len(got)
        elif want[i] == ELLIPSIS:
            r = any(m(i + 1, k) for k in range(j, len(got) + 1))
        else:
            r = j < len(got) and bool(_line_pattern(want[i]).match(got[j])) and m(i + 1, j + 1)
        memo[i, j] = r
        return r

    return m(0, 0)


def evaluate_block(doc: Path, line: int, where: Path) -> None:
    """Runs the code block of `doc` whose fence is at `line`, after evaluating the page's skip
    directives before it in order (the page's other blocks are not run): raises SybilFailure
    when it fails, unittest.SkipTest when a directive skips it, LookupError when there is none."""

    def run(example: Example) -> str | None:
        if example.parsed.line != line:
            return None  # another block of the page: its own test runs it
        return run_block(example.parsed, where, doc.name)

    for example in parse(doc, run):
        mine = isinstance(example.parsed, Block) and example.parsed.line == line
        try:
            example.evaluate()
        except unittest.SkipTest:
            if mine:
                raise
        if mine:
            return
    raise LookupError(f"no code block at line {line} of {doc}")
