"""Throughput of KernelBench's own harness against `kernelsearch bench`: the same candidates
(``benchmarks/kbtp_candidates``: one per problem for 31 level 1-2 problems; files say their kind,
``kbtp: kind=custom|compile_error|wrong``, and ``references.txt`` names the problems whose
candidate is the reference itself), the same GPU, each harness from cold caches.

- ``wheels``: download, as cp312 wheels, the pinned packages KernelBench's script imports that
  the GPU machines lack (pydra-config, pydantic, python-dotenv, openai, litellm, modal, ...).
- ``prepare`` (CPU): ``WORK/kernelbench`` is KernelBench's ``scripts/`` and ``src/`` with a
  ``KernelBench/`` tree of only the chosen problems (its local dataset) and
  ``runs/kbtp_level<L>/level_<L>_problem_<id>_sample_0_kernel.py``; ``WORK/ks`` holds
  ``problems/`` and ``solutions/`` for ``kernelsearch bench``; ``WORK/manifest.json`` lists the
  candidates. ``--nvcc`` builds each CUDA candidate as load_inline would (sm_90, no GPU) and
  checks that exactly the compile_error ones fail.
- ``run`` (GPU): KernelBench's ``scripts/eval_from_generations.py``, unmodified, once per level at
  its documented settings (``dataset_src=local num_gpu_devices=1 timeout=300 build_cache=True
  num_cpu_workers=<cores> gpu_arch=['Hopper']``; 5 correctness, 100 timing trials), and/or
  ``kernelsearch bench --matched-only --confirm 0 --no-compile --json`` at KernelBench v0.2's
  fp32 tolerance (``--atol 1e-4 --rtol 1e-4``; ``--ks-tolerance default`` for ours) (every check on; no
  torch.compile baseline or confirming processes, which KernelBench has neither of), each timed by
  wall clock and stopped at ``--budget-s`` / ``--stop-by-s``; writes ``manifest.json``,
  ``kernelbench.json|log``, ``kernelsearch.json|log`` into ``--out``.
- ``report``: Markdown tables (wall time, candidates/hour, verdicts side by side and why they
  differ) from one or more ``run`` outputs, KernelBench's levels added up across calls.

    python benchmarks/kernelbench_throughput.py wheels --dest .whl
    python benchmarks/kernelbench_throughput.py prepare --kernelbench .ext/kernelbench --work .ext/kbtp
    # GPU machine, carrying .ext/kbtp and .whl; KernelBench one level a call, kernelsearch in a third
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    PYTHONPATH=src python3 benchmarks/kernelbench_throughput.py run --work .ext/kbtp --out "$OUT" \\
        --harness kernelbench --levels 1 --kb-site /tmp/site --stop-by-s 560    # then --levels 2
    PYTHONPATH=src python3 benchmarks/kernelbench_throughput.py run --work .ext/kbtp --out "$OUT" \\
        --harness kernelsearch --stop-by-s 570
    python benchmarks/kernelbench_throughput.py report --from DIR1 --from DIR2 --from DIR3
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = Path(__file__).resolve().parent / "kbtp_candidates"
KINDS = ("reference", "custom", "compile_error", "wrong")
EXPECT = {"reference": "correct", "custom": "correct", "compile_error": "compile_error", "wrong": "incorrect"}


# What scripts/eval_from_generations.py imports (through kernelbench.eval/utils, pydra and modal)
# that the GPU machines' image lacks (KINDS.md's package list), pinned; protobuf and
# typing-extensions come along so that modal and pydantic do not depend on the image's versions.
# litellm 1.80.10 and openai 2.14.0 are the versions KernelBench's requirements.txt asks for at
# least; newer litellm wheels are ~40 MB. Installed with --no-deps into one --target folder.
WHEELS = (
    "annotated-types==0.8.0", "cbor2==6.3.0", "dill==0.3.9", "distro==1.9.0", "fastuuid==0.14.0",
    "grpclib==0.4.9", "h2==4.4.1", "hpack==4.2.0", "hyperframe==6.1.0", "importlib-metadata==10.2.0",
    "jiter==0.19.0", "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "lazy-importer==0.1.0",
    "litellm==1.80.10", "modal==1.3.5", "openai==2.14.0", "protobuf==6.33.6", "pydantic==2.12.5",
    "pydantic-core==2.41.5", "pydra-config==0.0.17.post1", "python-dotenv==1.2.1", "referencing==0.37.0",
    "rpds-py==2026.9.1", "sniffio==1.3.1", "synchronicity==0.11.1", "toml==0.10.2",
    "types-certifi==2021.10.8.3", "types-toml==0.10.8.20260518", "typing-extensions==4.16.0",
    "typing-inspection==0.4.5", "watchfiles==1.3.0",
)
PIP_PLATFORM = ("--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                "--platform", "manylinux1_x86_64")

KB_SCRIPT = "scripts/eval_from_generations.py"
KB_FILES = (KB_SCRIPT, "src/kernelbench/eval.py", "src/kernelbench/timing.py", "src/kernelbench/compile.py")
KB_TOLERANCE_FP32 = 1e-4  # kernelbench.eval.get_tolerance_for_precision("fp32"): atol = rtol


# ----------------------------------------------------------------------------- the plan


@dataclass
class Entry:
    """One candidate: the problem it is for, its kind and where each harness finds it."""

    level: int
    file: str  # the KernelBench problem file name, e.g. 40_LayerNorm.py
    kind: str
    expect: str
    source: str  # the candidate file it came from, relative to the repository, or "reference"
    sha256: str = ""
    backend: str = ""

    @property
    def name(self) -> str:
        return Path(self.file).stem

    @property
    def problem_id(self) -> int:
        return int(self.file.split("_", 1)[0])

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.file}"

    @property
    def kb_kernel(self) -> str:
        return f"kernelbench/runs/kbtp_level{self.level}/level_{self.level}_problem_{self.problem_id}_sample_0_kernel.py"

    def to_dict(self) -> dict:
        return {**asdict(self), "name": self.name, "problem_id": self.problem_id, "key": self.key,
                "kb_kernel": self.kb_kernel, "ks_problem": f"ks/problems/{self.file}",
                "ks_solution": f"ks/solutions/{self.file}"}


_HEADER = re.compile(r"kbtp:\s*kind=(\w+)\s+expect=(\w+)")


def candidate_kind(text: str) -> tuple[str, str]:
    """(kind, expect) from the ``kbtp: kind=... expect=...`` line of a candidate's docstring."""
    m = _HEADER.search(text[:400])
    if not m or m.group(1) not in KINDS:
        raise ValueError("no 'kbtp: kind=<custom|compile_error|wrong> expect=<verdict>' line at the top")
    return m.group(1), m.group(2)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def read_plan(candidates: Path) -> list[tuple[Entry, str | None]]:
    """Every candidate of ``candidates`` (``levelN/*.py`` and ``references.txt``), with its text
    (None for a reference: it is made from the problem's source)."""
    plan: list[tuple[Entry, str | None]] = []
    for d in sorted(candidates.glob("level*")):
        m = re.fullmatch(r"level(\d+)", d.name)
        if not m or not d.is_dir():
            continue
        for f in sorted(d.glob("*.py")):
            text = f.read_text()
            try:
                kind, expect = candidate_kind(text)
            except ValueError as e:
                raise SystemExit(f"{f}: {e}") from None
            plan.append((Entry(int(m.group(1)), f.name, kind, expect, _rel(f)), text))
    refs = candidates / "references.txt"
    if refs.is_file():
        for line in refs.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"level(\d+)/(.+\.py)", line)
            if not m:
                raise SystemExit(f"{refs}: not levelN/FILE.py: {line!r}")
            plan.append((Entry(int(m.group(1)), m.group(2), "reference", EXPECT["reference"], "reference"), None))
    seen_name: dict[str, str] = {}
    seen_id: dict[tuple[int, int], str] = {}
    for e, _ in plan:
        if e.name in seen_name:
            raise SystemExit(f"two candidates for {e.name} ({seen_name[e.name]}, {e.key}): "
                             "kernelsearch bench pairs one candidate with each problem file name")
        if (e.level, e.problem_id) in seen_id:
            raise SystemExit(f"level {e.level} problem id {e.problem_id} twice ({seen_id[(e.level, e.problem_id)]}, {e.key})")
        seen_name[e.name] = seen_id[(e.level, e.problem_id)] = e.key
    return sorted(plan, key=lambda p: (p[0].level, p[0].problem_id))


