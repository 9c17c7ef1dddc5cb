"""Verdict codes (records/codes.py): a closed, documented set, set where each check fails and
carried through the result, its --json, the archive, the audit and the reward."""

from __future__ import annotations

import ast
import json
import re
import signal
import sqlite3
from pathlib import Path

import pytest

from kernelsearch.archive.db import MIGRATIONS, Archive
from kernelsearch.audit.classify import CLASS_NAMES, classify, classify_code
from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.sandbox.process import WorkerOutcome
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.verdict import decide
from kernelsearch.evaluator.verdict.decide import Verdict
from kernelsearch.records import protocol
from kernelsearch.records.codes import INFO, TABLE, Code, audit_class
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import EvalResult, Status, TrialCheck
from kernelsearch.rl import Reward, RewardSpec

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(build_timeout_s=60, run_timeout_s=5, memory_bytes=2 << 30, output_bytes=1 << 20, max_tasks=64)
HEAD = "import torch\nimport torch.nn as nn\n\n\n"
PLAIN = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def test_the_table_is_the_enum_and_the_docs_show_it():
    assert [r.code for r in TABLE] == [c for c in Code if c is not Code.NONE]  # one row per code, in order
    statuses = {s.value for s in Status} - {"correct"}
    for row in TABLE:
        assert row.status in statuses and row.audit_class in CLASS_NAMES and row.meaning and row.layer, row
        assert set(row.layer.split(", ")) <= {"screen", "worker", "parent", "judge"}, row
    docs = (ROOT / "docs" / "judging.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (.+?) \| ([\w, ]+) \|$", docs, re.M)
    assert [(c, s, m, layer) for c, s, m, layer in rows] == [
        (r.code.value, r.status, r.meaning, r.layer) for r in TABLE]


