"""What a run found, read from its archive only: the round-by-round trajectory (the CRFM
Conv2D table is the model), the best kernel, and LLM totals. Feeds `kernelsearch show`.
Kernels are ranked by their own time and speedups are against the run's pooled baseline
(`search.ranking`)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelsearch.evaluator.timing.ceilings import describe_roofline
from kernelsearch.problems.loader import declared_string
from kernelsearch.search.ranking import Baseline, Figure, pct_of, pct_text, ranked_time_sql
from kernelsearch.search.store import RunStore


def idea_label(store: RunStore, row: dict[str, Any]) -> tuple[str, str]:
    """(text, family) of what produced a candidate."""
    if row["origin"] == "seed":
        return f"seed kernel {store.candidate(row['candidate_id']).name}", "seed"
    if row["idea_id"]:
        idea = store.idea(row["idea_id"])
        if idea is not None:
            return idea.text, idea.family
    parents = json.loads(row["parent_ids"])
    if len(parents) == 2:
        return f"crossover of {parents[0]} and {parents[1]}", "crossover"
    if parents:
        return f"revision of {parents[0]}", "refine"
    return "open prompt (no idea given)", "other"


def notes_used(store: RunStore) -> dict[int, dict[str, int]]:
    """Per round, how many LLM calls each playbook note went into."""
    used: dict[int, dict[str, int]] = {}
    for row in store.conn.execute("SELECT round, playbook FROM llm_calls WHERE run_id=? AND playbook IS NOT NULL "
                                  "ORDER BY id", (store.run_id,)):
        counts = used.setdefault(row["round"], {})
        for note in json.loads(row["playbook"]):
            counts[note["id"]] = counts.get(note["id"], 0) + 1
    return used


def trajectory(store: RunStore) -> dict[str, Any]:
    run = store.run()
    rid = run.id
    lineage = store.lineage()
    key = store.key()
    base = store.baseline()
    verdict: dict[int, Any] = {}
    for row in store.conn.execute(
            f"SELECT e.id, e.status, {ranked_time_sql()} AS ranked_ms, e.problem_id, e.device, "
            f"{store.eligible()} AS eligible FROM evaluations e "
            "JOIN lineage l ON l.evaluation_id = e.id WHERE l.run_id=?", (rid,)):
        verdict[row[0]] = row
    by_id = {r["candidate_id"]: r for r in lineage}

    def fastest(rows: list[dict[str, Any]]) -> tuple[float, dict[str, Any]] | None:
        """The fastest correct kernel of these rows on the run's problem and device that the
        run may rank (not held out as PyTorch's work)."""
        timed = [(float(v["ranked_ms"]), r) for r in rows
                 if (v := verdict[r["evaluation_id"]])["status"] == "correct" and v["eligible"]
                 and (v["problem_id"], v["device"]) == key and v["ranked_ms"]]
        return min(timed, key=lambda x: x[0]) if timed else None

    def vs_eager(candidate_id: str) -> float | None:
        """The kernel's speedup vs eager as progress and the best line show it (figure)."""
        return figure(store, candidate_id, base).vs_eager

    playbook = notes_used(store)
    rounds, best_so_far = [], None
    for rd in store.rounds():
        rows = [r for r in lineage if r["round"] == rd.round]
        done = [r for r in rows if r["status"] == "evaluated"]
        correct = [r for r in done if verdict[r["evaluation_id"]]["status"] == "correct"]
        round_best = fastest(correct)
        if round_best is not None and (best_so_far is None or round_best[0] < best_so_far[0]):
            best_so_far = round_best
        idea, family = idea_label(store, best_so_far[1]) if best_so_far else (None, None)
        rounds.append({
            "round": rd.round, "kind": rd.kind, "status": rd.status, "candidates": len(rows),
            "evaluated": len(done), "correct": len(correct),
            "held_out": sum(not verdict[r["evaluation_id"]]["eligible"] for r in correct),
            "round_best_speedup": vs_eager(round_best[1]["candidate_id"]) if round_best else None,
            "best_speedup": vs_eager(best_so_far[1]["candidate_id"]) if best_so_far else None,
            "best_candidate_id": best_so_far[1]["candidate_id"] if best_so_far else None,
            "idea": idea, "family": family, "playbook": playbook.get(rd.round, {}),
        })
    name, source = store.problem_source(run.problem_id)
    library = declared_string(source, "LIBRARY").strip()  # the library kernel eager runs (problem's LIBRARY)
    best: dict[str, Any] = {"candidate_id": None, "speedup_vs_eager": None, "speedup_vs_compile": None,
                            "pct_of_floor": None, "pct_of_library": None}
    m = store.best()
    if m is not None:
        idea, family = idea_label(store, by_id[m.candidate_id])
        fig = figure(store, m.candidate_id, base)  # confirmed: its own A/B eager
        best = {"candidate_id": m.candidate_id, "speedup_vs_eager": fig.vs_eager,
                "speedup_vs_compile": fig.vs_compile, "figure": fig.basis, "candidate_ms": m.ms,
                "round": m.round, "origin": m.origin,
                "backend": store.candidate(m.candidate_id).backend, "idea": idea, "family": family,
                "verification": _verification(store, m.candidate_id),
                "roofline": getattr(store.result(m.candidate_id), "roofline", None),
                **published(store, m.candidate_id, run.config.eval.device)}
        conf = best["confirmation"]
        # against the hardware: its ranked time (confirmed where confirmed) vs the roofline floor, as
        # --target-floor counts it; and vs the library kernel eager runs (eager_ms / kernel_ms)
        eager_ms, kernel_ms = (conf["eager_median_ms"], conf["median_ms"]) if conf else (base.eager_ms, m.ms)
        best.update(floor_ms=m.floor_ms, pct_of_floor=m.pct_of_floor,
                    pct_of_library=pct_of(eager_ms, kernel_ms) if library else None)
    u = store.usage()
    return {
        "run_id": rid, "problem": name, "strategy": run.strategy, "llm": run.config.llm,
        "device": run.config.eval.device, "status": run.status, "stop_reason": run.stop_reason,
        "stop_detail": run.stop_detail, "rounds": rounds, "best": best,
        "library": library, "eager_label": eager_label(library),
        # correct kernels PyTorch did the work of, kept out of best, parents, verify and export
        "torch_fallback": run.config.torch_fallback, "held_out": store.held_out(),
        "baseline": {"eager_ms": base.eager_ms, "compile_ms": base.compile_ms, "evaluations": base.evaluations},
        "candidates": len(lineage), "evaluated": sum(r["status"] == "evaluated" for r in lineage),
        "pending": sum(r["status"] == "pending" for r in lineage),
        "ideas": len(store.ideas()), "llm_calls": u.calls, "llm_errors": u.errors, "tokens": u.tokens,
        "input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "cost_usd": u.cost_usd,
        "unpriced_calls": u.unpriced, "elapsed_s": run.elapsed_s,
    }


def figure(store: RunStore, candidate_id: str, base: Baseline | None = None) -> Figure:
    """The one figure of a correct kernel of the run that progress, `show`, `best` and the HTML
    report give, with what it is: `store.figure`'s numbers (its passing confirmation's A/B
    figure where it has one, else its ranked time against the run's pooled baseline)."""
    vs_eager, vs_compile = store.figure(candidate_id, base)
    conf = store.archive.confirmation(candidate_id, store.key()[1])
    if conf is not None and conf.get("ok") and conf.get("speedup_vs_eager") is not None:
        return Figure(vs_eager, vs_compile, confirmed=True, processes=int(conf.get("processes") or 0),
                      spread=conf.get("speedup_rel_spread"))
    pooled = (store.baseline() if base is None else base).evaluations
    return Figure(vs_eager, vs_compile, pooled=pooled)


def published(store: RunStore, candidate_id: str, device: str) -> dict[str, Any]:
    """How a kernel's figure was obtained: its passing confirmation (evaluator/confirm.py), or
    one screening process."""
    conf = store.archive.confirmation(candidate_id, device)
    if conf is not None and conf.get("ok"):
        return {"confirmation": conf, "timed": f"confirmed: {conf['method']}",
                "speedup_spread": conf.get("speedup_rel_spread")}
    return {"confirmation": None, "timed": "one process (screening); `kernelsearch verify` confirms it",
            "speedup_spread": None}


def _verification(store: RunStore, candidate_id: str) -> str:
    v = store.archive.verification(candidate_id)
    return "not re-verified" if v is None else ("re-verified" if v[0] else f"failed re-verification: {v[1]}")


def eager_label(library: str) -> str:
    """What the eager baseline is called: "eager (cuBLAS ...)" where the problem names its library."""
    return f"eager ({library})" if library else "eager"


def roofline_line(best: dict[str, Any]) -> str:
    """`show`'s one roofline line for the best kernel: the floor, and the kernel's % of it from
    its ranked time (confirmed where confirmed), as --target-floor counts it; the evaluation's
    own % (from its screening time) is left out, so one figure is shown, in one wording."""
    roof = best.get("roofline")
    pct = best.get("pct_of_floor")
    if not roof and pct is None:
        return ""
    text = "roofline: " + (describe_roofline({**roof, "pct_of_floor": None, "eager_pct_of_floor": None})
                           if roof else f"floor {_ms(best.get('floor_ms'))}")
    if pct is not None:
        text += f"; this kernel reaches {pct_text(pct)} of the roofline floor"
        if roof and roof.get("eager_pct_of_floor") is not None:
            text += f" (eager PyTorch: {pct_text(roof['eager_pct_of_floor'])})"
    return text


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g} ms"