def level_dir(kb: Path, level: int) -> Path:
    for d in (kb / "KernelBench" / f"level{level}", kb / f"level{level}"):
        if d.is_dir():
            return d
    raise SystemExit(f"no level{level} under {kb} (expected {kb}/KernelBench/level{level})")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else ""


# ----------------------------------------------------------------------------- prepare


def prepare(args: argparse.Namespace) -> int:
    from kernelsearch.problems.reference import reference_source
    from kernelsearch.records.candidate import detect_backend

    kb, work, candidates = Path(args.kernelbench), Path(args.work), Path(args.candidates)
    missing = [f for f in KB_FILES if not (kb / f).is_file()]
    if missing:
        raise SystemExit(f"{kb} is not a KernelBench checkout: missing {', '.join(missing)}")
    plan = read_plan(candidates)
    if not plan:
        raise SystemExit(f"no candidates under {candidates}")
    for sub in ("kernelbench", "ks", "kshome"):
        shutil.rmtree(work / sub, ignore_errors=True)
    (work / "manifest.json").unlink(missing_ok=True)
    kbw = work / "kernelbench"
    for sub in ("scripts", "src"):
        shutil.copytree(kb / sub, kbw / sub, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for f in ("pyproject.toml", "LICENSE"):
        if (kb / f).is_file():
            shutil.copy2(kb / f, kbw / f)
    for sub in ("ks/problems", "ks/solutions"):
        (work / sub).mkdir(parents=True)
    entries = []
    for e, text in plan:
        problem = level_dir(kb, e.level) / e.file
        if not problem.is_file():
            raise SystemExit(f"{e.key}: no such problem in {kb}")
        source = problem.read_text()
        cand = reference_source(source) if text is None else text
        try:
            tree = ast.parse(cand)
        except SyntaxError as err:
            raise SystemExit(f"{e.key}: the candidate does not parse: {err}") from None
        if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
            raise SystemExit(f"{e.key}: the candidate defines no ModelNew")
        e.backend = detect_backend(cand)
        e.sha256 = hashlib.sha256(cand.encode()).hexdigest()[:16]
        dest = kbw / "KernelBench" / f"level{e.level}" / e.file
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(problem, dest)
        kernel = work / e.kb_kernel
        kernel.parent.mkdir(parents=True, exist_ok=True)
        kernel.write_text(cand)
        shutil.copy2(problem, work / "ks" / "problems" / e.file)
        (work / "ks" / "solutions" / e.file).write_text(cand)
        entries.append(e)
    manifest = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "kernelbench": {"source": str(kb), "files": {f: _sha(kb / f) for f in KB_FILES}},
        "candidates_dir": _rel(candidates),
        "entries": [e.to_dict() for e in entries],
    }
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1))
    counts = {k: sum(e.kind == k for e in entries) for k in KINDS}
    levels = sorted({e.level for e in entries})
    print(f"{len(entries)} candidates for {len(entries)} problems "
          f"({', '.join(f'level {lv}: {sum(e.level == lv for e in entries)}' for lv in levels)}): "
          + ", ".join(f"{k} {n}" for k, n in counts.items()))
    print(f"CUDA builds: {sum(e.backend == 'cuda' for e in entries)}; layout under {work}")
    if args.nvcc:
        return nvcc_check(entries, work, args.arch, args.jobs)
    return 0


