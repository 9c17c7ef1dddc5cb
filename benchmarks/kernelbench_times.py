"""Eager and torch.compile times of KernelBench's references at their own sizes, by the judge's
timing protocol, for the comparison with KernelBench's published H100 table
(``kernelbench_baselines.py --times``).

The judge times both baselines inside an evaluation (``judge/run.py``): a worker start and a cold
torch.compile per problem, 10-20 s each, so levels 1 and 2 would take most of a device session.
Here the compiler's CPU work runs in parallel and only the timing is serial:

1. warm: every problem is compiled and run once, several processes at a time (as many as the
   GPU's memory and ``--parallel`` allow), into the judge's inductor and Triton caches
   (``KERNELSEARCH_HOME/judge-cache``). Nothing is timed, and autotuning results are not kept:
   configurations picked on a shared GPU are picked again on a quiet one.
2. time: one process at a time takes a chunk of problems and times each as the judge does: the
   model and the timed calls' inputs from the judge's seeds (``make_model``, ``timing_inputs``),
   ``time_calls`` with the judge's per-call hooks (``baseline_hooks``), the stream shim loaded
   before torch. Its torch.compile finds the caches warm.

A problem that fails or kills its process gets a row saying why; the others go on. Rows go to
``OUT/times-<device>.jsonl`` as they finish and a later call skips problems already timed:

    python benchmarks/kernelbench_times.py --kernelbench .ext/kernelbench --levels 1,2 \\
        --out .ext/kb-times --budget-s 480
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
GIB = 1 << 30


def _sweep():
    sys.path.insert(0, str(HERE))
    import kernelbench_sweep

    return kernelbench_sweep


def read_done(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]
    return {r["key"]: r for r in rows if "key" in r}


def append(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The judge's compiler caches and ``extra``."""
    from kernelsearch.evaluator.evaluate import judge_cache_env

    return {**os.environ, **judge_cache_env(home), "PYTHONUNBUFFERED": "1", **extra}


def device_need(problem, device: str, home: Path) -> int:
    """Device bytes one warm-up process holds: parameters, one set of inputs, the forward, context."""
    from kernelsearch.evaluator.config import EvalConfig
    from kernelsearch.evaluator.feasibility import memory_need
    from kernelsearch.problems.describe import describe_cached

    need = memory_need(describe_cached(problem, device), EvalConfig(device=device, home=home))
    if need is None:
        return 8 * GIB
    return need.params + need.inputs + 2 * need.forward + GIB


def warm(jobs: list[dict], env: dict[str, str], parallel: int, room: int, deadline: float) -> tuple[dict[str, str], set[str]]:
    """Compile the jobs' problems once each, in order, as many at a time as fit, until the
    deadline: ({key: why} for those that failed, the keys of those that finished)."""
    waiting = list(jobs)
    running: list[tuple[subprocess.Popen, dict, IO[str], float]] = []
    failed: dict[str, str] = {}
    finished: set[str] = set()
    while (waiting or running) and time.monotonic() < deadline:
        used = sum(j["need"] for _, j, _, _ in running)
        for j in list(waiting):
            if len(running) < parallel and (not running or used + j["need"] <= room):
                err = tempfile.TemporaryFile("w+")  # not a pipe: a chatty compiler would block on it
                p = subprocess.Popen([sys.executable, __file__, "--worker", "warm"], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=err, text=True)
                p.stdin.write(json.dumps(j))
                p.stdin.close()
                running.append((p, j, err, time.monotonic()))
                waiting.remove(j)
                used += j["need"]
        time.sleep(0.2)
        for item in list(running):
            p, j, err, t0 = item
            if p.poll() is None and time.monotonic() - t0 < 600:
                continue
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.returncode != 0:
                err.seek(0)
                failed[j["key"]] = (err.read().strip().splitlines() or [f"exit {p.returncode}"])[-1][:300]
            else:
                finished.add(j["key"])
            err.close()
            running.remove(item)
    for p, _, _, _ in running:
        p.kill()
    return failed, finished


