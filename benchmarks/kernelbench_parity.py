"""Parity with KernelBench's own verdicts: the same candidate judged by KernelBench's
``eval_kernel_against_ref`` (``src/kernelbench/eval.py``, unmodified, a fresh process per
candidate) and by ``kernelsearch bench``, in fp32 and in bf16, side by side.

The pairs (problem, candidate, name, origin): the 31 of ``benchmarks/kbtp_candidates`` (the
throughput set, read by ``kernelbench_throughput.read_plan``) and those of
``benchmarks/parity_candidates`` (ours; a ``parity: problem=levelN/FILE.py`` line at the top of
each), which make their weights the ways published kernels do: the legacy constructor
``torch.Tensor(out, in)`` with the module's own init, ``torch.empty`` with it, copies of the
reference's modules, ``torch.randn`` weights, modules in another order, in-place init on a
Parameter, integer inputs, an fp32-only output.

- ``prepare`` (CPU): ``WORK/ks/problems/NAME.py`` and ``WORK/ks/solutions/NAME.py`` (one problem
  file per pair, named after the pair, so that ``kernelsearch bench`` pairs them and two
  candidates may share a problem), KernelBench's ``src/`` in ``WORK/kernelbench/src`` and
  ``WORK/manifest.json``. ``--nvcc`` compile-checks the CUDA candidates (sm_90, no GPU).
- ``run`` (GPU): ``--harness kernelbench``: per precision, each pair in a fresh process calling
  ``eval_kernel_against_ref(ref, cand, num_correct_trials=5, measure_performance=False,
  precision=..., build_dir=WORK/kbbuild/NAME)`` (the builds are kept, so a second precision
  reuses them); ``--harness kernelsearch``: per precision one ``kernelsearch bench --json
  --matched-only --confirm 0 --no-compile --precision P`` (one home, so builds are shared; an
  archive per precision). Results go to ``OUT/<harness>-<precision>.jsonl``; pairs already there or
  in a ``--done`` folder are skipped; nothing starts after ``--stop-by-s``.
- ``report``: the verdicts side by side per precision, ``same?``, and "why they differ" from a
  notes file (``NAME: text`` or ``NAME@bf16: text`` per line), with counts.

    python benchmarks/kernelbench_throughput.py wheels --dest .whl
    python benchmarks/kernelbench_parity.py prepare --kernelbench .ext/kernelbench --work .ext/parity --nvcc
    # GPU machine, carrying .ext/parity and .whl
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
    PYTHONPATH=src python3 benchmarks/kernelbench_parity.py run --work .ext/parity --out "$OUT" \\
        --harness kernelbench --precision fp32,bf16 --kb-site /tmp/site --stop-by-s 520
    PYTHONPATH=src python3 benchmarks/kernelbench_parity.py run --work .ext/parity --out "$OUT" \\
        --harness kernelsearch --precision fp32,bf16 --stop-by-s 520
    python benchmarks/kernelbench_parity.py report --from DIR1 --from DIR2 --notes NOTES
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARITY = HERE / "parity_candidates"
PRECISIONS = ("fp32", "fp16", "bf16")
HARNESSES = ("kernelbench", "kernelsearch")
KB_TRIALS = 5  # num_correct_trials, as KernelBench's scripts run it
_HEADER = re.compile(r"parity:\s*problem=level(\d+)/(\S+\.py)")


def throughput() -> ModuleType:
    """kernelbench_throughput.py, whose plan, layout and process helpers this script reuses."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import kernelbench_throughput

    return kernelbench_throughput


@dataclass
class Pair:
    """A candidate and the KernelBench problem it is judged against."""

    name: str  # unique; the file name of both its problem and its candidate under WORK/ks
    level: int
    problem: str  # the KernelBench problem's file name, e.g. 40_LayerNorm.py
    origin: str  # kbtp:<kind> (the throughput set) or parity (benchmarks/parity_candidates)
    source: str  # the candidate's file, relative to the repository, or "reference"
    backend: str = ""
    sha256: str = ""

    def to_dict(self) -> dict:
        # key and file are the names kernelbench_throughput's kernelsearch helpers read
        return {**asdict(self), "key": self.name, "file": f"{self.name}.py",
                "ks_problem": f"ks/problems/{self.name}.py", "ks_solution": f"ks/solutions/{self.name}.py"}


