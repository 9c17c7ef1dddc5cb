"""Several GPUs of one host: the same candidate set through ``kernelsearch bench`` once
per configuration (``local:N``: the local executor on GPUs 0..N-1; ``ray:N``: the Ray executor on
a local Ray instance that sees N GPUs), to see whether N lanes give N times the candidates per
hour with the same verdicts, and whether a kernel's time on a shared host matches its time from
the one-lane run.

- ``run``: over the kbtp layout (``kernelbench_throughput.py prepare``: ``WORK/ks/problems`` and
  ``WORK/ks/solutions``, ``WORK/manifest.json``). First, untimed, a warm-up in a process of its
  own prebuilds every extension into the shared build cache (``WORK/mg-home``), builds the
  stream shim and measures the device's ceilings, so every configuration starts from the same
  warm cache and the figures are evaluation throughput (builds that fail, the compile_error
  candidates, leave no cache entry and are built again in each configuration). Then, per
  configuration, ``kernelsearch bench --json --matched-only --confirm 0 --no-compile`` at
  KernelBench v0.2's fp32 tolerance with a fixed seed (the same inputs in every configuration),
  an archive of its own (no result is answered from another configuration's) and the wall time
  of the whole process. ``OUT/<executor>-<N>.json`` per configuration (skipped when a finished
  one is there: resumable), ``OUT/warm.json``, ``OUT/run.log``; everything stops by
  ``--stop-by-s``.
- ``report``: a Markdown table from one or more ``run`` outputs: candidates, wall s,
  candidates/hour, speedup over the base configuration (``local:1``), verdicts equal to it, and
  each kernel's time against its time there (median ratio, largest |log ratio|, how many differ
  by more than 5 %), with eager's ratios beside (eager is timed next to the candidate in every
  evaluation, so it shows what the host did at that moment).
- ``wheels``: Ray for the GPU machines, which lack it, as cp312 wheels; the ray wheel (~79 MB)
  is written without ``ray/jars/`` (Java workers only, 31 MB) so that it fits a device call.

    python benchmarks/kernelbench_throughput.py prepare --kernelbench .ext/kernelbench --work .ext/kbtp
    python benchmarks/multi_gpu.py wheels --dest .ext/raywhl
    # on the 2-GPU machine, carrying .ext/kbtp, .ext/raywhl (installed into /tmp/site) and
    # .ext/mg-out (the files of an earlier call, whose finished configurations are skipped)
    PYTHONPATH=/tmp/site python3 benchmarks/multi_gpu.py run --work .ext/kbtp --out .ext/mg-out \\
        --configs local:1,local:2,ray:2,ray:1 --stop-by-s 450; cp .ext/mg-out/*.* "$OUT"/
    python benchmarks/multi_gpu.py report --from DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import kernelbench_throughput as kbtp  # noqa: E402 - the layout, its manifest and helpers

# NVLink multicast must stay off on the shared multi-GPU hosts (KINDS.md); set for every process
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
DIFF = 0.05  # a kernel's time "differs" from the base run's beyond this relative change
RAY_VERSION = "2.60.0"
RAY_DROP = ("ray/jars/",)  # Java workers only; 31 of the wheel's 79 MB
# Ray's requirements that the GPU machines' image lacks (its others: click, filelock, msgpack,
# packaging, protobuf, pyyaml, requests are there); pinned as kernelbench_throughput pins them
RAY_DEPS = ("jsonschema", "jsonschema-specifications", "referencing", "rpds-py")
MIN_CONFIG_S = 30.0  # a configuration is not started with less time than this left


@dataclass(frozen=True)
class Config:
    """One way to run the sweep: an executor and how many lanes (GPUs, or CPU lanes)."""

    executor: str
    n: int

    @property
    def label(self) -> str:  # also the file name: letters, digits and '-' only
        return f"{self.executor}-{self.n}"

    @property
    def spec(self) -> str:
        return f"{self.executor}:{self.n}"


def parse_configs(text: str) -> list[Config]:
    out: list[Config] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, n = part.partition(":")
        if name not in ("local", "ray") or not n.isdigit() or int(n) < 1:
            raise SystemExit(f"--configs: local:N or ray:N (N >= 1), not {part!r}")
        cfg = Config(name, int(n))
        if cfg in out:
            raise SystemExit(f"--configs: {part} twice")
        out.append(cfg)
    if not out:
        raise SystemExit("--configs: none given")
    return out


# ----------------------------------------------------------------------------- run


def bench_command(cfg: Config, device: str, problems: Path, solutions: Path, archive: Path,
                  args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The bench command line for ``cfg`` and the environment entries it adds."""
    cmd = [sys.executable, "-m", "kernelsearch", "bench", str(problems), str(solutions), "--json",
           "--matched-only", "--confirm", "0", "--no-compile", "--device", device, "--archive", str(archive)]
    if args.seed >= 0:
        cmd += ["--seed", str(args.seed)]
    if args.tolerance == "kernelbench":
        cmd += ["--atol", str(kbtp.KB_TOLERANCE_FP32), "--rtol", str(kbtp.KB_TOLERANCE_FP32)]
    env: dict[str, str] = {}
    if cfg.executor == "local":
        cmd += ["--gpus", ",".join(map(str, range(cfg.n)))] if device == "cuda" else ["--lanes", str(cfg.n)]
    else:
        cmd += ["--executor", "ray"]
        if device == "cuda":
            # Ray counts the GPUs it may hand out from CUDA_VISIBLE_DEVICES; the override makes the
            # count exact even where its NVML probe fails (a task asking for a GPU would wait forever)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(cfg.n)))
            env["RAY_OVERRIDE_RESOURCES"] = json.dumps({"GPU": cfg.n})
        else:
            cmd += ["--lanes", str(cfg.n)]
        # on some container hosts MemTotal starts far below the memory limit and grows as memory is
        # used, so Ray's out-of-memory monitor could kill a task that fits
        env["RAY_memory_monitor_refresh_ms"] = "0"
    return cmd + list(args.bench_arg or []), env


