"""Where an evaluation's files go: a tmpfs when the outputs are large and fit, else the default
temporary directory; and an evaluation whose work directory is memory-backed still runs end to
end (workers, sandbox binds, the judge reading the candidate's files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.sandbox import scratch
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status


def _free(path: Path) -> int:
    return shutil.disk_usage(path).free


def test_large_outputs_go_to_the_tmpfs_when_they_fit(tmp_path):
    assert scratch.scratch_root(1 << 30, shm=tmp_path) in (str(tmp_path), None)  # None only if memory is short
    if scratch.available_memory() and scratch.available_memory() > (1 << 30) + (4 << 30) \
            and _free(tmp_path) > (2 << 30):
        assert scratch.scratch_root(1 << 30, shm=tmp_path) == str(tmp_path)


def test_small_unknown_or_oversized_outputs_stay_in_the_default_place(tmp_path):
    assert scratch.scratch_root(None, shm=tmp_path) is None
    assert scratch.scratch_root(1 << 20, shm=tmp_path) is None  # below the threshold: not worth memory
    assert scratch.scratch_root(_free(tmp_path), shm=tmp_path) is None  # no margin left
    assert scratch.scratch_root(1 << 30, shm=tmp_path / "missing") is None


@pytest.mark.skipif(not scratch.SHM.is_dir(), reason="no /dev/shm")
def test_an_evaluation_in_a_memory_backed_directory(cpu_config, archive, monkeypatch):
    made: list[Path] = []
    real = scratch.make_workdir

    def recording(prefix: str, need: int | None) -> Path:
        monkeypatch.setattr(scratch, "_SMALL", 0)  # the test problem's outputs are small
        made.append(real(prefix, need))
        return made[-1]

    monkeypatch.setattr("kernelsearch.evaluator.evaluate.make_workdir", recording)
    problem = load_problem(DATA / "problems" / "scale_add.py")
    result = evaluate(problem, Candidate.from_file(DATA / "candidates" / "py_correct.py"), cpu_config, archive)
    assert made and made[0].parent == scratch.SHM
    assert result.status is Status.CORRECT, (result.reason, result.output_excerpt[-2000:])
    assert len(result.checks) == 8 and all(c.ok for c in result.checks)
    assert not made[0].exists()  # cleaned up