def parity_problem(text: str) -> tuple[int, str]:
    """(level, problem file) from the ``parity: problem=levelN/FILE.py`` line of a candidate."""
    m = _HEADER.search(text[:400])
    if not m:
        raise ValueError("no 'parity: problem=levelN/FILE.py' line at the top")
    return int(m.group(1)), m.group(2)


def read_pairs(kbtp_dir: Path | None, parity_dir: Path | None) -> list[tuple[Pair, str | None]]:
    """Every pair with its candidate's text (None: the reference as candidate)."""
    tp = throughput()
    pairs: list[tuple[Pair, str | None]] = []
    if kbtp_dir is not None:
        for e, text in tp.read_plan(kbtp_dir):
            pairs.append((Pair(e.name, e.level, e.file, f"kbtp:{e.kind}", e.source), text))
    if parity_dir is not None:
        for f in sorted(parity_dir.glob("*.py")):
            text = f.read_text()
            try:
                level, problem = parity_problem(text)
            except ValueError as err:
                raise SystemExit(f"{f}: {err}") from None
            pairs.append((Pair(f.stem, level, problem, "parity", tp._rel(f)), text))
    seen: set[str] = set()
    for p, _ in pairs:
        if p.name in seen:
            raise SystemExit(f"two pairs named {p.name}")
        seen.add(p.name)
    return pairs


# ----------------------------------------------------------------------------- prepare


def prepare(args: argparse.Namespace) -> int:
    from kernelsearch.problems.reference import reference_source
    from kernelsearch.records.candidate import detect_backend

    tp = throughput()
    kb, work = Path(args.kernelbench), Path(args.work)
    if not (kb / "src" / "kernelbench" / "eval.py").is_file():
        raise SystemExit(f"{kb} is not a KernelBench checkout: no src/kernelbench/eval.py")
    pairs = read_pairs(Path(args.kbtp) if args.kbtp else None, Path(args.candidates) if args.candidates else None)
    if not pairs:
        raise SystemExit("no pairs")
    for sub in ("ks", "kernelbench", "ks-subset"):
        shutil.rmtree(work / sub, ignore_errors=True)
    shutil.copytree(kb / "src", work / "kernelbench" / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for sub in ("problems", "solutions"):
        (work / "ks" / sub).mkdir(parents=True)
    done = []
    for p, text in pairs:
        problem = tp.level_dir(kb, p.level) / p.problem
        if not problem.is_file():
            raise SystemExit(f"{p.name}: no level{p.level}/{p.problem} in {kb}")
        ref = problem.read_text()
        cand = reference_source(ref) if text is None else text
        if "class ModelNew" not in cand:
            raise SystemExit(f"{p.name}: the candidate defines no ModelNew")
        p.backend = detect_backend(cand)
        p.sha256 = hashlib.sha256(cand.encode()).hexdigest()[:16]
        (work / "ks" / "problems" / f"{p.name}.py").write_text(ref)
        (work / "ks" / "solutions" / f"{p.name}.py").write_text(cand)
        done.append(p)
    manifest = {"created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "kernelbench": {"source": str(kb), "eval_sha256": tp._sha(kb / "src/kernelbench/eval.py"),
                                "commit": _git_head(kb)},
                "pairs": [p.to_dict() for p in done]}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1))
    origins: dict[str, int] = {}
    for p in done:
        origins[p.origin] = origins.get(p.origin, 0) + 1
    print(f"{len(done)} pairs ({', '.join(f'{k} {n}' for k, n in sorted(origins.items()))}); "
          f"CUDA builds: {sum(p.backend == 'cuda' for p in done)}; layout under {work}")
    return nvcc_check(done, work, args.arch, args.jobs) if args.nvcc else 0


