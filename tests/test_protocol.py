"""The worker protocol (kernelsearch.records.protocol): every message kind has its fields, the
sending side refuses a kind or payload the protocol does not have, and the parent refuses, on
receipt, a message that is not one of the protocol's (a forged or misspelt one)."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from conftest import ROOT

import kernelsearch.evaluator  # noqa: F401 - registers the evaluator's roles
from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.sandbox.process import run_worker
from kernelsearch.records import protocol
from kernelsearch.records.jobs import BuildJob
from kernelsearch.records.protocol import FIELDS, Channel, Kind, ProtocolError, check, encode


def test_every_kind_has_its_fields_and_roles_send_known_kinds():
    assert set(FIELDS) == set(Kind)
    for name in ("candidate", "build", "judge", "ceilings"):
        r = protocol.role(name)
        assert r is not None and r.kinds <= set(Kind) and ":" in r.entry
    assert Kind.DONE == "done" and f"{Kind.STREAM_ORDER}" == "stream_order" and str(Kind.TIMING) == "timing"


def test_the_sender_refuses_a_misspelt_kind_or_a_wrong_payload(tmp_path):
    r, w = os.pipe()
    os.close(r)
    ch = Channel(w)
    with pytest.raises(ProtocolError, match="unknown message kind 'timnig'"):
        ch.send("timnig", samples_ms=[], spots=[], late=0, unjoined=0)
    with pytest.raises(ProtocolError, match="without its 'unjoined' field"):
        encode(Kind.TIMING, samples_ms=[1.0], spots=[], late=0)
    with pytest.raises(ProtocolError, match="'index' is bool, not int"):
        encode(Kind.TRIAL, index=True, mutated_inputs=[])
    with pytest.raises(ProtocolError, match="a field 'sampels_ms' the protocol does not have"):
        encode(Kind.TIMING, samples_ms=[1.0], sampels_ms=[], spots=[], late=0, unjoined=0)
    assert json.loads(encode("done")) == {"event": "done"}
    assert json.loads(encode(Kind.PROFILE, busy_ms=1.5, anything={"x": 1}))["anything"] == {"x": 1}  # open kind
    ch.f.close()


def test_the_parent_refuses_what_the_protocol_does_not_have():
    timing = {"event": "timing", "samples_ms": [1.0], "spots": [], "late": 0, "unjoined": 0}
    assert check(timing) == "" and check(timing, protocol.allowed_kinds("candidate")) == ""
    assert "unknown kind 'timnig'" in check({**timing, "event": "timnig"})
    assert "unknown kind" in check({"samples_ms": []})
    assert "'samples_ms' is str, not list" in check({**timing, "samples_ms": "fast"})
    assert "without its 'late' field" in check({k: v for k, v in timing.items() if k != "late"})
    assert "not an object" in check([1, 2])
    # the judge's kinds from the candidate's worker: forged
    assert "does not send" in check({"event": "check", "tag": "trial 0", "ok": True}, protocol.allowed_kinds("candidate"))
    assert check({"event": "error", "phase": "x", "kind": "harness_error", "message": "m"},
                 protocol.allowed_kinds("ceilings")) == ""


def test_senders_name_kinds_through_the_enum():
    """Every ``ch.send`` in the source names its kind as ``Kind.X``: a misspelt member is an
    AttributeError where it is written, not a message the parent silently ignores."""
    literal = []
    for path in (ROOT / "src" / "kernelsearch").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "send"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                literal.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert literal == []


def test_a_forged_message_is_refused_on_receipt(tmp_path: Path):
    """A candidate that writes to the result pipe itself: what the protocol does not have is
    not kept, and the outcome says why."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "forger.py").write_text(
        "import json, os, sys\nfd = int(sys.argv[1])\n"
        "for m in ({'event': 'timnig', 'samples_ms': [1e-6]}, {'event': 'phase', 'phase': 3},\n"
        "          {'event': 'check', 'tag': 'x', 'ok': True}):\n"
        "    os.write(fd, json.dumps(m).encode() + b'\\n')\n"
        "class ModelNew:\n    pass\n")
    out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "forger.py")), work,
                     Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30), timeouts={"default": 60})
    assert out.protocol_error == "a message of unknown kind 'timnig'", (out.protocol_error, out.output[-2000:])
    assert [m["event"] for m in out.messages] == ["phase", "built", "done"]


def test_the_verdict_calls_a_refused_message_forged():
    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.verdict.protocol import protocol_violation

    why = protocol_violation([], 0, TimingConfig(), 0, refused="a message of unknown kind 'timnig'")
    assert why == "the result channel carries a message of unknown kind 'timnig' (forged by the candidate)"
