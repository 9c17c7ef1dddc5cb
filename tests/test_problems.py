from __future__ import annotations

import math

import pytest
from conftest import DATA, MISSING_MODULE, mixed_dir

from kernelsearch.problems.describe import describe
from kernelsearch.problems.loader import (
    LoadFailure,
    ProblemError,
    ProblemsFailed,
    load_problem,
    load_problems,
    resolve_problems,
)


def test_bundled_suite_covers_three_levels():
    suite = resolve_problems("suite")
    assert len(suite) >= 12
    assert {p.level for p in suite} == {1, 2, 3}
    assert [p.name for p in resolve_problems("suite:level2")] == [p.name for p in suite if p.level == 2]


@pytest.mark.parametrize("problem", resolve_problems("suite"), ids=lambda p: p.name)
def test_suite_problem_describes_and_shrinks_on_cpu(problem):
    gpu, cpu = describe(problem, "cuda"), describe(problem, "cpu")
    assert not gpu.error and not cpu.error, (gpu.error, cpu.error)
    assert gpu.min_bytes > cpu.min_bytes > 0
    assert gpu.outputs and all(o.nbytes > 0 for o in gpu.outputs)
    assert all(o.nbytes <= 2 << 30 for o in gpu.outputs)  # outputs travel to the judge as files


def test_flops_counted_for_matmul():
    d = describe(load_problem("01_matmul"), "cpu")
    (m, k), (_, n) = d.inputs[0].shape, d.inputs[1].shape
    assert d.flops == 2 * m * k * n
    assert d.min_bytes == 4 * (m * k + k * n + m * n)


@pytest.mark.parametrize("name", ["02_softmax", "03_layernorm", "05_sum_reduction", "06_gelu"])
def test_elementwise_and_reduction_work_is_counted(name):
    """A problem with no matrix product still has work to show (`problems` printed 0.0 GFLOP):
    at least one operation per input element, kept out of the roofline's FLOPs."""
    from kernelsearch.report.terminal import work_text

    d = describe(load_problem(name), "cpu")
    n = math.prod(d.inputs[0].shape)
    assert d.flops == 0 and d.elementwise_ops >= n
    assert work_text(d.flops, d.elementwise_ops, 1e6).endswith(" elem.") and not work_text(0, 0, 1e6).endswith("elem.")
    m = describe(load_problem("01_matmul"), "cpu")
    assert m.elementwise_ops == 0 and work_text(m.flops, m.elementwise_ops, 1e6) == f"{m.flops / 1e6:.1f}"


def test_bundled_name_lookup():
    assert load_problem("02_softmax").name == "02_softmax"
    assert load_problem("softmax").name == "02_softmax"
    with pytest.raises(ProblemError, match="no such file or bundled problem"):
        load_problem("no_such_problem")


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing_inputs.py", "missing get_inputs"),
        ("broken_syntax.py", "failed to import: SyntaxError"),
        ("bad_cpu_sizes.py", "CPU_SIZES names globals the file does not define: ['batch']"),
    ],
)
def test_malformed_problem_errors_name_the_problem(name, message):
    with pytest.raises(ProblemError) as e:
        load_problem(DATA / "problems" / name)
    assert message in str(e.value) and name in str(e.value)


def test_bad_suite_selector():
    with pytest.raises(ProblemError, match="unknown suite selector"):
        resolve_problems("suite:levelx")


def test_a_directory_is_more_than_its_worst_file(tmp_path):
    d = mixed_dir(tmp_path / "probs")
    problems, failures = load_problems(d)
    assert [p.name for p in problems] == ["row_norm", "scale_add"]
    assert [f.name for f in failures] == ["48_needs_module", "broken_syntax"]
    missing, syntax = failures
    assert missing.path == d / "48_needs_module.py"
    assert missing.error == "failed to import: ModuleNotFoundError: No module named 'einops_not_installed_here'"
    assert missing.hint == "missing module 'einops_not_installed_here': pip install einops_not_installed_here"
    assert syntax.error.startswith("failed to import: SyntaxError:") and "line 2" in syntax.error
    assert syntax.hint == "syntax error at line 2: class Model(torch.nn.Module:"
    assert syntax.to_dict() == {"name": "broken_syntax", "path": str(d / "broken_syntax.py"),
                                "error": syntax.error, "hint": syntax.hint}
    assert "\n" not in missing.line() and missing.line().endswith("(hint: " + missing.hint + ")")
    # the strict loader still stops at the first bad file; a bad file named directly still raises
    with pytest.raises(ProblemError, match="einops_not_installed_here"):
        resolve_problems(d)
    with pytest.raises(ProblemError, match="pip install einops_not_installed_here") as e:
        load_problems(d / "48_needs_module.py")
    assert e.value.path == d / "48_needs_module.py" and e.value.hint == missing.hint


def test_no_file_of_a_directory_loads(tmp_path):
    (tmp_path / "a.py").write_text(MISSING_MODULE)
    (tmp_path / "b.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "c.py").write_text("import torch\nATOL = 'loose'\n" + MISSING_MODULE.split("from einops", 1)[0]
                                   + "class Model(torch.nn.Module):\n    pass\n"
                                   "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(ProblemsFailed) as e:
        load_problems(tmp_path)
    a, b, c = e.value.failures
    assert all(isinstance(f, LoadFailure) for f in e.value.failures)
    assert "pip install einops_not_installed_here" in a.hint
    assert b.error == "failed to import: SystemExit: 3" and b.hint == "the file exits when imported"
    assert c.error.startswith("ATOL must be a number")