def test_every_failing_verdict_of_decide_names_its_code():
    """By the source: a Verdict(...) other than a correct one always passes ``code=``, so a
    check added later cannot leave its failures without one."""
    tree = ast.parse((ROOT / "src/kernelsearch/evaluator/verdict/decide.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Verdict"]
    assert len(calls) > 20
    for call in calls:
        status = ast.unparse(call.args[0])
        if status != "Status.CORRECT":
            assert any(k.arg == "code" for k in call.keywords), (call.lineno, ast.unparse(call))


@pytest.mark.parametrize("out, status, code", [
    (WorkerOutcome(killed="processes"), Status.CRASHED, Code.PROCESS_LIMIT),
    (WorkerOutcome(killed="sandbox", output="bwrap failed"), Status.CRASHED, Code.SANDBOX_FAILURE),
    (WorkerOutcome(killed="timeout:build"), Status.TIMEOUT, Code.TIMEOUT),
    (WorkerOutcome(killed="memory"), Status.CRASHED, Code.MEMORY_LIMIT),
    (WorkerOutcome(killed="output"), Status.CRASHED, Code.OUTPUT_LIMIT),
    (WorkerOutcome(killed="channel"), Status.CRASHED, Code.CHANNEL_GARBAGE),
    (WorkerOutcome(messages=[{"event": "error", "kind": "compile_error", "message": "x.cpp: error: no"}]),
     Status.COMPILE_ERROR, Code.BUILD_FAILURE),
    (WorkerOutcome(messages=[{"event": "error", "kind": "rejected", "message": "m", "code": "thread"}]),
     Status.REJECTED, Code.THREAD),
    (WorkerOutcome(messages=[{"event": "error", "kind": "harness_error", "message": "m"}]),
     Status.CRASHED, Code.HARNESS_ERROR),
    (WorkerOutcome(messages=[{"event": "error", "kind": "problem_error", "message": "m"}]),
     Status.CRASHED, Code.PROBLEM_ERROR),
    (WorkerOutcome(messages=[{"event": "error", "kind": "runtime_error", "phase": "trial", "message": "m",
                              "code": "sandbox_denied"}]), Status.RUNTIME_ERROR, Code.SANDBOX_DENIED),
    # a raise may not name another class of failure for itself
    (WorkerOutcome(messages=[{"event": "error", "kind": "runtime_error", "phase": "trial", "message": "m",
                              "code": "problem_error"}]), Status.RUNTIME_ERROR, Code.RUNTIME_ERROR),
    (WorkerOutcome(returncode=-signal.SIGSEGV, phase="trial"), Status.CRASHED, Code.SIGNAL),
    (WorkerOutcome(returncode=3, phase="run"), Status.CRASHED, Code.WORKER_EXIT),
])
def test_the_candidate_workers_failures_carry_their_codes(out, status, code):
    v = decide.candidate_failure(out, LIMITS)
    assert v is not None and (v.status, v.code) == (status, code), v
    assert INFO[v.code].status == status.value


def test_the_judges_and_the_timings_codes():
    bad = TrialCheck("trial0", False, "3 of 8 elements outside atol")
    order = TrialCheck("stream order", False, "outside atol")
    assert decide.checks_verdict([bad], 1, []).code is Code.WRONG_VALUES
    assert decide.checks_verdict([order], 1, []).code is Code.UNORDERED_OUTPUT
    assert decide.checks_verdict([], 1, [{"mutated_inputs": [0]}]).code is Code.INPUT_MUTATION
    assert decide.checks_verdict([], 1, []).code is Code.MISSING_CHECKS
    assert decide.checks_verdict([TrialCheck("trial0", True)], 1, []) is None
    assert decide.no_timings([0.0]).code is Code.NO_TIMINGS
    assert decide.too_large("needs 90 GiB").code is Code.TOO_LARGE
    assert decide.handover_failure(OSError("x")).code is Code.HANDOVER_FAILURE
    assert decide.judge_failure(WorkerOutcome(returncode=1)).code is Code.REFERENCE_FAILED


@pytest.mark.parametrize("body, code", [
    ("class Other(nn.Module):\n    pass\n", Code.NO_MODEL_NEW),
    ("class ModelNew(nn.Module):\n    pass\n", Code.NO_MODEL_NEW),
    ("class ModelNew(Model):\n    pass\n", Code.TORCH_FALLBACK),
    ("import threading\n" + PLAIN, Code.THREAD),
    ("import multiprocessing\n" + PLAIN, Code.FORBIDDEN_ACCESS),
    ("fut = torch.jit.fork\n" + PLAIN, Code.THREAD),
    ("import socket\n" + PLAIN, Code.FORBIDDEN_ACCESS),
    ("import os\nos.environ['X'] = '1'\n" + PLAIN, Code.FORBIDDEN_ACCESS),
    ("import time\ntime.perf_counter = lambda: 0.0\n" + PLAIN, Code.PATCHING),
    ("M = torch.overrides.TorchFunctionMode\n" + PLAIN, Code.TENSOR_SUBCLASS),
    ("class Lazy(torch.Tensor):\n    pass\n" + PLAIN, Code.TENSOR_SUBCLASS),
    ("s = torch.cuda.Stream()\n" + PLAIN, Code.STREAM_RACE),
    ("from torch.utils.cpp_extension import load_inline\n"
     "ext = load_inline(name='x', cpp_sources='', cuda_sources='attr.accessPolicyWindow.num_bytes = n;')\n"
     + PLAIN, Code.CACHE_WARMING),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if x.shape[0] == 4096:\n"
     "            return x * 2\n        return x + x\n", Code.SHAPE_DISPATCH),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            return x * 2\n"
     "        except RuntimeError:\n            return torch.matmul(x, x)\n", Code.EXCEPTION_FALLBACK),
])
def test_the_screens_rules_set_their_codes(body: str, code: Code):
    res = screen(HEAD + body)
    assert res.reject and res.code is code, (res.code, res.reject)
    assert type(res.reject) is str  # the reason, a plain string, as before


def test_an_honest_source_has_no_code_and_the_screen_verdict_passes_it_on(cpu_config):
    res = screen(HEAD + PLAIN)
    assert (res.reject, res.code) == ("", Code.NONE)
    v = decide.screen_verdict(screen(HEAD + "import socket\n" + PLAIN), "torch", cpu_config, ("torch",))
    assert v is not None and v.code is Code.FORBIDDEN_ACCESS
    wrong = decide.screen_verdict(res, "cuda", cpu_config, ("torch", "cpp"))
    assert wrong is not None and wrong.code is Code.WRONG_DEVICE_BACKEND
    assert decide.screen_verdict(screen("def f(:\n"), "torch", cpu_config, ("torch",)).code is Code.BUILD_FAILURE


def test_a_rejection_must_carry_a_known_code_on_the_wire():
    ok = {"event": "error", "phase": "run", "kind": "rejected", "message": "m", "code": "output_reuse"}
    assert protocol.check(ok) == ""
    for bad in ({**ok, "code": "made_up"}, {k: v for k, v in ok.items() if k != "code"}, {**ok, "code": ""}):
        assert "without a verdict code" in protocol.check(bad), bad
    with pytest.raises(protocol.ProtocolError):
        protocol.encode(Kind.ERROR, phase="run", kind="rejected", message="m")
    assert protocol.check({"event": "error", "phase": "run", "kind": "runtime_error", "message": "m"}) == ""


