"""Device memory another process can take over: the CUDA driver's virtual memory management API
(``cuMemCreate`` with a POSIX file descriptor as its shareable handle), called through ctypes.

An allocation made this way lives as long as any handle, mapping or exported descriptor of it
does, in any process (CUDA driver API, ``cuMemRelease``). So a worker can copy an output into
one, export it, drop its own handle and mapping, send the descriptor away and exit: the memory
stays, and the process that imports the descriptor is the only one that can still reach it.

Why not ``cudaIpcGetMemHandle`` (torch's sharing): that memory dies with the process that made
it, so the judge would have to read it while the candidate's process still runs beside it.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_VMM_SUPPORTED, _FD_SUPPORTED = 102, 103  # CU_DEVICE_ATTRIBUTE_...
ALIGN = 256  # bytes: where each tensor of an output starts in its allocation


class VmmError(RuntimeError):
    """The driver refused (or cannot do) an export or an import."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_u64, _size, _p = ctypes.c_uint64, ctypes.c_size_t, ctypes.POINTER
_SIGNATURES = {
    "cuGetErrorName": (ctypes.c_int, _p(ctypes.c_char_p)),
    "cuDeviceGetAttribute": (_p(ctypes.c_int), ctypes.c_int, ctypes.c_int),
    "cuMemGetAllocationGranularity": (_p(_size), _p(_Prop), ctypes.c_int),
    "cuMemCreate": (_p(_u64), _size, _p(_Prop), _u64),
    "cuMemRelease": (_u64,),
    "cuMemAddressReserve": (_p(_u64), _size, _size, _u64, _u64),
    "cuMemAddressFree": (_u64, _size),
    "cuMemMap": (_u64, _size, _size, _u64, _u64),
    "cuMemUnmap": (_u64, _size),
    "cuMemSetAccess": (_u64, _size, _p(_Access), _size),
    "cuMemExportToShareableHandle": (_p(ctypes.c_int), _u64, ctypes.c_int, _u64),
    "cuMemImportFromShareableHandle": (_p(_u64), ctypes.c_void_p, ctypes.c_int),
    "cuMemcpyDtoD_v2": (_u64, _u64, _size),
}


@functools.cache
def _driver() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise VmmError(f"no CUDA driver library: {e}") from None
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = list(args), ctypes.c_int
    return lib


def _call(name: str, *args) -> None:
    rc = getattr(_driver(), name)(*args)
    if rc != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorName(rc, ctypes.byref(text))
        raise VmmError(f"{name}: {(text.value or b'').decode() or rc}")


def _device(device: torch.device | int | None) -> int:
    """The device's ordinal, its primary context current on this thread (the driver calls use it)."""
    index = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    index = torch.cuda.current_device() if index.index is None else index.index
    torch.cuda.set_device(index)
    torch.cuda.synchronize(index)  # also: every queued write to what is copied has landed
    return index


def _prop(device: int) -> _Prop:
    p = _Prop()
    p.type, p.requestedHandleTypes = _PINNED, _POSIX_FD
    p.location.type, p.location.id = _ON_DEVICE, device
    return p


@functools.cache
def granularity(device: int) -> int:
    """Bytes an allocation's size must be a multiple of (2 MiB on an H100)."""
    for attr, what in ((_VMM_SUPPORTED, "virtual memory management"), (_FD_SUPPORTED, "POSIX descriptor export")):
        value = ctypes.c_int()
        _call("cuDeviceGetAttribute", ctypes.byref(value), attr, device)
        if not value.value:
            raise VmmError(f"device {device} does not support {what}")
    g = _size()
    _call("cuMemGetAllocationGranularity", ctypes.byref(g), ctypes.byref(_prop(device)), 0)
    return int(g.value)


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def layout(nbytes: list[int], device: int) -> tuple[list[int], int]:
    """Offsets of tensors of these sizes in one allocation, and the allocation's size."""
    offsets, end = [], 0
    for n in nbytes:
        end = _round_up(end, ALIGN)
        offsets.append(end)
        end += n
    return offsets, _round_up(max(end, 1), granularity(device))


class _Mapping:
    """A physical allocation mapped read-write at a reserved range of this process's addresses,
    for the length of a ``with``: unmapped, the range freed and the handle released on exit."""

    def __init__(self, handle: int, size: int, device: int) -> None:
        self.handle, self.size, self.device, self.ptr = handle, size, device, 0

    def __enter__(self) -> _Mapping:
        ptr = _u64()
        try:
            _call("cuMemAddressReserve", ctypes.byref(ptr), self.size, 0, 0, 0)
            self.ptr = ptr.value
            _call("cuMemMap", self.ptr, self.size, 0, self.handle, 0)
        except BaseException:
            self._free()
            raise
        try:
            access = _Access()
            access.location.type, access.location.id, access.flags = _ON_DEVICE, self.device, _READ_WRITE
            _call("cuMemSetAccess", self.ptr, self.size, ctypes.byref(access), 1)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.ptr:
                torch.cuda.synchronize(self.device)
                _call("cuMemUnmap", self.ptr, self.size)
        finally:
            self._free()

    def _free(self) -> None:
        try:
            if self.ptr:
                _call("cuMemAddressFree", self.ptr, self.size)
        finally:
            self.ptr = 0
            _driver().cuMemRelease(self.handle)


@dataclass(frozen=True)
class Exported:
    fd: int  # the only reference to the memory left in this process: send it, then close it
    size: int
    offsets: list[int]


def export_copy(tensors: list[torch.Tensor]) -> Exported:
    """Copy contiguous tensors of one GPU into a new exportable allocation; the descriptor."""
    device = _device(tensors[0].device)
    nbytes = [t.numel() * t.element_size() for t in tensors]
    offsets, size = layout(nbytes, device)
    handle = _u64()
    _call("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(_prop(device)), 0)
    fd = ctypes.c_int(-1)
    with _Mapping(handle.value, size, device) as m:
        for t, at, n in zip(tensors, offsets, nbytes, strict=True):
            if n:
                _call("cuMemcpyDtoD_v2", m.ptr + at, t.data_ptr(), n)
        torch.cuda.synchronize(device)
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), m.handle, _POSIX_FD, 0)
    return Exported(fd.value, size, offsets)


def import_copy(fd: int, size: int, parts: list[tuple[torch.dtype, list[int], int, int]],
                device: torch.device | int | None = None) -> list[torch.Tensor]:
    """Copy (dtype, shape, bytes, offset) parts out of an exported allocation of ``size`` bytes
    into tensors of this process. The caller checked that each part lies inside ``size``; the
    driver refuses a mapping longer than the allocation, and a descriptor that is not one."""
    index = _device(device)
    handle = _u64()
    _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD)
    out = []
    with _Mapping(handle.value, size, index) as m:
        for dtype, shape, n, at in parts:
            dst = torch.empty(n, dtype=torch.uint8, device=f"cuda:{index}")
            if n:
                torch.cuda.synchronize(index)  # the allocator may hand back memory a queued kernel still uses
                _call("cuMemcpyDtoD_v2", dst.data_ptr(), m.ptr + at, n)
            out.append(dst.view(dtype).reshape(shape))
    return out