def _git_head(repo: Path) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def nvcc_check(pairs: list[Pair], work: Path, arch: str, jobs: int) -> int:
    """Every CUDA candidate built as load_inline would (no GPU): the throughput set's
    compile_error ones must fail, every other one must build."""
    tp = throughput()
    todo = [p for p in pairs if p.backend == "cuda"]
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            got = list(pool.map(lambda p: (p, tp._nvcc_one(work / "ks" / "solutions" / f"{p.name}.py",
                                                           Path(tmp) / p.name, arch)), todo))
    bad = 0
    for p, (ok, log) in got:
        good = ok != (p.origin == "kbtp:compile_error")
        bad += not good
        first = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower()), "")
        print(f"{'ok ' if good else 'BAD'} {p.name} ({p.origin}): {'built' if ok else 'failed: ' + first[:200]}")
    print(f"{len(got) - bad}/{len(got)} CUDA candidates built or failed as expected")
    return 1 if bad else 0


# ----------------------------------------------------------------------------- run


def _jsonl(path: Path) -> list[dict]:
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a stop
    return rows


def results_file(out: Path, harness: str, precision: str) -> Path:
    return out / f"{harness}-{precision}.jsonl"


def done_names(dirs: list[Path], harness: str, precision: str) -> set[str]:
    return {r["name"] for d in dirs for r in _jsonl(results_file(d, harness, precision))
            if r.get("verdict") not in (None, "not_run")}


class Appender:
    """Result lines appended one at a time (several threads), so a stop loses none written."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()

    def add(self, row: dict) -> None:
        with self.lock, self.path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.stop_by_s if args.stop_by_s else float("inf")
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = work / "manifest.json"
    if not manifest_path.is_file():
        raise SystemExit(f"{manifest_path}: run `prepare` first")
    shutil.copy2(manifest_path, out / "manifest.json")
    pairs = json.loads(manifest_path.read_text())["pairs"]
    if args.only:
        wanted = set(args.only.split(","))
        pairs = [p for p in pairs if p["name"] in wanted]
    precisions = [x.strip() for x in args.precision.split(",") if x.strip()]
    for x in precisions:
        if x not in PRECISIONS:
            raise SystemExit(f"--precision takes {', '.join(PRECISIONS)} or a comma list, not {x!r}")
    seen = [out, *(Path(d) for d in args.done or [])]
    tp = throughput()
    env_info = tp._env_info()
    judged = left = 0
    for precision in precisions:
        todo = [p for p in pairs if p["name"] not in done_names(seen, args.harness, precision)]
        if not todo:
            print(f"{args.harness} {precision}: all {len(pairs)} done already", flush=True)
            continue
        left += len(todo)
        if time.monotonic() >= deadline:
            print(f"{args.harness} {precision}: not started ({len(todo)} to do), past --stop-by-s", flush=True)
            continue
        sink = Appender(results_file(out, args.harness, precision))
        t0 = time.monotonic()
        fn = run_kernelbench if args.harness == "kernelbench" else run_kernelsearch
        n = fn(args, work, out, todo, precision, deadline, sink, env_info)
        judged += n
        print(f"{args.harness} {precision}: {n}/{len(todo)} judged in {time.monotonic() - t0:.1f} s", flush=True)
    return 0 if judged or not left else 1  # 1: there was work and none of it got a verdict


def run_kernelbench(args: argparse.Namespace, work: Path, out: Path, todo: list[dict], precision: str,
                    deadline: float, sink: Appender, env_info: dict) -> int:
    """Each pair in a fresh process (``kb-one``), ``--kb-jobs`` at a time."""
    tp = throughput()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.kb_site, str(work / "kernelbench" / "src")) if p)
    env.update({"PYTHONUNBUFFERED": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"})
    env.pop("TORCH_EXTENSIONS_DIR", None)
    logs = out / "logs" / f"kernelbench-{precision}"
    logs.mkdir(parents=True, exist_ok=True)
    count = [0]

    def one(p: dict) -> None:
        left = deadline - time.monotonic()
        if left <= 5:
            return
        result = work / "kbresults" / precision / f"{p['name']}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.unlink(missing_ok=True)
        build = work / "kbbuild" / p["name"]
        build.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "kb-one", "--problem", str(work / p["ks_problem"]),
               "--candidate", str(work / p["ks_solution"]), "--precision", precision, "--build-dir", str(build),
               "--result", str(result), "--trials", str(args.kb_trials)]
        t0 = time.monotonic()
        with (logs / f"{p['name']}.log").open("w") as log:
            proc = subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            limit = min(args.kb_timeout, left)
            try:
                rc, stopped = proc.wait(timeout=limit), False
            except subprocess.TimeoutExpired:
                tp._kill_group(proc)
                rc, stopped = proc.returncode, True
        wall = round(time.monotonic() - t0, 2)
        row = {"name": p["name"], "harness": "kernelbench", "precision": precision, "wall_s": wall, "rc": rc,
               "gpu": env_info.get("gpu"), "torch": env_info.get("torch")}
        raw = json.loads(result.read_text()) if result.is_file() else None
        if stopped and limit < args.kb_timeout:
            return  # cut by --stop-by-s: left for the next call
        if stopped:
            row.update(verdict="timeout", reason=f"no result within {args.kb_timeout} s")
        elif raw is None:
            row.update(verdict="error", reason=f"the evaluating process exited with {rc} and no result")
        elif raw.get("harness_error"):
            row.update(verdict="error", reason=raw["harness_error"][-400:])
        elif raw.get("result") is None:
            row.update(verdict="error", reason="eval_kernel_against_ref returned None (a build lock: it asks for a retry)")
        else:
            verdict, reason = tp.kb_verdict(raw["result"])
            md = raw["result"].get("metadata") or {}
            row.update(verdict=verdict, reason=reason, compiled=raw["result"].get("compiled"),
                       correctness=raw["result"].get("correctness"),
                       error_name=md.get("compilation_error_name") or md.get("runtime_error_name") or "",
                       correctness_trials=md.get("correctness_trials"), max_difference=md.get("max_difference"),
                       eval_s=raw.get("eval_s"))
        sink.add(row)
        count[0] += 1
        print(f"[{row['wall_s']:7.1f} s] kernelbench {precision} {p['name']}: {row['verdict']} {row['reason'][:120]}",
              flush=True)

    with ThreadPoolExecutor(max(1, args.kb_jobs)) as pool:
        list(pool.map(one, todo))
    return count[0]


def kb_one(args: argparse.Namespace) -> int:
    """In a fresh process: KernelBench's eval_kernel_against_ref on one pair, its result as JSON."""
    t0 = time.monotonic()
    out: dict = {}
    try:
        import torch
        from kernelbench.eval import eval_kernel_against_ref

        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.precision]
        res = eval_kernel_against_ref(Path(args.problem).read_text(), Path(args.candidate).read_text(),
                                      num_correct_trials=args.trials, measure_performance=False, verbose=False,
                                      build_dir=args.build_dir, precision=dtype)
        if res is not None:
            res = res.model_dump() if hasattr(res, "model_dump") else dict(vars(res))
        out["result"] = res
    except BaseException:  # noqa: BLE001 - whatever stops KernelBench's own eval is the finding
        out["harness_error"] = traceback.format_exc()
    out["eval_s"] = round(time.monotonic() - t0, 2)
    Path(args.result).write_text(json.dumps(out, default=str))
    return 0


