"""Choose the playbook notes that fit a problem and its latest evaluation.

What the reference computes comes from the aten operators its forward ran on the meta device
(`ProblemDescription.ops`): that sees `x @ w`, `F.linear`, nested modules and decompositions
alike, and costs nothing extra since describing the problem already runs the forward there.
The reference source is scanned only when the problem could not run on meta. Whether the work
is compute- or memory-bound comes from the evaluation's roofline when there is one, else from
the description's arithmetic intensity; the profile's kernel names say whether tensor cores
already run. The rules are plain and ordered, so the same inputs always give the same notes
(a prompt rebuilt on resume is the same prompt).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kernelsearch.playbook.notes import Note, load_notes

LIMIT = 3
# flop/byte above which a problem with no roofline yet is taken to be compute-bound (a GPU's
# fp16 tensor-core rate over its bandwidth is ~100-300; fp32 ~10-20)
COMPUTE_INTENSITY = 64.0
DEFAULT_SMS = 132  # an H100 SXM; only for the tile-count rules when the hardware text has none
TILE = 128 * 128  # output elements per block of a typical GEMM tile

# aten operator names (overload packets) -> the kinds of work the rules speak of
_OP_KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("matmul", re.compile(r"^(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_addmm_activation|_int_mm|_scaled_mm)$")),
    ("conv", re.compile(r"^(_?convolution|conv\w*|cudnn_convolution\w*|mkldnn_convolution)$")),
    ("attention", re.compile(r"scaled_dot_product|flash_attention|efficient_attention")),
    ("softmax", re.compile(r"^(_?softmax|_safe_softmax|_?log_softmax|logsumexp|nll_loss\w*|cross_entropy\w*)$")),
    ("norm", re.compile(r"^(native_layer_norm|layer_norm|native_group_norm|group_norm|native_batch_norm|"
                        r"_native_batch_norm_legit\w*|batch_norm\w*|instance_norm|_fused_rms_norm|rms_norm|"
                        r"var|var_mean|std|std_mean|rsqrt)$")),
    ("reduction", re.compile(r"^(sum|mean|amax|amin|max|min|prod|norm|linalg_vector_norm|cumsum|argmax|argmin)$")),
]
# the same kinds read from Python source (fallback when the forward cannot run on meta)
_SOURCE_KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("matmul", re.compile(r"\b(matmul|mm|bmm|addmm|linear|Linear|einsum)\b|\w\s*@\s*\w")),
    ("conv", re.compile(r"\bconv\w*\d?d\b|\bConv\w*\d?d\b")),
    ("attention", re.compile(r"scaled_dot_product_attention|MultiheadAttention")),
    ("softmax", re.compile(r"\b(log_)?softmax\b|\bSoftmax\b|logsumexp|cross_entropy|CrossEntropy")),
    ("norm", re.compile(r"layer_norm|LayerNorm|group_norm|GroupNorm|batch_norm|BatchNorm|InstanceNorm|"
                        r"rms_norm|RMSNorm|rsqrt|\.var\(|\.std\(")),
    ("reduction", re.compile(r"\.(sum|mean|amax|amin)\(|torch\.(sum|mean|amax|amin)\(")),
]
# kernel names of tensor-core code (cuBLAS/CUTLASS/our own): mma, hmma, xmma, gmma/wgmma, ...
TENSOR_CORE_NAME = re.compile(r"mma|tensorop|[sh]16816|[sh]1688|16x8x16", re.IGNORECASE)
WGMMA_NAME = re.compile(r"gmma|sm90", re.IGNORECASE)
LOW_PRECISION = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}
_GPU_SM = [("H200", 90), ("H100", 90), ("H800", 90), ("GH200", 90), ("B200", 100), ("A100", 80), ("A800", 80),
           ("A30", 80), ("L40", 89), ("L4", 89), ("RTX 40", 89), ("A10", 86), ("A40", 86), ("RTX 30", 86),
           ("V100", 70), ("T4", 75)]


@dataclass(frozen=True)
class Facts:
    """What the rules know about a problem, its hardware and its latest evaluation."""

    kinds: frozenset[str]  # matmul, conv, attention, softmax, norm, reduction (empty: elementwise)
    dtypes: frozenset[str]
    bound: str | None = None  # "compute" / "memory"
    bound_from: str = ""  # "roofline" (measured) or "estimate" (arithmetic intensity)
    sm: int | None = None  # 80, 90, ...
    sm_count: int | None = None
    tensor_cores: bool | None = None  # tensor-core kernels in the profile (None: no profile)
    wgmma: bool = False
    out_elems: int = 0  # elements of the largest output
    flops: int = 0
    row_len: int = 0  # last dimension of the first input


@dataclass(frozen=True)
class Choice:
    note: Note
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.note.id, "reason": self.reason}


def kinds_of(ops: list[str] | None = None, source: str = "") -> frozenset[str]:
    """Kinds of work from aten operator names, or from source text when there are none."""
    table, items = (_OP_KINDS, ops) if ops else (_SOURCE_KINDS, [source])
    kinds = {kind for kind, pat in table for item in items if pat.search(item)}
    if {"matmul", "softmax"} <= kinds:  # products around a softmax: attention written out
        kinds.add("attention")
    return frozenset(kinds)


def sm_of(text: str) -> int | None:
    """The SM version named in a hardware description ("compute capability 9.0", "sm_90",
    or a known GPU name)."""
    if m := re.search(r"compute capability (\d+)\.(\d+)", text):
        return int(m.group(1)) * 10 + int(m.group(2))
    if m := re.search(r"\bsm_?(\d{2,3})a?\b", text):
        return int(m.group(1))
    return next((sm for name, sm in _GPU_SM if name in text), None)


def facts(description: Any = None, *, source: str = "", hardware: str = "", result: Any = None) -> Facts:
    """Facts from a `ProblemDescription`, the reference source, the run's hardware text and an
    evaluation result (read by attribute: its `roofline` and `profile`, only if correct)."""
    ok_desc = description is not None and not getattr(description, "error", "")
    ops = list(getattr(description, "ops", []) or []) if ok_desc else []
    tensors = [t for t in [*(getattr(description, "inputs", []) or []), *(getattr(description, "outputs", []) or [])]
               if hasattr(t, "dtype")] if ok_desc else []
    outputs = [t for t in (getattr(description, "outputs", []) or []) if hasattr(t, "shape")] if ok_desc else []
    flops = int(getattr(description, "flops", 0) or 0) if ok_desc else 0
    intensity = getattr(description, "arithmetic_intensity", None) if ok_desc else None
    status = getattr(result, "status", "")
    correct = str(getattr(status, "value", status)) == "correct"
    roof = (getattr(result, "roofline", None) or {}) if correct else {}
    profile = (getattr(result, "profile", None) or {}) if correct else {}
    names = [str(k.get("name", "")) for k in profile.get("kernels", []) or [] if isinstance(k, dict)]
    bound, bound_from = roof.get("bound"), "roofline"
    if bound not in ("compute", "memory"):
        bound, bound_from = None, "estimate"
        if intensity is not None:
            bound = "compute" if intensity >= COMPUTE_INTENSITY else "memory"
        elif ok_desc:
            bound = "memory"  # no matrix product or convolution: elementwise, reductions, norms
    device_name = str(getattr(result, "device_name", "") or "")
    sms = re.search(r"(\d+) SMs", hardware)
    first_in = next((t for t in (getattr(description, "inputs", []) or []) if hasattr(t, "shape")), None) \
        if ok_desc else None
    return Facts(
        kinds=kinds_of(ops, source), dtypes=frozenset(t.dtype for t in tensors), bound=bound,
        bound_from=bound_from, sm=sm_of(hardware) or sm_of(device_name), sm_count=int(sms.group(1)) if sms else None,
        tensor_cores=any(TENSOR_CORE_NAME.search(n) for n in names) if names else None,
        wgmma=any(WGMMA_NAME.search(n) and TENSOR_CORE_NAME.search(n) for n in names),
        out_elems=max((math.prod(t.shape) for t in outputs), default=0), flops=flops,
        row_len=int(first_in.shape[-1]) if first_in is not None and first_in.shape else 0,
    )


def _rules(f: Facts, backend: str) -> list[tuple[int, str, str]]:
    """(priority, note id, reason) for every note the facts call for; higher goes first."""
    out: list[tuple[int, str, str]] = []
    gemm = bool(f.kinds & {"matmul", "conv"})
    attention = "attention" in f.kinds
    low = bool(f.dtypes & LOW_PRECISION)
    bound = f"{f.bound}-bound ({'measured' if f.bound_from == 'roofline' else 'estimated'})" if f.bound else ""
    compute = f.bound == "compute"
    sm90 = f.sm is not None and f.sm >= 90
    tc_hw = backend == "cuda" and (f.sm is None or f.sm >= 80)
    if attention:
        out.append((100, "online-softmax", "attention: fuse the softmax into the loop over keys instead of "
                                           "materialising the score matrix"))
    elif "softmax" in f.kinds:
        out.append((95, "online-softmax", "the reference takes a softmax over rows: one pass for max and sum"))
    if "norm" in f.kinds:
        out.append((95, "welford", "the reference normalises (mean/variance or RMS): stable one-pass statistics"))
    if (gemm or attention) and compute and low and tc_hw:
        dt = "/".join(sorted(f.dtypes & LOW_PRECISION))
        if sm90 and not f.wgmma:
            out.append((90, "wgmma-tma", f"{bound} {dt} matrix products on sm_{f.sm}"
                                         + ("" if f.tensor_cores is None else ", no wgmma kernel in the profile")))
        if not f.tensor_cores:
            seen = "no tensor-core kernel in the profile" if f.tensor_cores is False else "tensor cores fit"
            out.append((88 if sm90 else 90, "mma-ldmatrix", f"{bound} {dt} matrix products: {seen}"))
        if not sm90:
            out.append((80 if f.tensor_cores else 70, "cp-async-pipeline",
                        "keep the tensor cores fed: overlap the next tile's loads with this tile's products"))
        out.append((60, "smem-swizzle", "tensor-core tiles read from shared memory conflict without a swizzle"))
    elif gemm and compute:
        out.append((70, "cp-async-pipeline", f"{bound} matrix products in fp32: hide load latency behind the tiles"))
        out.append((60, "smem-swizzle", "tiled products read shared memory across rows"))
    if gemm and f.out_elems and f.flops:
        tiles = math.ceil(f.out_elems / TILE)
        sms = f.sm_count or DEFAULT_SMS
        depth = f.flops / (2 * f.out_elems)  # the reduction length K of one output element
        if tiles < sms and depth >= 1024:
            out.append((92, "split-k-stream-k", f"{tiles} output tiles of 128x128 for {sms} SMs with K ~{depth:.0f}: "
                                                "split the reduction to fill the GPU"))
        elif compute and tiles > sms and (waste := 1 - tiles / (math.ceil(tiles / sms) * sms)) >= 0.2:
            out.append((65, "persistent-kernels", f"{tiles} tiles on {sms} SMs leave {waste:.0%} of the last "
                                                  "wave idle: loop over tiles in resident blocks"))
            out.append((64, "split-k-stream-k", "stream-K evens out the last wave"))
    if sm90 and backend == "cuda":
        if gemm and compute and low:
            out.append((50, "clusters-dsmem", "sm_90: TMA multicast shares operand tiles across a cluster"))
        if f.kinds & {"norm", "softmax"} and f.row_len >= 32768:
            out.append((55, "clusters-dsmem", f"rows of {f.row_len} elements: reduce one row across a cluster "
                                              "through distributed shared memory"))
    return out


def serves(backend: str) -> bool:
    """Whether any note is written for this backend (none is for cpp: the notes are GPU work)."""
    return any(backend in n.backends for n in load_notes().values())


def choose(description: Any = None, *, backend: str, source: str = "", hardware: str = "", result: Any = None,
           limit: int = LIMIT, mode: str = "on") -> list[Choice]:
    """At most ``limit`` notes for this problem, best first, each with why it was chosen.
    None when the playbook is off, when the backend runs no GPU kernels of ours (cpp), or when
    nothing fits (a memory-bound elementwise problem, say)."""
    notes = load_notes()
    if mode == "off" or limit <= 0 or not serves(backend):
        return []
    f = facts(description, source=source, hardware=hardware, result=result)
    best: dict[str, tuple[int, str]] = {}
    for priority, note_id, reason in _rules(f, backend):
        if backend in notes[note_id].backends and priority > best.get(note_id, (-1, ""))[0]:
            best[note_id] = (priority, reason)
    order = list(notes)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], order.index(kv[0])))
    return [Choice(notes[i], reason) for i, (_, reason) in ranked[:limit]]
