"""GPU tests (marker ``gpu``) of outputs handed to the judge in device memory
(evaluator/handover): the memory outlives the process that exported it, and evaluations reach
the same verdicts through it as through files."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import DATA

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.handover import fds
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

pytestmark = pytest.mark.gpu
PROBLEM = DATA / "problems" / "scale_add.py"  # 64 MiB outputs on the GPU

EXPORTER = """
import socket, sys
import torch
from kernelsearch.evaluator.handover import fds, vmm
sock = socket.socket(fileno=int(sys.argv[1]))
a = torch.arange(3 << 20, dtype=torch.float32, device="cuda")
b = torch.full((5, 7), 2.5, dtype=torch.float16, device="cuda")
e = vmm.export_copy([a, b])
fds.send(sock, {"name": "x", "size": e.size, "offsets": e.offsets}, e.fd)
"""


def test_an_exported_output_outlives_its_process():
    import torch

    from kernelsearch.evaluator.handover import vmm

    mine, theirs = fds.pair()
    with mine:
        subprocess.run([sys.executable, "-c", EXPORTER, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                       check=True, timeout=120)
        theirs.close()
        (handed,), notes = fds.drain(mine, 4)
    assert notes == []
    h = handed.header
    try:
        a, b = vmm.import_copy(handed.fd, h["size"], [(torch.float32, [3 << 20], 12 << 20, h["offsets"][0]),
                                                      (torch.float16, [5, 7], 70, h["offsets"][1])])
    finally:
        handed.close()
    assert torch.equal(a, torch.arange(3 << 20, dtype=torch.float32, device="cuda"))
    assert torch.equal(b, torch.full((5, 7), 2.5, dtype=torch.float16, device="cuda"))


def _config(**kw) -> EvalConfig:
    return EvalConfig(device="cuda", trials=5, compile_baseline=False,
                      timing=TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=5.0, input_sets=3,
                                          spot_checks=2),
                      limits=Limits(build_timeout_s=900, run_timeout_s=120), **kw)


@pytest.fixture(scope="module", autouse=True)
def _built():
    """The CUDA candidates built in parallel first: the verdicts below then take seconds each."""
    from kernelsearch.evaluator.builds.prebuild import prebuild

    prebuild([Candidate.from_file(DATA / "candidates" / f"{n}.py") for n in ("cuda_correct", "cuda_wrong",
                                                                            "cuda_unwritten")], _config(), jobs=3)


@pytest.mark.parametrize("name,status", [("py_correct", Status.CORRECT), ("cuda_correct", Status.CORRECT),
                                         ("cuda_wrong", Status.INCORRECT), ("cuda_unwritten", Status.INCORRECT)])
def test_verdicts_through_device_memory_match_files(name, status, archive):
    cand = Candidate.from_file(DATA / "candidates" / f"{name}.py")
    via = {}
    for mode in ("auto", "files"):
        r = evaluate(load_problem(PROBLEM), cand, _config(handover=mode), archive)  # "auto" is the default
        assert r.status is status, (mode, r.status, r.reason, r.errors)
        via[mode] = r
    assert via["auto"].handover == "device 9/9", via["auto"].errors  # 5 trials, the repeat, 2 spots, the order check
    assert via["files"].handover == "files"
    if status is Status.INCORRECT:
        assert via["auto"].reason.split(":")[0] == via["files"].reason.split(":")[0]