def time_all(jobs: list[dict], device: str, env: dict[str, str], out: Path, chunk: int, deadline: float,
             compile_too: bool = True, hold_gib: float = 0.0) -> None:
    """Time the jobs a chunk per process, one process at a time; a process that dies is noted
    against the problem it was on and the rest of its chunk goes on in a new one."""
    todo = list(jobs)
    while todo and time.monotonic() < deadline:
        part, todo = todo[:chunk], todo[chunk:]
        left = deadline - time.monotonic()
        spec = json.dumps({"jobs": part, "out": str(out), "device": device, "stop_at": time.time() + min(left, 1e9),
                           "compile": compile_too, "hold_gib": hold_gib})
        try:
            p = subprocess.run([sys.executable, __file__, "--worker", "time"], input=spec, env=env, capture_output=True,
                               text=True, timeout=None if left == float("inf") else left + 120)
            rc, tail = p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:300]
        except subprocess.TimeoutExpired:
            rc, tail = -9, "killed after the call's budget"
        done = read_done(out)
        rest = [j for j in part if j["key"] not in done]
        if rest and rc != 0:
            append(out, {"key": rest[0]["key"], "error": f"the timing process died (exit {rc}): {tail}"})
            todo = rest[1:] + todo
        elif rest:
            return  # out of time: left for the next call


