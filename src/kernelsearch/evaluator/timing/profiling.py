"""Profiler feedback for correct candidates: what ran, how long, and (with Nsight Compute) why.

A speedup says how fast; the next prompt needs to know where the time went. The candidate
worker already profiles one forward (on CUDA that profile also backs a verdict check, see
worker.candidate._profile_check); this module turns that raw report into ``EvalResult.profile`` and a
few lines of summary for the refine, branch and evolve prompts. Where ``ncu`` is installed
and asked for (``EvalConfig.ncu``), one more run of the candidate's worker under Nsight
Compute adds memory and compute throughput, occupancy and the top warp stall reasons.

Everything here is feedback, never a verdict: a profiler that fails only loses lines. (The
share of GPU time in PyTorch's own kernels is shown here too; the verdict's use of it is
verdict/decide.py's library_compute, from the same report.)
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path
from typing import Any

from kernelsearch.evaluator.builds.tool_run import tool_run
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.timing.library import library_share
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate

TOP = 5  # kernels or ops named in a summary
NCU_METRICS = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "gpu__time_duration.sum": "duration_ns",
}
STALL_REASONS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "lg_throttle",
                 "math_pipe_throttle", "wait", "not_selected", "no_instruction", "membar", "drain",
                 "tex_throttle", "dispatch_stall", "branch_resolving", "imc_miss", "sleeping")
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def ncu_path() -> str | None:
    return shutil.which("ncu")


def from_report(msg: dict[str, Any] | None, device: str, candidate_ms: float | None) -> dict[str, Any] | None:
    """EvalResult.profile from the worker's ``profile`` message (None if there was none)."""
    if not msg:
        return None
    if msg.get("error"):
        return {"error": str(msg["error"])[:500], "kernels": [], "summary": f"(profiler failed: {msg['error']})"}
    counts = msg.get("kernels") if device == "cuda" else msg.get("ops")
    times = msg.get("times_ms") or {}
    if not isinstance(counts, dict) or not isinstance(times, dict):
        return None
    kernels = sorted(({"name": str(k)[:200], "calls": int(counts.get(k, 0)), "total_ms": float(times.get(k, 0.0))}
                      for k in counts), key=lambda k: -k["total_ms"])
    prof: dict[str, Any] = {"kernels": kernels[:50], "ncu": None}
    for key in ("busy_ms", "wall_ms"):
        if isinstance(msg.get(key), (int, float)):
            prof[key] = float(msg[key])
    share = library_share(msg) if device == "cuda" else None
    if share is not None:
        prof["library_share"] = share.share  # of the busy time, in PyTorch/library compute kernels
    prof["summary"] = summarise(prof, device, candidate_ms)
    return prof


def summarise(prof: dict[str, Any], device: str, candidate_ms: float | None) -> str:
    kernels = prof.get("kernels") or []
    lines = []
    if device == "cuda":
        busy = prof.get("busy_ms")
        launches = sum(k["calls"] for k in kernels)
        head = f"One forward launched {len(kernels)} distinct kernel(s), {launches} launch(es)"
        if busy is not None:
            head += f"; the GPU was busy {busy:.4g} ms"
            if candidate_ms:
                head += f" of the {candidate_ms:.4g} ms median ({min(100.0, 100 * busy / candidate_ms):.0f}%)"
        lines.append(head + ".")
        if prof.get("library_share"):
            lines.append(f"{100 * prof['library_share']:.0f}% of that time was in PyTorch/library kernels (ATen, "
                         f"cuBLAS, cuDNN), not in kernels of your own.")
        total = sum(k["total_ms"] for k in kernels) or 1.0
        for k in kernels[:TOP]:
            lines.append(f"- {_short(k['name'])}: {k['total_ms']:.4g} ms over {k['calls']} launch(es), "
                         f"{100 * k['total_ms'] / total:.0f}% of kernel time")
    else:
        wall = prof.get("wall_ms")
        in_torch = sum(k["total_ms"] for k in kernels)
        if wall:
            own = max(0.0, wall - in_torch)
            lines.append(f"One forward took {wall:.4g} ms under the profiler; PyTorch ops inside it took "
                         f"{in_torch:.4g} ms, so {100 * own / wall:.0f}% ran in the candidate's own code.")
        for k in kernels[:TOP]:
            lines.append(f"- {k['name']}: {k['total_ms']:.4g} ms over {k['calls']} call(s)")
    ncu = prof.get("ncu")
    if ncu:
        lines.append(_ncu_line(ncu))
    return "\n".join(lines)


