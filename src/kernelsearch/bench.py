"""Benchmark a directory of candidates against problems and summarise it as fast_p."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.confirm import DEFAULT_PROCESSES, Confirmation, confirm
from kernelsearch.executors import Finished, Job, make_executor
from kernelsearch.metrics.fastp import FAST_P_THRESHOLDS, correctness_rate, fast_p_table, geomean
from kernelsearch.problems.loader import Problem, ProblemError
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult, Status

SEEDBANK_DIR = Path(__file__).parent / "seedbank"
DEVICE_DEFAULT_BACKEND = {"cpu": "cpp", "cuda": "cuda"}


def solutions_dir(spec: str, device: str) -> Path:
    """``seedbank`` picks the bundled seeds for the device's backend; ``seedbank:triton`` names one."""
    if spec == "seedbank" or spec.startswith("seedbank:"):
        backend = spec.split(":", 1)[1] if ":" in spec else DEVICE_DEFAULT_BACKEND[device]
        d = SEEDBANK_DIR / backend
        if not d.is_dir():
            raise ProblemError(f"no seed bank for backend {backend!r}; have: {sorted(p.name for p in SEEDBANK_DIR.iterdir() if p.is_dir())}")
        return d
    d = Path(spec)
    if not d.is_dir():
        raise ProblemError(f"{spec}: not a directory")
    return d


def match_solutions(problems: list[Problem], spec: str, device: str) -> list[tuple[Problem, Path | None]]:
    """Pair each problem with ``<problem file stem>.py`` in the solutions directory."""
    d = solutions_dir(spec, device)
    return [(p, (d / f"{p.name}.py") if (d / f"{p.name}.py").is_file() else None) for p in problems]


@dataclass
class BenchSummary:
    device: str
    results: list[tuple[Problem, EvalResult | None]] = field(default_factory=list)
    # per problem name: the correct candidate's timing confirmed over fresh processes
    confirmations: dict[str, Confirmation] = field(default_factory=dict)

    def speedups(self, baseline: str, own_kernels: bool = False) -> list[float | None]:
        """Per-problem speedups, the confirmed figure where there is one (a kernel a confirming
        process found wrong is unsolved); ``own_kernels`` counts results marked torch_fallback
        (the work was PyTorch's) as unsolved, so fast_p can be reported with and without them."""
        out = []
        for p, r in self.results:
            s = None if r is None else (r.speedup_vs_eager if baseline == "eager" else r.speedup_vs_compile)
            conf = self.confirmations.get(p.name)
            if conf is not None:
                s = conf.speedup_vs_eager if baseline == "eager" else conf.speedup_vs_compile
            if own_kernels and r is not None and "torch_fallback" in r.flags:
                s = None
            out.append(s)
        return out

    def marked(self) -> list[str]:
        return [p.name for p, r in self.results if r is not None and "torch_fallback" in r.flags]

    def correct(self) -> list[float | None]:
        """1.0 marks a correct result, so correctness_rate can count it."""
        return [1.0 if r is not None and r.status.value == "correct" else None for _, r in self.results]

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "problems": len(self.results),
            "with_candidate": sum(r is not None for _, r in self.results),
            "correctness_rate": correctness_rate(self.correct()),
            "fast_p": {
                b: {str(p): v for p, v in fast_p_table(self.speedups(b), FAST_P_THRESHOLDS).items()}
                for b in ("eager", "compile")
            },
            "geomean_speedup": {b: geomean(self.speedups(b)) for b in ("eager", "compile")},
            "fast_p_note": "fast_p and geomean_speedup include kernels marked torch_fallback; "
                           "fast_p_own_kernels and geomean_speedup_own_kernels count them as unsolved",
            "torch_fallback_marked": self.marked(),
            "fast_p_own_kernels": {
                b: {str(p): v for p, v in fast_p_table(self.speedups(b, own_kernels=True), FAST_P_THRESHOLDS).items()}
                for b in ("eager", "compile")
            },
            "geomean_speedup_own_kernels": {b: geomean(self.speedups(b, own_kernels=True))
                                            for b in ("eager", "compile")},
            "results": [
                {"problem": p.name, **(r.to_dict() if r is not None else {"status": "no_candidate"}),
                 "confirmation": self.confirmations[p.name].to_dict() if p.name in self.confirmations else None}
                for p, r in self.results
            ],
        }


