"""Read run directories into plain records for the HTML report: the charts and tables never
touch SQLite, so they can be tested on hand-made records and every figure traces to a row."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelsearch.metrics.fastp import speedup_spread
from kernelsearch.records.result import EvalResult, Status
from kernelsearch.search.ranking import Baseline, pct_of
from kernelsearch.search.report import figure, idea_label, trajectory
from kernelsearch.search.store import RunStore

REFERENCE = "reference"  # the PyTorch reference: parent of kernels written from scratch


@dataclass
class CandidateRow:
    """One candidate of a run with its verdict; speedups are None unless it is correct, and
    the figure progress and `show` report (search.report.figure), ``figure`` saying which."""

    id: str
    round: int
    origin: str  # llm | seed
    parent_ids: list[str]
    idea_id: int | None
    idea: str
    family: str
    backend: str
    source: str
    status: str  # a Status value, or "pending"
    reason: str = ""
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    figure: str = ""  # what the speedups are: confirmed over N processes, or one evaluation vs the pooled eager
    spread_eager: float | None = None
    spread_compile: float | None = None
    candidate_ms: float | None = None
    ranked_ms: float | None = None  # the time the run ranks it by (confirmed where confirmed)
    roofline: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    verification: str = ""
    created_at: float = 0.0
    evaluated_at: float | None = None
    held_out: bool = False  # correct, but PyTorch's work: kept out of the run's ranking (RunStore.held_out)

    @property
    def evaluated(self) -> bool:
        return self.status != "pending"

    @property
    def correct(self) -> bool:
        return self.status == Status.CORRECT.value

    @property
    def ranked(self) -> bool:
        """Correct and one the run ranks: what the best-so-far and fast_p charts count."""
        return self.correct and not self.held_out

    @property
    def pct_of_floor(self) -> float | None:
        """Its ranked time against its roofline floor, as `show` and --target-floor count it."""
        v = (self.roofline or {}).get("floor_ms")
        return pct_of(float(v), self.ranked_ms or self.candidate_ms) if isinstance(v, (int, float)) else None

    @property
    def bound(self) -> str | None:
        v = (self.roofline or {}).get("bound")
        return str(v) if v else None


@dataclass
class IdeaInfo:
    id: int
    round: int
    text: str
    family: str
    parent_ids: list[str]
    outcome: str
    won: bool  # some kernel of this idea was correct and faster than its best parent


@dataclass
class CallRow:
    """One answered LLM call: when it came, what it used and cost."""

    created_at: float
    tokens: int
    cost_usd: float | None
    purpose: str


@dataclass
class RunData:
    label: str
    dir: Path
    run_id: str
    problem: str
    strategy: str
    llm: str
    device: str
    status: str
    stop_reason: str | None
    stop_detail: str | None
    created_at: float
    elapsed_s: float
    budgets: dict[str, Any]
    rounds: list[dict[str, Any]]
    best_id: str | None
    tokens: int
    cost_usd: float
    unpriced_calls: int
    candidates: list[CandidateRow] = field(default_factory=list)
    library: str = ""  # the library kernel eager runs for the problem (its LIBRARY), "" if not named
    best_pct_of_library: float | None = None  # as `show` has it: eager_ms / kernel_ms * 100
    ideas: list[IdeaInfo] = field(default_factory=list)
    calls: list[CallRow] = field(default_factory=list)

    @property
    def evaluated(self) -> list[CandidateRow]:
        """Evaluated candidates in the order they were evaluated."""
        done = [c for c in self.candidates if c.evaluated]
        return sorted(done, key=lambda c: (c.evaluated_at or c.created_at, c.created_at))

    @property
    def samples(self) -> list[CandidateRow]:
        """The model's evaluated kernels (seeds are not samples); all evaluated if none are."""
        llm = [c for c in self.evaluated if c.origin == "llm"]
        return llm or self.evaluated

    @property
    def best(self) -> CandidateRow | None:
        return self.by_id.get(self.best_id) if self.best_id else None

    @property
    def by_id(self) -> dict[str, CandidateRow]:
        return {c.id: c for c in self.candidates}


def ancestry(run: RunData, leaf: str) -> dict[str, list[str]]:
    """The best kernel's ancestors: candidate id -> its parents within the run; kernels the model
    wrote from the bare reference get the reference as parent."""
    by_id = run.by_id
    tree: dict[str, list[str]] = {}
    todo = [leaf]
    while todo:
        cid = todo.pop()
        if cid in tree:
            continue
        c = by_id[cid]
        parents = [p for p in c.parent_ids if p in by_id]
        if not parents and c.origin == "llm":
            parents = [REFERENCE]
        tree[cid] = parents
        todo.extend(p for p in parents if p != REFERENCE)
    if any(REFERENCE in ps for ps in tree.values()):
        tree[REFERENCE] = []
    return tree


