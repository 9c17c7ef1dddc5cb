"""Shared fixtures. Builds are cached in .ks-cache/ (keyed by candidate hash), so repeated test
runs, and the two xdist workers, reuse each other's compiled extensions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
os.environ.setdefault("KERNELSEARCH_HOME", str(ROOT / ".ks-cache" / "test-home"))

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig  # noqa: E402


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


MISSING_MODULE = '''import torch
import torch.nn as nn
from einops_not_installed_here.layers import Rearrange


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''


def mixed_dir(root):
    """Two good problems, one importing a module that is not installed, one that does not parse."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("scale_add.py", "row_norm.py"):
        (root / name).write_text((DATA / "problems" / name).read_text())
    (root / "48_needs_module.py").write_text(MISSING_MODULE)
    (root / "broken_syntax.py").write_text((DATA / "problems" / "broken_syntax.py").read_text())
    return root


@pytest.fixture
def cpu_config() -> EvalConfig:
    """Small but real: 5 trials, a short timed loop, tight limits so failures come fast."""
    return EvalConfig(
        device="cpu",
        trials=5,
        compile_baseline=False,
        timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, budget_s=2.0, input_sets=2, spot_checks=1),
        limits=Limits(build_timeout_s=600, run_timeout_s=30, memory_bytes=3 << 30, output_bytes=1 << 20),
    )


@pytest.fixture
def archive(tmp_path):
    from kernelsearch.archive import Archive

    with Archive(tmp_path / "archive.sqlite") as a:
        yield a