def run_kernelsearch(args: argparse.Namespace, work: Path, out: Path, todo: list[dict], precision: str,
                     deadline: float, sink: Appender, env_info: dict) -> int:
    """One ``kernelsearch bench`` over the pairs left, at ``precision``; one home for every
    precision (builds shared) and an archive per precision (a stopped run's verdicts)."""
    tp = throughput()
    home, archive = work / "kshome", work / f"ksarch-{precision}"
    home.mkdir(parents=True, exist_ok=True)
    archive.mkdir(parents=True, exist_ok=True)
    problems, solutions = tp._ks_subset(work, todo)
    cmd = [sys.executable, "-m", "kernelsearch", "bench", str(problems), str(solutions), "--json", "--matched-only",
           "--confirm", "0", "--no-compile", "--precision", precision, "--archive", str(archive / "archive.sqlite")]
    if args.device:
        cmd += ["--device", args.device]
    cmd += list(args.ks_arg or [])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                               if p and p != args.kb_site])
    env.update({"KERNELSEARCH_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    stdout = work / f"kernelsearch-{precision}-stdout.json"
    r = tp._run_split(cmd, ROOT, env, out / f"kernelsearch-{precision}.log", stdout, deadline)
    try:
        bench = json.loads(stdout.read_text()) if stdout.is_file() and stdout.stat().st_size else {}
    except ValueError:
        bench = {}
    rows = tp.ks_verdicts(todo, bench)
    if r["stopped"] and not bench:
        _, rows = tp.ks_from_archive(todo, archive, rows)
    raw = {x.get("problem"): x for x in bench.get("results", [])}
    n = 0
    for p, v in zip(todo, rows, strict=True):
        if v["verdict"] == "not_run":
            continue
        got = raw.get(p["name"], {})
        sink.add({"name": p["name"], "harness": "kernelsearch", "precision": precision,
                  "reported_precision": got.get("precision"), "gpu": env_info.get("gpu"), "torch": env_info.get("torch"),
                  **{k: val for k, val in v.items() if k not in ("key", "level")}})
        n += 1
    return n


# ----------------------------------------------------------------------------- report

# kernelsearch's statuses as KernelBench's outcomes, for "same?"
_CLASS = {"crashed": "runtime_error"}


def outcome(row: dict | None) -> str:
    if not row:
        return "not_run"
    return _CLASS.get(row.get("verdict", "not_run"), row.get("verdict", "not_run"))


def read_notes(path: str) -> dict[str, str]:
    """``NAME: text`` or ``NAME@PRECISION: text`` per line; ``#`` starts a comment line."""
    notes: dict[str, str] = {}
    if not path:
        return notes
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line:
            continue
        name, text = line.split(":", 1)
        notes[name.strip()] = text.strip()
    return notes


def load_results(dirs: list[Path]) -> tuple[list[dict], dict[tuple[str, str], dict[str, dict]]]:
    """The pairs (the first manifest found) and every verdict by (harness, precision) and name;
    a later folder's verdict replaces an earlier one's."""
    pairs: list[dict] = []
    found: dict[tuple[str, str], dict[str, dict]] = {}
    for d in dirs:
        if not pairs and (d / "manifest.json").is_file():
            pairs = json.loads((d / "manifest.json").read_text())["pairs"]
        for h in HARNESSES:
            for prec in PRECISIONS:
                for row in _jsonl(results_file(d, h, prec)):
                    if row.get("verdict") not in (None, "not_run"):
                        found.setdefault((h, prec), {})[row["name"]] = row
    if not pairs:
        raise SystemExit("no manifest.json in " + ", ".join(map(str, dirs)))
    return pairs, found


def _short(text: str, n: int = 90) -> str:
    text = " ".join(str(text or "").split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 3] + "..."


def kb_cell(row: dict | None) -> str:
    if not row:
        return "not run"
    if row["verdict"] == "correct":
        return "correct"
    label = {"compile_error": "compile fail"}.get(row["verdict"], row["verdict"])
    why = row.get("error_name") or ""
    if row["verdict"] == "incorrect":
        why = f"{row.get('reason', '')}"
    return f"{label}: {_short(why or row.get('reason', ''), 70)}" if (why or row.get("reason")) else label


def ks_cell(row: dict | None) -> str:
    if not row:
        return "not run"
    cell = row["verdict"]
    if row.get("flags"):
        cell += f" [{', '.join(row['flags'])}]"
    if row["verdict"] != "correct" and row.get("reason"):
        cell += f": {_short(row['reason'], 90)}"
    return cell


def report(args: argparse.Namespace) -> int:
    pairs, found = load_results([Path(d) for d in args.from_])
    notes = read_notes(args.notes)
    precs = [p for p in PRECISIONS if any((h, p) in found for h in HARNESSES)] or ["fp32"]
    head = ["candidate", "origin"]
    for p in precs:
        head += [f"{p} KernelBench", f"{p} kernelsearch", f"{p} same?"]
    head.append("why they differ")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stats = {p: {"both": 0, "same": 0, "differ": 0, "explained": 0} for p in precs}
    unexplained: list[str] = []
    for pair in pairs:
        name = pair["name"]
        cells = [name, pair["origin"]]
        whys = []
        for p in precs:
            a, b = found.get(("kernelbench", p), {}).get(name), found.get(("kernelsearch", p), {}).get(name)
            same = ""
            if a and b:
                stats[p]["both"] += 1
                if outcome(a) == outcome(b):
                    stats[p]["same"] += 1
                    same = "yes"
                else:
                    stats[p]["differ"] += 1
                    same = "**no**"
                    note = notes.get(f"{name}@{p}") or notes.get(name)
                    if note:
                        stats[p]["explained"] += 1
                    else:
                        unexplained.append(f"{name}@{p}")
            cells += [kb_cell(a), ks_cell(b), same or "-"]
            note = notes.get(f"{name}@{p}")
            if note and note not in whys:
                whys.append(f"{p}: {note}" if len(precs) > 1 else note)
        if notes.get(name):
            whys.insert(0, notes[name])
        if not whys and any(f"{name}@{p}" in unexplained for p in precs):
            whys.append("**no note**")
        cells.append(_short(" ".join(whys), 600))
        lines.append("| " + " | ".join(cells) + " |")
    summary = [f"Pairs: {len(pairs)} ("
               + ", ".join(f"{o} {sum(p['origin'] == o for p in pairs)}" for o in sorted({p['origin'] for p in pairs}))
               + ")."]
    for p in precs:
        s = stats[p]
        summary.append(f"- {p}: {s['both']} judged by both, {s['same']} the same, {s['differ']} different "
                       f"({s['explained']} with a note)"
                       + "".join(f"; {h} judged {len(found.get((h, p), {}))}" for h in HARNESSES))
    if unexplained:
        summary.append(f"- differences without a note: {', '.join(unexplained)}")
    text = "\n".join(summary + [""] + lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 1 if unexplained and args.strict else 0


# ----------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="phase", required=True)
    p = sub.add_parser("prepare", help="lay the pairs out for both harnesses (CPU)")
    p.add_argument("--kernelbench", required=True, help="a KernelBench checkout (src/, KernelBench/)")
    p.add_argument("--work", default=".ext/parity")
    p.add_argument("--kbtp", default=str(throughput().CANDIDATES), help="the throughput set ('' for none)")
    p.add_argument("--candidates", default=str(PARITY), help="parity candidates ('' for none)")
    p.add_argument("--nvcc", action="store_true", help="compile-check the CUDA candidates with nvcc (no GPU)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("-j", "--jobs", type=int, default=2, help="parallel nvcc checks")
    p.set_defaults(func=prepare)
    p = sub.add_parser("run", help="judge the pairs with one harness, per precision (GPU machine)")
    p.add_argument("--work", default=".ext/parity")
    p.add_argument("--out", required=True, help="where the JSON lines and logs go (e.g. $OUT)")
    p.add_argument("--harness", choices=HARNESSES, required=True)
    p.add_argument("--precision", default="fp32", help="fp32, fp16, bf16 or a comma list, run in that order")
    p.add_argument("--stop-by-s", type=float, default=0.0, help="start nothing, and stop what runs, this long after start")
    p.add_argument("--done", action="append", help="an earlier run's --out: its verdicts are not redone (repeatable)")
    p.add_argument("--only", default="", help="only these pair names (comma list)")
    p.add_argument("--kb-site", default="", help="folder of the carried wheels' packages (pip install --target)")
    p.add_argument("--kb-jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                   help="KernelBench evaluations at a time (each its own process and build)")
    p.add_argument("--kb-timeout", type=float, default=300.0, help="seconds per KernelBench evaluation, build included")
    p.add_argument("--kb-trials", type=int, default=KB_TRIALS, help="num_correct_trials")
    p.add_argument("--device", default="", help="kernelsearch --device (default: cuda if available)")
    p.add_argument("--ks-arg", action="append", help="one more argument for kernelsearch bench (repeatable)")
    p.set_defaults(func=run)
    p = sub.add_parser("kb-one", help=argparse.SUPPRESS)
    for a in ("--problem", "--candidate", "--precision", "--build-dir", "--result"):
        p.add_argument(a, required=True)
    p.add_argument("--trials", type=int, default=KB_TRIALS)
    p.set_defaults(func=kb_one)
    p = sub.add_parser("report", help="the verdicts side by side, per precision")
    p.add_argument("--from", dest="from_", action="append", required=True, help="a run's --out folder (repeatable)")
    p.add_argument("--notes", default="", help="why verdicts differ: 'NAME: text' or 'NAME@bf16: text' lines")
    p.add_argument("--out", default="", help="also write the Markdown here")
    p.add_argument("--strict", action="store_true", help="exit 1 when a difference has no note")
    p.set_defaults(func=report)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
