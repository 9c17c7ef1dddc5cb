"""The ``kernelsearch`` command. Commands return 0 when the work was done, whatever the
verdicts, and raise a typed error otherwise; ``main`` maps each error to its exit status by
the one table ``EXIT_STATUS`` (docs/commands.md#exit-status)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelsearch.cli.common import (
    LoadFailed,
    UsageError,
    add_precision_option,
    add_profile_options,
    add_seed_option,
    default_device,
    done,
    load_problem_set,
    note_precision,
    warn_flagged,
)
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig, default_home
from kernelsearch.llm.base import LLMError
from kernelsearch.llm.registry import ProviderSpecError
from kernelsearch.problems.loader import ProblemError, ProblemsFailed
from kernelsearch.records.choices import DEVICES, FALLBACK_POLICIES
from kernelsearch.search.store import NoRun, RunBusy

# The exit status of each error a command raises, first match wins (a subclass before its base).
EXIT_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (ProviderSpecError, 2),  # an --llm spec naming no provider (an LLMError)
    (LLMError, 1),  # run: the LLM provider could not start, or failed and stopped the run
    (UsageError, 2),  # bad arguments or input files
    (ProblemError, 2),  # a malformed problem named directly
    (NoRun, 2),  # RUN_DIR holds no run
    (RunBusy, 2),  # another session is working on the run
    (LoadFailed, LoadFailed.status),  # some problem files of a directory failed to load; the rest were processed
    (ProblemsFailed, LoadFailed.status),  # none of a directory's problem files loaded
    (KeyboardInterrupt, 130),
)
# what each status means, for --help (plain: argparse prints it as it is) and docs/commands.md
STATUS_MEANING = {
    0: "when the work was done, whatever the verdicts",
    1: "when run's LLM provider failed",
    2: "for a usage error or a malformed problem, with a one-line message saying which",
    3: "when some problem files of a directory could not be loaded (each is reported on stderr and the rest "
       "are processed) or none could",
    130: "when interrupted",
}
DESCRIPTION = ("Evaluate candidate kernels for PyTorch problems, and search for fast, correct ones with a language "
               "model. Exit status: " + "; ".join(f"{n} {m}" for n, m in STATUS_MEANING.items()) + ".")


def exit_status(error: BaseException) -> int:
    """The exit status of an error a command raised (``EXIT_STATUS``); 1 for any other."""
    return next((status for kind, status in EXIT_STATUS if isinstance(error, kind)), 1)


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=DEVICES, default=None, help="default: cuda if available, else cpu")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_precision_option(p)
    p.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default: the problem's at its own precision, else the precision's)")
    p.add_argument("--rtol", type=float, default=None,
                   help="relative tolerance (default: the problem's at its own precision, else the precision's)")
    p.add_argument("--trials", type=int, default=5, help="correctness trials, each with fresh random inputs")
    add_seed_option(p)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--torch-fallback", choices=FALLBACK_POLICIES, default="mark",
                   help="candidates whose work PyTorch does (torch ops in Python, ATen/cuBLAS/cuDNN calls in the "
                        "extension, or ATen/library kernels taking >=50%% of the GPU time): mark them correct "
                        "with the flag torch_fallback (default; bench also reports fast_p without them), or "
                        "reject them")
    p.add_argument("--archive", type=Path, default=None, help="SQLite archive (default: $KERNELSEARCH_HOME/archive.sqlite)")
    p.add_argument("--build-timeout", type=float, default=900.0, help="seconds allowed for a build")
    p.add_argument("--run-timeout", type=float, default=300.0, help="seconds allowed for checks and timing")
    p.add_argument("--max-reps", type=int, default=100, help="most timed repetitions per measurement")
    p.add_argument("--cpu-threads", type=int, default=1,
                   help="CPU runs: threads for candidate and baselines alike (default 1, for stable timings)")
    add_profile_options(p)


def _config(args: argparse.Namespace, check_device: bool = True) -> EvalConfig:
    """The evaluation config of the options; ``check_device=False`` for a command that only
    reports on evaluations made elsewhere (``audit --report-only``)."""
    device = args.device or default_device()
    if check_device and device == "cuda" and default_device() != "cuda":
        raise UsageError("--device cuda: no CUDA device is available (install a CUDA build of PyTorch)")
    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.cpu_threads < 1:
        raise UsageError("--cpu-threads must be at least 1")
    timing = TimingConfig(max_reps=max(args.max_reps, 10), budget_s=10.0)
    limits = Limits(build_timeout_s=args.build_timeout, run_timeout_s=args.run_timeout)
    return EvalConfig(
        device=device, precision=args.precision, atol=args.atol, rtol=args.rtol, trials=args.trials, seed=args.seed,
        compile_baseline=not args.no_compile, torch_fallback=args.torch_fallback, timing=timing, limits=limits,
        cpu_threads=args.cpu_threads, profile=not args.no_profile, ncu=args.ncu,
    )


def _archive(args: argparse.Namespace):
    from kernelsearch.archive import Archive

    return Archive(args.archive or default_home() / "archive.sqlite")


def cmd_eval(args: argparse.Namespace) -> int:
    from kernelsearch.evaluator.evaluate import evaluate
    from kernelsearch.problems.loader import load_problem
    from kernelsearch.records.candidate import Candidate
    from kernelsearch.report.terminal import print_result

    problem = load_problem(args.problem)
    path = Path(args.candidate)
    if not path.is_file():
        raise UsageError(f"{path}: no such candidate file")
    candidate = Candidate.from_file(path, backend=args.backend)
    config = _config(args)
    note_precision([problem], config.precision)
    with _archive(args) as archive:
        result = evaluate(problem, candidate, config, archive)
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print_result(result)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from kernelsearch.bench import match_solutions, run_bench
    from kernelsearch.cli.executor_opts import executor_options
    from kernelsearch.report.terminal import print_bench

    config = _config(args)
    try:  # usage errors before loading: once files fail to load, the exit status is 3 as announced
        ex_opts = executor_options(args)
    except ValueError as e:
        raise UsageError(str(e)) from e
    problems, failures = load_problem_set(args.problems)
    warn_flagged(problems, config.device, config.precision)
    pairs = match_solutions(problems, args.solutions, config.device)
    if args.matched_only:
        pairs = [(p, c) for p, c in pairs if c is not None]
    if not any(c is not None for _, c in pairs):
        why = f"{args.solutions}: no candidate file matches any problem (files are matched by problem file name)"
        if not failures:
            raise UsageError(why)
        if args.json:
            print(json.dumps({"failed_to_load": [f.to_dict() for f in failures]}))
        raise LoadFailed(f"{why} that loaded")
    with _archive(args) as archive:
        summary = run_bench(pairs, config, archive, progress=True, jobs=args.jobs,  # on stderr
                            executor=args.executor, executor_options=ex_opts, confirm_processes=args.confirm)
    if args.json:
        print(json.dumps({**summary.to_dict(), "failed_to_load": [f.to_dict() for f in failures]}, default=str))
    else:
        print_bench(summary)
    return done(failures)


def cmd_lint(args: argparse.Namespace) -> int:
    from kernelsearch.lint.linter import counts, format_text, lint

    device = args.device or default_device()
    if device == "cuda" and default_device() != "cuda":
        raise UsageError("--device cuda: no CUDA device is available (install a CUDA build of PyTorch)")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    problems, failures = load_problem_set(args.problems)
    problems = [p.at(args.precision) for p in problems]
    reports = lint(problems, device, timeout_s=args.timeout)
    if args.json:
        print(json.dumps({"device": device, "counts": counts(reports), "problems": [r.to_dict() for r in reports],
                          "failed_to_load": [f.to_dict() for f in failures]}))
    else:
        print(format_text(reports, device))
    return done(failures)


def cmd_problems(args: argparse.Namespace) -> int:
    from kernelsearch.problems.describe import describe
    from kernelsearch.problems.loader import level_of
    from kernelsearch.report.terminal import print_problems

    try:
        problems, failures = load_problem_set(args.problems)
    except ProblemsFailed as e:  # still a list, of the files that failed
        print(f"kernelsearch: error: {e}", file=sys.stderr)
        problems, failures = [], e.failures
    rows = [(p, describe(p, "cuda"), describe(p, "cpu")) for p in problems]
    if args.json:
        # one entry per file; a file that failed to load has "error" and "hint" instead of "gpu" and "cpu"
        out = [{"name": p.name, "level": p.level, "group": p.group, "library": p.library, "path": str(p.path),
                "precision": p.own_precision, "precision_source": p.precision_source,
                "precision_note": p.precision_note, "gpu": g.to_dict(), "cpu": c.to_dict()} for p, g, c in rows]
        out += [{"level": level_of(f.path), **f.to_dict()} for f in failures]
        print(json.dumps(sorted(out, key=lambda d: Path(d["path"]).name)))
    elif rows:
        print_problems(rows)
    return done(failures)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelsearch", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="evaluate one candidate against one problem")
    p.add_argument("problem", help="problem file or bundled problem name (see: kernelsearch problems)")
    p.add_argument("candidate", help="candidate .py defining class ModelNew")
    p.add_argument("--backend", choices=["cuda", "triton", "cute", "tilelang", "cpp", "torch"], default=None, help="default: detected")
    _add_eval_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("bench", help="evaluate a directory of candidates and print a fast_p table")
    p.add_argument("problems", help="suite, suite:level1..3, suite:wall, a directory of problem files, or one file")
    p.add_argument("solutions", help="directory of candidates named like the problems, or seedbank[:BACKEND]")
    p.add_argument("--matched-only", action="store_true", help="leave problems with no candidate out of the table")
    p.add_argument("--confirm", type=int, default=3, metavar="N",
                   help="time each correct kernel again in N fresh processes, each next to eager, and publish "
                        "their median (default 3; 0: the single evaluation's figures)")
    p.add_argument("-j", "--jobs", "--build-jobs", dest="jobs", type=int, default=None,
                   help="parallel builds (default: the cores no evaluation lane reserves)")
    from kernelsearch.cli.executor_opts import add_executor_options

    add_executor_options(p)
    _add_eval_options(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("problems", help="list problems with their sizes, FLOPs and bytes")
    p.add_argument("problems", nargs="?", default="suite",
                   help="suite (levels 1-3, the default), suite:level1..3, suite:wall, a directory or a file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_problems)

    p = sub.add_parser("lint", help="flag problems that make a weak reward (constant output, loose tolerance, ...)")
    p.add_argument("problems", help="suite, suite:level1..3, suite:wall, a directory of problem files, one file or a bundled name")
    p.add_argument("--device", choices=DEVICES, default=None, help="default: cuda if available, else cpu")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per problem")
    add_precision_option(p)
    p.set_defaults(func=cmd_lint)

    from kernelsearch.cli.search_cmds import add_search_commands  # run, show, best

    add_search_commands(sub)
    from kernelsearch.cli.verify_cmd import add_verify_command

    add_verify_command(sub)
    from kernelsearch.cli.export_cmd import add_export_command

    add_export_command(sub)
    from kernelsearch.cli.report_cmd import add_report_command  # HTML report

    add_report_command(sub)
    from kernelsearch.cli.audit_cmd import add_audit_command  # judge a published set of kernels

    add_audit_command(sub, _add_eval_options, _config, _archive)
    return parser


def _version() -> str:
    from kernelsearch import __version__

    return f"kernelsearch {__version__}"


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an option the command does not know is reported with the command's usage
    (argparse leaves it to the top-level parser, which prints the list of commands)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    try:
        return args.func(args)
    except tuple(kind for kind, _ in EXIT_STATUS) as e:
        if isinstance(e, KeyboardInterrupt):
            print("kernelsearch: interrupted", file=sys.stderr)
        elif str(e):  # a LoadFailed without a message: each file was reported as it failed
            print(f"kernelsearch: error: {e}", file=sys.stderr)
        if isinstance(e, ProblemsFailed) and getattr(args, "json", False):
            print(json.dumps({"failed_to_load": [f.to_dict() for f in e.failures]}))
        return exit_status(e)


if __name__ == "__main__":
    # Run the package's copy of this module, so that exceptions raised by other modules
    # (which import kernelsearch.cli.main, not __main__) are the classes caught here.
    from kernelsearch.cli.main import main as package_main

    sys.exit(package_main())