def run_bench(pairs: list[tuple[Problem, Path | None]], config: EvalConfig, archive: Archive | None,
              progress: bool = True, jobs: int | None = None, executor: str = "local",
              executor_options: dict[str, Any] | None = None,
              confirm_processes: int = DEFAULT_PROCESSES,
              on_result: Callable[[Problem, EvalResult], None] | None = None) -> BenchSummary:
    """Evaluate every matched candidate through an executor (default ``local``: builds in
    parallel on ``jobs`` cores while the evaluation lanes take built candidates one at a time),
    then confirm each correct one's timing over ``confirm_processes`` fresh processes, one
    kernel at a time (0: publish the single evaluation's figures). ``progress``: on stderr, a bar
    while evaluating where stderr is a terminal, else a plain line per evaluated kernel; and a
    line per confirmed kernel either way. ``on_result``: called with each evaluation as it ends,
    before any confirmation (``audit`` saves a failing kernel's row at once)."""
    summary = BenchSummary(device=config.device)
    bar_ok = progress and sys.stderr.isatty()
    todo = [Job(p, Candidate.from_file(c), config, tag=p.name) for p, c in pairs if c is not None]
    opts = dict(executor_options or {})
    if executor == "local":
        opts.setdefault("build_jobs", jobs)
    def told(fin: Finished) -> None:
        if on_result is not None:
            on_result(fin.job.problem, fin.result)

    with make_executor(executor, archive, **opts) as ex:
        if bar_ok:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                          TimeElapsedColumn(), transient=False, console=Console(stderr=True)) as bar:
                task = bar.add_task(f"building and evaluating ({ex.name} executor)", total=len(todo))

                def advance(fin: Finished) -> None:
                    bar.update(task, description=f"{fin.job.problem.name}: {fin.result.status.value}")
                    bar.advance(task)
                    told(fin)

                out = ex.evaluate_many(todo, on_result=advance)
        elif progress:  # not a terminal (a log, a pipe): plain lines
            done = iter(range(1, len(todo) + 1))

            def line(fin: Finished) -> None:
                _say(f"evaluated {next(done)}/{len(todo)}: {fin.job.problem.name}: {fin.result.status.value}")
                told(fin)

            out = ex.evaluate_many(todo, on_result=line)
        else:
            out = ex.evaluate_many(todo, on_result=told)
    results = {j.tag: r for j, r in zip(todo, out, strict=True)}
    summary.results = [(p, results.get(p.name)) for p, _ in pairs]
    if confirm_processes > 0:
        correct = [job for job in todo if results[job.tag].status is Status.CORRECT]
        if progress and correct:
            _say(f"confirming {len(correct)} correct kernel(s), each over {confirm_processes} fresh processes")
        for k, job in enumerate(correct, 1):
            conf = confirm(job.problem, job.candidate, config, confirm_processes,
                           compile_ms=results[job.tag].compile_ms, archive=archive)
            summary.confirmations[job.tag] = conf
            if progress:
                what = (f"{conf.speedup_vs_eager:.2f}x vs eager" if conf.ok and conf.speedup_vs_eager
                        else "confirmed" if conf.ok else f"not confirmed: {conf.reason}"[:200])
                _say(f"confirmation {k}/{len(correct)}: {job.problem.name}: {what}")
    return summary


def _say(line: str) -> None:
    print(f"kernelsearch: bench: {line}", file=sys.stderr, flush=True)
