from __future__ import annotations

import pytest

from kernelsearch.evaluator.screen.python import screen
from kernelsearch.records.candidate import detect_backend

HEAD = "import torch\nimport torch.nn as nn\n"


@pytest.mark.parametrize("src, backend", [
    (HEAD + "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='', cuda_sources='', functions=[])", "cuda"),
    (HEAD + "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='', functions=[])", "cpp"),
    (HEAD + "import triton\nimport triton.language as tl\n", "triton"),
    (HEAD + "class ModelNew(nn.Module): pass", "torch"),
])
def test_detect_backend(src, backend):
    assert detect_backend(src) == backend


@pytest.mark.parametrize("body, reason", [
    ("class ModelNew(Model):\n    pass", "subclasses the reference Model"),
    ("import subprocess\nclass ModelNew(nn.Module):\n    def forward(self, x): return x", "imports subprocess"),
    ("from multiprocessing import Pool\nclass ModelNew(nn.Module):\n    def forward(self, x): return x", "imports multiprocessing"),
    ("class ModelNew(nn.Module):\n    def forward(self, x): return __import__('os')", "dynamic import"),
    ("class ModelNew(nn.Module):\n    pass", "no forward"),
])
def test_rejections(body, reason):
    assert reason in screen(HEAD + body).reject


def test_torch_compute_on_forward_is_flagged():
    src = HEAD + (
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
    )
    assert screen(src).flags == ["torch_fallback"]
    # holding parameters in an nn.Linear is fine when forward only reads its weight
    src_ok = src.replace("return self.fc(x)", "return ext.gemm(x, self.fc.weight)")
    assert screen(src_ok).flags == []


def test_exception_fallback_is_flagged():
    src = HEAD + (
        "class ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        try:\n            return ext.f(x)\n        except RuntimeError:\n            return torch.matmul(x, x)\n"
    )
    assert "exception_fallback" in screen(src).flags


@pytest.mark.parametrize("line, rejected", [
    ("os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0a'", False),  # a build setting, for its own build
    ("del os.environ['TORCH_CUDA_ARCH_LIST']", False),
    ("os.environ['CUDA_LAUNCH_BLOCKING'] = '1'", True),  # changes how the harness's calls run
    ("os.environ[key] = '9.0a'", True),  # a key the screen cannot read
    ("os.environ = {}", True),
])
def test_only_build_settings_may_be_set_in_the_environment(line, rejected):
    src = HEAD + f"import os\nkey = 'X'\n{line}\nclass ModelNew(nn.Module):\n    def forward(self, x): return x\n"
    reason = screen(src).reject
    assert bool(reason) is rejected, reason
    if rejected:
        assert "patches a module" in reason