def depths(tree: dict[str, list[str]]) -> dict[str, int]:
    """Longest path from a root, in topological order (no recursion: chains can be long)."""
    children: dict[str, list[str]] = {n: [] for n in tree}
    waiting = {n: len(ps) for n, ps in tree.items()}
    for n, ps in tree.items():
        for p in ps:
            children[p].append(n)
    depth = {n: 0 for n in tree}
    ready = [n for n, k in waiting.items() if k == 0]
    while ready:
        n = ready.pop()
        for ch in children[n]:
            depth[ch] = max(depth[ch], depth[n] + 1)
            waiting[ch] -= 1
            if waiting[ch] == 0:
                ready.append(ch)
    return depth


def _candidate(store: RunStore, row: dict[str, Any], base: Baseline, held_out: set[str]) -> CandidateRow:
    cand = store.candidate(row["candidate_id"])
    idea, family = idea_label(store, row)
    c = CandidateRow(
        id=row["candidate_id"],
        round=int(row["round"]),
        origin=row["origin"],
        parent_ids=json.loads(row["parent_ids"]),
        idea_id=row["idea_id"],
        idea=idea,
        family=family,
        backend=cand.backend,
        source=cand.source,
        status="pending",
        created_at=float(row["created_at"]),
        evaluated_at=row["evaluated_at"],
    )
    if row["status"] != "evaluated":
        return c
    r: EvalResult | None = store.result(c.id)
    if r is None:
        return c
    c.status, c.reason = r.status.value, r.reason
    c.held_out = c.id in held_out
    if c.held_out:
        c.reason = f"held out of the ranking: PyTorch did the work (torch_fallback); {c.reason}"
    c.ranked_ms = store.ranked_ms(c.id)
    fig = figure(store, c.id, base)  # the figure progress and `show` give
    c.speedup_eager, c.speedup_compile, c.figure = fig.vs_eager, fig.vs_compile, fig.basis
    c.spread_eager, c.spread_compile = speedup_spread(r, "eager"), speedup_spread(r, "compile")
    if fig.confirmed:  # the spread over the confirming processes (its compile figure has none)
        c.spread_eager, c.spread_compile = fig.spread, None
    c.candidate_ms, c.roofline, c.profile = r.candidate_ms, r.roofline, r.profile
    v = store.archive.verification(c.id)
    if v is not None:
        c.verification = "re-verified" if v[0] else f"failed re-verification: {v[1]}"
    return c


def _ideas(store: RunStore, cands: list[CandidateRow]) -> list[IdeaInfo]:
    speed = {
        c.id: c.speedup_eager
        for c in cands
        if c.ranked and not c.verification.startswith("failed")
    }
    out = []
    for i in store.ideas():
        bar = max((speed.get(p) or 0.0 for p in i.parent_ids), default=1.0) if i.parent_ids else 1.0
        won = any(c.idea_id == i.id and (speed.get(c.id) or 0.0) > bar for c in cands)
        out.append(IdeaInfo(i.id, i.round, i.text, i.family, i.parent_ids, i.outcome, won))
    return out


def load_run(store: RunStore, label: str) -> RunData:
    run = store.run()
    t = trajectory(store)
    base = store.baseline()
    held = set(store.held_out())
    cands = [_candidate(store, row, base, held) for row in store.lineage()]
    calls = [
        CallRow(
            float(c["created_at"]),
            int(c["input_tokens"]) + int(c["output_tokens"]),
            c["cost_usd"],
            c["purpose"] or "",
        )
        for c in store.calls()
        if c["answer"] is not None
    ]
    budgets = {k: v for k, v in asdict(run.config.budgets).items() if v is not None}
    return RunData(
        label=label,
        dir=store.dir,
        run_id=run.id,
        problem=t["problem"],
        strategy=run.strategy,
        llm=run.config.llm,
        device=t["device"],
        status=run.status,
        stop_reason=run.stop_reason,
        stop_detail=run.stop_detail,
        created_at=run.created_at,
        elapsed_s=run.elapsed_s,
        budgets=budgets,
        rounds=t["rounds"],
        best_id=t["best"]["candidate_id"],
        tokens=t["tokens"],
        cost_usd=t["cost_usd"],
        unpriced_calls=t["unpriced_calls"],
        candidates=cands,
        library=t["library"],
        best_pct_of_library=t["best"]["pct_of_library"],
        ideas=_ideas(store, cands),
        calls=calls,
    )


def load_runs(run_dirs: list[Path]) -> list[RunData]:
    """The run of each given directory, labelled "strategy @ dir-name" (made unique)."""
    runs: list[RunData] = []
    seen: dict[str, int] = {}
    for d in run_dirs:
        with RunStore(d) as store:
            label = f"{store.run().strategy} @ {Path(d).resolve().name}"
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:
                label += f" #{seen[label]}"
            runs.append(load_run(store, label))
    return runs
