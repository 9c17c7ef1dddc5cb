"""Executors (kernelsearch.executors) and the normalised identity behind dedup.

The scheduling tests use stand-in evaluators and builds (instant); the equivalence, dedup and
fault tests run real evaluations of plain-PyTorch candidates (no build) and the cached C++
build of tests/data/candidates/cpp_correct.py.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.archive import Archive
from kernelsearch.evaluator.evaluate import baseline_key, evaluate
from kernelsearch.evaluator.screen.normalise import normalise_cpp, normalised_hash
from kernelsearch.executors import Job, make_executor
from kernelsearch.executors.local import LocalExecutor
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Baselines, EvalResult, Status, TimingStats

PROBLEM = DATA / "problems" / "scale_add.py"
CANDS = DATA / "candidates"


def cand(name: str) -> Candidate:
    return Candidate.from_file(CANDS / f"{name}.py")


def reformatted(c: Candidate) -> Candidate:
    """The same program with other comments and blank lines (C++ and Python)."""
    src = "# reformatted\n" + c.source.replace("\nclass ModelNew", "\n\n# here\nclass ModelNew")
    src = src.replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n// a comment\n\n")
    src = src.replace("    return out;", "    return   out;  /* done */")
    return Candidate.from_source(src, name=c.name + "_ref")


# -- normalised identity -----------------------------------------------------------------------
def test_formatting_does_not_change_the_hash():
    for name in ("cpp_correct", "py_correct", "cpp_wrong"):
        c = cand(name)
        r = reformatted(c)
        assert r.source != c.source and r.id != c.id
        assert normalised_hash(r.source, r.backend) == normalised_hash(c.source, c.backend), name


def test_what_runs_changes_the_hash():
    c = cand("cpp_correct").source
    h = normalised_hash(c)
    for changed in (c.replace("2.0f * pa[i]", "2.0f*pa[i] + 0.0f"),  # a C++ token
                    c.replace('"""Correct: one fused pass."""', '"""Correct: one pass."""'),  # a docstring
                    c.replace('"-O3"', '"-O2"'),  # a flag
                    c.replace("a.contiguous()", "a"),  # Python code
                    c + "\nX = 1\n"):
        assert normalised_hash(changed) != h
    # C++ text that is not only compiler input (read elsewhere in Python) is compared verbatim
    used = c + "\nNOTE = SRC.count('//')\n"
    assert normalised_hash(used.replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n// x\n")) \
        != normalised_hash(used)
    # a load_inline that is not torch's could read the comments
    own = c.replace("from torch.utils.cpp_extension import load_inline",
                    "from torch.utils.cpp_extension import load_inline as _li\nload_inline = _li")
    assert normalised_hash(own.replace("for (int64_t", "// c\n    for (int64_t")) != normalised_hash(own)


def test_cpp_normaliser_keeps_literals_lines_and_tokens_apart():
    assert normalise_cpp('int  a = 1;   // c\n\n/* b */ const char* s = "x  // y";\n') == \
        'int a = 1;\nconst char* s = "x  // y";'
    assert normalise_cpp("auto r = R\"d( a  /* b */ )d\"; char q = '\"';\n") == \
        "auto r = R\"d( a  /* b */ )d\"; char q = '\"';"
    assert normalise_cpp("int n = 1'000'000;  // sep\n") == "int n = 1'000'000;"
    # backslash continuations: a blank that separates tokens survives, a blank line that ends
    # the macro stays
    assert normalise_cpp("#define X int\\\n   y\n") == "#define X int\\\n y"
    assert normalise_cpp("#define E \\\n\nint z;\n") == "#define E \\\n\nint z;"
    assert normalise_cpp("// continued \\\nint x;") is None  # unsure: left verbatim
    assert normalise_cpp('const char* s = "open;\n') is None
    # __LINE__ makes line numbers part of the program: blank lines stay
    assert normalise_cpp("int a;\n\nint l = __LINE__;\n") == "int a;\n\nint l = __LINE__;\n"
    assert normalise_cpp("#include <a//b.h>  // kept verbatim\nint x;") == "#include <a//b.h>  // kept verbatim\nint x;"


# -- scheduling, with stand-ins ----------------------------------------------------------------
def _fake_result(problem, candidate, config, status=Status.CORRECT) -> EvalResult:
    r = EvalResult(problem=problem.name, problem_id=problem.id, candidate_id=candidate.id, backend=candidate.backend,
                   device=config.device, status=status, reason="fake", gpu=config.gpu)
    r.eager_timing = TimingStats.from_samples([2.0])
    r.candidate_timing = TimingStats.from_samples([1.0])
    return r


def _torch_cand(expr: str) -> Candidate:
    return Candidate.from_source("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                 f"    def forward(self, a, b):\n        return {expr}\n")


def test_built_jobs_queue_for_the_lane_in_build_order(cpu_config, monkeypatch, tmp_path):
    """A job that needs no build is not held up by a slow build; builds finished go first."""
    import kernelsearch.executors.local as local
    from kernelsearch.evaluator.builds.prebuild import BuildOutcome

    def fake_build(candidate, config, max_jobs=1, hold=None):
        time.sleep(1.5 if "slow" in candidate.name else 0.2)
        return BuildOutcome(candidate.id, True, seconds=0.1)

    monkeypatch.setattr(local, "build_one", fake_build)
    order: list[str] = []

    def fake_eval(problem, candidate, config, archive):
        order.append(candidate.name)
        return _fake_result(problem, candidate, config)

    problem = load_problem(PROBLEM)
    cpp = cand("cpp_correct").source
    jobs = [Job(problem, Candidate(cpp + "\n# slow\n", "cpp", "slow"), cpu_config.with_(home=tmp_path)),
            Job(problem, Candidate(cpp + "\n# quick\n", "cpp", "quick"), cpu_config.with_(home=tmp_path)),
            Job(problem, Candidate(_torch_cand("a * 2 + b").source, "torch", "nobuild"), cpu_config)]
    with LocalExecutor(None, fake_eval, build_jobs=2) as ex:
        results = ex.evaluate_many(jobs)
        assert ex.stats.builds == 2
    assert order == ["nobuild", "quick", "slow"]
    assert [r.candidate_id for r in results] == [j.candidate.id for j in jobs]  # answers in job order


def test_baselines_are_timed_once_before_jobs_of_a_problem_spread_over_lanes(cpu_config, archive):
    """Two CPU lanes: until a problem's torch.compile baseline is cached only one of its jobs
    runs (eager is timed in every evaluation, so without compile nothing waits)."""
    problem = load_problem(PROBLEM)
    cpu_config = cpu_config.with_(compile_baseline=True)  # the fake evaluator compiles nothing
    key = baseline_key(problem, cpu_config)
    lock = threading.Lock()
    running: list[int] = [0]
    seen: list[tuple[bool, int]] = []  # (baseline cached at start, jobs running)

    def fake_eval(problem, candidate, config, archive):
        with lock:
            running[0] += 1
            seen.append((archive.get_baseline(key) is not None, running[0]))
        time.sleep(0.3)
        if archive.get_baseline(key) is None:
            t = TimingStats.from_samples([2.0])
            archive.put_baseline(key, problem.id, "cpu", "cpu", "x", Baselines(t, None))
        with lock:
            running[0] -= 1
        r = _fake_result(problem, candidate, config)
        archive.add_candidate(candidate, problem)
        archive.add_evaluation(r)
        return r

    jobs = [Job(problem, _torch_cand(f"a * 2 + b + {i} * 0"), cpu_config) for i in range(5)]
    with LocalExecutor(archive, fake_eval, lanes=2) as ex:
        results = ex.evaluate_many(jobs)
        assert ex.stats.lanes_used == {"cpu0", "cpu1"}
    assert all(r.status is Status.CORRECT for r in results)
    assert seen[0] == (False, 1)  # the first ran alone
    assert all(cached for cached, _ in seen[1:]) and max(n for _, n in seen) == 2  # then two at a time
    assert archive.count("evaluations") == 5


def test_a_lane_whose_evaluation_raises_goes_on(cpu_config, archive):
    problem = load_problem(PROBLEM)

    def flaky(problem, candidate, config, archive):
        if "boom" in candidate.source:
            raise RuntimeError("harness bug")
        r = _fake_result(problem, candidate, config)
        archive.add_candidate(candidate, problem)
        archive.add_evaluation(r)
        return r

    jobs = [Job(problem, _torch_cand(e), cpu_config) for e in ("a * 2 + b", "a + b  # boom", "b + 2 * a")]
    with LocalExecutor(archive, flaky) as ex:
        results = ex.evaluate_many(jobs)
    assert [r.status for r in results] == [Status.CORRECT, Status.CRASHED, Status.CORRECT]
    assert "harness bug" in results[1].reason and "lane cpu0" in results[1].reason
    assert archive.count("evaluations") == 3  # the crash is recorded too


def test_a_dead_lane_is_replaced_and_nothing_queued_is_lost(cpu_config, monkeypatch):
    problem = load_problem(PROBLEM)
    real = LocalExecutor._evaluate_on
    calls = [0]

    def dies_once(self, lane, job, prep=None):
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("lane thread broke")  # outside the evaluation's own try
        return real(self, lane, job, prep)

    monkeypatch.setattr(LocalExecutor, "_evaluate_on", dies_once)
    fake = lambda p, c, cfg, a: _fake_result(p, c, cfg)  # noqa: E731
    jobs = [Job(problem, _torch_cand(f"a * 2 + b + {i} * 0"), cpu_config) for i in range(4)]
    with LocalExecutor(None, fake) as ex:
        results = ex.evaluate_many(jobs)
    assert [r.status for r in results] == [Status.CORRECT, Status.CRASHED, Status.CORRECT, Status.CORRECT]
    assert "lane cpu0 died" in results[1].reason


def test_an_interrupt_in_a_lane_reaches_the_caller_after_earlier_results(cpu_config):
    class Killed(BaseException):
        pass

    problem = load_problem(PROBLEM)

    def dies(problem, candidate, config, archive):
        if "die" in candidate.source:
            raise Killed()
        return _fake_result(problem, candidate, config)

    ex = LocalExecutor(None, dies)
    for e in ("a * 2 + b", "a + b  # die", "b + a"):
        ex.submit(Job(problem, _torch_cand(e), cpu_config))
    got = []
    with pytest.raises(Killed):
        while True:
            got += ex.poll(timeout=5)
    ex.close(wait=False)
    assert len(got) == 1 and got[0].result.status is Status.CORRECT


# -- real evaluations --------------------------------------------------------------------------
EQUIV = ["py_correct", "py_raises", "py_syntax", "py_mutates", "cpp_correct"]


def _comparable(r: EvalResult) -> tuple:
    return r.status, r.reason.split(",")[0] if r.status is Status.CORRECT else r.reason


def test_local_executor_gives_the_serial_verdicts(cpu_config, tmp_path):
    """Same candidates, serial ``evaluate`` and the local executor: same statuses and reasons,
    results with the same fields; the reformatted copy is evaluated once."""
    problem = load_problem(PROBLEM)
    cands = [cand(n) for n in EQUIV]
    with Archive(tmp_path / "serial.sqlite") as a:
        serial = [evaluate(problem, c, cpu_config, a) for c in cands]
    dup = reformatted(cands[0])
    with Archive(tmp_path / "local.sqlite") as a, make_executor("local", a) as ex:
        local = ex.evaluate_many([Job(problem, c, cpu_config) for c in [*cands, dup]])
        assert ex.stats.evaluated == len(cands) and ex.stats.duplicates == 1
        assert a.count("evaluations") == len(cands) + 1
    assert [_comparable(r) for r in serial] == [_comparable(r) for r in local[:-1]]
    filled = lambda r: {k for k, v in r.to_dict().items() if v not in (None, "", [], {})}  # noqa: E731
    assert [filled(r) for r in serial] == [filled(r) for r in local[:-1]]
    assert local[-1].duplicate_of == cands[0].id and local[-1].candidate_id == dup.id
    assert local[-1].status is local[0].status and local[-1].candidate_ms == local[0].candidate_ms


def _recorded_prepares(monkeypatch) -> list:
    """Every evaluation prepared from now on (``evaluate`` or the local executor), in order."""
    import kernelsearch.evaluator.evaluate as ev
    import kernelsearch.executors.local as local

    preps: list = []
    real_prepare = ev.prepare

    def recorded(*a, **kw):
        preps.append(real_prepare(*a, **kw))
        return preps[-1]

    monkeypatch.setattr(ev, "prepare", recorded)
    monkeypatch.setattr(local, "prepare", recorded)
    return preps


def _all_ended(preps: list) -> bool:
    """Each prepared evaluation closed and both its workers gone."""
    return all(p.work is None and all(w.proc.poll() is not None for w in (p.cand, p.judge)) for p in preps)


def test_prefetched_jobs_give_the_serial_verdicts_and_every_worker_ends(cpu_config, tmp_path, monkeypatch):
    """A lane that prepares its next job ahead (the GPU default, forced here on the CPU) gives
    the serial verdicts; every prepared evaluation is closed, run or not, and its workers end,
    also when the executor stops with one prepared and never run."""
    preps = _recorded_prepares(monkeypatch)
    problem = load_problem(PROBLEM)
    cands = [cand(n) for n in ("py_correct", "py_raises", "py_mutates")]
    with Archive(tmp_path / "serial.sqlite") as a:
        serial = [evaluate(problem, c, cpu_config, a) for c in cands]
    preps.clear()
    with Archive(tmp_path / "local.sqlite") as a, LocalExecutor(a, prefetch=True) as ex:
        local_results = ex.evaluate_many([Job(problem, c, cpu_config) for c in cands])
    assert [_comparable(r) for r in serial] == [_comparable(r) for r in local_results]
    assert len(preps) == len(cands) and _all_ended(preps)

    # several jobs ahead: while a job is being taken, more than one later job has its workers
    # started and waiting (one ahead left the lane waiting for start-ups)
    unrun: list[int] = []
    import kernelsearch.executors.local as local

    real = local.prepare

    def counted(*a, **kw):
        unrun.append(sum(1 for p in preps if p.cand is not None and not p.cand._done))
        return real(*a, **kw)

    monkeypatch.setattr(local, "prepare", counted)
    preps.clear()
    five = [_torch_cand(f"a * 2 + b + {i} * 0") for i in range(5)]
    with Archive(tmp_path / "ahead.sqlite") as a, LocalExecutor(a, prefetch=True, warmups=False) as ex:
        assert all(r.status is Status.CORRECT for r in ex.evaluate_many([Job(problem, c, cpu_config) for c in five]))
    assert local.AHEAD >= 2 and max(unrun) >= 2, unrun
    assert len(preps) == len(five) and _all_ended(preps)

    # stop after the first result, with the next job prepared ahead: it is closed, not run
    preps.clear()
    more = [_torch_cand(f"a * 2 + b + {i} * 0") for i in range(3)]
    with Archive(tmp_path / "stop.sqlite") as a:
        ex = LocalExecutor(a, prefetch=True, warmups=False)
        for c in more:
            ex.submit(Job(problem, c, cpu_config))
        assert ex.poll(timeout=None)
        ex.close(wait=True)
        assert a.count("evaluations") < len(more)
    assert len(preps) == len(more) and _all_ended(preps)


def test_an_idle_lane_prepares_a_job_while_it_builds(cpu_config, tmp_path, monkeypatch):
    """With nothing to run, a lane claims the oldest job still building and starts its workers:
    a claim whose build fails is answered from the build and its workers closed; the next claim
    runs, prepared, as soon as its build is done, with the serial verdict."""
    import kernelsearch.executors.local as local
    from kernelsearch.evaluator.builds.prebuild import BuildOutcome
    from kernelsearch.evaluator.sandbox.process import WorkerOutcome

    problem = load_problem(PROBLEM)
    broken, good = _torch_cand("a * 2 + b + 0 * 7"), cand("py_correct")

    def slow_build(c, cfg, max_jobs=1, hold=None):
        if c.id == broken.id:
            time.sleep(2)
            failed = WorkerOutcome(messages=[{"event": "error", "kind": "compile_error", "phase": "build",
                                              "message": "x.cu:1: error: expected ';'"}], returncode=1, phase="build")
            return BuildOutcome(c.id, False, worker=failed)
        time.sleep(8)
        return BuildOutcome(c.id, True)

    with Archive(tmp_path / "serial.sqlite") as a:
        serial = evaluate(problem, good, cpu_config, a)
    preps = _recorded_prepares(monkeypatch)
    monkeypatch.setattr(local, "needs_build", lambda c, cfg: True)
    monkeypatch.setattr(local, "build_one", slow_build)
    with Archive(tmp_path / "a.sqlite") as a, LocalExecutor(a, prefetch=True, warmups=False) as ex:
        r_broken, r_good = ex.evaluate_many([Job(problem, broken, cpu_config), Job(problem, good, cpu_config)])
        assert ex.stats.failed_builds == 1 and ex.stats.prepared_early == 1 and ex.stats.evaluated == 1
    assert r_broken.status is Status.COMPILE_ERROR and "expected ';'" in r_broken.reason
    assert _comparable(r_good) == _comparable(serial)
    assert [p.candidate.id for p in preps] == [broken.id, good.id]  # both claimed in turn, nothing else
    assert _all_ended(preps)


def test_an_idle_lane_times_baselines_while_builds_run(cpu_config, tmp_path, monkeypatch):
    """While the only job is still building, the lane times its problem's baselines; the job's
    result then uses the cached torch.compile figures (one baseline row) and its own eager."""
    import kernelsearch.executors.local as local
    from kernelsearch.evaluator.builds.prebuild import BuildOutcome

    def slow_build(c, cfg, max_jobs=1, hold=None):
        time.sleep(6)
        return BuildOutcome(c.id, True)

    monkeypatch.setattr(local, "needs_build", lambda c, cfg: True)
    monkeypatch.setattr(local, "build_one", slow_build)
    problem = load_problem(PROBLEM)
    config = cpu_config.with_(home=tmp_path / "home", compile_baseline=True)
    with Archive(tmp_path / "a.sqlite") as a, LocalExecutor(a) as ex:
        r = ex.evaluate_many([Job(problem, cand("py_correct"), config)])[0]
        assert ex.stats.warmups >= 1
        cached = a.get_baseline(baseline_key(problem, config))
        assert a.count("baselines") == 1
    assert r.status is Status.CORRECT and cached is not None and cached.compiled is not None
    assert r.compile_timing == cached.compiled
    assert r.eager_timing is not None and r.eager_timing != cached.eager  # timed again, next to the candidate


def test_builds_pause_while_a_lane_times(tmp_path):
    """QuietTiming with real worker processes: a build worker (and all it started) is stopped
    while any listener is in its timing phase, continued after, and a listener that has
    ended cannot pause anything again."""
    from kernelsearch.evaluator.sandbox import isolation
    from kernelsearch.evaluator.sandbox.process import Worker
    from kernelsearch.executors.quiet import QuietTiming

    def states(w: Worker, want_stopped: bool | None = None) -> set[str]:
        """Process states of the worker's members, once they settle (a signal lands async)."""
        for _ in range(50):
            found = set()
            for pid in isolation.members(w.proc.pid, w.cgroup):
                try:
                    found.add(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
                except OSError:
                    pass
            if want_stopped is None or (found == {"T"}) == want_stopped:
                break
            time.sleep(0.1)
        return found

    quiet = QuietTiming()
    build = Worker(None, tmp_path / "build", output_bytes=1 << 20, file_bytes=1 << 30)
    with build, quiet.building(build):
        a, b = quiet.listener(), quiet.listener()
        a("run")
        assert "T" not in states(build)
        a("timing")
        assert states(build, True) == {"T"}
        b("timing")
        a("")  # one lane still timing: the build stays stopped
        assert states(build) == {"T"}
        b("run")
        assert "T" not in states(build, False) and quiet.pauses == 1 and quiet.paused_s > 0
        a("timing")  # ended: ignored
        assert "T" not in states(build)
    assert build.proc.poll() is not None


def test_duplicates_across_runs_come_from_the_archive(cpu_config, tmp_path):
    problem = load_problem(PROBLEM)
    runs: list[str] = []

    def counting(problem, candidate, config, archive):
        runs.append(candidate.name)
        return evaluate(problem, candidate, config, archive)

    c = cand("py_correct")
    with Archive(tmp_path / "a.sqlite") as a:
        with make_executor("local", a, counting, dedup=True) as ex:
            first = ex.evaluate_many([Job(problem, c, cpu_config)])[0]
        with make_executor("local", a, counting, dedup=True) as ex:
            again = ex.evaluate_many([Job(problem, reformatted(c), cpu_config)])[0]
            other = ex.evaluate_many([Job(problem, c, cpu_config.with_(trials=2))])[0]  # other settings: evaluated
        assert a.count("dedup") == 2
    assert runs == ["py_correct", "py_correct"]
    assert again.duplicate_of == c.id and again.status is first.status is Status.CORRECT
    assert other.duplicate_of == "" and len(other.checks) == 2 + 1 + 1 + 1


def test_a_worker_killed_by_sigkill_is_a_crash_and_the_queue_goes_on(cpu_config, tmp_path):
    problem = load_problem(PROBLEM)
    killer = Candidate.from_source(
        "import os\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n"
        "        os.kill(os.getpid(), 9)\n        return a * 2 + b\n", name="sigkill")
    config = cpu_config.with_(static_screen=False)  # the screen would stop os.kill first
    with Archive(tmp_path / "a.sqlite") as a, make_executor("local", a) as ex:
        results = ex.evaluate_many([Job(problem, killer, config), Job(problem, cand("py_correct"), config)])
    assert results[0].status is Status.CRASHED and "SIGKILL" in results[0].reason
    assert results[1].status is Status.CORRECT


def test_a_failed_build_is_answered_without_a_lane(cpu_config, tmp_path, monkeypatch):
    """A compiler error found by the build pool is the evaluation's result (same status and
    reason as the evaluation's own build would give), and no lane runs it."""
    import kernelsearch.executors.local as local
    from kernelsearch.evaluator.builds.prebuild import BuildOutcome
    from kernelsearch.evaluator.sandbox.process import WorkerOutcome

    msg = "RuntimeError: Error building extension 'x':\nmain.cpp:3:1: error: 'j' was not declared in this scope"
    worker = WorkerOutcome(messages=[{"event": "phase", "phase": "build"},
                                     {"event": "error", "phase": "build", "kind": "compile_error", "message": msg}],
                           returncode=0, phase="build", output="", isolation="none+watchdog")
    monkeypatch.setattr(local, "build_one", lambda c, cfg, max_jobs=1, hold=None: BuildOutcome(c.id, False, worker=worker))
    lanes: list[str] = []

    def never(problem, candidate, config, archive):
        lanes.append(candidate.id)
        raise AssertionError("a failed build reached a lane")

    problem = load_problem(PROBLEM)
    c = Candidate(cand("cpp_compile_error").source + "\n# fresh\n", "cpp", "err")
    with Archive(tmp_path / "a.sqlite") as a, LocalExecutor(a, never) as ex:
        r = ex.evaluate_many([Job(problem, c, cpu_config.with_(home=tmp_path / "home"))])[0]
        assert ex.stats.failed_builds == 1 and a.count("evaluations") == 1
    assert lanes == [] and r.status is Status.COMPILE_ERROR
    assert r.reason == "build failed: main.cpp:3:1: error: 'j' was not declared in this scope"


@pytest.mark.gpu
def test_two_gpus_are_both_used(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig

    config = EvalConfig(device="cuda", compile_baseline=False,
                        timing=TimingConfig(warmup=2, min_reps=5, max_reps=20, budget_s=2.0),
                        limits=Limits(run_timeout_s=120))
    problem = load_problem(PROBLEM)
    jobs = [Job(problem, _torch_cand(f"a * 2 + b + {i} * 0"), config) for i in range(4)]
    with Archive(tmp_path / "a.sqlite") as a, make_executor("local", a, gpus=[0, 1]) as ex:
        results = ex.evaluate_many(jobs)
        assert ex.stats.lanes_used == {0, 1}
    assert {r.gpu for r in results} == {0, 1}
    assert all(r.status is Status.CORRECT for r in results), [r.reason for r in results]


def test_a_worker_started_anywhere_moves_onto_the_lanes_cores(tmp_path):
    """Workers prepared ahead start on any core (their start-up is not the lane's); ``pin``
    moves every thread of them onto the lane's cores before the job runs."""
    from kernelsearch.evaluator.sandbox import isolation
    from kernelsearch.evaluator.sandbox.process import Worker
    from kernelsearch.executors.common import usable_cpus

    core = usable_cpus()[-1]
    with Worker(None, tmp_path / "w", output_bytes=1 << 20, file_bytes=1 << 30) as w:
        time.sleep(2)  # its interpreter has started threads of its own by now
        w.pin([core])
        tasks = [(pid, int(t)) for pid in isolation.members(w.proc.pid, w.cgroup)
                 for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tasks) >= 2 and all(os.sched_getaffinity(t) == {core} for _, t in tasks), tasks


def test_the_gpu_lane_pins_both_workers():
    from kernelsearch.evaluator.config import EvalConfig

    assert EvalConfig(device="cuda", gpu=1).worker_env()["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in EvalConfig(device="cuda").worker_env()
    assert baseline_key(load_problem(PROBLEM), EvalConfig(gpu=1)) == baseline_key(load_problem(PROBLEM), EvalConfig())


def test_visible_gpu_follows_the_parents_numbering(monkeypatch):
    from kernelsearch.evaluator.config import visible_gpu

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpu(1) == "5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpu(1) == "1"


def test_search_evaluates_early_answers_while_later_ones_are_written(tmp_path):
    """Overlap with the LLM: a round's first candidate is being evaluated before the round's
    last answer has arrived."""
    from search_support import (
        ScriptedProvider,
        code_answer,
        fake_evaluate,
        run_config,
        torch_source,
    )

    from kernelsearch.llm.client import LLMClient
    from kernelsearch.search import Budgets, Driver, RunStore, create_run
    from kernelsearch.search.calls import RunCallLog

    events: list[tuple[str, float]] = []

    def answer(request) -> str:
        slot = request.metadata["slot"]
        time.sleep(1.0 if slot == 3 else 0.05)
        events.append((f"answer {slot}", time.monotonic()))
        return code_answer(torch_source(f"a * 2 + b + {slot} * 0", speed=1.0 + slot))

    def evaluate_fn(problem, candidate, config, archive):
        events.append((f"evaluate {candidate.name}", time.monotonic()))
        return fake_evaluate(problem, candidate, config, archive)

    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), run_config("best-of-n", "scripted:x", Budgets(), n=4), [])
    provider = ScriptedProvider(answer)
    with RunStore(tmp_path / "run") as store:
        stop = Driver(store, evaluate_fn=evaluate_fn,
                      client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id))).run()
        assert stop.reason == "done" and store.count_evaluated() == 4
    at = dict(events)
    assert at["evaluate r0_0"] < at["answer 3"]
