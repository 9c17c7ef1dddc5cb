from __future__ import annotations

import pytest
import torch

from kernelsearch.evaluator.handover.codec import CodecError, read_tensors, write_tensors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_roundtrip(tmp_path, dtype):
    t = (torch.randn(3, 5) * 10).to(dtype)
    write_tensors(tmp_path / "t.kst", t)
    (back,) = read_tensors(tmp_path / "t.kst")
    assert back.dtype == dtype and torch.equal(back, t)


def test_sequence_and_empty(tmp_path):
    write_tensors(tmp_path / "s.kst", (torch.ones(2), torch.empty(0, 4)))
    a, b = read_tensors(tmp_path / "s.kst")
    assert torch.equal(a, torch.ones(2)) and b.shape == (0, 4)


def test_non_tensor_output_refused(tmp_path):
    with pytest.raises(TypeError):
        write_tensors(tmp_path / "x.kst", {"a": torch.ones(1)})


@pytest.mark.parametrize("mangle", [
    lambda b: b"PKL0" + b[4:],  # not our magic
    lambda b: b[:-4],  # truncated data
    lambda b: b + b"junk",  # trailing bytes
    lambda b: b.replace(b'torch.float32', b'torch.object0'),  # unknown dtype
    lambda b: b[:8] + b"{not json" + b[17:],  # corrupt header
])
def test_tampered_files_are_rejected(tmp_path, mangle):
    write_tensors(tmp_path / "t.kst", torch.randn(4, 4))
    p = tmp_path / "t.kst"
    p.write_bytes(mangle(p.read_bytes()))
    with pytest.raises(CodecError):
        read_tensors(p)
