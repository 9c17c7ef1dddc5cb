"""Evaluate a release's entries through bench's executor path, in chunks, appending each judged
kernel's row to the state as soon as it is final, and summarise the rows.

Resumable like the KernelBench sweep: ``STATE/rows.jsonl`` holds one JSON line per judged
kernel, keyed by the problem's and the kernel's content, the device and the precision; a rerun
skips the kernels it holds and reports them with the new ones. A failing kernel's row is saved
as soon as it is judged, a correct one's once its chunk is confirmed (``chunk`` kernels,
evaluated and confirmed together by ``run_bench``): an interrupted run loses at most the
kernels in flight and the correct ones of its chunk awaiting confirmation.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.audit.classify import classify_code
from kernelsearch.audit.sources import Entry
from kernelsearch.bench import BenchSummary, run_bench
from kernelsearch.evaluator.config import EvalConfig, default_home
from kernelsearch.evaluator.confirm import Confirmation
from kernelsearch.metrics.fastp import FAST_P_THRESHOLDS, fast_p_table, geomean
from kernelsearch.problems.loader import Problem, ProblemError, load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult, Status

ROWS_FILE = "rows.jsonl"
DEFAULT_CHUNK = 8


@dataclass(frozen=True)
class Options:
    """How to run the audit beyond the evaluation config (bench's executor options)."""

    jobs: int | None = None
    executor: str = "local"
    executor_options: dict[str, Any] | None = None
    confirm: int = 3
    chunk: int = DEFAULT_CHUNK
    lint: bool = True
    progress: bool = True
    evaluate: bool = True  # False: report what the state holds, judge nothing (the rest: not_judged)


class AuditState:
    """``STATE/rows.jsonl``: the judged rows by key, the last line of a key winning."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.path = root / ROWS_FILE
        self.rows: dict[str, dict] = {}
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut short by a kill: its kernel is judged again
                    continue
                if isinstance(row, dict) and isinstance(row.get("key"), str):
                    self.rows[row["key"]] = row

    def add(self, row: dict) -> None:
        """Append and flush to disk at once: a kill after this loses nothing judged."""
        with self.path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.rows[row["key"]] = row


def default_state(source: Path, output: Path | None) -> Path:
    """Next to ``-o FILE`` (``FILE.state``), else under the KERNELSEARCH home by source name."""
    if output is not None:
        return output.with_name(output.name + ".state")
    return default_home() / "audit" / source.resolve().name


def row_key(problem: Problem, candidate: Candidate, config: EvalConfig) -> str:
    return f"{problem.id}:{candidate.id}:{config.device}:{problem.precision}:{config.torch_fallback}"


def error_row(e: Entry) -> dict:
    """A row for an entry that is not evaluated (a bad row, no kernel, a problem that fails to load)."""
    status = "not_evaluated"
    return {"name": e.name, "status": status, "reason": e.error, "code": "", "class": e.error_class, "flags": [],
            "claimed_speedup": e.claimed, "claimed_speedup_compile": e.claimed_compile,
            "speedup_vs_eager": None, "speedup_vs_compile": None, "torch_fallback": False, "lint": []}


def not_judged_row(e: Entry) -> dict:
    """A row for a kernel the state does not hold, in a report that evaluates nothing."""
    return {**error_row(e), "status": "not_judged", "class": "not_judged",
            "reason": "not judged yet (the state holds no evaluation of it)"}


def judged_row(e: Entry, key: str, res: EvalResult, conf: Confirmation | None, lint: list[str]) -> dict:
    """A judged kernel's row: the confirmed figures where there are some; a kernel a confirming
    process found wrong takes that process's status and reason."""
    status, reason, code = res.status.value, res.reason, res.code
    vs_eager, vs_compile, ms, eager_ms = res.speedup_vs_eager, res.speedup_vs_compile, res.candidate_ms, res.eager_ms
    if conf is not None:
        vs_eager, vs_compile = conf.speedup_vs_eager, conf.speedup_vs_compile
        if conf.ok:
            ms, eager_ms = conf.median_ms, conf.eager_median_ms
        else:
            bad = next((s for s in conf.statuses if s != "correct"), "crashed")
            status, reason = bad, "not confirmed: " + conf.reason.split(": ", 1)[-1]
            code = conf.code  # "" from an older confirmation: its reason is classified by phrase
    return {
        "name": e.name, "status": status, "reason": reason, "code": code,
        "class": classify_code(status, code, reason.removeprefix("not confirmed: "), res.flags),
        "flags": list(res.flags), "claimed_speedup": e.claimed, "claimed_speedup_compile": e.claimed_compile,
        "speedup_vs_eager": vs_eager, "speedup_vs_compile": vs_compile,
        "torch_fallback": "torch_fallback" in res.flags, "lint": lint,
        "key": key, "problem": str(e.problem), "problem_id": res.problem_id, "candidate_id": res.candidate_id,
        "backend": res.backend, "device": res.device, "device_name": res.device_name, "precision": res.precision,
        "measured_ms": ms, "eager_ms": eager_ms, "compile_ms": res.compile_ms,
        "confirmed_processes": conf.processes if conf is not None else 0,
        "notes": [x for x in res.errors if "PyTorch" in x or "library" in x][:3],
        # every check it failed (EvalResult.failures, the deciding one first), each with its class
        "failures": [{**f, "class": classify_code(f["status"], f.get("code", ""), f["reason"])} for f in res.failures],
    }


def lint_lines(problems: Sequence[Problem], device: str, home: Path) -> dict[str, list[str]]:
    """The problem linter's warnings and errors by problem id (cached under ``home/lint``); a
    linter that cannot run is one line per problem, never a stop."""
    try:
        import torch

        from kernelsearch.lint.linter import cached_lint

        if device == "cuda" and not torch.cuda.is_available():
            device = "cpu"
        reports = cached_lint(list(problems), device, home / "lint", torch.__version__)
    except Exception as e:  # noqa: BLE001 - the lint advises; the evaluations still run
        return {p.id: [f"lint failed: {type(e).__name__}: {e}"[:300]] for p in problems}
    return {p.id: [f"{f.code}: {f.message}" for f in r.flagged] for p, r in zip(problems, reports, strict=True)}


def run_audit(entries: Sequence[Entry], config: EvalConfig, archive: Archive | None, state: AuditState,
              opts: Options = Options(), say: Callable[[str], None] | None = None) -> list[dict]:
    """One row per entry, in entry order: rows already in ``state`` as they are, the others
    evaluated ``opts.chunk`` at a time through ``run_bench``, each appended once final (a failing
    kernel as soon as it is judged, a correct one once its chunk is confirmed)."""
    say = say or _say
    rows: dict[int, dict] = {}
    todo: list[tuple[int, Entry, Problem, Candidate, str]] = []
    for i, e in enumerate(entries):
        if e.error or e.problem is None or e.kernel is None:
            rows[i] = error_row(e)
            continue
        try:
            problem = load_problem(e.problem).at(config.precision)
            cand = Candidate.from_file(e.kernel)
        except (ProblemError, OSError, UnicodeDecodeError) as err:
            rows[i] = error_row(Entry(e.name, claimed=e.claimed, claimed_compile=e.claimed_compile,
                                      error=f"the problem does not load: {err}"[:500], error_class="problem_error"))
            continue
        key = row_key(problem, cand, config)
        if key in state.rows:
            rows[i] = {**state.rows[key], "name": e.name, "claimed_speedup": e.claimed,
                       "claimed_speedup_compile": e.claimed_compile}
        else:
            todo.append((i, e, problem, cand, key))
    if not opts.evaluate:
        rows.update((i, not_judged_row(e)) for i, e, *_ in todo)
        todo = []
    if opts.progress:
        count = Counter(r["status"] for r in rows.values())
        say(f"{len(entries)} kernel(s): {len(rows) - count['not_evaluated'] - count['not_judged']} judged before "
            f"(in {state.path}), {count['not_evaluated']} not evaluable, {len(todo)} to evaluate"
            + (f", {count['not_judged']} not judged (--report-only)" if count["not_judged"] else ""))
    home = config.home or default_home()
    chunk = max(1, opts.chunk)
    for n in range(0, len(todo), chunk):
        part = todo[n:n + chunk]
        if opts.progress:
            say(f"chunk {n // chunk + 1}/{(len(todo) + chunk - 1) // chunk}: {', '.join(e.name for _, e, *_ in part)}")
        lints = lint_lines([p for _, _, p, _, _ in part], config.device, home) if opts.lint else {}
        by_name = {problem.name: (i, e, key) for i, e, problem, _, key in part}

        def final(problem: Problem, res: EvalResult, by_name: dict = by_name, lints: dict = lints) -> None:
            """A kernel no confirmation will change is saved as soon as it is judged."""
            i, e, key = by_name[problem.name]
            if res.status is not Status.CORRECT or opts.confirm == 0:
                rows[i] = judged_row(e, key, res, None, lints.get(problem.id, []))
                state.add(rows[i])

        summary = _bench(part, config, archive, opts, final)
        for (i, e, problem, _, key), (_, res) in zip(part, summary.results, strict=True):
            assert res is not None  # every pair here has a candidate
            if i not in rows:  # correct, once confirmed
                rows[i] = judged_row(e, key, res, summary.confirmations.get(problem.name), lints.get(problem.id, []))
                state.add(rows[i])
    return [rows[i] for i in range(len(entries))]


def _bench(part: list[tuple[int, Entry, Problem, Candidate, str]], config: EvalConfig, archive: Archive | None,
           opts: Options, on_result: Callable[[Problem, EvalResult], None]) -> BenchSummary:
    """bench's evaluation of one chunk (problem names are the entries', unique in a release)."""
    pairs = [(p, e.kernel) for _, e, p, _, _ in part]
    return run_bench(pairs, config, archive, progress=opts.progress, jobs=opts.jobs, executor=opts.executor,
                     executor_options=opts.executor_options, confirm_processes=opts.confirm, on_result=on_result)


def summarise(rows: Sequence[dict], device: str) -> dict[str, Any]:
    """Claimed fast_p against verified fast_p (with torch_fallback kernels and own kernels only)
    over all audited rows (rows not evaluated count as unsolved, as bench's problems without a
    candidate do; rows not judged, in a ``--report-only`` report, are left out, so that claims
    and verdicts cover the same kernels), and counts by status and class."""
    def table(xs: list[float | None]) -> dict[str, float]:
        return {str(p): v for p, v in fast_p_table(xs, FAST_P_THRESHOLDS).items()}

    not_judged = sum(r["status"] == "not_judged" for r in rows)
    rows = [r for r in rows if r["status"] != "not_judged"]  # claimed and verified over the same kernels

    claimed = [r.get("claimed_speedup") for r in rows]
    claimed_c = [r.get("claimed_speedup_compile") for r in rows]
    verified = [r.get("speedup_vs_eager") for r in rows]
    own = [None if r.get("torch_fallback") else s for r, s in zip(rows, verified, strict=True)]
    verified_c = [r.get("speedup_vs_compile") for r in rows]
    own_c = [None if r.get("torch_fallback") else s for r, s in zip(rows, verified_c, strict=True)]
    return {
        "device": device,
        "kernels": len(rows),
        "not_judged": not_judged,
        "evaluated": sum(r["status"] != "not_evaluated" for r in rows),
        "by_status": dict(Counter(r["status"] for r in rows).most_common()),
        "by_class": dict(Counter(r["class"] for r in rows).most_common()),
        "claimed_fast_p": table(claimed),
        "verified_fast_p": table(verified),
        "verified_fast_p_own_kernels": table(own),
        "claimed_fast_p_compile": table(claimed_c) if any(x is not None for x in claimed_c) else None,
        "verified_fast_p_compile": table(verified_c),
        "verified_fast_p_compile_own_kernels": table(own_c),
        "claimed_geomean": geomean(claimed),
        "verified_geomean": geomean(verified),
        "verified_geomean_own_kernels": geomean(own),
        "claimed_faster": sum(x is not None and x > 1 for x in claimed),
        "verified_faster": sum(x is not None and x > 1 for x in verified),
        "verified_faster_own_kernels": sum(x is not None and x > 1 for x in own),
        "torch_fallback": [r["name"] for r in rows if r.get("torch_fallback") and r["status"] == "correct"],
        "fast_p_note": "fast_p over every audited kernel (not evaluated or failing: unsolved); verified_fast_p "
                       "counts torch_fallback kernels as solved, verified_fast_p_own_kernels as unsolved",
    }


def _say(line: str) -> None:
    print(f"kernelsearch: audit: {line}", file=sys.stderr, flush=True)