def print_trajectory(t: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=escape(f"{t['problem']} · {t['strategy']} · {t['llm']} · run {t['run_id']}"),
                  header_style="bold")
    for col in ("round", "candidates", "correct", "round best", "best so far", "idea behind the best so far"):
        table.add_column(col, overflow="fold")
    for r in t["rounds"]:
        label = f"{r['round']}" + (" (seeds)" if r["kind"] == "seed" else "")
        if r["status"] != "evaluated":
            label += f" [{r['status']}]"
        idea = f"[{r['family']}] {r['idea']}" if r["idea"] else "-"
        held = f" ({r['held_out']} held out)" if r.get("held_out") else ""
        table.add_row(escape(label), str(r["candidates"]), f"{r['correct']}/{r['evaluated']}{held}",
                      _x(r["round_best_speedup"]), _x(r["best_speedup"]), escape(idea[:160]))
    console.print(table)
    b = t["best"]
    if b["candidate_id"]:
        console.print(f"best kernel: {b['candidate_id']} ({b['backend']}, round {b['round']}): "
                      f"{_x(b['speedup_vs_eager'])} vs eager, {_x(b['speedup_vs_compile'])} vs torch.compile "
                      f"({b['figure']}; {b['verification']})",
                      highlight=False)
        conf = b.get("confirmation")
        if conf is not None:
            console.print(f"timed: {_ms(conf['median_ms'])} ±{100 * conf['rel_spread']:.1f}%, eager "
                          f"{_ms(conf['eager_median_ms'])}; speedup ±{100 * conf['speedup_rel_spread']:.1f}% "
                          f"({conf['method']})", highlight=False)
        else:
            console.print(f"timed: {_ms(b['candidate_ms'])} in {b['timed']}", highlight=False)
        roofline = roofline_line(b)
        if roofline:
            console.print(escape(roofline), highlight=False)
        if b.get("pct_of_library") is not None:
            console.print(escape(f"against the library: {pct_text(b['pct_of_library'])} of {t['eager_label']}"),
                          highlight=False)
        base = t["baseline"]
        console.print(f"round speedups are against the run's baseline: {escape(t['eager_label'])} {_ms(base['eager_ms'])}, "
                      f"torch.compile {_ms(base['compile_ms'])} "
                      f"(medians over {base['evaluations']} evaluation(s)); a confirmed kernel's against "
                      "the eager timed next to it in its confirmation", highlight=False)
    held = t.get("held_out") or []
    if not b["candidate_id"]:
        console.print("best kernel: " + ("none of its own yet: every correct kernel is held out (below)" if held
                                         else "none correct yet"), highlight=False)
    if held:
        console.print(f"held out: {len(held)} correct kernel(s) whose work PyTorch/ATen did (torch_fallback), "
                      f"never best, parents or exported; `run --resume ... --torch-fallback allow` ranks them: "
                      + ", ".join(held[:5]) + (" ..." if len(held) > 5 else ""), highlight=False)
    used = [f"round {r['round']}: " + ", ".join(f"{k} x{n}" for k, n in r["playbook"].items())
            for r in t["rounds"] if r.get("playbook")]
    if used:
        console.print(escape("playbook notes in the prompts: " + "; ".join(used)), highlight=False)
    cost = f"${t['cost_usd']:.4f}" + (f" (+{t['unpriced_calls']} unpriced)" if t["unpriced_calls"] else "")
    console.print(f"{t['candidates']} candidates ({t['evaluated']} evaluated, {t['pending']} pending), "
                  f"{t['ideas']} ideas, {t['llm_calls']} LLM calls ({t['llm_errors']} failed), "
                  f"{t['tokens']:,} tokens, {cost}, {t['elapsed_s']:.0f} s", highlight=False)
    console.print(escape(f"status: {t['status']}" + (f" ({t['stop_reason']}: {t['stop_detail']})"
                                                     if t["stop_reason"] else "")), highlight=False)