def _short(name: str, n: int = 90) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def _ncu_line(ncu: dict[str, Any]) -> str:
    if ncu.get("error"):
        return f"Nsight Compute: {ncu['error']}"
    parts = []
    for key, label in (("memory_throughput_pct", "memory throughput"), ("compute_throughput_pct", "compute (SM) "
                       "throughput"), ("achieved_occupancy_pct", "achieved occupancy")):
        if ncu.get(key) is not None:
            parts.append(f"{label} {ncu[key]:.0f}%")
    text = f"Nsight Compute on {_short(str(ncu.get('kernel', '?')), 60)}: " + ", ".join(parts)
    stalls = ncu.get("stalls") or {}
    if stalls:
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
        text += "; top warp stalls (cycles per issued instruction): " + ", ".join(f"{k} {v:.2g}" for k, v in top)
    return text


def ncu_profile(problem: Problem, candidate: Candidate, config: EvalConfig, kernel_names: list[str]) -> dict[str, Any]:
    """One more run of the candidate's worker (one trial, no timing) under Nsight Compute,
    restricted to the candidate's own kernels. Returns the ``ncu`` entry of the profile."""
    if not kernel_names:
        return {"error": "skipped: the candidate's kernel names are unknown, so its kernels cannot be picked out"}
    tool = ncu_path()
    if tool is None:
        return {"error": "not installed"}
    names = "|".join(re.escape(n) for n in kernel_names[:20])
    metrics = [*NCU_METRICS, *(_STALL.format(r) for r in STALL_REASONS)]

    def wrapper(work: Path) -> list[str]:
        return [tool, "--csv", "--page", "raw", "--metrics", ",".join(metrics), "--target-processes", "all",
                "--kernel-name-base", "function", "--kernel-name", f"regex:^({names})$", "--launch-count", "8",
                "--log-file", str(work / "ncu.csv")]

    with tool_run(problem, candidate, config, wrapper, run_timeout_s=600.0, prefix="ks-ncu-",
                  job_extra={"distribution": config.distribution}) as (out, work):
        log = work / "ncu.csv"
        text = log.read_text(errors="replace") if log.is_file() else ""
    found = parse_ncu_csv(text)
    if found is None:
        why = next((ln.strip() for ln in (text + "\n" + out.output).splitlines() if "==ERROR==" in ln
                    or "ERR_NVGPUCTRPERM" in ln), "") or out.killed or f"no kernel profiled (exit {out.returncode})"
        return {"error": f"no metrics: {why}"[:300]}
    return found


def parse_ncu_csv(text: str) -> dict[str, Any] | None:
    """ncu ``--csv --page raw``: a header row, a units row, then one row per profiled launch.
    The kernel with the most total time speaks for the candidate; its launches are averaged."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        return None
    cols = rows[head]
    data = [dict(zip(cols, r, strict=False)) for r in rows[head + 1:] if len(r) == len(cols)]
    data = [d for d in data if _num(d.get("gpu__time_duration.sum")) is not None]  # drops the units row
    if not data:
        return None
    by_kernel: dict[str, list[dict[str, str]]] = {}
    for d in data:
        by_kernel.setdefault(d["Kernel Name"], []).append(d)
    name, runs = max(by_kernel.items(), key=lambda kv: sum(_num(d["gpu__time_duration.sum"]) or 0 for d in kv[1]))
    out: dict[str, Any] = {"kernel": name, "launches": len(runs)}
    for metric, key in NCU_METRICS.items():
        out[key] = _mean(_num(d.get(metric)) for d in runs)
    stalls = {r: _mean(_num(d.get(_STALL.format(r))) for d in runs) for r in STALL_REASONS}
    out["stalls"] = {k: v for k, v in stalls.items() if v is not None and v > 0}
    return out


def _num(x: str | None) -> float | None:
    try:
        return float(str(x).replace(",", ""))
    except (TypeError, ValueError):
        return None


def _mean(xs: Any) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None
