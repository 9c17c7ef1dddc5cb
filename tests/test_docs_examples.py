"""Every code block of the README and docs/*.md runs, verbatim, and prints what the page says
(tests/docs_blocks.py says how each kind of block runs and how output is matched).

One test per block, so that pytest-xdist may spread them: each test reads its page with sybil
and evaluates the page's skip directives in order up to its own block, running only that block.
A block that needs a GPU, an API key, a network or more than CI's time is marked with sybil's
`<!-- skip: next "reason" -->` and shows as skipped with that reason.
"""

from __future__ import annotations

import os
import unittest
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # in CI a missing sybil fails the run (it is in the dev extra)
    pytest.importorskip("sybil", reason="the docs tests need sybil (pip install -e '.[dev]')")

from docs_blocks import (
    CODE,
    DOCUMENTS,
    NOT_CODE,
    ROOT,
    Block,
    console_commands,
    evaluate_block,
    fenced_blocks,
    output_mismatch,
    parse,
    sandbox,
    skip_directives,
)
from sybil import Document
from sybil.example import SybilFailure

from kernelsearch.cli.main import build_parser

CASES = [(doc, block.line) for doc in DOCUMENTS for block in
         (ex.parsed for ex in parse(doc, lambda ex: None)) if isinstance(block, Block)]


def _id(case: tuple[Path, int]) -> str:
    return f"{case[0].relative_to(ROOT)}:{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_block_runs_as_the_page_says(case, tmp_path):
    doc, line = case
    try:
        evaluate_block(doc, line, sandbox(tmp_path))
    except unittest.SkipTest as skipped:
        pytest.skip(f"{_id(case)}: {skipped}")


def test_readme_examples_are_not_skipped():
    """The README's Python example (with the output it shows) and its console example run."""
    readme = ROOT / "README.md"
    skipped = {ex.parsed.line for ex in _skipped_examples(readme)}
    blocks = [ex.parsed for ex in parse(readme, lambda ex: None) if isinstance(ex.parsed, Block)]
    running = [b for b in blocks if b.line not in skipped]
    assert {"python", "console"} <= {b.language for b in running}
    assert all(b.expected for b in running if b.language == "python"), "shows what it prints"


def _skipped_examples(doc: Path) -> list:
    """The code-block examples of a page that its skip directives skip."""
    out = []
    for example in parse(doc, lambda ex: None):
        try:
            example.evaluate()
        except unittest.SkipTest:
            out.append(example)
    return out


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_every_fenced_block_is_code_or_known_text(doc):
    """A block in a language this runner does not know would go untested without a word."""
    document = Document(doc.read_text(), str(doc))
    unknown = {lang for _, lang in fenced_blocks(document)} - set(CODE) - NOT_CODE
    assert not unknown, f"{doc.name}: blocks in {sorted(unknown)}: add them to docs_blocks.CODE or NOT_CODE"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_every_skip_says_why(doc):
    for line, action, reason in skip_directives(doc):
        if action in ("next", "start"):
            assert reason and isinstance(eval(reason, {}), str) and eval(reason, {}).strip(), (
                f"{doc.name}:{line}: `skip: {action}` needs a quoted reason")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_skipped_kernelsearch_commands_still_parse(doc):
    """A skipped block is not run, but its `kernelsearch` commands must still be ones the CLI
    accepts (a renamed flag shows up here)."""
    parser = build_parser()
    for block in (ex.parsed for ex in parse(doc, lambda ex: None)):
        if not isinstance(block, Block) or block.language == "python":
            continue
        for cmd in _kernelsearch_commands(block):
            if "..." in cmd:
                continue  # an elided command line
            try:
                parser.parse_args(_split(cmd)[1:])
            except SystemExit as e:
                pytest.fail(f"{doc.name}:{block.line}: `{cmd}` does not parse (exit {e.code})")


def _split(cmd: str) -> list[str]:
    import shlex

    words = shlex.split(cmd, comments=True)
    for stop in ("&&", "||", ";", "|", ">"):
        if stop in words:
            words = words[:words.index(stop)]
    return words


