"""Each side of the handover: the candidate worker's ``Sink`` and the judge's ``Source``.

Both name outputs as the tensor files did (``trial0.kst``...), so an output goes one way or the
other and the judge asks for it by name either way.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch

from kernelsearch.evaluator.handover import fds
from kernelsearch.evaluator.handover.codec import (
    CodecError,
    flatten,
    read_tensors,
    tensor_plan,
    write_tensors,
)


class Sink:
    """Where the candidate's worker puts an output: device memory handed to the parent while
    ``budget`` bytes last (CUDA, a handover socket in the environment), else a tensor file. Made
    before the candidate is imported; ``put`` is bound there, like the guards' methods."""

    def __init__(self, out_dir: Path, budget: int, note) -> None:
        self.out_dir, self.left, self.note = out_dir, budget, note
        fd = os.environ.pop(fds.ENV, "")
        self.sock = socket.socket(fileno=int(fd)) if fd.isdigit() and budget > 0 else None
        if fd.isdigit() and self.sock is None:
            os.close(int(fd))

    def put(self, name: str, value: object) -> str:
        """Hand ``value`` over under ``name``; "device" or "file", the way it went."""
        tensors, kind = flatten(value)
        tensors = [t.detach().contiguous() for t in tensors]
        nbytes = [t.numel() * t.element_size() for t in tensors]
        if self.sock is not None and tensors and all(t.is_cuda and t.device == tensors[0].device for t in tensors):
            from kernelsearch.evaluator.handover import vmm

            if sum(nbytes) <= self.left:
                try:
                    exported = vmm.export_copy(tensors)
                    try:
                        header = {"name": name, "kind": kind, "size": exported.size, "tensors": [
                            {"dtype": str(t.dtype), "shape": list(t.shape), "nbytes": n, "offset": at}
                            for t, n, at in zip(tensors, nbytes, exported.offsets, strict=True)]}
                        fds.send(self.sock, header, exported.fd)
                    finally:
                        os.close(exported.fd)
                    self.left -= exported.size
                    return "device"
                except (vmm.VmmError, OSError) as e:
                    self._stop(f"{name} and later outputs went through files: {e}")
        write_tensors(self.out_dir / name, value)
        return "file"

    def _stop(self, why: str) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            self.note(why)


class Source:
    """Where the judge gets an output: from the descriptors the parent passed on its socket
    (read once, when the job arrives: the parent sends them all before the job), else from the
    candidate's output directory."""

    def __init__(self, out_dir: Path, device: str, limit: int) -> None:
        self.out_dir, self.device = out_dir, device
        self.handed: dict[str, fds.Handed] = {}
        fd = os.environ.pop(fds.ENV, "")
        if fd.isdigit():
            with socket.socket(fileno=int(fd)) as sock:
                items, _ = fds.drain(sock, limit)  # the parent checked them; it sends nothing else
            self.handed = {h.name: h for h in items}

    def load(self, name: str) -> tuple[list[torch.Tensor] | None, str]:
        """The output's tensors on the judge's device, or None and why not."""
        handed = self.handed.pop(name, None)
        if handed is not None:
            try:
                return self._import(handed), ""
            except (CodecError, RuntimeError) as e:
                return None, f"output handed over in device memory unreadable: {e}"
            finally:
                handed.close()
        path = self.out_dir / name
        if not path.is_file():
            return None, f"{name}: no output written"
        try:
            return read_tensors(path, self.device), ""
        except CodecError as e:
            return None, f"output file unreadable: {e}"

    def _import(self, handed: fds.Handed) -> list[torch.Tensor]:
        from kernelsearch.evaluator.handover import vmm

        h, where = handed.header, handed.name
        metas, size = h.get("tensors"), h.get("size")
        parts = [(d, s, n, m.get("offset")) for (d, s, n), m in zip(tensor_plan(metas, where), metas, strict=True)]
        if type(size) is not int or size <= 0:
            raise CodecError(f"{where}: bad allocation size {size!r:.40}")
        for _, _, n, at in parts:
            if type(at) is not int or at < 0 or at % vmm.ALIGN or at + n > size:
                raise CodecError(f"{where}: a tensor at offset {at!r:.40} ({n} bytes) is not inside {size} bytes")
        if not torch.cuda.is_available():
            raise CodecError(f"{where}: handed over in device memory, and the judge has no GPU")
        if size > torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory:
            raise CodecError(f"{where}: an allocation of {size} bytes, more than the GPU has")
        return vmm.import_copy(handed.fd, size, parts, self.device)

    def close(self) -> None:
        fds.close_all(list(self.handed.values()))
        self.handed = {}
