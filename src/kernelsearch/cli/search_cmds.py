"""`kernelsearch run`, `show` and `best`: the search loop on the command line.

A run directory holds one run (`RUN_DIR/run.sqlite` plus the problem's file); given several
problems (a suite or a directory), `run` makes one run directory per problem under `--out`
and runs them one after the other, and `show` then adds a fast_p table over them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelsearch.cli.common import (
    UsageError,
    add_precision_option,
    add_profile_options,
    add_seed_option,
    default_device,
    done,
    find_runs,
    load_problem_set,
    warn_flagged,
)
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.llm.base import DEFAULT_TIMEOUT_S, LLMError
from kernelsearch.playbook.notes import MODES as PLAYBOOK_MODES
from kernelsearch.records.choices import DEVICES
from kernelsearch.search.config import (
    DEVICE_BACKEND,
    FALLBACK_POLICIES,
    STRATEGIES,
    Budgets,
    RunConfig,
    StrategyParams,
)
from kernelsearch.search.store import RunStore

BUDGET_FLAGS = {"rounds": "rounds", "max_candidates": "candidates", "max_tokens": "tokens",
                "max_cost": "cost_usd", "max_time": "wall_s", "target_speedup": "target_speedup",
                "target_floor": "target_floor_pct"}


def _check_provider(config: RunConfig) -> None:
    """Make the run's provider once before any run directory is made, so a provider that cannot
    start (LLMError, exit status 1) leaves nothing behind; a spec naming no provider
    (ProviderSpecError) is a usage error."""
    from kernelsearch.llm.registry import make_provider

    make_provider(config.llm, **config.provider_options())


def _duration(text: str) -> float:
    """Seconds from "90", "90s", "30m" or "2h"."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 90, 90s, 30m or 2h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def add_search_commands(sub: Any) -> None:
    """Register run, show and best on the main parser's subcommands."""
    p = sub.add_parser("run", help="search for fast kernels with a language model",
                       description="Start a search (PROBLEM --strategy S --llm PROVIDER:MODEL --out RUN_DIR) "
                                   "or continue one (--resume RUN_DIR).")
    p.add_argument("problem", nargs="?", help="problem file, bundled name, suite[:levelN|:wall] or directory")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    p.add_argument("--out", type=Path, metavar="RUN_DIR", help="new run directory (must not hold a run)")
    p.add_argument("--strategy", choices=STRATEGIES, help="single, best-of-n, refine, branch or evolve")
    p.add_argument("--llm", metavar="PROVIDER:MODEL",
                   help="openai:MODEL, anthropic:MODEL, exchange:DIR or replay:FILE (on resume: switch provider)")
    p.add_argument("--phase", choices=["propose", "evaluate"],
                   help="propose: only the LLM side of the next round; evaluate: only pending candidates")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON at the end")
    p.add_argument("-q", "--quiet", action="store_true", help="no live progress")
    p.add_argument("--no-verify", action="store_true",
                   help="do not re-verify the best kernel when the run ends (see: kernelsearch verify)")

    g = p.add_argument_group("strategy")
    g.add_argument("-n", type=int, default=None, help="best-of-n samples; refine chains; evolve children per round (default 4, refine 1)")
    g.add_argument("--top-k", type=int, default=2, help="branch: seeds per round")
    g.add_argument("--ideas", type=int, default=3, help="branch: ideas per seed")
    g.add_argument("--realisations", type=int, default=2, help="branch: implementations per idea")
    g.add_argument("--crossover-rate", type=float, default=0.5, help="evolve: share of children made by crossover")
    g.add_argument("--explore", type=float, default=0.2, help="evolve: share of parent choice spread evenly")
    g.add_argument("--reuse-penalty", type=float, default=0.5, help="evolve: penalty per earlier use of a parent")
    g.add_argument("--seed-kernel", action="append", type=Path, default=[], metavar="FILE",
                   help="a kernel (ModelNew file) entering the archive at the start; repeatable")
    g.add_argument("--search-seed", type=int, default=None, help="seed of the search's own random choices")

    g = p.add_argument_group("budgets (the first reached stops the run; on resume they replace the stored ones)")
    g.add_argument("--rounds", type=int, default=None, help="LLM rounds (default: refine 5, branch 3, evolve 5)")
    g.add_argument("--max-candidates", type=int, default=None, help="candidates proposed by the model")
    g.add_argument("--max-tokens", type=int, default=None, help="input + output tokens")
    g.add_argument("--max-cost", type=float, default=None, help="USD")
    g.add_argument("--max-time", type=_duration, default=None, help="active wall time (90, 30m, 2h)")
    g.add_argument("--target-speedup", type=float, default=None, help="stop at a correct kernel this much faster than eager")
    g.add_argument("--target-floor", type=float, default=None, metavar="P",
                   help="stop at a correct kernel that reaches P %% of the roofline floor (100: at the measured "
                        "bandwidth or matmul rate of the device)")

    g = p.add_argument_group("LLM")
    g.add_argument("--temperature", type=float, default=0.7)
    g.add_argument("--max-answer-tokens", type=int, default=8192, help="max_tokens of each answer")
    g.add_argument("--llm-timeout", type=float, default=None,
                   help=f"seconds per request (default {DEFAULT_TIMEOUT_S:g}); exchange: how long each question "
                        "waits for its answer before the run stops to be resumed (0: don't wait)")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, DeepSeek, ...)")
    g.add_argument("--api-key-env", default=None, help="environment variable holding the API key")
    g.add_argument("--llm-jobs", type=int, default=4, help="parallel requests")
    g.add_argument("--prices", default=None, help="JSON price table (USD per million tokens) to extend the defaults")
    g.add_argument("--prompts", default=None, help="directory of prompt templates overriding the built-in ones")
    g.add_argument("--hardware", default=None, help="hardware description for the prompts (default: detected)")
    g.add_argument("--playbook", choices=PLAYBOOK_MODES, default=None,
                   help="add the technique notes that fit the problem and its profile to the prompts, with "
                        "an exemplar kernel written for another problem in prompts that ask for code ('notes': cite the "
                        "exemplars, no source) (default on; kept on resume unless given)")

    g = p.add_argument_group("evaluation")
    g.add_argument("--device", choices=DEVICES, default=None, help="default: cuda if available, else cpu")
    g.add_argument("--backend", choices=["cpp", "cuda", "triton", "cute", "tilelang"], default=None,
                   help="default: cpp on cpu, cuda on cuda")
    add_precision_option(g)
    g.add_argument("--atol", type=float, default=None)
    g.add_argument("--rtol", type=float, default=None)
    g.add_argument("--trials", type=int, default=5)
    add_seed_option(g)
    g.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    g.add_argument("--torch-fallback", choices=FALLBACK_POLICIES, default=None,
                   help="kernels whose work PyTorch does (torch ops in Python, ATen/cuBLAS/cuDNN in the extension, "
                        "or ATen/library kernels taking >=50%% of the GPU time) are correct with the flag "
                        "torch_fallback. mark (default): never the run's best, a parent, a verify leader or an "
                        "export row; allow: ranked like any kernel; reject: rejected by the evaluator. On resume, "
                        "mark and allow may be switched")
    g.add_argument("--build-timeout", type=float, default=900.0)
    g.add_argument("--run-timeout", type=float, default=300.0)
    g.add_argument("--warmup", type=int, default=3)
    g.add_argument("--min-reps", type=int, default=10)
    g.add_argument("--max-reps", type=int, default=100)
    g.add_argument("--timing-budget", type=float, default=10.0, help="seconds for each timed loop")
    g.add_argument("--input-sets", type=int, default=3)
    add_profile_options(g)
    g.add_argument("-j", "--jobs", "--build-jobs", dest="jobs", type=int, default=None,
                   help="parallel builds (default: the cores no evaluation lane reserves)")
    from kernelsearch.cli.executor_opts import add_executor_options

    add_executor_options(g)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="a run's round-by-round trajectory, best kernel and LLM totals")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("best", help="write a run's best kernel as a standalone ModelNew file")
    p.add_argument("run_dir", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=cmd_best)


