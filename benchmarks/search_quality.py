"""A benchmark of search itself: `branch` runs with and without the technique playbook,
answered by a real model through `exchange:`, evaluated on the device.

Each problem of a problem set (default `suite:wall`) gets two runs that differ only in
`--playbook on|off`: the same strategy, rounds and options, so the same candidate budget (a
branch round seeds from the correct kernels, so an arm with fewer of them can make fewer
candidates: the report shows the counts and names the problems where they differ). The model is
`exchange:WORK/exchange`, one directory for both arms: whoever answers (a person, an agent
standing in for an API) works through one queue, and a question both arms ask alike (no notes
chosen) is one file, answered once. Nothing here searches: every step is `kernelsearch run` (or
`verify`) on the runs' own directories, so they are ordinary runs (`kernelsearch show` works on
them) and every phase resumes from what they hold.

Phases (the same `--work DIR` each time; each may be repeated and picks up where it stopped):

    propose   create the runs (first call), then move each as far as its answers allow: post
              the round's questions, read the answers, commit the candidates. Prints how many
              questions wait in WORK/exchange/requests.
    evaluate  on the device: build every run's pending candidates at once, across the
              machine's cores, then evaluate them run by run; after all of them, a run whose
              search is done gets its best kernel re-verified and its time confirmed
              (`kernelsearch verify --top 1`), once.
    report    per problem and arm: the best kernel's % of the library kernel and of the
              roofline floor, fast_1 against eager and torch.compile, correct rate, candidates,
              tokens; `--json FILE`, `--markdown` (for docs/measurements.md).

Usage (see docs/search.md, "Benchmark of search quality"):

    python benchmarks/search_quality.py propose --work .ext/sq --hardware "GPU: NVIDIA H100 ..."
    python benchmarks/search_quality.py evaluate --work .ext/sq     # on the GPU machine
    python benchmarks/search_quality.py report --work .ext/sq [--json sq.json] [--markdown]

Options of `kernelsearch run` after `--` go to every run at creation (both arms alike), e.g.
`propose --work W -- --top-k 2 --ideas 3 --realisations 2 --max-candidates 30`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelsearch.cli.common import default_device, load_problem_set
from kernelsearch.cli.main import main as kernelsearch
from kernelsearch.evaluator.builds.prebuild import prebuild_each
from kernelsearch.metrics.fastp import clears, correctness_rate, fast_p, geomean
from kernelsearch.search.budgets import round_stop
from kernelsearch.search.driver import Driver
from kernelsearch.search.report import trajectory
from kernelsearch.search.store import RunStore

ARMS = ("on", "off")  # --playbook of the two runs of each problem
STRATEGY = "branch"
SETTINGS_FILE = "settings.json"
# the benchmark sets these for both arms; taking them from `-- RUN OPTIONS` would unpair the arms
CONTROLLED = ("--strategy", "--llm", "--out", "--resume", "--phase", "--playbook", "--rounds", "--json", "-q",
              "--quiet", "--device", "--hardware", "--llm-timeout")
# run states, in the order a run goes through them
TO_PROPOSE, WAITING, TO_EVALUATE, DONE, FAILED = "to propose", "waiting", "to evaluate", "done", "failed"


# -- settings and layout ----------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """What the runs are made with, kept in WORK/settings.json: later calls must not change it,
    or the table would compare runs made differently."""

    problems: str = "suite:wall"
    rounds: int = 3
    device: str = "cuda"
    hardware: str | None = None
    run_args: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        return cls(**{**d, "run_args": tuple(d.get("run_args", ()))})


@dataclass(frozen=True)
class RunRef:
    """One run of the benchmark: a problem under one arm, in WORK/runs/playbook-ARM/PROBLEM."""

    problem: str
    arm: str
    dir: Path


class Work:
    """The benchmark's directory: settings, the shared exchange directory and the runs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def exchange(self) -> Path:
        return (self.root / "exchange").resolve()

    def run_dir(self, arm: str, problem: str) -> Path:
        return self.root / "runs" / f"playbook-{arm}" / problem

    def load_settings(self) -> Settings | None:
        path = self.root / SETTINGS_FILE
        return Settings.from_dict(json.loads(path.read_text())) if path.is_file() else None

    def save_settings(self, s: Settings) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / SETTINGS_FILE).write_text(json.dumps(asdict(s), indent=1) + "\n")

    def runs(self, only: list[str] | None = None) -> list[RunRef]:
        """The runs made so far (problem order, then arm), those whose name contains an --only word."""
        names = sorted({d.name for arm in ARMS for d in (self.root / "runs" / f"playbook-{arm}").glob("*")
                        if RunStore.exists(d)})
        return [RunRef(n, arm, self.run_dir(arm, n)) for n in names if _selected(n, only) for arm in ARMS
                if RunStore.exists(self.run_dir(arm, n))]

    def unanswered(self) -> list[Path]:
        """Request files with no response file yet: what the model still has to answer."""
        reqs = sorted((self.exchange / "requests").glob("*.json"))
        return [r for r in reqs if not (self.exchange / "responses" / r.name).exists()]


