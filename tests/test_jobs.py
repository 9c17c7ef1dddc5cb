"""Worker jobs (records/jobs.py): typed on the parent's side, parsed and checked on the worker's.
A misspelt, missing or ill-typed field is refused with the field's name, never read as a default."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
from jobs_support import MisspeltBuildJob

import kernelsearch.evaluator  # noqa: F401 - registers the evaluator's roles
import kernelsearch.lint  # noqa: F401 - registers the lint role
from kernelsearch.evaluator.config import Limits, TimingConfig
from kernelsearch.evaluator.sandbox.process import run_worker
from kernelsearch.records import protocol
from kernelsearch.records.jobs import (
    JOBS,
    BuildJob,
    CandidateJob,
    CeilingsJob,
    JobError,
    JudgeJob,
    LintItem,
    LintJob,
    parse,
    to_wire,
)


def _judge(**changes) -> JudgeJob:
    job = JudgeJob(device="cpu", problem_path="/p.py", init_seed=3, timing_seeds=[1, 2], timing=asdict(TimingConfig()),
                   out_dir="/out", atol=1e-4, rtol=0, check_trials=[5, 6], baselines="all", compile_baseline=True)
    return replace(job, **changes)


HONEST = [
    BuildJob(device="cpu", candidate_path="/c.py"),
    CandidateJob(device="cuda", problem_path="/p.py", init_seed=1, timing_seeds=[2, 3], timing=asdict(TimingConfig()),
                 out_dir="/out", candidate_path="/c.py", trial_seeds=[4], kernel_names=["k"], order_seeds=[7, 8],
                 precision="bf16", distribution="large", device_handover_bytes=1 << 20),
    _judge(),
    _judge(check_spots=[{"input_set": 1, "file": "timed0.kst"}], check_order={"file": "order0.kst", "seed": 9},
           baselines="eager", handover_limit=3),
    CeilingsJob(device="cpu", copy_bytes=1 << 20, n=64, dtypes=["float32"]),
    LintJob(device="cpu", memory_bytes=1 << 30,
            problems=[LintItem(index=0, path="/a.py", atol=1e-4, rtol=1e-4), LintItem(1, "/b.py", 0.01, 0.01, "fp16")]),
]


@pytest.mark.parametrize("job", HONEST, ids=lambda j: j.ROLE)
def test_every_job_survives_the_wire(job) -> None:
    """What the parent sends is what the worker reads (through JSON, as on the pipe)."""
    wire = json.loads(json.dumps({**to_wire(job), "entry": "kernelsearch.x:y"}))
    assert wire["role"] == job.ROLE
    assert parse(wire) == job


def test_every_registered_role_has_a_job() -> None:
    for name in ("build", "candidate", "judge", "ceilings", "lint"):
        assert protocol.role(name) is not None and name in JOBS


@pytest.mark.parametrize(("change", "why"), [
    (lambda w: w.update(atoll=w.pop("atol")), "'judge' job with a field 'atoll' the job does not have"),
    (lambda w: w.pop("init_seed"), "'judge' job without its 'init_seed' field"),
    (lambda w: w.update(init_seed="3"), "field 'init_seed' is str '3', not int"),
    (lambda w: w.update(init_seed=True), "field 'init_seed' is bool True, not int"),
    (lambda w: w.update(timing_seeds=[1, 2.5]), "field 'timing_seeds' is list"),
    (lambda w: w.update(baselines=True), "field 'baselines' is bool True, not one of 'none', 'eager', 'all'"),
    (lambda w: w.update(device="gpu"), "field 'device' is str 'gpu', not one of 'cpu', 'cuda'"),
    (lambda w: w.update(check_order="order0.kst"), "field 'check_order' is str"),
    (lambda w: w.update(role="jduge"), "a job for an unknown role 'jduge'"),
])
def test_a_malformed_job_is_refused_naming_the_field(change, why) -> None:
    wire = to_wire(_judge())
    change(wire)
    with pytest.raises(JobError, match=None) as e:
        parse(wire)
    assert why in str(e.value), str(e.value)


def test_ints_are_floats_but_bools_are_not() -> None:
    """JSON writes 0.0 as 0 in some encoders: a tolerance of 0 is a float; True is not an int."""
    assert parse({**to_wire(_judge()), "rtol": 0}).rtol == 0
    with pytest.raises(JobError, match="'atol' is bool"):
        _judge(atol=True)


def test_the_parent_cannot_build_an_ill_typed_job() -> None:
    with pytest.raises(JobError, match="'trial_seeds' is int 4, not list"):
        CandidateJob(device="cpu", problem_path="/p.py", init_seed=1, timing_seeds=[], timing={}, out_dir="/o",
                     candidate_path="/c.py", trial_seeds=4)
    with pytest.raises(TypeError):  # a misspelt keyword: the dataclass refuses it
        BuildJob(device="cpu", candidate_pth="/c.py")  # type: ignore[call-arg]


def test_a_lint_item_is_checked_inside_its_job() -> None:
    wire = to_wire(HONEST[-1])
    wire["problems"][1]["atol"] = "0.01"
    with pytest.raises(JobError, match="'lint' job's problems item: field 'atol' is str"):
        parse(wire)
    wire["problems"][1] = {"index": 1, "pth": "/b.py", "atol": 0.01, "rtol": 0.01}
    with pytest.raises(JobError, match="problems item with a field 'pth'"):
        parse(wire)


def test_the_worker_refuses_a_misspelt_job(tmp_path) -> None:
    """End to end: the worker's entry point parses the job before its role runs, and a job with a
    misspelt field comes back as a setup error naming it, with the role never started."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "c.py").write_text("raise SystemExit('the role ran')\n")
    out = run_worker(MisspeltBuildJob(device="cpu", candidate_pth=str(work / "c.py")), work,
                     Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30), timeouts={"default": 120})
    err = out.first(protocol.Kind.ERROR)
    assert err is not None, (out.messages, out.output[-2000:])
    assert err["phase"] == "setup" and err["kind"] == "harness_error"
    assert "malformed job" in err["message"] and "'candidate_pth'" in err["message"], err
    assert out.first(protocol.Kind.PHASE) is None and out.first(protocol.Kind.DONE) is None


def test_a_worker_runs_only_the_role_it_was_started_for(tmp_path) -> None:
    from kernelsearch.evaluator.sandbox.process import start_worker

    lim = Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30)
    with start_worker(BuildJob(device="cpu", candidate_path="/c.py"), tmp_path / "w", lim) as w, \
            pytest.raises(ValueError, match="started for a 'build' job was handed a 'ceilings' job"):
        w.run(CeilingsJob(device="cpu", copy_bytes=4, n=2, dtypes=[]), {"default": 5}, lim.memory_bytes)
