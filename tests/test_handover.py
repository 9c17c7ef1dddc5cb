"""Outputs handed to the judge as descriptors (evaluator/handover): the socket protocol, the
parent's and the judge's refusals, and a candidate that forges a handover. On the CPU outputs
go through files, so the device path is forced open here (its budget patched) to reach the
socket code with real workers; the device copy itself is tested in test_handover_gpu.py."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.evaluator import evaluate as ev
from kernelsearch.evaluator.handover import fds
from kernelsearch.evaluator.handover.codec import write_tensors
from kernelsearch.evaluator.handover.outputs import Source
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

PROBLEM = DATA / "problems" / "scale_add.py"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _file_fd(text: str) -> int:
    f = tempfile.TemporaryFile()
    f.write(text.encode())
    f.flush()
    fd = os.dup(f.fileno())
    f.close()
    return fd


def test_descriptors_and_headers_cross_the_socket():
    mine, theirs = fds.pair()
    with mine, theirs:
        for i in range(3):
            fd = _file_fd(f"output {i}")
            fds.send(theirs, {"name": f"trial{i}.kst", "size": i}, fd)
            os.close(fd)
        got, notes = fds.drain(mine, limit=8)
    assert notes == []
    assert [h.name for h in got] == ["trial0.kst", "trial1.kst", "trial2.kst"]
    for i, h in enumerate(got):
        assert os.pread(h.fd, 64, 0) == f"output {i}".encode()  # the same open file, in this process
    fds.close_all(got)
    assert all(h.fd == -1 for h in got)


def test_malformed_messages_are_refused_and_their_descriptors_closed():
    before = _open_fds()
    mine, theirs = fds.pair()
    with mine, theirs:
        a, b = _file_fd("a"), _file_fd("b")
        theirs.send(b'{"name": "trial0.kst"}')  # no descriptor
        socket.send_fds(theirs, [b'{"name": "trial0.kst"}'], [a, b])  # two
        socket.send_fds(theirs, [b"not json"], [a])
        socket.send_fds(theirs, [b'["a list"]'], [a])
        socket.send_fds(theirs, [b'{"name": 3}'], [a])
        socket.send_fds(theirs, [b'{"name": "x"}' + b" " * (fds.MAX_HEADER + 10)], [a])  # too long
        for i in range(3):
            socket.send_fds(theirs, [json.dumps({"name": f"ok{i}"}).encode()], [b])
        os.close(a)
        os.close(b)
        got, notes = fds.drain(mine, limit=2)
    assert [h.name for h in got] == ["ok0", "ok1"]
    assert len(notes) == 7, notes
    assert any("0 descriptors" in n for n in notes) and any("2 descriptors" in n for n in notes)
    assert any("longer than allowed" in n for n in notes) and any("more than 2 outputs" in n for n in notes)
    fds.close_all(got)
    assert _open_fds() == before  # every descriptor received was closed or handed to the caller


def _source_with(tmp_path: Path, monkeypatch, messages: list[tuple[dict, int]]) -> Source:
    mine, theirs = fds.pair()
    for header, fd in messages:
        fds.send(mine, header, fd)
    mine.close()
    monkeypatch.setenv(fds.ENV, str(theirs.detach()))
    return Source(tmp_path, "cpu", limit=8)


def test_the_judge_checks_a_handed_header_before_any_import(tmp_path, monkeypatch):
    fd = _file_fd("x" * 64)
    meta = {"dtype": "torch.float32", "shape": [4], "nbytes": 16, "offset": 0}
    src = _source_with(tmp_path, monkeypatch, [
        ({"name": "trial0.kst", "size": 1 << 21, "tensors": [{**meta, "nbytes": 8}]}, fd),
        ({"name": "trial1.kst", "size": 1 << 21, "tensors": [{**meta, "offset": 100}]}, fd),
        ({"name": "trial2.kst", "size": 8, "tensors": [meta]}, fd),
        ({"name": "trial3.kst", "size": -1, "tensors": [meta]}, fd),
        ({"name": "trial4.kst", "size": 1 << 21, "tensors": [meta]}, fd),  # well-formed: the import decides
    ])
    os.close(fd)
    write_tensors(tmp_path / "trial4.kst", __import__("torch").zeros(4))  # a file does not win over a handed output
    reasons = {}
    for i in range(5):
        got, why = src.load(f"trial{i}.kst")
        assert got is None
        reasons[i] = why
    assert "size mismatch" in reasons[0]
    assert "not inside" in reasons[1] and "not inside" in reasons[2]
    assert "bad allocation size" in reasons[3]
    assert reasons[4].startswith("output handed over in device memory unreadable")
    assert src.handed == {}  # each descriptor was closed once used


def test_the_parent_refuses_unknown_and_repeated_names(tmp_path):
    prep = ev.Prepared(None, None, None, None)  # type: ignore[arg-type]
    prep.handed = [fds.Handed({"name": n}, _file_fd(n)) for n in ("trial0.kst", "trial1.kst", "trial1.kst",
                                                                  "../etc/passwd", "order0.kst")]

    class Judge:  # records what would be sent; the socket itself is tested above
        got: list[str] = []

        def give(self, items):
            self.got = [h.name for h in items]

    prep.judge = Judge()  # type: ignore[assignment]
    res = ev.EvalResult(problem="p", problem_id="p", candidate_id="c", backend="torch", device="cuda",
                        status=Status.CORRECT, reason="")
    assert ev._give_outputs(prep, res) == 2
    assert prep.judge.got == ["trial0.kst", "order0.kst"]
    assert "refused ../etc/passwd, trial1.kst" in res.errors[0]
    assert prep.handed == []


FORGER = '''
import os, socket, stat, tempfile
import torch.nn as nn


def _forge():
    """Send a descriptor named as the first trial's output on any socket this process holds."""
    f = tempfile.TemporaryFile()
    f.write(b"\\0" * 4096)
    f.flush()
    sent = 0
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=os.dup(fd))
            socket.send_fds(s, [b'{"name": "trial0.kst", "size": 2097152, "tensors": [{"dtype": "torch.float32", '
                                b'"shape": [65536], "nbytes": 262144, "offset": 0}]}'], [f.fileno()])
            s.close()
            sent += 1
        except OSError:
            pass
    return sent


