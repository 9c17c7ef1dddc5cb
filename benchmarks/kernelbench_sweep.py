"""Run every KernelBench problem through kernelsearch: load, lint, and evaluate the problem's own
reference as a candidate, so each problem reaches a verdict or a specific reason why not.

The candidate is generated text: the problem's source with a wrapper appended,

    class ModelNew(torch.nn.Module):
        def __init__(self, *args, **kwargs): super().__init__(); self.ref = Model(*args, **kwargs)
        def forward(self, *args): return self.ref(*args)

The static screen (evaluator/screen/python.py) rejects ``class ModelNew(Model)`` and any import
of the harness's copy of the problem, but accepts a ``ModelNew`` that builds ``Model`` and calls
it; it marks that ``torch_fallback``, which is what it is. Built under the same seed as the
reference, the wrapped ``Model`` gets the reference's parameters, so a correct verdict says the
problem runs end to end in the evaluator (trials, mutation and determinism checks, timing, the
judge's comparisons and baselines).

Resumable across calls: every finished problem is appended to ``OUT/results-<device>.jsonl``
(and the summary ``OUT/sweep-<device>.json`` rewritten) at once; a later call skips problems
already judged on that device (also those whose evaluation reached the archive but not the
file), and tries files that failed to load again (a module may have been installed since).
Usage (see docs/kernelbench.md):

    python benchmarks/kernelbench_sweep.py --kernelbench .ext/kernelbench --levels 1,2,3 \\
        --device cuda --part 1/8 --budget-s 480 --out .ext/kb-sweep
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig, default_home
from kernelsearch.evaluator.evaluate import baseline_key
from kernelsearch.executors import Job, make_executor
from kernelsearch.lint.linter import cached_lint
from kernelsearch.problems.describe import describe_cached, format_shape
from kernelsearch.problems.loader import Problem, ProblemError, import_hint, load_problem
from kernelsearch.problems.reference import reference_source
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult


def reference_candidate(problem: Problem) -> Candidate:
    """The problem's source with the wrapper appended (module docstring above says why)."""
    return Candidate.from_source(reference_source(problem.source), backend="torch", name=problem.name)


@dataclass(frozen=True)
class Item:
    """One problem file of the sweep: its level and path, and its row key."""

    level: int
    path: Path

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.path.name}"


def _number(path: Path) -> int:
    m = re.match(r"(\d+)_", path.name)
    return int(m.group(1)) if m else 10**9


def level_dir(root: Path, level: int) -> Path | None:
    """``root`` may be a KernelBench checkout, its ``KernelBench`` folder, or a folder of levels."""
    for d in (root / "KernelBench" / f"level{level}", root / f"level{level}"):
        if d.is_dir():
            return d
    return None


def select(root: Path, levels: Iterable[int], only: list[str], part: tuple[int, int]) -> list[Item]:
    """The problem files of the chosen levels in (level, number) order, filtered by ``--only``
    (substrings of ``level1/23_Softmax.py``) and dealt round-robin into ``part`` (K of N), so
    each part gets a share of every level."""
    items: list[Item] = []
    for lv in levels:
        d = level_dir(root, lv)
        if d is None:
            print(f"no level{lv} under {root}", file=sys.stderr)
            continue
        files = sorted((f for f in d.glob("*.py") if not f.name.startswith("_")), key=lambda f: (_number(f), f.name))
        items += [Item(lv, f) for f in files]
    if only:
        items = [it for it in items if any(s in it.key for s in only)]
    k, n = part
    return [it for i, it in enumerate(items) if i % n == k - 1]


def parse_part(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"--part takes K/N with 1 <= K <= N, not {text!r}")
    return int(m.group(1)), int(m.group(2))


def read_rows(path: Path) -> dict[str, dict]:
    """The results file's rows by key, the last row of a key winning (torn last line ignored)."""
    rows: dict[str, dict] = {}
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "key" in row:
            rows[row["key"]] = row
    return rows


def _ms(x: float | None) -> float | None:
    return round(x, 4) if isinstance(x, (int, float)) else None


def judged_row(item: Item, problem: Problem, res: EvalResult, lint_lines: list[str] | None, config: EvalConfig) -> dict:
    """``lint_lines`` None: not linted yet (a later call without --no-lint lints it)."""
    desc = describe_cached(problem, config.device)
    return {
        "key": item.key, "level": item.level, "file": item.path.name, "name": problem.name,
        "problem_id": problem.id, "candidate_id": res.candidate_id, "device": config.device, "state": "judged",
        "status": res.status.value, "reason": res.reason, "flags": res.flags, "lint": lint_lines or [],
        "linted": lint_lines is not None,
        "eval_s": round(res.eval_s or 0.0, 2), "phase_s": res.phase_s, "candidate_ms": _ms(res.candidate_ms), "eager_ms": _ms(res.eager_ms),
        "compile_ms": _ms(res.compile_ms), "compile_error": res.compile_error[:300],
        "eager": res.eager_timing.to_dict() if res.eager_timing else None,
        "compile": res.compile_timing.to_dict() if res.compile_timing else None,
        "baseline_key": baseline_key(problem, config), "max_abs_error": res.max_abs_error,
        "device_name": res.device_name, "torch_version": res.torch_version,
        "inputs": format_shape(desc.inputs), "outputs": format_shape(desc.outputs),
        "min_bytes": desc.min_bytes, "flops": desc.flops,
    }