def _selected(name: str, only: list[str] | None) -> bool:
    return not only or any(word in name for word in only)


def resolve_settings(args: argparse.Namespace, stored: Settings | None) -> Settings:
    """The stored settings, or new ones from the arguments; a conflicting argument is an error
    (start another WORK for other settings), since both arms and all problems must match."""
    given = {k: v for k, v in (("problems", args.problems), ("rounds", args.rounds), ("device", args.device),
                               ("hardware", args.hardware)) if v is not None}
    if args.run_args:
        given["run_args"] = tuple(args.run_args)
    if stored is None:
        for flag in given.get("run_args", ()):
            if flag.split("=")[0] in CONTROLLED:
                raise SystemExit(f"search_quality: {flag} is set by the benchmark; leave it out of the run options")
        return Settings(**given)
    clash = [k for k, v in given.items() if getattr(stored, k) != v]
    if clash:
        raise SystemExit(f"search_quality: {args.work} was made with other {', '.join(clash)} "
                         f"({', '.join(f'{k}={getattr(stored, k)!r}' for k in clash)}); use another --work")
    return stored


# -- driving the kernelsearch CLI ---------------------------------------------------------------
def ks(*argv: str) -> int:
    """Run a `kernelsearch` command in this process and return its exit status: the runs are
    driven exactly as on the command line, without paying for a new interpreter each time. Its
    --json summary is dropped (the tables here read the archives); its stderr passes through."""
    with contextlib.redirect_stdout(io.StringIO()):
        return kernelsearch([str(a) for a in argv])


@dataclass
class State:
    """Where a run stands, read from its archive."""

    label: str  # TO_PROPOSE, WAITING, TO_EVALUATE, DONE or FAILED
    detail: str
    rounds_done: int  # LLM rounds evaluated
    rounds_budget: int | None
    pending: int  # candidates not evaluated yet


def run_state(run_dir: Path) -> State:
    """The run's state. Done means the driver would plan no further round (`round_stop` over
    what the run has spent, the same check `kernelsearch run` makes) or the strategy ended."""
    with RunStore(run_dir) as store:
        run = store.run()
        rounds = [r for r in store.rounds() if r.kind == "llm"]
        evaluated = sum(r.status == "evaluated" for r in rounds)
        pending = sum(r["status"] == "pending" for r in store.lineage())
        state = State("", run.stop_detail or "", evaluated, run.config.budgets.rounds, pending)
        last = rounds[-1] if rounds else None
        stop = _budget_stop(store) if last is None or last.status == "evaluated" else None
        if (last is not None and last.status == "proposed") or pending:
            state.label = TO_EVALUATE
        elif run.status == "waiting":
            state.label, state.detail = WAITING, state.detail.split(" wait for an answer")[0] + " unanswered"
        elif run.stop_reason == "llm_error":
            state.label = FAILED
        elif run.status == "finished" or run.status == "stopped" or stop:  # a budget ended it
            state.label, state.detail = DONE, stop or state.detail
        else:
            state.label = TO_PROPOSE
        return state


