"""Prompt templates render completely, can be overridden, and carry the evaluator's feedback."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelsearch.llm.prompts import (
    BUILTIN_DIR,
    Feedback,
    HardwareContext,
    LedgerEntry,
    PromptError,
    PromptLibrary,
    build_messages,
    clip,
)

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n"
KERNEL = "class ModelNew(torch.nn.Module):\n    pass  # costs $$$\n"


def _context(**over):
    ctx = {
        "problem_name": "02_softmax",
        "problem_source": PROBLEM,
        "backend": "cuda",
        "hardware": HardwareContext("NVIDIA H100 80GB HBM3", 3350, 132, "9.0", 50),
        "current_kernel": KERNEL,
        "feedback": Feedback(
            status="incorrect", failed_check="rand_0: mismatch", max_abs_error=0.5
        ),
        "ideas_ledger": [LedgerEntry("Tile in shared memory", "memory_hierarchy", "1.3x faster")],
        "num_ideas": 6,
        "idea": "Use warp shuffles for the row max",
        "idea_family": "instruction_efficiency",
        "parent_a": KERNEL,
        "parent_b": KERNEL,
        "parent_a_summary": "1.5x, vectorised loads",
        "parent_b_summary": "1.4x, one warp per row",
    }
    ctx.update(over)
    return ctx


@pytest.mark.parametrize("name", ["ideas", "implement", "refine", "crossover"])
def test_every_task_renders_fully(name):
    system, user = build_messages(name, _context())
    assert system.role == "system" and user.role == "user"
    assert "load_inline" in system.content  # CUDA backend notes
    assert "$" not in user.content.replace("$$$", "")
    assert "```python\nimport torch" in user.content
    assert "132 SMs" in user.content and "3,350 GB/s" in user.content


def test_task_specific_content():
    lib = PromptLibrary()
    ideas = lib.render("ideas", _context())
    assert "Propose 6 distinct ideas" in ideas
    assert "[memory_hierarchy] Tile in shared memory -> 1.3x faster" in ideas
    for family in (
        "memory_hierarchy",
        "async_latency",
        "precision",
        "instruction_efficiency",
        "occupancy_parallelism",
        "control_flow",
    ):
        assert family in ideas
    refine = lib.render("refine", _context())
    assert "Failed correctness check: rand_0: mismatch" in refine
    assert "Use warp shuffles" in lib.render("implement", _context())
    assert "one warp per row" in lib.render("crossover", _context())


def test_optional_values_have_stand_ins():
    text = PromptLibrary().render(
        "ideas", _context(current_kernel=None, ideas_ledger=[], hardware=None)
    )
    assert "(none yet: start from the reference implementation)" in text
    assert "(none yet)" in text and "(not given)" in text


def test_override_directory(tmp_path, monkeypatch):
    (tmp_path / "ideas.md").write_text("Give $num_ideas ideas for $problem_name, cost $$0.\n")
    lib = PromptLibrary(tmp_path)
    assert lib.render("ideas", _context()) == "Give 6 ideas for 02_softmax, cost $0.\n"
    assert "Implement one idea" in lib.render("implement", _context())  # falls back to built-in
    monkeypatch.setenv("KERNELSEARCH_PROMPTS", str(tmp_path))
    assert PromptLibrary().path("ideas") == tmp_path / "ideas.md"
    assert PromptLibrary().path("refine") == BUILTIN_DIR / "refine.md"


def test_missing_values_and_bad_templates_are_clear(tmp_path):
    with pytest.raises(PromptError, match="problem_source"):
        PromptLibrary().render("refine", {"backend": "cuda"})
    (tmp_path / "ideas.md").write_text("Costs $5\n")
    with pytest.raises(PromptError, match=r"\$\$"):
        PromptLibrary(tmp_path).render("ideas", _context())
    with pytest.raises(PromptError, match="does not exist"):
        PromptLibrary(tmp_path / "nope")


def test_feedback_from_an_evaluator_result():
    result = SimpleNamespace(
        status=SimpleNamespace(value="compile_error"),
        reason="nvcc failed",
        build_log="error: identifier 'foo' is undefined\n" * 500,
        checks=[
            SimpleNamespace(tag="rand_0", ok=True, reason=""),
            SimpleNamespace(tag="rand_1", ok=False, reason="max abs error 0.3 > atol"),
        ],
        errors=[],
        max_abs_error=0.3,
        norm_error=0.01,
        atol=1e-2,
        rtol=1e-2,
        candidate_ms=2.0,
        eager_ms=3.0,
        compile_ms=None,
    )
    text = Feedback.from_result(result).describe()
    assert "Status: compile_error (nvcc failed)" in text
    assert "Failed correctness check: rand_1: max abs error 0.3 > atol" in text
    assert "max abs error 0.3, normalised error 0.01, tolerance atol=0.01, rtol=0.01" in text
    assert "your kernel 2 ms, eager PyTorch 3 ms" in text and "1.50x vs eager" in text
    assert "characters cut" in text and "identifier 'foo'" in text
    assert Feedback().describe() == "(no feedback)"


def test_hardware_from_device_properties():
    props = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        major=9,
        minor=0,
        multi_processor_count=132,
        L2_cache_size=50 * 2**20,
    )
    hw = HardwareContext.from_properties(props)
    assert (hw.mem_bandwidth_gbs, hw.sm_count, hw.compute_capability, hw.l2_cache_mb) == (
        3350,
        132,
        "9.0",
        50.0,
    )
    assert (
        HardwareContext.from_properties(SimpleNamespace(name="Mystery GPU")).describe()
        == "GPU: Mystery GPU."
    )


def test_cpu_hardware_names_the_cores_once():
    """The prompt's hardware line of a CPU run: the model name with its core count, once."""
    import argparse

    from search_support import PROBLEM

    from kernelsearch.cli.search_cmds import _hardware
    from kernelsearch.problems.loader import load_problem

    text = _hardware(argparse.Namespace(hardware=None), load_problem(PROBLEM), "cpu")
    assert text.startswith("CPU: ") and text.count("cores") == 1, text


def test_clip_keeps_head_and_tail():
    text = "HEAD" + "x" * 10_000 + "TAIL"
    out = clip(text, 100)
    assert out.startswith("HEAD") and out.endswith("TAIL") and len(out) < 200