def nvcc_check(entries: list[Entry], work: Path, arch: str, jobs: int) -> int:
    """Compile every CUDA candidate as load_inline would (its CUDA file and its bindings), no GPU
    needed; a compile_error candidate must fail and every other one must build."""
    todo = [e for e in entries if e.backend == "cuda"]
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            results = list(pool.map(lambda e: (e, _nvcc_one(work / e.kb_kernel, Path(tmp) / e.name, arch)), todo))
    bad = 0
    for e, (ok, log) in results:
        want_fail = e.kind == "compile_error"
        good = ok != want_fail
        bad += not good
        first_error = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower()), "")
        print(f"{'ok ' if good else 'BAD'} {e.key} ({e.kind}): {'built' if ok else 'failed: ' + first_error[:200]}")
    print(f"{len(results) - bad}/{len(results)} CUDA candidates behaved as their kind says")
    return 1 if bad else 0


def _nvcc_one(path: Path, d: Path, arch: str) -> tuple[bool, str]:
    import sysconfig

    import torch.utils.cpp_extension as ext

    from kernelsearch.playbook.exemplars import build_sources

    src = build_sources(path.read_text())
    d.mkdir(parents=True, exist_ok=True)
    inc = [Path(p) for p in ext.include_paths()]
    if not any((p / "c10/cuda/impl/cuda_cmake_macros.h").is_file() for p in inc):  # a CPU-only torch
        stub = d / "stub" / "c10/cuda/impl"
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        inc.insert(0, d / "stub")
    flags = [f"-I{p}" for p in inc] + [f"-I{sysconfig.get_paths()['include']}"]
    cu = d / "cuda.cu"
    cu.write_text("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + "\n".join(src.cuda_sources))
    cmd = ["nvcc", "-c", str(cu), "-o", str(d / "cuda.o"), *flags, "-std=c++17", "-Xcompiler", "-fPIC",
           *ext.COMMON_NVCC_FLAGS, *src.extra_cuda_cflags, f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return False, out.stdout + out.stderr
    main = d / "main.cpp"
    defs = "\n".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in src.functions)
    main.write_text("#include <torch/extension.h>\n" + "\n".join(src.cpp_sources)
                    + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n")
    cxx = subprocess.run(["c++", "-c", str(main), "-o", str(d / "main.o"), *flags, "-std=c++17", "-fPIC",
                          "-DTORCH_EXTENSION_NAME=kbtp_check"], capture_output=True, text=True)
    return cxx.returncode == 0, out.stdout + out.stderr + cxx.stdout + cxx.stderr


# ----------------------------------------------------------------------------- run


def _wait(proc: subprocess.Popen, pump: Callable[[], None], deadline: float,
          stop: Callable[[subprocess.Popen], None] | None = None) -> tuple[int, bool]:
    """Copy the process's output with ``pump`` (a thread) until it exits or ``deadline`` passes
    (then ``stop``, by default ``_kill_group``, ends it); return its exit status and whether it
    was stopped."""
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    stopped = False
    while proc.poll() is None:
        if time.monotonic() > deadline:
            stopped = True
            (stop or _kill_group)(proc)
            break
        time.sleep(0.2)
    rc = proc.wait()
    reader.join(timeout=10)
    return rc, stopped


def _run_logged(cmd: list[str], cwd: Path, env: dict, log: Path, deadline: float, title: str) -> dict:
    """Run ``cmd`` in its own process group, its output appended to ``log`` line by line with the
    seconds since it started; stopped (TERM, then KILL) at ``deadline``. Returns wall time, exit
    status and whether it was stopped, and the time of first lines matching a few markers."""
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    with log.open("a") as f:
        f.write(f"\n===== {title}\n$ {' '.join(cmd)}\n(cwd {cwd})\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, text=True, errors="replace", bufsize=1)
        assert proc.stdout is not None

        def pump() -> None:
            for line in proc.stdout:
                t = time.monotonic() - t0
                for mark, pat in (("eval_start", "[Curr Batch]"), ("first_result", "[Eval Result]")):
                    if mark not in marks and pat in line:
                        marks[mark] = round(t, 2)
                f.write(f"[{t:8.2f}] {line}")
                f.flush()

        rc, stopped = _wait(proc, pump, deadline)
        wall = time.monotonic() - t0
        f.write(f"===== {title}: exit {rc}{' (stopped at the budget)' if stopped else ''} after {wall:.1f} s\n")
    return {"wall_s": round(wall, 2), "rc": rc, "stopped": stopped, "marks": marks}


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _env_info() -> dict:
    info = {"python": sys.version.split()[0], "cpu_count": os.cpu_count(), "host": os.uname().nodename}
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001 - information only
        info["torch_error"] = str(e)[:200]
    return info


def warm_up() -> float:
    """Untimed, before a harness: import torch and its extension builder, touch the GPU, read
    torch's headers once and compile an empty kernel with nvcc, so that neither harness pays
    for a cold page cache (a call on a fresh machine) that the other, in a call on a machine
    the first one warmed, would not."""
    t0 = time.monotonic()
    code = ("import torch, torch.utils.cpp_extension as e, pathlib\n"
            "[p.read_bytes() for d in e.include_paths() for p in pathlib.Path(d).rglob('*.h')]\n"
            "torch.cuda.is_available() and torch.zeros(1, device='cuda').sum().item()\n")
    subprocess.run([sys.executable, "-c", code], check=False, capture_output=True)
    if shutil.which("nvcc"):
        with tempfile.TemporaryDirectory() as tmp:
            cu = Path(tmp) / "warm.cu"
            cu.write_text("__global__ void warm(float* x) { x[threadIdx.x] = 0.f; }\n")
            subprocess.run(["nvcc", "-c", str(cu), "-o", str(Path(tmp) / "warm.o")], check=False, capture_output=True)
    return round(time.monotonic() - t0, 2)


def _entries(work: Path, levels: set[int] | None) -> tuple[dict, list[dict]]:
    manifest_path = work / "manifest.json"
    if not manifest_path.is_file():
        raise SystemExit(f"{manifest_path}: run `prepare` first")
    manifest = json.loads(manifest_path.read_text())
    entries = [e for e in manifest["entries"] if levels is None or e["level"] in levels]
    return manifest, entries


def _deadline(args: argparse.Namespace) -> float:
    """When the harness starting now must stop: ``--budget-s`` after its start, and never after
    ``--stop-by-s`` from the start of ``run`` (so a device call ends inside its limit)."""
    now = time.monotonic()
    ends = [now + args.budget_s] if args.budget_s else []
    if args.stop_by_s:
        ends.append(args.run_started + args.stop_by_s)
    return min(ends) if ends else float("inf")


def run(args: argparse.Namespace) -> int:
    args.run_started = time.monotonic()
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    levels = {int(x) for x in args.levels.split(",")} if args.levels else None
    manifest, entries = _entries(work, levels)
    shutil.copy2(work / "manifest.json", out / "manifest.json")
    harnesses = [h.strip() for h in args.harness.split(",") if h.strip()]
    harnesses = ["kernelbench", "kernelsearch"] if harnesses == ["both"] else harnesses
    for h in harnesses:
        if h not in ("kernelbench", "kernelsearch"):
            raise SystemExit(f"--harness takes kernelbench, kernelsearch, both or a comma list, not {h!r}")
    warm = None if args.no_warmup else warm_up()
    rc = 0
    for h in harnesses:
        fn = run_kernelbench if h == "kernelbench" else run_kernelsearch
        summary = fn(args, work, out, entries)
        env = _env_info()
        summary.update({"env": env, "warm_up_s": warm, "budget_s": args.budget_s, "stop_by_s": args.stop_by_s,
                        "finished": time.strftime("%Y-%m-%d %H:%M:%S")})
        for info in summary.get("levels", {}).values():  # levels may be merged from several calls
            info.update({"host": env.get("host"), "gpu": env.get("gpu")})
        (out / f"{h}.json").write_text(json.dumps(summary, indent=1, default=str))
        print(f"{h}: {summary['judged']}/{len(entries)} judged in {summary['wall_s']:.1f} s"
              + (f" ({summary['candidates_per_hour']:.0f} candidates/hour)" if summary["candidates_per_hour"] else "")
              + (" - stopped at the budget" if summary["stopped"] else ""), flush=True)
        rc = rc or (0 if summary["judged"] else 1)
    return rc


def kb_command(args: argparse.Namespace, work: Path, level: int) -> list[str]:
    kbw = work / "kernelbench"
    workers = args.kb_workers or os.cpu_count() or 1
    return [sys.executable, KB_SCRIPT, f"run_name=kbtp_level{level}", "dataset_src=local", f"level={level}",
            "num_gpu_devices=1", f"timeout={args.kb_timeout}", f"build_cache={not args.kb_no_build_cache}",
            f"num_cpu_workers={workers}", f"gpu_arch=['{args.kb_gpu_arch}']", f"runs_dir={kbw / 'runs'}",
            f"kernel_eval_build_dir={kbw / 'cache'}"]


def run_kernelbench(args: argparse.Namespace, work: Path, out: Path, entries: list[dict]) -> dict:
    kbw = work / "kernelbench"
    log = out / "kernelbench.log"
    log.write_text("")
    shutil.rmtree(kbw / "cache", ignore_errors=True)  # cold: no build of an earlier run
    for f in (kbw / "runs").glob("*/eval_results.json"):
        f.unlink()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in (args.kb_site, str(kbw / "src")) if p])
    env.update({"PYTHONUNBUFFERED": "1",
                # litellm (imported by kernelbench.utils) reads its price table from the network at
                # import unless told to use its own copy; the GPU machines have no network
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"})
    env.pop("TORCH_EXTENSIONS_DIR", None)
    start = time.monotonic()
    deadline = _deadline(args)
    runs, raw = {}, {}
    for level in sorted({e["level"] for e in entries}):
        cmd = kb_command(args, work, level)
        if time.monotonic() >= deadline:
            runs[level] = {"skipped": "budget spent before this level started", "command": cmd}
            continue
        r = _run_logged(cmd, kbw, env, log, deadline, f"KernelBench level {level}")
        r["command"] = cmd
        runs[level] = r
        results = kbw / "runs" / f"kbtp_level{level}" / "eval_results.json"
        try:  # the script rewrites it whole after every candidate; a stop may tear the last write
            raw[level] = json.loads(results.read_text()) if results.is_file() else {}
        except ValueError:
            raw[level] = {}
            r["results_file"] = "unreadable (torn by the stop?)"
    wall = time.monotonic() - start
    verdicts = kb_verdicts(entries, raw, log.read_text(errors="replace"))
    judged = sum(v["verdict"] != "not_run" for v in verdicts)
    for level, r in runs.items():
        r["judged"] = sum(v["verdict"] != "not_run" for v in verdicts if v["level"] == level)
    return {
        "harness": "kernelbench", "wall_s": round(wall, 2), "judged": judged,
        "candidates_per_hour": round(judged / wall * 3600, 1) if wall > 0 and judged else None,
        "stopped": any(r.get("stopped") or r.get("skipped") for r in runs.values()),
        "settings": {"script": KB_SCRIPT, "dataset_src": "local", "num_gpu_devices": 1,
                     "timeout": args.kb_timeout, "build_cache": not args.kb_no_build_cache,
                     "num_cpu_workers": args.kb_workers or os.cpu_count(), "gpu_arch": [args.kb_gpu_arch],
                     "num_correct_trials": 5, "num_perf_trials": 100, "timing_method": "cuda_event",
                     "precision": "fp32", "tolerance": KB_TOLERANCE_FP32, "pythonpath": env["PYTHONPATH"]},
        "levels": {str(k): v for k, v in runs.items()}, "results": verdicts,
        "raw": {str(k): v for k, v in raw.items()},
    }


_KB_RESULT = re.compile(r"\[Eval Result\] Problem ID: (\d+), Sample ID: (\d+)")


def _kb_ref_runtimes(log: str) -> dict[tuple[int, int], float]:
    """(level, problem id) -> ref_runtime (ms) from the results the script prints (its JSON file
    leaves ref_runtime out); levels are told apart by the log's section headers."""
    found: dict[tuple[int, int], float] = {}
    level = 0
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"===== KernelBench level (\d+)", line)
        if m:
            level = int(m.group(1))
            continue
        m = _KB_RESULT.search(line)
        if not m:
            continue
        for nxt in lines[i:i + 4]:
            r = re.search(r"ref_runtime=(-?[\d.eE+-]+)", nxt)
            if r:
                try:
                    found[(level, int(m.group(1)))] = float(r.group(1))
                except ValueError:
                    pass
                break
    return found


def kb_verdict(res: dict | None) -> tuple[str, str]:
    """KernelBench's result as one of kernelsearch's statuses, with the reason it gives."""
    if res is None:
        return "not_run", "no result (not reached, or stopped at the budget)"
    md = res.get("metadata") or {}
    if not res.get("compiled"):
        if "compilation_error" in md or "compilation_error_name" in md:
            return "compile_error", str(md.get("compilation_error_name", "")) + ": " + str(md.get("compilation_error", ""))[:300]
        if "Evaluation timed out" in str(md.get("error", "")):
            return "timeout", str(md.get("error"))
        err = md.get("cuda_error") or md.get("other_error") or md.get("error") or ""
        return "runtime_error", str(err)[:300]
    if res.get("correctness"):
        return "correct", "excessive_speedup flagged" if md.get("excessive_speedup") else ""
    if "runtime_error" in md:
        return "runtime_error", f"{md.get('runtime_error_name', '')}: {str(md['runtime_error'])[:300]}"
    why = str(md.get("correctness_issue", "")) or "incorrect"
    if md.get("max_difference"):
        why += f" (max difference per trial {', '.join(map(str, md['max_difference']))}"
        why += f"; trials {md.get('correctness_trials', '?')})"
    return "incorrect", why


def kb_verdicts(entries: list[dict], raw: dict[int, dict], log: str) -> list[dict]:
    refs = _kb_ref_runtimes(log)
    rows = []
    for e in entries:
        samples = raw.get(e["level"], {}).get(str(e["problem_id"])) or []
        res = next((s for s in samples if s.get("sample_id") == 0), None)
        verdict, reason = kb_verdict(res)
        runtime = res.get("runtime") if res else None
        ref = refs.get((e["level"], e["problem_id"]))
        rows.append({
            "key": e["key"], "level": e["level"], "verdict": verdict, "reason": reason,
            "runtime_ms": runtime if isinstance(runtime, (int, float)) and runtime > 0 else None,
            "ref_runtime_ms": ref if ref is not None and ref > 0 else None,
            "excessive_speedup": bool(res and (res.get("metadata") or {}).get("excessive_speedup")),
        })
    return rows


def _ks_subset(work: Path, entries: list[dict]) -> tuple[Path, Path]:
    """The problems and solutions folders, restricted to ``entries`` where that is fewer."""
    probs, sols = work / "ks" / "problems", work / "ks" / "solutions"
    if len(entries) == len(list(sols.glob("*.py"))):
        return probs, sols
    sub = work / "ks-subset"
    shutil.rmtree(sub, ignore_errors=True)
    for d in ("problems", "solutions"):
        (sub / d).mkdir(parents=True)
    for e in entries:
        shutil.copy2(probs / e["file"], sub / "problems" / e["file"])
        shutil.copy2(sols / e["file"], sub / "solutions" / e["file"])
    return sub / "problems", sub / "solutions"


def ks_command(args: argparse.Namespace, problems: Path, solutions: Path) -> list[str]:
    cmd = [sys.executable, "-m", "kernelsearch", "bench", str(problems), str(solutions), "--json",
           "--matched-only", "--confirm", str(args.ks_confirm)]
    if not args.ks_compile:
        cmd.append("--no-compile")
    if args.device:
        cmd += ["--device", args.device]
    if args.ks_jobs:
        cmd += ["-j", str(args.ks_jobs)]
    if args.ks_tolerance == "kernelbench":
        cmd += ["--atol", str(KB_TOLERANCE_FP32), "--rtol", str(KB_TOLERANCE_FP32)]
    return cmd + list(args.ks_arg or [])


def tolerance_setting(args: argparse.Namespace) -> str:
    if args.ks_tolerance == "kernelbench":
        return f"KernelBench v0.2's for fp32: atol = rtol = {KB_TOLERANCE_FP32:g}"
    return "kernelsearch's: the problem's, else atol = rtol = 1e-2"


def run_kernelsearch(args: argparse.Namespace, work: Path, out: Path, entries: list[dict]) -> dict:
    home = work / "kshome"
    shutil.rmtree(home, ignore_errors=True)  # cold: no build, baseline, lint or ceilings cache
    home.mkdir(parents=True)
    problems, solutions = _ks_subset(work, entries)
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p and p != args.kb_site])
    env.update({"KERNELSEARCH_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    cmd = ks_command(args, problems, solutions)
    log = out / "kernelsearch.log"
    log.write_text("")
    stdout = work / "kernelsearch-stdout.json"
    deadline = _deadline(args)
    r = _run_split(cmd, ROOT, env, log, stdout, deadline)
    try:
        bench = json.loads(stdout.read_text()) if stdout.is_file() and stdout.stat().st_size else {}
    except ValueError:
        bench = {}
    verdicts = ks_verdicts(entries, bench)
    judged = sum(v["verdict"] != "not_run" for v in verdicts)
    if r["stopped"] and not bench:
        judged, verdicts = ks_from_archive(entries, home, verdicts)
    wall = r["wall_s"]
    return {
        "harness": "kernelsearch", "wall_s": wall, "judged": judged,
        "candidates_per_hour": round(judged / wall * 3600, 1) if wall > 0 and judged else None,
        "stopped": r["stopped"], "rc": r["rc"], "command": cmd,
        "levels_covered": sorted({e["level"] for e in entries}),
        "settings": {"confirm": args.ks_confirm, "compile_baseline": bool(args.ks_compile),
                     "device": args.device or "default", "jobs": args.ks_jobs or "default",
                     "extra": list(args.ks_arg or []), "tolerance": tolerance_setting(args)},
        "results": verdicts, "raw": bench,
    }


def _run_split(cmd: list[str], cwd: Path, env: dict, log: Path, stdout_path: Path, deadline: float,
               title: str = "", stop: Callable[[subprocess.Popen], None] | None = None) -> dict:
    """Run ``cmd`` with its stdout to ``stdout_path`` and its stderr appended to ``log`` with the
    seconds since it started, until it exits or ``deadline`` passes (see ``_wait``); wall time,
    exit status and whether it was stopped."""
    t0 = time.monotonic()
    head = f"\n===== {title}\n" if title else ""
    with log.open("a") as f, stdout_path.open("w") as so:
        f.write(f"{head}$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=so, stderr=subprocess.PIPE,
                                start_new_session=True, text=True, errors="replace", bufsize=1)
        assert proc.stderr is not None

        def pump() -> None:
            for line in proc.stderr:
                f.write(f"[{time.monotonic() - t0:8.2f}] {line}")
                f.flush()

        rc, stopped = _wait(proc, pump, deadline, stop)
        wall = time.monotonic() - t0
        name = f"{title}: " if title else ""
        f.write(f"===== {name}exit {rc}{' (stopped at the budget)' if stopped else ''} after {wall:.1f} s\n")
    return {"wall_s": round(wall, 2), "rc": rc, "stopped": stopped}


def ks_verdicts(entries: list[dict], bench: dict) -> list[dict]:
    by_name = {r.get("problem"): r for r in bench.get("results", [])}
    rows = []
    for e in entries:
        r = by_name.get(e["name"])
        if not r or r.get("status") in (None, "no_candidate"):
            rows.append({"key": e["key"], "level": e["level"], "verdict": "not_run", "reason": "no result", "flags": []})
            continue
        rows.append({
            "key": e["key"], "level": e["level"], "verdict": r.get("status"), "reason": r.get("reason") or "",
            "flags": r.get("flags") or [], "candidate_ms": r.get("candidate_ms"), "eager_ms": r.get("eager_ms"),
            "speedup_vs_eager": r.get("speedup_vs_eager"), "max_abs_error": r.get("max_abs_error"),
            "norm_error": r.get("norm_error"), "atol": r.get("atol"), "rtol": r.get("rtol"),
            "eval_s": r.get("eval_s"), "duplicate_of": r.get("duplicate_of"),
        })
    return rows


def ks_from_archive(entries: list[dict], home: Path, verdicts: list[dict]) -> tuple[int, list[dict]]:
    """Verdicts of a bench stopped at the budget (no JSON printed): whatever reached the archive."""
    try:
        from kernelsearch.archive.db import Archive
        from kernelsearch.problems.loader import load_problem
        from kernelsearch.records.candidate import Candidate
    except ImportError:
        return 0, verdicts
    path = home / "archive.sqlite"
    if not path.is_file():
        return 0, verdicts
    by_key = {v["key"]: v for v in verdicts}
    with Archive(path) as archive:
        for e in entries:
            try:
                problem = load_problem(home.parent / "ks" / "problems" / e["file"])
                # two pairs may share a problem's source (and so its id): the candidate tells them apart
                cand = Candidate.from_file(home.parent / "ks" / "solutions" / e["file"]).id
                found = [r for r in archive.evaluations(problem.id) if r.candidate_id == cand]
            except Exception:  # noqa: BLE001 - best effort after a stop
                continue
            if found:
                r = found[-1]
                by_key[e["key"]] = {"key": e["key"], "level": e["level"], "verdict": r.status.value, "reason": r.reason,
                                    "flags": list(r.flags), "candidate_ms": r.candidate_ms, "eager_ms": r.eager_ms,
                                    "speedup_vs_eager": r.speedup_vs_eager, "from_archive": True}
    rows = [by_key[e["key"]] for e in entries]
    return sum(v["verdict"] != "not_run" for v in rows), rows


# ----------------------------------------------------------------------------- report


def _load_runs(dirs: list[Path]) -> tuple[dict, dict, dict]:
    """The manifest and each harness's summary from ``run`` output folders. KernelBench runs
    are merged per level (a level's figures come from the last folder where it finished, else
    from the one that judged most), so a level re-run in a later call replaces a cut one;
    for kernelsearch the last run that finished (else the one that judged most) is taken."""
    manifest: dict = {}
    kbs, kss = [], []
    for d in dirs:
        if (d / "manifest.json").is_file() and not manifest:
            manifest = json.loads((d / "manifest.json").read_text())
        for name, found in (("kernelbench", kbs), ("kernelsearch", kss)):
            f = d / f"{name}.json"
            if f.is_file():
                found.append(json.loads(f.read_text()))
    if not manifest:
        raise SystemExit("no manifest.json in " + ", ".join(map(str, dirs)))
    return manifest, merge_kernelbench(kbs), _best(kss)


def _best(runs: list[dict]) -> dict:
    best: dict = {}
    for r in runs:
        if not best or (best.get("stopped") and not r.get("stopped")) or (
                bool(best.get("stopped")) == bool(r.get("stopped")) and r["judged"] >= best["judged"]):
            best = r
    return best


def merge_kernelbench(runs: list[dict]) -> dict:
    if len(runs) <= 1:
        return runs[0] if runs else {}
    chosen: dict[str, tuple[dict, dict]] = {}
    for r in runs:
        for level, info in r.get("levels", {}).items():
            if "wall_s" not in info:
                continue
            prev = chosen.get(level)
            if prev is None or (prev[1].get("stopped") and not info.get("stopped")) or (
                    bool(prev[1].get("stopped")) == bool(info.get("stopped"))
                    and info.get("judged", 0) >= prev[1].get("judged", 0)):
                chosen[level] = (r, info)
    merged = {k: v for k, v in runs[0].items() if k not in ("results", "raw", "levels")}
    merged["levels"] = {lv: info for lv, (_, info) in sorted(chosen.items())}
    merged["results"] = [v for lv, (r, _) in sorted(chosen.items()) for v in r.get("results", [])
                         if str(v.get("level")) == lv]
    merged["wall_s"] = round(sum(info["wall_s"] for _, info in chosen.values()), 2)
    merged["judged"] = sum(v["verdict"] != "not_run" for v in merged["results"])
    merged["stopped"] = any(info.get("stopped") for _, info in chosen.values())
    merged["candidates_per_hour"] = (round(merged["judged"] / merged["wall_s"] * 3600, 1)
                                     if merged["wall_s"] > 0 and merged["judged"] else None)
    merged["merged_from"] = len(runs)
    return merged


def _ms(x) -> str:
    return f"{x:.3g} ms" if isinstance(x, (int, float)) else "-"


def _kb_cell(v: dict) -> str:
    cell = v["verdict"]
    if v["verdict"] == "correct":
        cell += f" {_ms(v.get('runtime_ms'))}"
        if v.get("ref_runtime_ms"):
            cell += f" (ref {_ms(v['ref_runtime_ms'])})"
        if v.get("excessive_speedup"):
            cell += ", flagged excessive speedup"
    return cell


def _ks_cell(v: dict) -> str:
    cell = v["verdict"]
    if v.get("flags"):
        cell += f" [{', '.join(v['flags'])}]"
    if v["verdict"] == "correct":
        cell += f" {_ms(v.get('candidate_ms'))} (eager {_ms(v.get('eager_ms'))})"
    return cell


def difference(kind: str, kbv: dict, ksv: dict) -> str:
    """Why the two verdicts differ, where a rule knows; else both reasons."""
    a, b = kbv["verdict"], ksv["verdict"]
    if a == b:
        return ""
    if "not_run" in (a, b):
        who = "KernelBench" if a == "not_run" else "kernelsearch"
        return f"{who} gave no verdict (not reached within the budget, or stopped)"
    reason = ksv.get("reason", "")
    if a == "correct" and b == "incorrect" and "vacuous" in reason:
        return ("the reference's output is tiny, so an all-zeros output passes the absolute tolerance; "
                "kernelsearch also requires the normalised error: " + reason[:200])
    if a == "incorrect" and b == "correct" and ksv.get("atol") not in (None, KB_TOLERANCE_FP32):
        return (f"KernelBench's fp32 tolerance is atol = rtol = {KB_TOLERANCE_FP32:g}, kernelsearch's here "
                f"atol {ksv.get('atol'):g}, rtol {ksv.get('rtol'):g} (max abs error {ksv.get('max_abs_error')}); "
                f"KernelBench: {kbv.get('reason', '')[:160]}")
    if b == "rejected":
        return "kernelsearch rejected it: " + reason[:240]
    return f"KernelBench: {kbv.get('reason', '')[:160]}; kernelsearch: {reason[:160]}"


def report(args: argparse.Namespace) -> int:
    manifest, kb, ks = _load_runs([Path(d) for d in args.from_])
    entries = manifest["entries"]
    kbr = {v["key"]: v for v in kb.get("results", [])}
    ksr = {v["key"]: v for v in ks.get("results", [])}
    none = {"verdict": "not_run", "reason": "not run"}
    lines = []
    counts = ", ".join(f"{k} {sum(e['kind'] == k for e in entries)}" for k in KINDS)
    lines.append(f"Candidates: {len(entries)} ({counts}).")
    for name, run_ in (("KernelBench", kb), ("kernelsearch", ks)):
        env = run_.get("env") or {}
        if env:
            hosts = sorted({str(i.get("host")) for i in run_.get("levels", {}).values() if i.get("host")}
                           or {str(env.get("host", "?"))})
            lines.append(f"{name} ran on {env.get('gpu', 'no GPU')} (host {', '.join(hosts)}, "
                         f"{env.get('cpu_count', '?')} cores, torch {env.get('torch', '?')}), finished "
                         f"{run_.get('finished', '?')}" + (f", levels merged from {run_['merged_from']} calls"
                                                           if run_.get("merged_from") else "") + ".")
    lines.append("")
    lines.append("| harness | settings | judged | wall s | candidates/hour |")
    lines.append("|---|---|---|---|---|")
    cph = {}
    for name, run_ in (("KernelBench `eval_from_generations.py`", kb), ("`kernelsearch bench`", ks)):
        if not run_:
            lines.append(f"| {name} | not run | - | - | - |")
            continue
        s = run_.get("settings", {})
        if run_["harness"] == "kernelbench":
            how = (f"build_cache={s.get('build_cache')}, {s.get('num_cpu_workers')} CPU workers, "
                   f"{s.get('num_correct_trials')} correctness + {s.get('num_perf_trials')} timing trials, "
                   f"timeout {s.get('timeout')} s, gpu_arch {s.get('gpu_arch')}, atol = rtol = {s.get('tolerance')}")
            levels = run_.get("levels", {})
            how += "; " + ", ".join(f"level {lv} {r.get('wall_s', '-')} s" + (f" (builds until {r['marks']['eval_start']} s)"
                                    if r.get("marks", {}).get("eval_start") else "") for lv, r in levels.items())
        else:
            how = (f"--confirm {s.get('confirm')}, torch.compile baseline {'on' if s.get('compile_baseline') else 'off'}, "
                   f"every check on, tolerance: {s.get('tolerance')}")
        stopped = " (stopped at the budget)" if run_.get("stopped") else ""
        cph[run_["harness"]] = run_.get("candidates_per_hour")
        per_hour = run_.get("candidates_per_hour")
        lines.append(f"| {name} | {how} | {run_['judged']}/{len(entries)}{stopped} | {run_['wall_s']:.1f} | "
                     f"{f'{per_hour:.0f}' if per_hour else '-'} |")
    if cph.get("kernelbench") and cph.get("kernelsearch"):
        lines.append(f"| kernelsearch / KernelBench | | | | **{cph['kernelsearch'] / cph['kernelbench']:.2f}x** |")
    lines.append("")
    lines.append("| kind | candidates | KernelBench correct | kernelsearch correct | verdicts differ |")
    lines.append("|---|---|---|---|---|")
    for k in KINDS:
        es = [e for e in entries if e["kind"] == k]
        if not es:
            continue
        kbc = sum(kbr.get(e["key"], none)["verdict"] == "correct" for e in es)
        ksc = sum(ksr.get(e["key"], none)["verdict"] == "correct" for e in es)
        diff = sum(kbr.get(e["key"], none)["verdict"] != ksr.get(e["key"], none)["verdict"] for e in es)
        lines.append(f"| {k} | {len(es)} | {kbc} | {ksc} | {diff} |")
    lines.append("")
    lines.append("| problem | kind | expected | KernelBench | kernelsearch | why they differ |")
    lines.append("|---|---|---|---|---|---|")
    for e in entries:
        a, b = kbr.get(e["key"], none), ksr.get(e["key"], none)
        lines.append(f"| {e['key']} | {e['kind']} | {e['expect']} | {_kb_cell(a)} | {_ks_cell(b)} | "
                     f"{difference(e['kind'], a, b).replace('|', '/')} |")
    text = "\n".join(lines)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"manifest": manifest, "kernelbench": {k: v for k, v in kb.items() if k != "raw"},
                                               "kernelsearch": {k: v for k, v in ks.items() if k != "raw"},
                                               "markdown": text}, indent=1, default=str))
    return 0