def _kernelsearch_commands(block: Block) -> list[str]:
    if block.language == "console":
        lines = [cmd for cmd, _ in console_commands(block.source)]
    else:
        lines, cur = [], ""
        for raw in block.source.splitlines():
            cur += raw.rstrip("\\").strip() + " " if raw.rstrip().endswith("\\") else raw.strip()
            if not raw.rstrip().endswith("\\"):
                lines.append(cur)
                cur = ""
    out = []
    for line in lines:
        for part in line.split("&&"):
            part = part.strip()
            if part.startswith("kernelsearch "):
                out.append(part)
    return out


# -- the tolerant match itself ----------------------------------------------------------------

def test_match_ignores_numbers_and_table_widths():
    page = "status: correct  5 checks passed, 0.83x vs eager\n┏━━━┳━━┓\n│ eager │ 1.188 ±12% │"
    printed = "status: correct  9 checks passed, 1.20x vs eager\n┏━━━━━━┳━━━━━┓\n│ eager    │ 10.5 ±3%     │"
    assert output_mismatch(page, printed) is None


def test_match_fails_on_other_words_and_missing_lines():
    assert output_mismatch("status: correct", "status: incorrect")
    assert output_mismatch("a\nb", "a")
    assert output_mismatch("a", "a\nb"), "lines the page does not show need a `...` line"
    why = output_mismatch("one\ntwo\nthree", "one\n2\nthree")
    assert why and "line 2" in why and "two" in why


def test_ellipsis_lines_and_in_line():
    assert output_mismatch("head\n...", "head\nmore\nand more") is None
    assert output_mismatch("a\n...\nz", "a\nz") is None
    assert output_mismatch("cpu (...)", "cpu (AMD EPYC 9654 (2 cores))") is None
    assert output_mismatch("cpu (...)", "gpu (H100)")


def test_console_commands_pair_with_their_output():
    src = "$ kernelsearch eval a b \\\n    --device cpu\nout 1\nout 2\n$ echo hi\nhi\n"
    assert console_commands(src) == [("kernelsearch eval a b --device cpu", "out 1\nout 2"), ("echo hi", "hi")]


# -- the runner on pages made here: it fails what it should, and skips with the reason ---------

PAGE = '''# a page

```python
print("hello", 3)
```

```text
hello 4
```

<!-- skip: next "needs a GPU" -->

```bash
exit 1
```

```bash
echo "$PWD" > where.txt
false
```

```console
$ echo one two
one three
```

```console
$ kernelsearch --version
kernelsearch ...
```
'''


def _page(tmp_path: Path, text: str = PAGE) -> tuple[Path, list[Block]]:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page, [ex.parsed for ex in parse(page, lambda ex: None) if isinstance(ex.parsed, Block)]


def test_runner_compares_python_output(tmp_path):
    page, blocks = _page(tmp_path)
    assert blocks[0].expected == "hello 4\n"
    evaluate_block(page, blocks[0].line, tmp_path)  # numbers may differ
    wrong, blocks = _page(tmp_path, PAGE.replace("hello 4", "goodbye 4"))
    with pytest.raises(SybilFailure, match="goodbye"):
        evaluate_block(wrong, blocks[0].line, tmp_path)


def test_runner_skips_with_the_reason(tmp_path):
    page, blocks = _page(tmp_path)
    with pytest.raises(unittest.SkipTest, match="needs a GPU"):
        evaluate_block(page, blocks[1].line, tmp_path)


def test_runner_fails_a_failing_shell_block_in_its_directory(tmp_path):
    page, blocks = _page(tmp_path)
    with pytest.raises(SybilFailure, match="exit status 1"):
        evaluate_block(page, blocks[2].line, tmp_path)
    assert (tmp_path / "where.txt").read_text().strip() == str(tmp_path)


def test_runner_fails_console_output_that_differs(tmp_path):
    page, blocks = _page(tmp_path)
    with pytest.raises(SybilFailure, match="one three"):
        evaluate_block(page, blocks[3].line, tmp_path)


def test_runner_runs_kernelsearch_from_this_checkout(tmp_path):
    page, blocks = _page(tmp_path)
    evaluate_block(page, blocks[4].line, tmp_path)


def test_sandbox_links_the_tracked_tree_and_keeps_writes(tmp_path):
    where = sandbox(tmp_path)
    assert (where / "tests" / "data" / "problems" / "scale_add.py").is_file()
    assert (where / "src").is_symlink() and not (where / ".git").exists()