def _result(status: Status = Status.CORRECT) -> EvalResult:
    return EvalResult("p", "pid", "cid", "torch", "cpu", status, "")


def test_the_result_carries_the_deciding_code_and_each_failures():
    r = decide.conclude(_result(), [Verdict(Status.INCORRECT, "trial0: wrong", code=Code.WRONG_VALUES),
                                    Verdict(Status.REJECTED, "impossible timing", code=Code.IMPOSSIBLE_TIME)])
    assert (r.status, r.code) == (Status.REJECTED, "impossible_time")
    assert [(f["status"], f["code"]) for f in r.failures] == [("rejected", "impossible_time"),
                                                              ("incorrect", "wrong_values")]
    back = EvalResult.from_dict(r.to_dict())
    assert back.code == "impossible_time" and back.failures == r.failures
    assert r.to_dict()["code"] == "impossible_time"
    ok = decide.apply(r, Verdict(Status.CORRECT, "3 checks passed"))
    assert (ok.status, ok.code) == (Status.CORRECT, "")
    old = r.to_dict()
    del old["code"]
    assert EvalResult.from_dict(old).code == ""  # a record written before codes


def test_the_audit_classes_by_code_whatever_the_wording():
    assert classify_code("rejected", "thread", "words nobody matches") == "thread"
    assert classify_code("rejected", "timer_escape", "") == "impossible_time"
    assert classify_code("crashed", "memory_limit", "") == "crashed"
    assert classify_code("runtime_error", "sandbox_denied", "") == "forbidden_access"
    assert classify_code("rejected", "not_a_code", "imports threading") == "other"
    assert classify_code("correct", "", "5 checks passed", ["torch_fallback"]) == "torch_fallback"
    # an old row without a code: its reason, by the legacy phrase rules
    assert classify_code("rejected", "", "imports threading: starts threads") == "thread"
    r = _result(Status.REJECTED)
    r.code, r.reason = "output_reuse", "reworded entirely"
    assert classify(r) == "output_reuse"
    assert {audit_class(c) for c in Code} <= set(CLASS_NAMES)


def test_the_reward_carries_the_code():
    r = decide.apply(_result(), Verdict(Status.REJECTED, "uses .__dict__", code=Code.FORBIDDEN_ACCESS))
    value, why = RewardSpec().score(r)
    reward = Reward(value, why, r, "src")
    assert reward.code == "forbidden_access" and value == RewardSpec().rejected
    assert Reward(0.0, "no code", None, None).code == ""


def test_the_archive_stores_the_code_and_an_older_archive_gets_the_column(tmp_path):
    old = decide.apply(_result(), Verdict(Status.REJECTED, "imports threading: starts threads", code=Code.THREAD)).to_dict()
    del old["code"]  # as an older version wrote it
    for f in old["failures"]:
        del f["code"]
    db = sqlite3.connect(tmp_path / "old.sqlite")
    for script in MIGRATIONS[:6]:
        db.executescript(script)
    db.execute("INSERT INTO problems VALUES ('pid', 'p', NULL, NULL, 'src', 0)")
    db.execute("INSERT INTO candidates VALUES ('cid', 'pid', 'torch', NULL, 'src', 0)")
    db.execute("""INSERT INTO evaluations(candidate_id, problem_id, device, status, reason, record, created_at)
                  VALUES ('cid', 'pid', 'cpu', 'rejected', 'imports threading', ?, 0)""", (json.dumps(old),))
    db.execute("PRAGMA user_version=6")
    db.commit()
    db.close()
    with Archive(tmp_path / "old.sqlite") as a:
        assert a.schema_version() == len(MIGRATIONS)
        assert [tuple(r) for r in a.conn.execute("SELECT status, code FROM evaluations")] == [("rejected", None)]
        r = decide.apply(_result(), Verdict(Status.REJECTED, "m", code=Code.PATCHING))
        eid = a.add_evaluation(r)
        assert a.conn.execute("SELECT code FROM evaluations WHERE id=?", (eid,)).fetchone()[0] == "patching"
        first, last = a.evaluations()
        assert last.code == "patching" and first.code == "" and classify(first) == "thread"  # by its reason