def failed_row(item: Item, error: str, hint: str, device: str) -> dict:
    return {"key": item.key, "level": item.level, "file": item.path.name, "name": item.path.stem,
            "device": device, "state": "load_failed", "status": "load_failed", "reason": error, "hint": hint}


def load(item: Item) -> tuple[Problem | None, str, str]:
    """The problem, or why it did not load and what to do about it."""
    try:
        return load_problem(item.path), "", ""
    except ProblemError as e:
        return None, e.detail, e.hint
    except Exception as e:  # noqa: BLE001 - one odd file must not stop the sweep
        return None, f"{type(e).__name__}: {e}"[:400], import_hint(e)


def from_archive(archive: Archive, problem: Problem, cand: Candidate, device: str) -> EvalResult | None:
    """This candidate's latest evaluation on ``device``, if the archive has one (a call killed
    after the archive's write and before the results file's)."""
    found = [r for r in archive.evaluations(problem.id) if r.candidate_id == cand.id and r.device == device]
    return found[-1] if found else None


class Sweep:
    """The results file, the summary JSON and the archive of one device's sweep."""

    def __init__(self, out: Path, device: str, archive_path: Path | None) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.results = out / f"results-{device}.jsonl"
        self.summary = out / f"sweep-{device}.json"
        self.archive = Archive(archive_path or out / "archive.sqlite")
        self.rows = read_rows(self.results)

    def done(self, item: Item, problem: Problem, device: str) -> bool:
        row = self.rows.get(item.key)
        return bool(row and row.get("state") == "judged" and row.get("problem_id") == problem.id
                    and row.get("device") == device)

    def add(self, row: dict) -> None:
        with self.results.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.rows[row["key"]] = row
        tmp = self.summary.with_suffix(".tmp")
        tmp.write_text(json.dumps({"rows": sorted(self.rows.values(), key=_order)}, indent=1, default=str))
        os.replace(tmp, self.summary)


def _order(row: dict) -> tuple[int, int, str]:
    return int(row.get("level") or 0), _number(Path(row.get("file", ""))), row.get("file", "")


def lint_lines(problems: list[Problem], device: str, home: Path) -> dict[str, list[str]]:
    """Warnings and errors of the problem linter by problem id (cached under home/lint)."""
    import torch

    reports = cached_lint(problems, device, home / "lint", torch.__version__)
    return {p.id: [f"{f.code}: {f.message}" for f in r.flagged] for p, r in zip(problems, reports, strict=True)}