# -- configuration --------------------------------------------------------------------------
def _eval_config(args: argparse.Namespace, device: str) -> EvalConfig:
    if args.trials < 1 or args.max_reps < 1 or args.min_reps < 1:
        raise UsageError("--trials, --min-reps and --max-reps must be at least 1")
    timing = TimingConfig(warmup=args.warmup, min_reps=min(args.min_reps, args.max_reps), max_reps=args.max_reps,
                          budget_s=args.timing_budget, input_sets=max(1, args.input_sets),
                          spot_checks=min(2, max(1, args.input_sets)))
    return EvalConfig(device=device, precision=args.precision, atol=args.atol, rtol=args.rtol, trials=args.trials,
                      seed=args.seed,
                      compile_baseline=not args.no_compile,
                      torch_fallback="reject" if args.torch_fallback == "reject" else "mark", timing=timing,
                      limits=Limits(build_timeout_s=args.build_timeout, run_timeout_s=args.run_timeout),
                      profile=not args.no_profile, ncu=args.ncu)


def _budgets(args: argparse.Namespace, base: Budgets | None = None) -> Budgets:
    given = {field: getattr(args, flag) for flag, field in BUDGET_FLAGS.items() if getattr(args, flag) is not None}
    for flag, field in BUDGET_FLAGS.items():
        if field in given and given[field] <= 0:
            raise UsageError(f"--{flag.replace('_', '-')}: must be positive")
    return replace(base or Budgets(), **given)