def _base_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    parts = [str(ROOT / "src")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env.update({"KERNELSEARCH_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    for k, v in NO_MULTICAST.items():
        env[k] = os.environ.get(k) or v
    return env


def _stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Interrupt first (the executor shuts its lanes and workers down), then the whole group."""
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    kbtp._kill_group(proc)


def gpu_snapshot() -> list[dict]:
    """Per GPU: name, SM clock, temperature, power (nvidia-smi; empty without it)."""
    if not shutil.which("nvidia-smi"):
        return []
    q = "index,name,clocks.sm,temperature.gpu,power.draw,memory.used"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    keys = q.split(",")
    return [dict(zip(keys, (v.strip() for v in line.split(",")), strict=False)) for line in out.splitlines() if line.strip()]


def env_info(env: dict[str, str]) -> dict:
    """The host, its GPUs and versions; ``env``: the bench's environment (multicast settings)."""
    from importlib.metadata import PackageNotFoundError, version

    info: dict = {"python": sys.version.split()[0], "cpu_count": os.cpu_count(), "host": os.uname().nodename,
                  "gpus": [g.get("name") for g in gpu_snapshot()]}
    for pkg in ("torch", "ray"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    info.update({k: env.get(k) for k in NO_MULTICAST})
    return info


def archive_rows(path: Path) -> dict[str, dict]:
    """Problem name -> its last evaluation's record, with ``created_at`` (when it was written)."""
    if not path.is_file():
        return {}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT record, created_at FROM evaluations ORDER BY id").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return {}
    out: dict[str, dict] = {}
    for record, created in rows:
        try:
            r = json.loads(record)
        except ValueError:
            continue
        r["created_at"] = created
        out[str(r.get("problem"))] = r
    return out


def _rel_spread(r: dict, which: str) -> float | None:
    t = (r.get("timing") or {}).get(which) or {}
    return t.get("rel_spread")


def verdict_rows(entries: list[dict], bench: dict, archive: dict[str, dict], t0_wall: float) -> list[dict]:
    """One row per candidate from the bench's JSON, else (a stopped run) from its archive;
    ``start_s``/``end_s``: when its evaluation ran, in seconds since the bench started."""
    by_name = {r.get("problem"): r for r in bench.get("results", [])}
    rows = []
    for e in entries:
        r = by_name.get(e["name"]) or archive.get(e["name"])
        row = {"key": e["key"], "kind": e["kind"], "expect": e["expect"]}
        if not r or r.get("status") in (None, "no_candidate"):
            rows.append({**row, "verdict": "not_run", "reason": "no result"})
            continue
        end = (archive.get(e["name"]) or {}).get("created_at")
        eval_s = r.get("eval_s")
        row.update({
            "verdict": r.get("status"), "reason": (r.get("reason") or "")[:300], "flags": r.get("flags") or [],
            "candidate_ms": r.get("candidate_ms"), "eager_ms": r.get("eager_ms"),
            "candidate_rel_spread": _rel_spread(r, "candidate"), "eager_rel_spread": _rel_spread(r, "eager"),
            "gpu": r.get("gpu"), "eval_s": eval_s, "phase_s": r.get("phase_s") or {},
            "duplicate_of": r.get("duplicate_of") or "",
        })
        if isinstance(end, (int, float)):
            row["end_s"] = round(end - t0_wall, 2)
            if isinstance(eval_s, (int, float)):
                row["start_s"] = round(end - t0_wall - eval_s, 2)
        rows.append(row)
    return rows


def run_config(cfg: Config, args: argparse.Namespace, work: Path, out: Path, entries: list[dict],
               deadline: float) -> dict:
    problems, solutions = kbtp._ks_subset(work, entries)
    state = work / "mg"
    state.mkdir(parents=True, exist_ok=True)
    archive = state / f"{cfg.label}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{archive}{suffix}").unlink(missing_ok=True)
    cmd, extra = bench_command(cfg, args.device, problems, solutions, archive, args)
    env = _base_env(work / "mg-home")
    env.update(extra)
    before = gpu_snapshot()
    t0_wall = time.time()
    stdout = state / f"{cfg.label}-stdout.json"
    r = kbtp._run_split(cmd, ROOT, env, out / "run.log", stdout, deadline, cfg.spec, _stop)
    bench = last_json(stdout)
    if cfg.executor == "ray" and r["stopped"]:  # a driver killed mid-run may leave Ray behind
        try:
            subprocess.run([sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
                            "sys.argv = ['ray', 'stop', '--force']; main()"], env=env, capture_output=True,
                           timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            pass
    rows = verdict_rows(entries, bench, archive_rows(archive), t0_wall)
    judged = sum(v["verdict"] != "not_run" for v in rows)
    wall = r["wall_s"]
    return {
        "config": cfg.spec, "label": cfg.label, "executor": cfg.executor, "lanes": cfg.n, "device": args.device,
        "command": cmd, "env_extra": extra, "wall_s": wall, "rc": r["rc"], "stopped": r["stopped"],
        "judged": judged, "candidates": len(entries),
        "candidates_per_hour": round(judged / wall * 3600, 1) if wall > 0 and judged else None,
        "settings": {"seed": args.seed if args.seed >= 0 else "secret", "tolerance": args.tolerance,
                     "confirm": 0, "compile_baseline": False, "extra": list(args.bench_arg or [])},
        "gpus_before": before, "gpus_after": gpu_snapshot(), "env": env_info(env),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0_wall)),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "results": rows,
    }


def last_json(path: Path) -> dict:
    """The bench's JSON: the whole of stdout, else its last line that parses (a library may
    have printed before it); {} when there is none (a stopped run: the archive tells)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    for chunk in [text, *reversed(text.splitlines())]:
        try:
            found = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return {}


def finished(path: Path) -> bool:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return not d.get("stopped") and d.get("rc") == 0 and d.get("judged") == d.get("candidates")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    stop_by = started + args.stop_by_s if args.stop_by_s else float("inf")
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    levels = {int(x) for x in args.levels.split(",")} if args.levels else None
    manifest, entries = kbtp._entries(work, levels)
    if args.only:
        keys = [s.strip() for s in args.only.split(",") if s.strip()]
        entries = [e for e in entries if any(k in e["key"] for k in keys)]
    if not entries:
        raise SystemExit("no candidates chosen")
    configs = parse_configs(args.configs)
    log = out / "run.log"
    todo = [c for c in configs if args.force or not finished(out / f"{c.label}.json")]
    for c in configs:
        if c not in todo:
            print(f"{c.spec}: finished in an earlier call ({out / f'{c.label}.json'}), skipped", flush=True)
    if todo and not args.no_warm:
        warm = warm_up(args, work, entries, log, stop_by)
        (out / "warm.json").write_text(json.dumps(warm, indent=1))
        print(f"warm-up: {warm.get('built', 0)} built, {warm.get('failed', 0)} failed to build, "
              f"{warm.get('cached', 0)} cached, ceilings {'ok' if warm.get('ceilings') else 'missing'}, "
              f"{warm['wall_s']:.1f} s", flush=True)
    rc = 0
    for cfg in todo:
        left = stop_by - time.monotonic()
        if left < MIN_CONFIG_S:
            print(f"{cfg.spec}: not started, {left:.0f} s left", flush=True)
            rc = rc or 1
            continue
        deadline = min(stop_by, time.monotonic() + args.budget_s) if args.budget_s else stop_by
        summary = run_config(cfg, args, work, out, entries, deadline)
        (out / f"{cfg.label}.json").write_text(json.dumps(summary, indent=1, default=str))
        per_hour = summary["candidates_per_hour"]
        print(f"{cfg.spec}: {summary['judged']}/{len(entries)} judged in {summary['wall_s']:.1f} s"
              + (f" ({per_hour:.0f} candidates/hour)" if per_hour else "")
              + (" - stopped at the budget" if summary["stopped"] else "")
              + (f" - exit {summary['rc']}" if summary["rc"] not in (0, None) else ""), flush=True)
        rc = rc or (0 if summary["judged"] and not summary["stopped"] else 1)
    text = render([out])
    (out / "report.md").write_text(text + "\n")
    print(text)
    return rc


def warm_up(args: argparse.Namespace, work: Path, entries: list[dict], log: Path, stop_by: float) -> dict:
    """The untimed warm-up, in a process of its own (the driver never touches the device)."""
    _, solutions = kbtp._ks_subset(work, entries)
    cmd = [sys.executable, str(Path(__file__).resolve()), "warm", "--solutions", str(solutions),
           "--device", args.device]
    stdout = work / "mg-warm.json"
    r = kbtp._run_split(cmd, ROOT, _base_env(work / "mg-home"), log, stdout, stop_by, "warm-up", _stop)
    return {**last_json(stdout), **r}


def warm(args: argparse.Namespace) -> int:
    """Prebuild every extension (two ninja jobs each, builds side by side over the cores), build
    the stream shim, measure the ceilings; print one JSON line."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelsearch.evaluator.builds.prebuild import build_one, is_built, needs_build
    from kernelsearch.evaluator.config import EvalConfig
    from kernelsearch.evaluator.evaluate import host_device_name
    from kernelsearch.evaluator.timing.ceilings import ceilings
    from kernelsearch.records.candidate import Candidate

    t0 = time.monotonic()
    cfg = EvalConfig(device=args.device)
    cands = [Candidate.from_file(p) for p in sorted(Path(args.solutions).glob("*.py"))]
    need = [c for c in cands if needs_build(c, cfg)]
    todo = [c for c in need if not is_built(c, cfg)]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    outcomes = []
    if todo:
        with ThreadPoolExecutor(max(1, min(len(todo), cores // 2))) as pool:
            outcomes = list(pool.map(lambda c: build_one(c, cfg, max_jobs=2), todo))
    info: dict = {"candidates": len(cands), "need_build": len(need), "cached": len(need) - len(todo),
                  "built": sum(o.ok for o in outcomes), "failed": sum(not o.ok for o in outcomes),
                  "failed_names": [c.name for c, o in zip(todo, outcomes, strict=True) if not o.ok],
                  "build_wall_s": round(time.monotonic() - t0, 2), "home": str(cfg.home)}
    if args.device == "cuda":
        from kernelsearch.evaluator.builds.stream_shim import ShimUnavailable, shim_path

        try:
            info["stream_shim"] = str(shim_path(cfg.home))
        except ShimUnavailable as e:
            info["stream_shim"] = f"unavailable: {e}"
    ceil = ceilings(cfg, host_device_name(args.device))
    info["ceilings"] = ceil.describe() if ceil is not None else None
    info["warm_s"] = round(time.monotonic() - t0, 2)
    print(json.dumps(info), flush=True)
    return 0


# ----------------------------------------------------------------------------- report


def load_runs(dirs: list[Path]) -> tuple[list[dict], list[dict]]:
    """Per configuration the best run among the folders (finished over stopped, then the one
    that judged most), in the order first seen; and the warm-ups."""
    runs: dict[str, list[dict]] = {}
    warms = []
    for d in dirs:
        if (d / "warm.json").is_file():
            warms.append(json.loads((d / "warm.json").read_text()))
        for f in sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime):
            if f.name == "warm.json":
                continue
            try:
                r = json.loads(f.read_text())
            except ValueError:
                continue
            if isinstance(r, dict) and "config" in r and "results" in r:
                runs.setdefault(r["config"], []).append(r)
    return [kbtp._best(rs) for rs in runs.values()], warms


def _num(x) -> bool:
    return isinstance(x, (int, float)) and x > 0


def time_ratios(run_: dict, base: dict, field: str) -> list[tuple[str, float]]:
    """(key, time here / time in the base run) for kernels correct in both."""
    b = {r["key"]: r for r in base["results"]}
    out = []
    for r in run_["results"]:
        o = b.get(r["key"])
        if o and r["verdict"] == o["verdict"] == "correct" and _num(r.get(field)) and _num(o.get(field)):
            out.append((r["key"], r[field] / o[field]))
    return out


def ratio_stats(ratios: list[tuple[str, float]]) -> dict:
    if not ratios:
        return {"n": 0}
    vals = [v for _, v in ratios]
    worst = max(ratios, key=lambda kv: abs(math.log(kv[1])))
    return {"n": len(vals), "median": statistics.median(vals), "max_abs_log": abs(math.log(worst[1])),
            "worst": worst, "over": sum(abs(v - 1) > DIFF for v in vals)}


def overlap_s(row: dict, rows: list[dict]) -> float | None:
    """Seconds of ``row``'s evaluation during which another lane was evaluating (evaluations on
    the same GPU are one lane's, run one after another; without GPU numbers any other one)."""
    if not (_num(row.get("eval_s")) and isinstance(row.get("end_s"), (int, float))):
        return None
    a0, a1 = row["start_s"], row["end_s"]
    spans = []
    for o in rows:
        if o is row or not isinstance(o.get("start_s"), (int, float)):
            continue
        if row.get("gpu") is not None and o.get("gpu") == row.get("gpu"):
            continue
        lo, hi = max(a0, o["start_s"]), min(a1, o["end_s"])
        if hi > lo:
            spans.append((lo, hi))
    total, end = 0.0, -math.inf
    for lo, hi in sorted(spans):  # the union: two others may overlap each other
        lo = max(lo, end)
        if hi > lo:
            total += hi - lo
            end = hi
    return total


def _fmt_stats(s: dict) -> str:
    if not s.get("n"):
        return "- | - | -"
    return f"{s['median']:.3f} | {s['max_abs_log']:.3f} (x{math.exp(s['max_abs_log']):.2f}) | {s['over']}/{s['n']}"


def render(dirs: list[Path], base_spec: str = "local:1") -> str:
    runs, warms = load_runs(dirs)
    if not runs:
        return "no run found in " + ", ".join(map(str, dirs))
    base = next((r for r in runs if r["config"] == base_spec), runs[0])
    lines = []
    env = base.get("env") or {}
    lines.append(f"Host {env.get('host', '?')}: {', '.join(env.get('gpus') or []) or 'no GPU'} "
                 f"({len(env.get('gpus') or [])} GPUs), {env.get('cpu_count', '?')} cores, torch "
                 f"{env.get('torch', '?')}, ray {env.get('ray') or 'not installed'}; device {base.get('device')}; "
                 f"{base['candidates']} candidates; settings {base.get('settings')}.")
    for w in warms:
        lines.append(f"Warm-up (untimed, before the first configuration): {w.get('built', 0)} extensions built, "
                     f"{w.get('failed', 0)} failed (built again in every configuration), {w.get('cached', 0)} "
                     f"cached; {w.get('wall_s', '-')} s.")
    lines.append(f"Base: {base['config']}. Time ratios: this configuration's candidate_ms over the base's, for "
                 f"kernels correct in both; 'differ' counts ratios beyond {DIFF:.0%}; eager, timed beside each "
                 "candidate, is the control.")
    lines.append("")
    lines.append("| config | judged | wall s | candidates/hour | speedup over base | verdicts = base "
                 "| kernel time ratio: median | max abs log ratio | differ > 5 % "
                 "| eager ratio: median | max abs log ratio | differ > 5 % |")
    lines.append("|---" * 12 + "|")
    b_cph = base.get("candidates_per_hour")
    bmap = {r["key"]: r for r in base["results"]}
    diffs: list[str] = []
    for r in runs:
        cph = r.get("candidates_per_hour")
        both = [(x, bmap[x["key"]]) for x in r["results"]
                if x["key"] in bmap and "not_run" not in (x["verdict"], bmap[x["key"]]["verdict"])]
        same = sum(x["verdict"] == y["verdict"] for x, y in both)
        if r is not base:
            diffs += [f"- {r['config']}: {x['key']}: {y['verdict']} in {base['config']}, {x['verdict']} here "
                      f"({x.get('reason', '')[:160]})" for x, y in both if x["verdict"] != y["verdict"]]
        cand, eager = ratio_stats(time_ratios(r, base, "candidate_ms")), ratio_stats(time_ratios(r, base, "eager_ms"))
        stopped = " (stopped)" if r.get("stopped") else ""
        lines.append(
            f"| {r['config']} | {r['judged']}/{r['candidates']}{stopped} | {r['wall_s']:.1f} | "
            f"{f'{cph:.0f}' if cph else '-'} | {f'{cph / b_cph:.2f}x' if cph and b_cph else '-'} | "
            f"{same}/{len(both)} | " + ("base | | | | |" if r is base else f"{_fmt_stats(cand)} | {_fmt_stats(eager)} |"))
    lines.append("")
    lines.append("Verdicts that differ from the base: " + ("none." if not diffs else ""))
    lines += diffs
    lines.append("")
    lines.append(f"Kernels whose time differs from the base's by more than {DIFF:.0%} (candidate and eager ratio, "
                 "their spreads (IQR/median) here and in the base, GPU, seconds of the evaluation during which "
                 "another lane was evaluating):")
    lines.append("")
    lines.append("| config | kernel | base ms | ratio | eager ratio | spread here | spread base | GPU | overlap s / eval s |")
    lines.append("|---" * 9 + "|")
    n_rows = 0
    for r in runs:
        if r is base:
            continue
        eager = dict(time_ratios(r, base, "eager_ms"))
        for key, v in time_ratios(r, base, "candidate_ms"):
            if abs(v - 1) <= DIFF:
                continue
            x = next(y for y in r["results"] if y["key"] == key)
            o = bmap[key]
            ov = overlap_s(x, r["results"])
            e = eager.get(key)
            lines.append(
                f"| {r['config']} | {key} | {o['candidate_ms']:.4g} | {v:.3f} | {f'{e:.3f}' if e else '-'} | "
                f"{_pct(x.get('candidate_rel_spread'))} | {_pct(o.get('candidate_rel_spread'))} | {_gpu(x)} | "
                f"{f'{ov:.1f}' if ov is not None else '-'} / {x.get('eval_s') or 0:.1f} |")
            n_rows += 1
    if not n_rows:
        lines.append("| (none) | | | | | | | | |")
    return "\n".join(lines)


def _gpu(row: dict) -> str:
    return "-" if row.get("gpu") is None else str(row["gpu"])


def _pct(x) -> str:
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) else "-"


def report(args: argparse.Namespace) -> int:
    text = render([Path(d) for d in args.from_], args.base)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0


# ----------------------------------------------------------------------------- wheels


def slim_wheel(src: Path, dest: Path, drop: tuple[str, ...] = RAY_DROP) -> int:
    """Copy a wheel without the files under ``drop``, its RECORD to match; bytes left out."""
    dropped = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            if info.filename.startswith(drop):
                dropped += info.file_size
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [ln for ln in data.decode().splitlines() if not ln.split(",", 1)[0].startswith(drop)]
                data = ("\n".join(kept) + "\n").encode()
            zout.writestr(info, data)
    return dropped


def wheels(args: argparse.Namespace) -> int:
    pins = [w for w in kbtp.WHEELS if w.split("==")[0] in RAY_DEPS]
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kbtp.PIP_PLATFORM, "-d", tmp,
               f"ray=={RAY_VERSION}", *pins]
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc:
            return rc
        for w in Path(tmp).glob("*.whl"):
            if w.name.startswith("ray-"):
                n = slim_wheel(w, dest / w.name)
                print(f"{w.name}: {w.stat().st_size / 2**20:.1f} MiB, written without {', '.join(RAY_DROP)} "
                      f"({n / 2**20:.1f} MiB unpacked): {(dest / w.name).stat().st_size / 2**20:.1f} MiB")
            else:
                shutil.copy2(w, dest / w.name)
    size = sum(w.stat().st_size for w in dest.glob("*.whl"))
    print(f"{len(list(dest.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB in {dest}")
    return 0


# ----------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="phase", required=True)
    p = sub.add_parser("run", help="bench the candidates once per configuration (GPU machine)")
    p.add_argument("--work", default=".ext/kbtp", help="the layout kernelbench_throughput.py prepare made")
    p.add_argument("--out", required=True, help="where the JSON, log and report go (e.g. $OUT)")
    p.add_argument("--configs", default="local:1,local:2,ray:2,ray:1",
                   help="comma list of local:N / ray:N, run in this order (N GPUs, or CPU lanes)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--stop-by-s", type=float, default=0.0,
                   help="stop everything this long after run started, warm-up included (0: no limit)")
    p.add_argument("--budget-s", type=float, default=0.0, help="stop one configuration after this long (0: none)")
    p.add_argument("--levels", default="", help="only these levels, e.g. 1")
    p.add_argument("--only", default="", help="only candidates whose key contains one of these (comma list)")
    p.add_argument("--seed", type=int, default=1, help="bench --seed: the same inputs in every configuration "
                                                       "(-1: a secret seed per evaluation)")
    p.add_argument("--tolerance", choices=("kernelbench", "default"), default="kernelbench",
                   help="kernelbench: atol = rtol = 1e-4 (as kernelbench_throughput); default: the problem's")
    p.add_argument("--no-warm", action="store_true", help="skip the prebuild and ceilings warm-up")
    p.add_argument("--force", action="store_true", help="run configurations that finished in an earlier call too")
    p.add_argument("--bench-arg", action="append", help="one more argument for kernelsearch bench (repeatable)")
    p.set_defaults(func=run)
    p = sub.add_parser("report", help="Markdown table from run outputs")
    p.add_argument("--from", dest="from_", action="append", required=True, help="a run's --out folder (repeatable)")
    p.add_argument("--base", default="local:1", help="the configuration the others are compared with")
    p.add_argument("--markdown", default="", help="also write the table here")
    p.set_defaults(func=report)
    p = sub.add_parser("wheels", help="Ray and the packages it needs that the GPU machines lack, as cp312 wheels")
    p.add_argument("--dest", default=".ext/raywhl")
    p.set_defaults(func=wheels)
    p = sub.add_parser("warm", help=argparse.SUPPRESS)  # run's warm-up, in its own process
    p.add_argument("--solutions", required=True)
    p.add_argument("--device", default="cuda")
    p.set_defaults(func=warm)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