def _budget_stop(store: RunStore) -> str | None:
    """Why the next round would not be planned, if it would not (the driver's own accounting)."""
    stop = round_stop(store.run().config.budgets, Driver(store).spent())
    return f"{stop.reason}: {stop.detail}" if stop else None


# -- propose ----------------------------------------------------------------------------------
def create_argv(work: Work, s: Settings, ref: RunRef, problem_path: Path, wait: float) -> list[str]:
    """`kernelsearch run` for a new run of one arm: both arms differ in --playbook only."""
    hardware = ["--hardware", s.hardware] if s.hardware else []
    return ["run", str(problem_path), "--out", str(ref.dir), "--strategy", STRATEGY,
            "--llm", f"exchange:{work.exchange}", "--phase", "propose", "--playbook", ref.arm,
            "--rounds", str(s.rounds), "--device", s.device, *hardware, "--llm-timeout", str(wait),
            "--json", "-q", *s.run_args]


def resume_argv(work: Work, ref: RunRef, phase: str, wait: float) -> list[str]:
    """`kernelsearch run --resume` for one phase; the exchange directory is named again, so a
    WORK copied elsewhere (to the device and back) still finds its answers."""
    llm = ["--llm", f"exchange:{work.exchange}", "--llm-timeout", str(wait)] if phase == "propose" else []
    return ["run", "--resume", str(ref.dir), "--phase", phase, *llm, "--json", "-q"]


def ensure_runs(work: Work, s: Settings, only: list[str] | None, wait: float) -> list[RunRef]:
    """Create the runs not made yet (each creation also proposes its first questions); the
    problems come from the problem set as the CLI loads it (files that fail are reported)."""
    problems, _ = load_problem_set(s.problems)
    made: list[RunRef] = []
    for p in problems:
        if not _selected(p.name, only):
            continue
        for arm in ARMS:
            ref = RunRef(p.name, arm, work.run_dir(arm, p.name))
            if not RunStore.exists(ref.dir):
                code = ks(*create_argv(work, s, ref, Path(p.path), wait))
                if code not in (0, 1):  # 1: the provider failed, recorded in the run (state "failed")
                    raise SystemExit(f"search_quality: creating {ref.dir} failed (exit {code})")
                made.append(ref)
    return made


def warn_hardware(s: Settings) -> None:
    """Where the GPU is not visible and no --hardware was given, the prompts cannot name the GPU
    and the playbook cannot see its SM version (no Hopper notes): say so before runs are made."""
    if s.device == "cuda" and not s.hardware and default_device() != "cuda":
        print("search_quality: warning: no GPU visible here and no --hardware: the prompts will not name the GPU "
              "and the playbook will not see its SM version", file=sys.stderr)


def propose(args: argparse.Namespace) -> int:
    """One pass over the runs: create the missing ones, move the others as far as their answers
    allow, then say what waits (the request count is what the answerer needs)."""
    work = Work(args.work)
    s = resolve_settings(args, work.load_settings())
    work.save_settings(s)
    warn_hardware(s)
    made = ensure_runs(work, s, args.only, args.wait)
    for ref in work.runs(args.only):
        if ref not in made and run_state(ref.dir).label in (TO_PROPOSE, WAITING, FAILED):  # failed: ask again
            ks(*resume_argv(work, ref, "propose", args.wait))
    states = {ref: run_state(ref.dir) for ref in work.runs(args.only)}
    print_states(states, f"search quality: {work.root} after propose")
    open_requests = work.unanswered()
    print(f"{len(open_requests)} request(s) wait for an answer in {work.exchange / 'requests'} "
          f"(answers: {work.exchange / 'responses'}/<id>.json, format in {work.exchange / 'README.txt'})")
    print(next_step(states, len(open_requests)))
    return 0


