"""Static rules over the C++/CUDA text a candidate hands to ``load_inline``.

The compiled code is invisible to the Python AST walk, yet it is where side streams, L2
persistence windows and calls into ATen or cuBLAS live. These rules read the source strings
(resolved through module-level names where possible) with regular expressions: a cheap first
net, like the rest of the screen; the dynamic checks in the worker are the backstop.
"""

from __future__ import annotations

import ast
import re

from kernelsearch.records.codes import Code


class Finding(str):
    """A screen rule's reason to reject, carrying the rule's verdict code (records/codes.py):
    a ``str``, so a rule reads as its reason; "" (a plain str) is no finding."""

    code: Code

    def __new__(cls, code: Code, reason: str) -> Finding:
        obj = super().__new__(cls, reason)
        obj.code = code
        return obj

# Creating or selecting a stream other than the caller's current one.
_SIDE_STREAM = re.compile(
    r"\b(cudaStreamCreate\w*|getStreamFromPool|getStreamFromExternal|cublasSetStream\w*|cudnnSetStream|"
    r"cudaStreamPerThread|cudaStreamNonBlocking|setCurrentCUDAStream)\b"
)
# Anything that orders the side stream's work before the caller sees the result.
_STREAM_SYNC = re.compile(
    r"\b(cudaStreamWaitEvent|cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|"
    r"synchronize|wait_stream|cudaStreamQuery)\b|\.block\s*\("
)
_L2_PERSIST = re.compile(r"\b(accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
                         r"hitProp|cudaStreamAttributeAccessPolicyWindow)\b")
_ATEN_OPS = (
    "matmul|mm|bmm|addmm|baddbmm|addmv|mv|dot|linear|einsum|conv\\w*|softmax|log_softmax|layer_norm|"
    "native_layer_norm|group_norm|batch_norm|rms_norm|gelu|relu|silu|sigmoid|tanh|sum|mean|var|std|norm|"
    "cumsum|max_pool\\w*|avg_pool\\w*|scaled_dot_product_attention"
)
_ATEN_CALL = re.compile(rf"\b(?:at|torch)::(?:\w+::)*({_ATEN_OPS})\s*\(")
_ATEN_METHOD = re.compile(rf"\.\s*({_ATEN_OPS})\s*\(")
_VENDOR_CALL = re.compile(r"\b(cublas\w*[Gg]emm\w*|cublasLt\w+|cudnn(?:Convolution|BatchNorm|Softmax|RNN|Pooling)\w*)\s*\(")
_SOURCE_KWARGS = ("cpp_sources", "cuda_sources", "sources")
# launch attributes between ``__global__`` and a kernel's name (``__cluster_dims__(2, 1, 1)``)
_KERNEL_ATTRS = re.compile(r"\b__(?:launch_bounds|cluster_dims|maxnreg|block_size)__\s*\([^)]*\)|"
                           r"\b__attribute__\s*\(\([^)]*\)\)")


def extension_builds(tree: ast.Module) -> list[ast.Call]:
    """Every ``load_inline``/``load`` call of the source (however the loader was reached)."""
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _callee(node.func) in ("load_inline", "load")]


def load_inline_args(tree: ast.Module, keys: tuple[str, ...]) -> dict[str, list[str]] | None:
    """The string arguments ``keys`` of every load_inline/load call, in order, resolved through
    module-level names, lists and ``+`` (None when there is no such call): a second build in
    the same file is screened like the first."""
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    found: dict[str, list[str]] | None = None
    for node in extension_builds(tree):
        found = found if found is not None else {key: [] for key in keys}
        for kw in node.keywords:
            if kw.arg in found:
                found[kw.arg].extend(_strings(kw.value, names, depth=0))
    return found


def native_sources(tree: ast.Module) -> list[str]:
    """The strings passed as cpp_sources/cuda_sources to load_inline (through module-level
    names, lists and + concatenations); every long string literal if none can be resolved."""
    args = load_inline_args(tree, _SOURCE_KWARGS) or {}
    found = [text for key in _SOURCE_KWARGS for text in args.get(key, [])]
    if found:
        return found
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and len(n.value) > 80 and id(n) not in docstrings]


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _strings(node: ast.expr, names: dict[str, ast.expr], depth: int) -> list[str]:
    if depth > 8:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], names, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e, names, depth + 1)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, names, depth + 1), _strings(node.right, names, depth + 1)
        first = node.left
        while isinstance(first, ast.Name) and first.id in names:
            first = names[first.id]
        if isinstance(first, (ast.List, ast.Tuple)):
            return left + right  # list + list
        return ["".join(left) + "".join(right)]  # one string built from parts
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))]
    return []


def _strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    return re.sub(r"//[^\n]*", " ", code)


def native_reject(sources: list[str]) -> Finding | str:
    """A reason to reject the candidate for what its C++/CUDA does (with its code), or ""."""
    code = _strip_comments("\n".join(sources))
    if m := _L2_PERSIST.search(code):
        return Finding(Code.CACHE_WARMING, f"C++ source sets an L2 persisting-cache window ({m.group(1)}): inputs "
                       "stay cached between timed calls")
    if (m := _SIDE_STREAM.search(code)) and not _STREAM_SYNC.search(code):
        return Finding(Code.STREAM_RACE, f"C++ source uses a side CUDA stream ({m.group(1)}) and never synchronises "
                       "it with the caller's stream: work would escape the timer")
    return ""


def native_compute(sources: list[str]) -> list[str]:
    """Library compute called from the compiled code (ATen ops, cuBLAS, cuDNN): the speed is
    then the library's, which the torch-fallback policy marks or rejects."""
    code = _strip_comments("\n".join(sources))
    hits = {f"at::{m.group(1)}" for m in _ATEN_CALL.finditer(code)}
    hits |= {f"Tensor.{m.group(1)}" for m in _ATEN_METHOD.finditer(code)}
    hits |= {m.group(1) for m in _VENDOR_CALL.finditer(code)}
    return sorted(hits)


def defined_kernels(sources: list[str], python_source: str) -> list[str]:
    """Names of the kernels a candidate defines: CUDA ``__global__`` functions and
    ``@triton.jit`` functions. CuTe DSL and TileLang kernels are not named here: the GPU names
    them after a mangled signature, and their launches are counted instead."""
    code = _KERNEL_ATTRS.sub(" ", _strip_comments("\n".join(sources)))
    names = re.findall(r"__global__\s+[^;{(]*?\b(\w+)\s*(?:<[^;{(]*>)?\s*\(", code)
    # a bare @jit is Triton's only where Triton is imported: TileLang's @jit names a host
    # function, not the GPU kernel the profiler would see
    jit = r"@(?:triton\.)?jit" if re.search(r"^\s*(?:import|from)\s+triton\b", python_source, re.M) else r"@triton\.jit"
    names += re.findall(jit + r"[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)", python_source)
    names += re.findall(r"@triton\.autotune\([\s\S]*?\)\s*\n\s*" + jit + r"[^\n]*\n\s*def\s+(\w+)", python_source)
    return sorted(set(names))
