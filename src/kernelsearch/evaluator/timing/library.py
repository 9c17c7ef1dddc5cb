"""Whether PyTorch's own kernels did a CUDA candidate's work, from the kernels one profiled
forward ran (the worker's ``profile`` message, `worker/launches.py` ``profile_kernels``).

The static screen reads names in the C++ text and the TorchFunctionMode sees Python calls; an
extension that calls ATen under a name the screen does not list (``at::_softmax``) and launches
a token kernel of its own "to look busy" passes both. What ran on the GPU does not lie about
whose code it was: ATen's kernels live in ``at::`` (``at::native::...``), cuBLAS, cuDNN and the
CUTLASS kernels libraries ship carry their own names (``sm90_xmma_gemm_...``, ``nvjet_...``,
``cudnn::...``). A candidate's kernel never has those names unless it puts itself in ATen's
namespace, so library names win over the candidate's own names (a decoy named after an ATen
kernel cannot claim its time). Kernels that only fill or copy memory (allocating an output with
``torch::zeros``, a ``.contiguous()`` or dtype copy) are not the work, as in the Python-side
observer, which does not count allocation, views, copies or conversions.

The decision is a share of time: library compute kernels at least ``FALLBACK_SHARE`` of the
GPU's busy time (the union of every kernel's interval, so kernels run side by side on other
streams cannot dilute it). The parent decides from the worker's report, which it treats as
untrusted data: anything malformed gives no decision (the static and Python-side checks stand).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

FALLBACK_SHARE = 0.5  # library compute kernels' share of the GPU's busy time that marks a fallback

# Names only PyTorch or a vendor library gives its kernels (matched anywhere in the demangled name).
_LIBRARY = re.compile("|".join((
    r"\bat::",  # ATen: at::native::..., at::cuda::..., at::(anonymous namespace)::...
    r"\bpytorch_flash::", r"PyTorchMemEffAttention", r"\bfmha_cutlass",  # PyTorch's attention kernels
    r"\btriton_(?:poi|red|per|tem)_",  # kernels torch.compile (Inductor) generates
    r"(?i:cublas|cudnn)",  # cuBLAS / cuBLASLt / cuDNN kernels and namespaces
    r"\bcutlass",  # CUTLASS kernels (cuBLAS ships many: cutlass_80_tensorop_...)
    r"\bsm\d+_xmma", r"\bxmma_", r"\bnvjet_",  # cuBLAS(Lt) / cuDNN tensor-core GEMM and conv kernels
    r"\b(?:maxwell|volta|turing|ampere|hopper)_\w*gemm",  # cuBLAS SGEMM/HGEMM kernels by architecture
    r"\bgemv2[NT]_kernel", r"\bgemvNSP_kernel", r"\bgemmSN_\w+_kernel", r"\bgemmk1_kernel",
    r"\bsplitKreduce_kernel",  # cuBLAS helpers
    r"\b(?:implicit|explicit|precomputed)_convolve_sgemm", r"\bfft2d_[rc]2[rc]", r"\bnchwToNhwcKernel",
    r"\bnhwcToNchwKernel",  # cuDNN
)))
# Library kernels that only fill or copy memory: never "the work".
_NOT_WORK = re.compile(r"FillFunctor|\bfill_kernel|[Cc]opy")
_MAX_KERNELS = 500  # the worker reports at most 50; more is a malformed report
_MAX_NAME = 4000


def library_kernel(name: str) -> bool:
    """True for a kernel PyTorch or a vendor library wrote that computes (not a fill or copy)."""
    return bool(_LIBRARY.search(name)) and not _NOT_WORK.search(name)


def short_name(name: str, n: int = 80) -> str:
    """``void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, ...>(float*, ...)``
    -> ``at::native::cunn_SoftMaxForward``: readable in a one-line reason."""
    s = name.replace("(anonymous namespace)::", "")
    for _ in range(50):  # template arguments, innermost first
        s, k = re.subn(r"<[^<>]*>", "", s)
        if not k:
            break
    s = s.split("(", 1)[0].strip()
    s = s.rsplit(" ", 1)[-1] or name  # drop a return type
    return s if len(s) <= n else s[: n - 3] + "..."


@dataclass(frozen=True)
class LibraryShare:
    """How much of one profiled forward's GPU time went to PyTorch's (or a vendor library's)
    compute kernels."""

    share: float  # of the GPU's busy time, 0..1
    busy_ms: float
    kernels: tuple[tuple[str, float, int], ...]  # library compute kernels: (name, ms, launches), slowest first

    @property
    def fallback(self) -> bool:
        return self.share >= FALLBACK_SHARE

    def describe(self) -> str:
        top = ", ".join(f"{short_name(k)} {ms:.3g} ms x{n}" for k, ms, n in self.kernels[:3])
        more = f" and {len(self.kernels) - 3} more" if len(self.kernels) > 3 else ""
        return (f"PyTorch/library kernels took {100 * self.share:.0f}% of the GPU's {self.busy_ms:.3g} ms busy time "
                f"in a profiled forward ({top}{more})")


def _number(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    v = float(x)
    return v if math.isfinite(v) and v >= 0 else None


def library_share(report: object) -> LibraryShare | None:
    """The share from a CUDA ``profile`` report ({"kernels": {name: launches}, "times_ms":
    {name: ms}, "busy_ms": ms}); None when the report is missing, failed or malformed, or the
    GPU ran nothing."""
    if not isinstance(report, dict):
        return None
    times, counts = report.get("times_ms"), report.get("kernels")
    if not isinstance(times, dict) or not isinstance(counts, dict) or len(times) > _MAX_KERNELS:
        return None
    clean: dict[str, float] = {}
    for name, ms in times.items():
        v = _number(ms)
        if not isinstance(name, str) or v is None:
            return None
        clean[name[:_MAX_NAME]] = clean.get(name[:_MAX_NAME], 0.0) + v
    total = sum(clean.values())
    busy = _number(report.get("busy_ms"))
    busy = busy if busy else total
    if busy <= 0:
        return None
    lib = []
    for name, ms in clean.items():
        if library_kernel(name):
            n = counts.get(name)
            lib.append((name, ms, n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0))
    lib.sort(key=lambda k: -k[1])
    return LibraryShare(min(1.0, sum(ms for _, ms, _ in lib) / busy), busy, tuple(lib))