def next_step(states: dict[RunRef, State], open_requests: int) -> str:
    """What to do next, from the runs' states."""
    labels = [st.label for st in states.values()]
    steps = []
    if open_requests:
        steps.append("answer the requests, then `propose` again")
    if TO_EVALUATE in labels:
        steps.append(f"`evaluate` on the device ({labels.count(TO_EVALUATE)} run(s) have candidates)")
    if TO_PROPOSE in labels and not open_requests:
        steps.append("`propose` again (the next round)")
    if FAILED in labels:
        steps.append(f"{labels.count(FAILED)} run(s) stopped on an LLM error: see `kernelsearch show`")
    if labels and all(lb == DONE for lb in labels):
        steps.append("every run is done: `report`")
    return "next: " + ("; ".join(steps) if steps else "nothing to do")


def print_states(states: dict[RunRef, State], title: str) -> None:
    """Each run's state after a phase, so the operator sees which runs still need what."""
    t = Table(title=escape(title), header_style="bold")
    for col in ("problem", "playbook", "rounds", "state", "pending", "detail"):
        t.add_column(col, overflow="fold")
    for ref, st in states.items():
        t.add_row(ref.problem, ref.arm, f"{st.rounds_done}/{st.rounds_budget or '-'}", st.label, str(st.pending),
                  escape(st.detail[:120]))
    Console(width=None if sys.stdout.isatty() else 160).print(t)


