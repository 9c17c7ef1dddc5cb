"""The Ray executor on a local Ray instance (two CPUs), CPU problems only.

Skipped where Ray is not installed, except under CI (env CI set), where it must be: the dev
extra installs it. One Ray instance serves the module; the candidates are plain PyTorch
(no build) plus the cached C++ build of tests/data/candidates/cpp_correct.py, which goes
through a build task.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from conftest import DATA

from kernelsearch.archive import Archive
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.executors import Job, make_executor
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

if importlib.util.find_spec("ray") is None and not os.environ.get("CI"):
    pytest.skip("ray is not installed (pip install 'kernelsearch[ray]')", allow_module_level=True)

PROBLEM = DATA / "problems" / "scale_add.py"


@pytest.fixture(scope="module")
def ray_instance():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_executor_gives_the_serial_verdicts(ray_instance, cpu_config, tmp_path):
    problem = load_problem(PROBLEM)
    cands = [Candidate.from_file(DATA / "candidates" / f"{n}.py") for n in ("py_correct", "py_raises", "cpp_correct")]
    dup = Candidate.from_source("# the same, reformatted\n" + cands[0].source.replace("\n\n\nclass", "\n\n\n# x\nclass"),
                                name="dup")
    with Archive(tmp_path / "serial.sqlite") as a:
        serial = [evaluate(problem, c, cpu_config, a) for c in cands]
    with Archive(tmp_path / "ray.sqlite") as a:
        with make_executor("ray", a) as ex:
            got = ex.evaluate_many([Job(problem, c, cpu_config) for c in [*cands, dup]])
            assert ex.stats.evaluated == 3 and ex.stats.duplicates == 1 and ex.stats.builds + ex.stats.cached_builds == 1
        # written by this process only: results, the baselines the tasks timed, the dedup rows
        assert a.count("evaluations") == 4 and a.count("baselines") == 1 and a.count("dedup") == 3
    assert [r.status for r in got[:3]] == [r.status for r in serial]
    assert got[0].status is Status.CORRECT and got[1].reason == serial[1].reason
    assert got[3].duplicate_of == cands[0].id
    filled = lambda r: {k for k, v in r.to_dict().items() if v not in (None, "", [], {})}  # noqa: E731
    assert [filled(r) for r in got[:3]] == [filled(r) for r in serial]