def run_warm(job: dict) -> None:
    import torch
    import torch._inductor.config as inductor

    from kernelsearch.evaluator.worker.common import make_inputs, make_model
    from kernelsearch.problems.loader import load_module

    inductor.autotune_local_cache = False
    device = job["device"]
    module = load_module(Path(job["path"]), device=device, name=f"ks_times_{job['n']}")
    model = make_model(module.Model, module, job["init_seed"], device)
    inputs = make_inputs(module, job["timing_seeds"][0], device)
    with torch.no_grad():
        torch.compile(model)(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()


def run_time(spec: dict) -> None:
    from kernelsearch.evaluator.timing import streamshim

    streamshim.preload(os.environ.get(streamshim.ENV, ""))  # before torch, as in the judge's worker
    import gc

    import torch

    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.judge.run import baseline_hooks, baseline_timings
    from kernelsearch.evaluator.worker.common import make_model, timing_inputs
    from kernelsearch.problems.loader import load_module

    device, out = spec["device"], Path(spec["out"])
    hooks = baseline_hooks(device)
    # device memory taken before timing, as the outputs handed over in device memory take it in
    # an evaluation (docs/measurements.md: 66 GiB held left the convolutions' times unchanged)
    held = torch.empty(int(spec.get("hold_gib", 0) * GIB), dtype=torch.uint8, device=device)  # noqa: F841
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    for job in spec["jobs"]:
        if time.time() > spec["stop_at"]:
            return
        row: dict = {"key": job["key"], "device": device, "device_name": name, "torch_version": torch.__version__,
                     "warm_error": job.get("warm_error", "")}
        try:
            module = load_module(Path(job["path"]), device=device, name=f"ks_times_{job['n']}")
            model = make_model(module.Model, module, job["init_seed"], device)
            tcfg = TimingConfig(**job["timing"])
            sets, inputs_for = timing_inputs(module, job["timing_seeds"], device, tcfg)
            t0 = time.monotonic()
            for kind, stats, error in baseline_timings(model, sets, inputs_for, device, tcfg, hooks, spec["compile"]):
                if stats is not None:
                    row[kind], row[f"{kind}_ms"] = stats, stats["median_ms"]
                else:
                    row["compile_error"] = error[:300]
                if kind == "eager":
                    t0 = time.monotonic()  # what follows is the compile and its timing
            if spec["compile"]:
                row["compile_and_time_s"] = round(time.monotonic() - t0, 2)
            if spec.get("hold_gib"):
                row["hold_gib"] = spec["hold_gib"]
        except Exception as e:  # noqa: BLE001 - the next problem still gets its row
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        append(out, row)
        model = sets = inputs_for = None
        torch._dynamo.reset()
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", help="a KernelBench checkout (or its KernelBench folder)")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--only", default="", help="comma-separated substrings of keys such as level1/23_Softmax.py")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", default=".ext/kb-times")
    ap.add_argument("--home", default="", help="KERNELSEARCH_HOME (its judge-cache holds the compiler's caches)")
    ap.add_argument("--parallel", type=int, default=12, help="warm-up processes at once")
    ap.add_argument("--gpu-fraction", type=float, default=0.8,
                    help="of the GPU's memory (on the CPU: available memory) the warm-ups may hold")
    ap.add_argument("--chunk", type=int, default=25, help="problems timed by one process")
    ap.add_argument("--warm-share", type=float, default=0.5, help="of --budget-s the warm-up may take")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting work after this long")
    ap.add_argument("--no-compile", action="store_true", help="eager only (no warm-up)")
    ap.add_argument("--hold-gib", type=float, default=0.0,
                    help="device memory the timing process takes before timing, as handed-over outputs do")
    ap.add_argument("--worker", choices=("warm", "time"), help=argparse.SUPPRESS)  # its job on stdin
    args = ap.parse_args(argv)
    if args.worker:
        (run_warm if args.worker == "warm" else run_time)(json.loads(sys.stdin.read()))
        sys.stdout.flush()
        os._exit(0)  # as the judge's worker: no interpreter teardown with CUDA and compiler pools alive
    if not args.kernelbench:
        ap.error("--kernelbench is required")
    import torch

    from kernelsearch.evaluator.config import EvalConfig, default_home
    from kernelsearch.evaluator.evaluate import draw_seeds, stream_shim_env
    from kernelsearch.evaluator.sandbox.scratch import available_memory

    t0 = time.monotonic()
    deadline = t0 + args.budget_s if args.budget_s else float("inf")
    sweep = _sweep()
    home = Path(args.home) if args.home else default_home()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = args.device
    out = out_dir / f"times-{device}.jsonl"
    # a file that failed to load is tried again (a module may have been installed since)
    previous = read_done(out)
    done = {k for k, r in previous.items() if not str(r.get("error", "")).startswith("failed to load")}
    config = EvalConfig(device=device, home=home)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    only = [s for s in args.only.split(",") if s]
    jobs = []
    for n, item in enumerate(sweep.select(Path(args.kernelbench), levels, only, (1, 1))):
        if item.key in done:
            continue
        problem, error, _ = sweep.load(item)
        if problem is None:
            if previous.get(item.key, {}).get("error") != f"failed to load: {error}":
                append(out, {"key": item.key, "error": f"failed to load: {error}"})
            continue
        init_seed, _, timing_seeds, _, _ = draw_seeds(config, 0)
        jobs.append({"key": item.key, "n": n, "path": str(problem.path), "init_seed": init_seed,
                     "timing_seeds": timing_seeds, "timing": asdict(config.timing), "device": device,
                     "need": device_need(problem, device, home)})
    shim, why = stream_shim_env(config)
    if why:
        print(f"no stream shim: {why}", file=sys.stderr)
    env = _env(home, shim)
    # one compiler thread per warm-up process: they run side by side (not part of the caches' keys)
    warm_env = _env(home, {"TORCHINDUCTOR_COMPILE_THREADS": "1"})
    total = torch.cuda.get_device_properties(0).total_memory if device == "cuda" else (available_memory() or 8 * GIB)
    room = int(total * args.gpu_fraction)
    print(f"{len(jobs)} problem(s) to time; warming the compiler's caches", file=sys.stderr, flush=True)
    # the warm-up gets a share of the budget; problems it did not reach are timed after those
    # it did, compiling cold (slower, the same figures)
    warm_deadline = t0 + args.warm_share * args.budget_s if args.budget_s else deadline
    failed, finished = ({}, set()) if args.no_compile else warm(jobs, warm_env, args.parallel, room, warm_deadline)
    for j in jobs:
        j["warm_error"] = failed.get(j["key"], "" if j["key"] in finished or args.no_compile else "not warmed in this call")
    jobs.sort(key=lambda j: j["key"] not in finished)
    t1 = time.monotonic()
    print(f"warm-up {t1 - t0:.0f} s ({len(finished)} compiled, {len(failed)} failed); timing one at a time",
          file=sys.stderr, flush=True)
    time_all(jobs, device, env, out, args.chunk, deadline, not args.no_compile, args.hold_gib)
    rows = read_done(out)
    timed = sum(1 for j in jobs if "eager_ms" in rows.get(j["key"], {}))
    print(json.dumps({"timed_now": timed, "left": sum(1 for j in jobs if j["key"] not in rows),
                      "warm_s": round(t1 - t0), "time_s": round(time.monotonic() - t1), "results": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