SENT = _forge()


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a * 2 + b
'''


@pytest.fixture
def device_path_open(monkeypatch):
    """The device path's budget on the CPU: the workers get their sockets (the Sink still writes
    CPU tensors to files)."""
    monkeypatch.setattr(ev, "device_handover_budget", lambda need, config: 1 << 30)


def test_a_run_with_the_sockets_open_is_unchanged(cpu_config, archive, device_path_open):
    r = ev.evaluate(load_problem(PROBLEM), Candidate.from_file(DATA / "candidates" / "py_correct.py"),
                    cpu_config, archive)
    assert r.status is Status.CORRECT, r.reason
    assert r.handover == "files"


def test_a_forged_handover_fails_the_check(cpu_config, archive, device_path_open):
    """The candidate finds the socket (the variable naming it is gone before its import) and
    sends a descriptor as trial 0's output: the judge takes it over the harness's file, cannot
    import it, and the check fails with that reason. No output reaches a verdict unchecked."""
    config = cpu_config.with_(static_screen=False)
    r = ev.evaluate(load_problem(PROBLEM), Candidate(source=FORGER, backend="torch", name="forger"), config, archive)
    assert r.status is Status.INCORRECT, (r.status, r.reason)
    assert "trial0: output handed over in device memory unreadable" in r.reason
    assert r.handover == "device 1/8"  # one output more than before: the in-place pair
    assert archive.integrity_ok()


def test_an_output_larger_than_the_file_cap_still_reaches_the_judge(cpu_config, archive):
    """The outputs go as files where device memory is not used; the worker's cap on a file's
    size is raised to hold them (an 8 GiB output failed with "File too large" on the H100)."""
    from dataclasses import replace

    config = cpu_config.with_(limits=replace(cpu_config.limits, file_bytes=64 << 10))  # outputs are 256 KiB
    r = ev.evaluate(load_problem(PROBLEM), Candidate.from_file(DATA / "candidates" / "py_correct.py"),
                    config, archive)
    assert r.status is Status.CORRECT, r.reason
    assert r.handover == "files"