# -- evaluate ---------------------------------------------------------------------------------
def evaluate(args: argparse.Namespace) -> int:
    """Evaluate every run with pending candidates, then verify the finished ones whose best is
    not confirmed yet: all evaluations first, so a slow verification never takes the time a
    later run's round needed. Stops starting new runs after --budget-s, and turns SIGTERM (from
    `timeout`) into a clean stop (running evaluations are recorded, queued ones stay pending
    for the next call). Exit 1 when a run could not be evaluated (no GPU, a busy run), 130 when
    interrupted."""
    work = Work(args.work)
    start, status = time.monotonic(), 0

    def in_budget() -> bool:
        if args.budget_s is not None and time.monotonic() - start >= args.budget_s:
            print(f"search_quality: --budget-s {args.budget_s:g} spent; the rest waits for the next call")
            return False
        return True

    try:
        with _sigterm_as_interrupt():
            refs = work.runs(args.only)
            prebuild_pending(refs)
            steps = [(evaluate_run, ref) for ref in refs]
            if not args.no_verify:
                steps += [(verify_run, ref) for ref in refs]
            for step, ref in steps:
                if not in_budget():
                    break
                if not step(work, ref):
                    status = 1
                    break
    except KeyboardInterrupt:
        print("search_quality: interrupted; `evaluate` again continues", file=sys.stderr)
        status = 130
    print_states({ref: run_state(ref.dir) for ref in work.runs(args.only)}, f"search quality: {work.root} after evaluate")
    return status


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, which `kernelsearch run` turns into a clean stop;
    the previous handler is back afterwards (only the main thread may set one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def prebuild_pending(refs: list[RunRef]) -> tuple[int, int]:
    """Build the pending candidates of every run before any is evaluated; return (built,
    failed). A run's session builds only its own candidates, when its turn comes, so the device
    waited on one run's builds after another (a CUDA extension takes 40-90 s; round 0 of the
    wall problems spent most of its 86 s per run there). The sessions then find the builds in
    the cache."""
    pairs = []
    for ref in refs:
        if run_state(ref.dir).label == TO_EVALUATE:
            with RunStore(ref.dir) as store:
                run = store.run()
                pairs += [(c, run.config.eval) for c in store.pending()]
    t0 = time.monotonic()
    built, failed = prebuild_each(pairs)
    if built or failed:
        print(f"search_quality: built {built} of {built + failed} pending candidates in {time.monotonic() - t0:.0f} s")
    return built, failed


def evaluate_run(work: Work, ref: RunRef) -> bool:
    """One run's pending candidates. False when the session was interrupted or could not run
    (no device): stop there."""
    if run_state(ref.dir).label == TO_EVALUATE:
        code = ks(*resume_argv(work, ref, "evaluate", 0))
        if code != 0:
            print(f"search_quality: evaluating {ref.dir} stopped (exit {code})", file=sys.stderr)
            return False
    return True


def verify_run(work: Work, ref: RunRef) -> bool:
    """A finished run's best kernel re-verified and its time confirmed over fresh processes (the
    figure the report then publishes), unless that is done. False as for ``evaluate_run``."""
    if run_state(ref.dir).label != DONE or report_row(ref).timed != "1 process":
        return True
    code = ks("verify", str(ref.dir), "--top", "1", "--no-sanitize", "--json")
    if code != 0:
        print(f"search_quality: verifying {ref.dir} stopped (exit {code})", file=sys.stderr)
        return False
    return True


# -- report -----------------------------------------------------------------------------------
@dataclass
class Row:
    """One run's line in the table (JSON: these fields)."""

    problem: str
    arm: str
    run_dir: str
    state: str
    rounds_done: int
    rounds_budget: int | None
    candidates: int  # proposed by the model
    evaluated: int
    correct: int  # judged correct (held-out PyTorch fallbacks included)
    held_out: int
    correct_rate: float | None
    best_candidate: str | None
    pct_of_library: float | None
    pct_of_floor: float | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    fast_1_eager: bool
    fast_1_compile: bool
    timed: str  # "confirmed" or "1 process"
    library: str
    input_tokens: int
    output_tokens: int
    llm_calls: int
    models: list[str] = field(default_factory=list)
    device_name: str = ""


def report_row(ref: RunRef) -> Row:
    """The run's figures as `kernelsearch show` computes them (`search.report.trajectory`)."""
    st = run_state(ref.dir)
    with RunStore(ref.dir) as store:
        t = trajectory(store)
        models, device_name = _models_and_device(store)
    b = t["best"]
    correct = sum(r["correct"] for r in t["rounds"])
    eager, compiled = b["speedup_vs_eager"], b["speedup_vs_compile"]
    return Row(
        problem=ref.problem, arm=ref.arm, run_dir=str(ref.dir), state=st.label, rounds_done=st.rounds_done,
        rounds_budget=st.rounds_budget, candidates=t["candidates"], evaluated=t["evaluated"], correct=correct,
        held_out=len(t["held_out"]), correct_rate=correct / t["evaluated"] if t["evaluated"] else None,
        best_candidate=b["candidate_id"], pct_of_library=b["pct_of_library"], pct_of_floor=b["pct_of_floor"],
        speedup_vs_eager=eager, speedup_vs_compile=compiled,
        fast_1_eager=clears(eager, 1.0), fast_1_compile=clears(compiled, 1.0),
        timed="-" if b["candidate_id"] is None else "confirmed" if b.get("confirmation") else "1 process",
        library=t["library"],
        input_tokens=t["input_tokens"], output_tokens=t["output_tokens"], llm_calls=t["llm_calls"],
        models=models, device_name=device_name)


def _models_and_device(store: RunStore) -> tuple[list[str], str]:
    """Who answered (the models the responses named) and where the kernels were timed."""
    models = [r[0] for r in store.conn.execute(
        "SELECT DISTINCT model FROM llm_calls WHERE run_id=? AND answer IS NOT NULL AND model IS NOT NULL "
        "ORDER BY model", (store.run_id,))]
    dev = store.conn.execute("SELECT e.device_name FROM lineage l JOIN evaluations e ON e.id = l.evaluation_id "
                             "WHERE l.run_id=? AND e.device_name IS NOT NULL LIMIT 1", (store.run_id,)).fetchone()
    return models, dev[0] if dev else ""


def arm_summary(rows: list[Row]) -> dict[str, Any]:
    """Over the problems of one arm: fast_1 (KernelBench's: correct and faster; a problem with no
    correct kernel counts as unsolved), the pooled correct rate, the geometric mean of % of
    library, candidates and tokens."""
    correct = sum(r.correct for r in rows)
    evaluated = sum(r.evaluated for r in rows)
    return {
        "problems": len(rows),
        "solved": correctness_rate([r.speedup_vs_eager for r in rows]),
        "fast_1_eager": fast_p([r.speedup_vs_eager for r in rows], 1.0),
        "fast_1_compile": fast_p([r.speedup_vs_compile for r in rows], 1.0),
        "geomean_pct_of_library": geomean(r.pct_of_library for r in rows),
        "correct_rate": correct / evaluated if evaluated else None,
        "candidates": sum(r.candidates for r in rows), "evaluated": evaluated,
        "input_tokens": sum(r.input_tokens for r in rows), "output_tokens": sum(r.output_tokens for r in rows),
    }


def unequal(rows: list[Row]) -> list[str]:
    """Problems whose two arms evaluated different numbers of candidates (same budget, but a
    branch round has fewer seeds where fewer kernels were correct): the reader should know."""
    by_problem: dict[str, set[int]] = {}
    for r in rows:
        by_problem.setdefault(r.problem, set()).add(r.evaluated)
    return [p for p, counts in by_problem.items() if len(counts) > 1]


def build_report(work: Work, only: list[str] | None = None) -> dict[str, Any]:
    """Everything the tables show, as JSON-able data (what `--json` writes)."""
    rows = [report_row(ref) for ref in work.runs(only)]
    s = work.load_settings()
    return {"settings": asdict(s) if s else None, "strategy": STRATEGY,
            "rows": [asdict(r) for r in rows],
            "arms": {arm: arm_summary([r for r in rows if r.arm == arm]) for arm in ARMS},
            "unequal_candidates": unequal(rows),
            "models": sorted({m for r in rows for m in r.models}),
            "device_names": sorted({r.device_name for r in rows if r.device_name})}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _share(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


ROW_COLUMNS = ("problem", "playbook", "% of library", "% of floor", "vs eager", "vs compile", "fast_1 eager",
               "fast_1 compile", "correct", "candidates", "tokens in/out", "timed", "rounds")
ARM_COLUMNS = ("playbook", "problems", "solved", "fast_1 eager", "fast_1 compile", "geomean % of library",
               "correct", "candidates", "tokens in/out")


def row_cells(r: dict[str, Any]) -> list[str]:
    """One run's cells, shared by the terminal and the Markdown table so they cannot disagree."""
    correct = f"{r['correct']}/{r['evaluated']}" + (f" ({r['held_out']} held out)" if r["held_out"] else "")
    return [r["problem"], r["arm"], _pct(r["pct_of_library"]), _pct(r["pct_of_floor"]), _x(r["speedup_vs_eager"]),
            _x(r["speedup_vs_compile"]), "yes" if r["fast_1_eager"] else "no", "yes" if r["fast_1_compile"] else "no",
            correct, str(r["candidates"]), f"{r['input_tokens']:,}/{r['output_tokens']:,}", r["timed"],
            f"{r['rounds_done']}/{r['rounds_budget'] or '-'}" + ("" if r["state"] == DONE else f" ({r['state']})")]


def arm_cells(arm: str, a: dict[str, Any]) -> list[str]:
    """One arm's summary cells (terminal and Markdown alike)."""
    return [arm, str(a["problems"]), _share(a["solved"]), _share(a["fast_1_eager"]), _share(a["fast_1_compile"]),
            _pct(a["geomean_pct_of_library"]), _share(a["correct_rate"]), str(a["candidates"]),
            f"{a['input_tokens']:,}/{a['output_tokens']:,}"]


def caption(rep: dict[str, Any]) -> str:
    """How the figures were made (settings, device, who answered): a table without it misleads."""
    s = rep["settings"] or {}
    return (f"{rep['strategy']}, {s.get('rounds')} rounds, problems {s.get('problems')}, "
            f"options {' '.join(s.get('run_args') or []) or '(defaults)'}; device: "
            f"{', '.join(rep['device_names']) or '-'}; answered by: {', '.join(rep['models']) or '-'}")


def print_report(rep: dict[str, Any]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    t = Table(title=escape("search quality: " + caption(rep)), header_style="bold")
    for col in ROW_COLUMNS:
        t.add_column(col, overflow="fold")
    for r in rep["rows"]:
        t.add_row(*map(escape, row_cells(r)))
    console.print(t)
    a = Table(title="per arm, over the problems", header_style="bold")
    for col in ARM_COLUMNS:
        a.add_column(col)
    for arm, summary in rep["arms"].items():
        a.add_row(*arm_cells(arm, summary))
    console.print(a)
    if rep["unequal_candidates"]:
        console.print("the arms evaluated different numbers of candidates on: " + ", ".join(rep["unequal_candidates"]),
                      highlight=False)


def markdown(rep: dict[str, Any]) -> str:
    """The two tables as Markdown, for docs/measurements.md."""
    def table(cols: tuple[str, ...], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(r) + " |" for r in rows]

    lines = [f"Search quality: {caption(rep)}.", ""]
    lines += table(ROW_COLUMNS, [row_cells(r) for r in rep["rows"]]) + [""]
    lines += table(ARM_COLUMNS, [arm_cells(arm, a) for arm, a in rep["arms"].items()])
    if rep["unequal_candidates"]:
        lines += ["", "The arms evaluated different numbers of candidates on: " + ", ".join(rep["unequal_candidates"]) + "."]
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace) -> int:
    """Read every run's archive and print the tables (any time: unfinished runs say so)."""
    rep = build_report(Work(args.work), args.only)
    if args.json:
        args.json.write_text(json.dumps(rep, indent=1) + "\n")
    if args.markdown:
        print(markdown(rep), end="")
    else:
        print_report(rep)
    return 0


# -- command line -----------------------------------------------------------------------------
def _only(text: str) -> list[str]:
    return [w for w in text.split(",") if w]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="phase", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--work", type=Path, required=True, help="the benchmark's directory (its runs and state)")
    common.add_argument("--only", type=_only, default=None, help="comma-separated words: problems whose name has one")

    p = sub.add_parser("propose", parents=[common], help="create the runs, post and read the model's answers")
    p.add_argument("--problems", default=None, help="problem set, as `kernelsearch run` takes it (default suite:wall)")
    p.add_argument("--rounds", type=int, default=None, help="branch rounds (default 3)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="where the runs evaluate (default cuda)")
    p.add_argument("--hardware", default=None,
                   help="hardware text for the prompts (the playbook reads the SM version from it); needed where "
                        "the GPU is not visible, e.g. 'GPU: NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs'")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for each answer (default 0: post and go)")
    p.add_argument("run_args", nargs="*", help="after --: options of `kernelsearch run` for every run, at creation")
    p.set_defaults(func=propose)

    p = sub.add_parser("evaluate", parents=[common], help="evaluate pending candidates (on the device)")
    p.add_argument("--budget-s", type=float, default=None, help="start no new run's evaluation after this many seconds")
    p.add_argument("--no-verify", action="store_true", help="do not re-verify and confirm the best kernel of done runs")
    p.set_defaults(func=evaluate)

    p = sub.add_parser("report", parents=[common], help="print the table")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the report as JSON")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables instead (docs/measurements.md)")
    p.set_defaults(func=report)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