# ----------------------------------------------------------------------------- wheels


def wheels(args: argparse.Namespace) -> int:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *PIP_PLATFORM, "-d", args.dest, *WHEELS]
    print(" ".join(cmd))
    if args.print:
        return 0
    Path(args.dest).mkdir(parents=True, exist_ok=True)
    rc = subprocess.run(cmd).returncode
    names: dict[str, list[str]] = {}
    for w in Path(args.dest).glob("*.whl"):
        names.setdefault(w.name.split("-")[0].lower().replace("_", "-"), []).append(w.name)
    twice = {n: ws for n, ws in names.items() if len(ws) > 1}
    size = sum(w.stat().st_size for w in Path(args.dest).glob("*.whl"))
    print(f"{len(names)} packages, {size / 2**20:.1f} MiB in {args.dest}"
          + (f"; more than one version of {', '.join(twice)}: keep one (pip install stops on two)" if twice else ""))
    return rc or (1 if twice else 0)


# ----------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="phase", required=True)
    p = sub.add_parser("prepare", help="lay the candidates out for both harnesses (CPU)")
    p.add_argument("--kernelbench", required=True, help="a KernelBench checkout (scripts/, src/, KernelBench/)")
    p.add_argument("--candidates", default=str(CANDIDATES), help="levelN/*.py candidates and references.txt")
    p.add_argument("--work", default=".ext/kbtp")
    p.add_argument("--nvcc", action="store_true", help="compile-check the CUDA candidates with nvcc (no GPU)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("-j", "--jobs", type=int, default=2, help="parallel nvcc checks")
    p.set_defaults(func=prepare)
    p = sub.add_parser("run", help="run the harnesses from cold caches, timed (GPU machine)")
    p.add_argument("--work", default=".ext/kbtp")
    p.add_argument("--out", required=True, help="where the JSON and logs go (e.g. $OUT)")
    p.add_argument("--harness", default="both", help="kernelbench, kernelsearch, both, or a comma list in order")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop a harness after this long (each; 0: none)")
    p.add_argument("--stop-by-s", type=float, default=0.0,
                   help="stop every harness this long after run started, warm-up included (0: no such limit)")
    p.add_argument("--levels", default="", help="only these levels, e.g. 2 (default: every level prepared)")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed import and header warm-up")
    p.add_argument("--kb-site", default="", help="folder of the carried wheels' packages (pip install --target)")
    p.add_argument("--kb-workers", type=int, default=0, help="KernelBench num_cpu_workers (default: the cores)")
    p.add_argument("--kb-timeout", type=int, default=300, help="KernelBench timeout per candidate (README's 300)")
    p.add_argument("--kb-gpu-arch", default="Hopper")
    p.add_argument("--kb-no-build-cache", action="store_true", help="KernelBench's default: no parallel pre-build")
    p.add_argument("--device", default="", help="kernelsearch --device (default: cuda if available)")
    p.add_argument("--ks-confirm", type=int, default=0, help="kernelsearch bench --confirm (default 0)")
    p.add_argument("--ks-compile", action="store_true", help="time the torch.compile baseline too")
    p.add_argument("--ks-jobs", type=int, default=0, help="kernelsearch bench -j (default: its own)")
    p.add_argument("--ks-tolerance", choices=("kernelbench", "default"), default="kernelbench",
                   help="kernelbench: KernelBench v0.2's fp32 tolerance (1e-4) for kernelsearch too; "
                        "default: kernelsearch's own (the problem's, else 1e-2)")
    p.add_argument("--ks-arg", action="append", help="one more argument for kernelsearch bench (repeatable)")
    p.set_defaults(func=run)
    p = sub.add_parser("report", help="side-by-side Markdown from run outputs")
    p.add_argument("--from", dest="from_", action="append", required=True, help="a run's --out folder (repeatable)")
    p.add_argument("--json", default="", help="also write the merged summary here")
    p.set_defaults(func=report)
    p = sub.add_parser("wheels", help="download the packages KernelBench's script needs, as wheels for the GPU machine")
    p.add_argument("--dest", default=".whl")
    p.add_argument("--print", action="store_true", help="print the pip command only")
    p.set_defaults(func=wheels)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