def needs_lint(row: dict) -> bool:
    """Not linted yet, or the lint failed to run (not cached either: it may not fail again).
    A problem too large for this machine ("run-error: does not fit ...") is a finding, not a
    failed run: it is not linted again, as its verdict is not judged again (the message names
    the memory available at the time, so a second lint would differ and append a row)."""
    if not row.get("linted"):
        return True
    return any((line.startswith("run-error:") and not line.startswith("run-error: does not fit"))
               or line.startswith("lint failed:") for line in row.get("lint") or [])


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
    only = [s for s in (args.only or "").split(",") if s]
    items = select(Path(args.kernelbench), levels, only, args.part)
    sweep = Sweep(Path(args.out), args.device, Path(args.archive) if args.archive else None)
    home = Path(args.home) if args.home else default_home()
    config = EvalConfig(device=args.device, trials=args.trials, compile_baseline=not args.no_compile, home=home)
    todo: list[tuple[Item, Problem]] = []
    loaded: list[tuple[Item, Problem]] = []
    for item in items:
        problem, error, hint = load(item)
        if problem is None:
            row = failed_row(item, error, hint, args.device)
            if sweep.rows.get(item.key) != row:
                sweep.add(row)
            print(f"{item.key}: failed to load: {error}" + (f" (hint: {hint})" if hint else ""), file=sys.stderr)
            continue
        loaded.append((item, problem))
        if not sweep.done(item, problem, args.device):
            todo.append((item, problem))
    print(f"{len(items)} problem file(s) in this part, {len(todo)} to evaluate on {args.device}", file=sys.stderr)
    lints: dict[str, list[str]] = {}
    if not args.no_lint:  # problems judged in a call without the lint are linted now
        unlinted = [(it, p) for it, p in loaded if needs_lint(sweep.rows.get(it.key, {}))]
        for n in range(0, len(unlinted), args.lint_batch):
            if args.budget_s and time.monotonic() - t0 > args.budget_s:
                break  # unlinted problems still get their verdicts; a later call lints them (cached)
            batch = [p for _, p in unlinted[n:n + args.lint_batch]]
            try:
                lints.update(lint_lines(batch, args.device, home))
            except Exception as e:  # noqa: BLE001 - the lint advises; the evaluations still run
                lints.update({p.id: [f"lint failed: {type(e).__name__}: {e}"[:300]] for p in batch})
        for it, p in unlinted:
            row = sweep.rows.get(it.key)
            if p.id in lints and sweep.done(it, p, args.device) and row is not None:
                new = {**row, "lint": lints[p.id], "linted": True}
                if new != row:
                    sweep.add(new)

    def record(item: Item, problem: Problem, res: EvalResult) -> None:
        sweep.add(judged_row(item, problem, res, lints.get(problem.id), config))
        print(f"{item.key}: {res.status.value} ({res.eval_s or 0:.0f} s): {res.reason}", file=sys.stderr, flush=True)

    queued: dict[str, tuple[Item, Problem]] = {}
    for item, problem in todo:
        cand = reference_candidate(problem)
        res = from_archive(sweep.archive, problem, cand, args.device)
        if res is not None:
            record(item, problem, res)
        else:
            queued[item.key] = (item, problem)
    # the executor's pipeline (executors/local.py): the next problems' workers start while one
    # is evaluated, one evaluation at a time per GPU, so timings are as in a serial loop
    stopped = 0
    ex = make_executor("local", sweep.archive)
    try:
        for item, problem in queued.values():
            ex.submit(Job(problem, reference_candidate(problem), config, tag=item.key))
        while ex.outstanding():
            for fin in ex.poll(timeout=5):
                record(*queued[fin.job.tag], fin.result)
            if args.budget_s and time.monotonic() - t0 > args.budget_s and ex.outstanding():
                break
    finally:
        ex.close(wait=True)  # the evaluation under way finishes; queued ones stay to do
        for fin in ex.poll(timeout=0):
            record(*queued[fin.job.tag], fin.result)
        stopped = ex.outstanding()
    shown = [sweep.rows[it.key] for it in items if it.key in sweep.rows]
    Console(width=args.width).print(table(shown, args.device))
    left = sum(1 for it in items if it.key not in sweep.rows)
    if stopped:
        print(f"stopped after {args.budget_s:g} s with {stopped} problem(s) of this part left: "
              "run the same command again to go on", file=sys.stderr)
    print(json.dumps({"part": f"{args.part[0]}/{args.part[1]}", "files": len(items), "left": left,
                      "results": str(sweep.results), "summary": str(sweep.summary)}))
    sweep.archive.close()
    return 0


def table(rows: list[dict], device: str) -> Table:
    t = Table(title=f"KernelBench, reference as candidate ({device})", header_style="bold")
    for col in ("problem", "verdict / reason", "eval s", "eager ms", "compile ms", "lint"):
        t.add_column(col, overflow="fold")
    for r in sorted(rows, key=_order):
        status = r.get("status", "")
        why = r.get("reason", "") if status != "correct" else ", ".join(r.get("flags") or []) or "ok"
        if r.get("hint"):
            why += f" (hint: {r['hint']})"
        lint = "; ".join(line.split(":", 1)[0] for line in r.get("lint") or [])
        # plain text: a hint's "kernelsearch[kernelbench]" is not rich markup
        t.add_row(Text(r["key"]), Text(f"{status}: {why}"[:400]), _fmt(r.get("eval_s"), 0),
                  _fmt(r.get("eager_ms"), 3), _fmt(r.get("compile_ms"), 3), Text(lint))
    return t


def _fmt(x: float | None, digits: int) -> str:
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) else "-"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", required=True, help="a KernelBench checkout (or its KernelBench folder)")
    ap.add_argument("--levels", default="1,2,3", help="comma-separated levels (4 needs transformers and the Hub)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--part", type=parse_part, default=(1, 1), help="K/N: the K-th of N round-robin shares")
    ap.add_argument("--only", default="", help="comma-separated substrings of keys such as level1/23_Softmax.py")
    ap.add_argument("--out", default=".ext/kb-sweep", help="results-<device>.jsonl, sweep-<device>.json, archive")
    ap.add_argument("--archive", default="", help="default: OUT/archive.sqlite")
    ap.add_argument("--home", default="", help="KERNELSEARCH_HOME for builds, lint and judge caches")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--no-lint", action="store_true")
    ap.add_argument("--lint-batch", type=int, default=8, help="problems linted by one worker")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="stop after this many seconds, once the evaluation under way is done (0: no limit)")
    ap.add_argument("--width", type=int, default=170)
    return ap


def main(argv: list[str] | None = None) -> int:
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