def _hardware(args: argparse.Namespace, problem: Any, device: str) -> str:
    from kernelsearch.problems.describe import describe, format_shape

    if args.hardware:
        text = args.hardware
    elif device == "cuda" and default_device() == "cuda":
        from kernelsearch.llm.prompts import HardwareContext

        text = HardwareContext.from_torch().describe()
    elif device == "cuda":
        text = "An NVIDIA GPU (not visible where this run was created; pass --hardware to describe it)."
    else:
        from kernelsearch.evaluator.evaluate import host_device_name

        text = f"CPU: {host_device_name('cpu')}. The kernel runs on the CPU."  # the name has the core count
    desc = describe(problem, device)
    if not desc.error:
        text += f"\nThe kernel is evaluated at these input shapes: {format_shape(desc.inputs)}."
    return text


def _new_config(args: argparse.Namespace, problem: Any, device: str) -> RunConfig:
    from kernelsearch.search.strategies import REGISTRY

    if not args.strategy:
        raise UsageError("--strategy is required for a new run")
    if not args.llm:
        raise UsageError("--llm PROVIDER:MODEL is required for a new run (e.g. openai:gpt-4o, exchange:DIR)")
    for name in ("n", "top_k", "ideas", "realisations", "llm_jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    n = args.n if args.n is not None else (1 if args.strategy == "refine" else 4)
    params = StrategyParams(n=n, top_k=args.top_k, num_ideas=args.ideas, realisations=args.realisations,
                            crossover_rate=args.crossover_rate, explore=args.explore, reuse_penalty=args.reuse_penalty,
                            seed=args.search_seed if args.search_seed is not None else int.from_bytes(os.urandom(4), "little"))
    budgets = _budgets(args)
    if budgets.rounds is None:
        budgets = replace(budgets, rounds=REGISTRY[args.strategy].default_rounds)
    return RunConfig(
        strategy=args.strategy, llm=args.llm, problem_name=problem.name,
        backend=args.backend or DEVICE_BACKEND[device], hardware=_hardware(args, problem, device),
        temperature=args.temperature, max_tokens=args.max_answer_tokens, llm_timeout=args.llm_timeout,
        base_url=args.base_url, api_key_env=args.api_key_env, llm_jobs=args.llm_jobs, build_jobs=args.jobs,
        prompts_dir=args.prompts, prices=args.prices, params=params, budgets=budgets,
        eval=_eval_config(args, device), torch_fallback=args.torch_fallback or "mark",
        playbook=args.playbook or "on",
    )


def _resumed_config(args: argparse.Namespace, config: RunConfig) -> RunConfig:
    """Budgets, provider, parallelism, the playbook and whether PyTorch fallbacks rank (mark or
    allow) may change on resume; what is searched and how it is judged may not."""
    changes: dict[str, Any] = {"budgets": _budgets(args, config.budgets)}
    policy = args.torch_fallback
    if policy is not None and policy != config.torch_fallback:
        if "reject" in (policy, config.torch_fallback):
            raise UsageError(f"--torch-fallback {policy}: this run was made with --torch-fallback "
                             f"{config.torch_fallback}; only mark and allow may be switched on resume "
                             "(reject changes how kernels are judged)")
        changes["torch_fallback"] = policy
    if args.llm:
        changes["llm"] = args.llm
    if args.llm_timeout is not None:
        changes["llm_timeout"] = args.llm_timeout
    if args.jobs is not None:
        changes["build_jobs"] = args.jobs
    if args.playbook is not None:  # only later prompts change; answered ones are kept
        changes["playbook"] = args.playbook
    for name in ("base_url", "api_key_env", "prices"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    return config.with_(**changes)


def _confirmed_figure(store: RunStore, candidate_id: str) -> str:
    """The kernel's figure once re-verified (a confirmed time replaces the screening one), as
    `show` prints it below, so the progress figures above are not the last word."""
    from kernelsearch.search.ranking import pct_text
    from kernelsearch.search.report import figure

    best = store.best()
    fig = figure(store, candidate_id)
    if best is None or best.candidate_id != candidate_id or fig.vs_eager is None:
        return ""
    floor = f", {pct_text(best.pct_of_floor)} of the roofline floor" if best.pct_of_floor else ""
    return f"; now {fig.text()}{floor}"


# -- commands -------------------------------------------------------------------------------
def _session(run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from kernelsearch.search.driver import Driver
    from kernelsearch.search.progress import RichView, View
    from kernelsearch.search.report import trajectory

    with RunStore(run_dir) as store:
        run = store.run()
        if args.resume is not None:
            config = _resumed_config(args, run.config)
            if config != run.config:
                store.set_config(config)
        else:
            config = run.config
        if config.eval.device == "cuda" and default_device() != "cuda" and args.phase != "propose":
            raise UsageError(f"{run_dir}: this run evaluates on cuda and no CUDA device is visible here; "
                             "use --phase propose here and --phase evaluate on a GPU machine")
        view = View() if args.quiet or args.json else RichView()
        from kernelsearch.cli.executor_opts import executor_options

        try:
            ex_opts = executor_options(args)
        except ValueError as e:
            raise UsageError(str(e)) from e
        driver = Driver(store, view=view, executor=args.executor, executor_options=ex_opts)
        try:
            stop = driver.run(args.phase)  # RunBusy when another session holds the run
        except LLMError as e:  # a provider that cannot be made (bad spec, SDK missing, no key)
            store.set_status("stopped", "llm_error", str(e)[:500])
            raise
        if args.phase is None and not args.no_verify and stop.status in ("finished", "stopped"):
            from kernelsearch.search.verify_run import verify_best

            for res in verify_best(run_dir, top=1):
                if not (args.quiet or args.json):
                    print(f"re-verification of {res.candidate_id}: {'passed' if res.ok else 'FAILED'} ({res.reason})"
                          + _confirmed_figure(store, res.candidate_id))
        llm = driver.session_llm
        summary = trajectory(store)
        summary["session"] = {"stop_reason": stop.reason, "detail": stop.detail, "llm_calls": llm.calls,
                              "cached_calls": llm.cached_calls, "failed_calls": llm.failed_calls,
                              "pending_calls": llm.pending_calls}
        summary["run_dir"] = str(run_dir)
        return summary


def cmd_run(args: argparse.Namespace) -> int:
    from kernelsearch.records.candidate import Candidate
    from kernelsearch.search.driver import create_run

    failures: list = []  # problem files of a directory that failed to load
    several = False
    if args.resume is not None:
        if args.problem or args.out or args.strategy or args.seed_kernel:
            raise UsageError("--resume RUN_DIR continues a run: leave out PROBLEM, --out, --strategy and --seed-kernel")
        dirs = find_runs(args.resume)
    else:
        if not args.problem or not args.out:
            raise UsageError("a new run needs PROBLEM and --out RUN_DIR (or use --resume RUN_DIR)")
        if args.phase == "evaluate":
            raise UsageError("--phase evaluate needs an existing run: use --resume RUN_DIR --phase evaluate")
        device = args.device or default_device()
        if device == "cuda" and default_device() != "cuda" and args.phase != "propose":
            raise UsageError("--device cuda: no CUDA device is available here (use --phase propose to only generate)")
        for path in args.seed_kernel:
            if not path.is_file():
                raise UsageError(f"--seed-kernel {path}: no such file")
        if args.strategy and args.llm:  # before loading: once files fail to load, the exit status is 3
            _check_provider(RunConfig(strategy=args.strategy, llm=args.llm, problem_name="", backend="",
                                      llm_timeout=args.llm_timeout, base_url=args.base_url,
                                      api_key_env=args.api_key_env))
        problems, failures = load_problem_set(args.problem)  # failures reported on stderr
        warn_flagged(problems, device, args.precision)  # the problem linter's advice, on stderr
        seeds = [Candidate.from_file(s) for s in args.seed_kernel]
        several = len(problems) + len(failures) > 1
        dirs = [args.out / p.name for p in problems] if several else [args.out]
        for d in dirs:
            if RunStore.exists(d):
                raise UsageError(f"{d} already holds a run: continue it with `kernelsearch run --resume {args.out}`")
        for problem, d in zip(problems, dirs, strict=True):
            create_run(d, problem, _new_config(args, problem, device), seeds)
    summaries = [_session(d, args) for d in dirs]
    if args.json:
        if several:
            out: dict[str, Any] = {"runs": summaries, "failed_to_load": [f.to_dict() for f in failures]}
        else:
            out = summaries[0] if len(summaries) == 1 else {"runs": summaries}
        print(json.dumps(out, default=str))
    else:
        from kernelsearch.search.report import print_trajectory

        for s in summaries:
            print_trajectory(s)
    failed = [s for s in summaries if s["session"]["stop_reason"] == "llm_error"]
    if failed:
        raise LLMError(f"{failed[0]['run_dir']}: the run stopped: its LLM provider failed ({failed[0]['session']['detail']})"
                       + (f"; and {len(failed) - 1} more run(s)" if len(failed) > 1 else ""))
    return done(failures)


def _fast_p(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    from kernelsearch.metrics.fastp import (
        FAST_P_THRESHOLDS,
        correctness_rate,
        fast_p_table,
        geomean,
    )

    out: dict[str, Any] = {}
    for key, field in (("eager", "speedup_vs_eager"), ("compile", "speedup_vs_compile")):
        sp = [s["best"][field] if s["best"]["candidate_id"] else None for s in summaries]
        out[key] = {"fast_p": {str(p): v for p, v in fast_p_table(sp, FAST_P_THRESHOLDS).items()},
                    "geomean_speedup": geomean(sp)}
    out["correctness_rate"] = correctness_rate([1.0 if s["best"]["candidate_id"] else None for s in summaries])
    return out


def cmd_show(args: argparse.Namespace) -> int:
    from kernelsearch.search.report import print_trajectory, trajectory

    summaries = []
    for d in find_runs(args.run_dir):
        with RunStore(d) as store:
            summaries.append(trajectory(store))
    if args.json:
        out = summaries[0] if len(summaries) == 1 else {"runs": summaries, **_fast_p(summaries)}
        print(json.dumps(out, default=str))
        return 0
    for s in summaries:
        print_trajectory(s)
    if len(summaries) > 1:
        f = _fast_p(summaries)
        print(f"{len(summaries)} problems, correct on {f['correctness_rate']:.0%}; fast_p vs eager: "
              + ", ".join(f"p={p}: {v:.0%}" for p, v in f["eager"]["fast_p"].items()))
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    from kernelsearch.search.report import figure, published

    dirs = find_runs(args.run_dir, one=True)
    with RunStore(dirs[0]) as store:
        run = store.run()
        best = store.best()
        if best is None:
            held = store.held_out()
            raise UsageError(f"{dirs[0]}: no correct kernel yet" + (
                f" of its own ({len(held)} held out as PyTorch fallbacks, torch_fallback; "
                f"`kernelsearch run --resume {dirs[0]} --torch-fallback allow` ranks them)" if held else ""))
        source = store.candidate(best.candidate_id).source
        pub = published(store, best.candidate_id, run.config.eval.device)
        fig = figure(store, best.candidate_id)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(source)
    text = fig.text() if fig.vs_eager else "speedup unknown"  # as `show`, progress and the HTML report give it
    if fig.spread is not None:
        text += f" ±{100 * fig.spread:.0f}%"
    print(f"wrote {args.output}: candidate {best.candidate_id}, {text} ({pub['timed']})", file=sys.stderr)
    return 0
