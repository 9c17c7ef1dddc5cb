"""Rows of the exported dataset, built from a run's archive alone.

One row per (run, candidate): a kernel that was judged correct in that run and whose latest
re-verification passed (or, on request, one not re-verified yet), unless the run holds it out
as PyTorch's work (torch_fallback). The row carries everything a
training pipeline needs without opening the archive: the reference and kernel sources, the
timings with their noise, the idea that produced the kernel and the chain of ancestors it came
from. ``SCHEMA`` is the single description of the columns: the Parquet writer builds its Arrow
schema from it and docs/formats.md documents it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsearch.records.result import EvalResult, TimingStats
from kernelsearch.search.report import idea_label
from kernelsearch.search.store import NoRun, RunStore


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "string" | "int64" | "float64" | "bool" | "list<string>" | "list<lineage>"
    doc: str


# Fields of each ``lineage`` entry, in order.
LINEAGE_FIELDS: tuple[Column, ...] = (
    Column("candidate_id", "string", "the ancestor's candidate id"),
    Column("round", "int64", "the round it was proposed in"),
    Column("origin", "string", "`llm` or `seed`"),
    Column("idea", "string", "text of the idea that produced it"),
    Column("idea_family", "string", "that idea's family"),
    Column("status", "string", "its verdict in this run (an ancestor need not be correct)"),
    Column("speedup_vs_eager", "float64", "its speedup over eager PyTorch; null unless correct"),
)

SCHEMA: tuple[Column, ...] = (
    Column("run_id", "string", "id of the search run"),
    Column("run_dir", "string", "name of the run directory (last path component)"),
    Column("strategy", "string", "search strategy: single, best-of-n, refine, branch, evolve"),
    Column("llm", "string", "the run's `--llm` setting (`provider:model`)"),
    Column("problem", "string", "problem name (file stem, e.g. `02_softmax`)"),
    Column("problem_id", "string", "content hash of the problem file"),
    Column("reference_source", "string", "the problem file's text (the PyTorch reference `Model`)"),
    Column("candidate_id", "string", "content hash of the kernel source"),
    Column("kernel_source", "string", "the kernel: a Python file defining `ModelNew`"),
    Column("backend", "string", "cpp, cuda, triton or torch"),
    Column("round", "int64", "round of the run that proposed it (0: seeds or the first LLM round)"),
    Column("origin", "string", "`llm` (proposed by the model) or `seed` (given with --seed-kernel)"),
    Column("model", "string", "model that wrote it; null for seeds"),
    Column("parent_ids", "list<string>", "candidate ids of its direct parents (two for a crossover)"),
    Column("device", "string", "cpu or cuda"),
    Column("device_name", "string", "the device as the worker reported it"),
    Column("torch_version", "string", "PyTorch version of the evaluation"),
    Column("status", "string", "verdict of the evaluation; always `correct` in an export"),
    Column("reason", "string", "the evaluator's one-line reason"),
    Column("flags", "list<string>", "evaluator marks, e.g. `torch_fallback` (only in runs made with "
                                    "`--torch-fallback allow`: other runs do not export such kernels)"),
    Column("candidate_ms", "float64", "median time of the kernel's forward, ms"),
    Column("candidate_rel_spread", "float64", "IQR / median of the kernel's timings"),
    Column("eager_ms", "float64", "median time of the eager PyTorch reference, ms"),
    Column("eager_rel_spread", "float64", "IQR / median of the eager timings"),
    Column("compile_ms", "float64", "median time of `torch.compile(Model)`, ms; null when not measured"),
    Column("compile_rel_spread", "float64", "IQR / median of the compile timings"),
    Column("speedup_vs_eager", "float64", "eager_ms / candidate_ms"),
    Column("speedup_vs_compile", "float64", "compile_ms / candidate_ms; null without a compile baseline"),
    Column("max_abs_error", "float64", "largest absolute error against the reference over the checks"),
    Column("norm_error", "float64", "largest ||out - ref|| / ||ref|| over the checks"),
    Column("atol", "float64", "absolute tolerance used"),
    Column("rtol", "float64", "relative tolerance used"),
    Column("roofline_floor_ms", "float64", "roofline floor: least time the device could take, ms"),
    Column("roofline_pct_of_floor", "float64", "100 * floor_ms / candidate_ms: how near the floor the kernel gets (100: at it)"),
    Column("roofline_bound", "string", "`memory` or `compute`: which ceiling sets the floor"),
    Column("roofline", "string", "the evaluation's whole roofline record as a JSON object text; null if none"),
    Column("idea", "string", "text of the idea that produced the kernel (or what stood for one)"),
    Column("idea_family", "string", "the idea's family (memory_hierarchy, ..., seed, refine, crossover, other)"),
    Column("lineage", "list<lineage>", "ancestors from the root to the direct parent (first parent at each step)"),
    Column("verified", "bool", "true when the latest re-verification passed; false: not re-verified yet"),
    Column("verification", "string", "the latest re-verification's reason; null when not re-verified"),
    Column("confirmed_processes", "int64", "fresh processes of the kernel's latest passing confirmation; 0: none"),
    Column("confirmed_ms", "float64", "published time: median over those processes, ms; null when not confirmed"),
    Column("confirmed_rel_spread", "float64", "spread covering every process's median (docs/judging.md, Published times)"),
    Column("confirmed_eager_ms", "float64", "median eager time over the same processes (A/B), ms"),
    Column("confirmed_speedup_vs_eager", "float64", "confirmed_eager_ms / confirmed_ms"),
    Column("confirmed_speedup_vs_compile", "float64", "compile_ms / confirmed_ms; null without a compile baseline"),
)

COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA)


def export_rows(run_dir: str | Path, include_unverified: bool = False) -> Iterator[dict[str, Any]]:
    """The rows of the run in ``run_dir``, in the order the run proposed the kernels."""
    try:
        store = RunStore(run_dir)  # never creates an archive where there is none
    except NoRun as e:
        raise FileNotFoundError(str(e)) from None
    with store:
        yield from run_rows(store, include_unverified=include_unverified)


def run_rows(store: RunStore, include_unverified: bool = False) -> list[dict[str, Any]]:
    """Rows for the store's run: its correct kernels whose latest re-verification passed, plus the
    not-yet-verified ones when ``include_unverified``. A kernel that failed re-verification is
    never exported: it is not correct. Nor is one the run holds out as PyTorch's work
    (torch_fallback, unless the run was made with --torch-fallback allow: ``RunStore.held_out``)."""
    run = store.run()
    problem_name, reference = store.problem_source(run.problem_id)
    lineage = store.lineage()
    by_id = {r["candidate_id"]: r for r in lineage}
    results: dict[str, EvalResult | None] = {}

    def result(cid: str) -> EvalResult | None:
        if cid not in results:
            results[cid] = store.result(cid)
        return results[cid]

    held_out = set(store.held_out())
    rows = []
    for lrow in lineage:
        if lrow["status"] != "evaluated" or lrow["candidate_id"] in held_out:
            continue
        res = result(lrow["candidate_id"])
        if res is None or res.status.value != "correct":
            continue
        ver = store.archive.verification(lrow["candidate_id"])
        if ver is not None and not ver[0]:
            continue
        if ver is None and not include_unverified:
            continue
        cand = store.candidate(lrow["candidate_id"])
        idea, family = idea_label(store, lrow)
        roof = res.roofline if isinstance(res.roofline, dict) else None
        row: dict[str, Any] = {
            "run_id": run.id, "run_dir": store.dir.resolve().name, "strategy": run.strategy,
            "llm": run.config.llm, "problem": problem_name, "problem_id": run.problem_id,
            "reference_source": reference, "candidate_id": cand.id, "kernel_source": cand.source,
            "backend": cand.backend, "round": int(lrow["round"]), "origin": lrow["origin"],
            "model": lrow["model"], "parent_ids": list(json.loads(lrow["parent_ids"])),
            "device": res.device, "device_name": res.device_name, "torch_version": res.torch_version,
            "status": res.status.value, "reason": res.reason, "flags": [str(f) for f in res.flags],
            "candidate_ms": _num(res.candidate_ms), "candidate_rel_spread": _spread(res.candidate_timing),
            "eager_ms": _num(res.eager_ms), "eager_rel_spread": _spread(res.eager_timing),
            "compile_ms": _num(res.compile_ms), "compile_rel_spread": _spread(res.compile_timing),
            "speedup_vs_eager": _num(res.speedup_vs_eager), "speedup_vs_compile": _num(res.speedup_vs_compile),
            "max_abs_error": _num(res.max_abs_error), "norm_error": _num(res.norm_error),
            "atol": _num(res.atol), "rtol": _num(res.rtol),
            "roofline_floor_ms": _num(roof.get("floor_ms")) if roof else None,
            "roofline_pct_of_floor": _num(roof.get("pct_of_floor")) if roof else None,
            "roofline_bound": _str(roof.get("bound")) if roof else None,
            "roofline": json.dumps(roof, sort_keys=True, default=str) if roof else None,
            "idea": idea, "idea_family": family,
            "lineage": _ancestors(store, lrow, by_id, result),
            "verified": ver is not None,
            "verification": ver[1] if ver is not None else None,
            **_confirmed(store.archive.confirmation(cand.id, res.device)),
        }
        rows.append(row)
    return rows


def _confirmed(conf: dict | None) -> dict[str, Any]:
    ok = conf is not None and conf.get("ok")
    return {"confirmed_processes": int(conf.get("processes") or 0) if ok else 0,
            "confirmed_ms": _num(conf.get("median_ms")) if ok else None,
            "confirmed_rel_spread": _num(conf.get("rel_spread")) if ok else None,
            "confirmed_eager_ms": _num(conf.get("eager_median_ms")) if ok else None,
            "confirmed_speedup_vs_eager": _num(conf.get("speedup_vs_eager")) if ok else None,
            "confirmed_speedup_vs_compile": _num(conf.get("speedup_vs_compile")) if ok else None}


def _ancestors(store: RunStore, row: dict[str, Any], by_id: dict[str, dict[str, Any]],
               result: Any) -> list[dict[str, Any]]:
    """Follow the first parent back to the root; listed root first. A crossover's second parent
    is in ``parent_ids`` but not followed, so the lineage stays one chain."""
    chain: list[dict[str, Any]] = []
    seen = {row["candidate_id"]}
    parents = json.loads(row["parent_ids"])
    while parents and parents[0] in by_id and parents[0] not in seen:
        prow = by_id[parents[0]]
        seen.add(prow["candidate_id"])
        res = result(prow["candidate_id"])
        idea, family = idea_label(store, prow)
        chain.append({
            "candidate_id": prow["candidate_id"], "round": int(prow["round"]), "origin": prow["origin"],
            "idea": idea, "idea_family": family,
            "status": res.status.value if res is not None else prow["status"],
            "speedup_vs_eager": _num(res.speedup_vs_eager) if res is not None else None,
        })
        parents = json.loads(prow["parent_ids"])
    chain.reverse()
    return chain


def _num(x: Any) -> float | None:
    """Finite floats only: JSON has no NaN or infinity, and a consumer should not meet them."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _spread(t: TimingStats | None) -> float | None:
    return _num(t.rel_spread) if t is not None else None


def _str(x: Any) -> str | None:
    return None if x is None else str(x)
