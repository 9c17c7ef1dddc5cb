"""Static screen: a cheap first net over the candidate's source, before anything runs.

It is not the defence (a determined candidate can hide anything from an AST walk); the
isolated judge is. It catches the common shapes early with a specific reason, and marks
results that lean on PyTorch for the real work so fast_p can report them apart.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# Modules whose use in a candidate means background work, escape from the worker, or
# reaching around the harness.
FORBIDDEN_MODULES = {
    "threading": "starts threads (work after the timer stops)",
    "_thread": "starts threads (work after the timer stops)",
    "multiprocessing": "starts processes",
    "concurrent": "starts threads or processes",
    "subprocess": "runs other programs",
    "socket": "opens network connections",
    "asyncio": "runs background tasks",
    "signal": "installs signal handlers",
    "gc": "inspects the interpreter's objects",
    "inspect": "inspects the harness",
    "kernelsearch": "imports the harness",
}

# torch functions that do the heavy lifting; calling them on the forward path means the
# candidate's speed is PyTorch's, not its own kernel's.
TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "softmax", "log_softmax",
    "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "scaled_dot_product_attention",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "gelu", "relu",
    "silu", "sigmoid", "tanh", "cross_entropy", "cumsum", "sum", "mean", "var", "std", "norm",
}
TORCH_MODULES = {
    "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "LayerNorm", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "GroupNorm", "MultiheadAttention", "Softmax", "GELU", "ReLU",
    "MaxPool2d", "AvgPool2d", "Sequential", "RMSNorm",
}


@dataclass
class ScreenResult:
    reject: str = ""  # non-empty: the candidate is rejected with this reason
    syntax_error: str = ""
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def screen(source: str) -> ScreenResult:
    res = ScreenResult()
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        res.syntax_error = f"Python syntax error at line {e.lineno}: {e.msg}"
        return res
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    model_new = classes.get("ModelNew")
    if model_new is None:
        res.reject = "no class ModelNew defined"
        return res
    for base in model_new.bases:
        if isinstance(base, ast.Name) and base.id == "Model":
            res.reject = "ModelNew subclasses the reference Model"
            return res
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""]
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("__import__", "importlib.import_module"):
            res.reject = "dynamic import"
            return res
        for m in mods:
            top = m.split(".")[0]
            if top in FORBIDDEN_MODULES:
                res.reject = f"imports {m}: {FORBIDDEN_MODULES[top]}"
                return res
    forward = next(
        (f for f in model_new.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None
    )
    if forward is None:
        res.reject = "ModelNew has no forward method"
        return res
    uses = _torch_compute_on_forward(model_new, forward)
    if uses:
        res.flags.append("torch_fallback")
        res.notes.append("forward path calls PyTorch compute: " + ", ".join(sorted(uses)[:8]))
    if _has_torch_fallback_handler(forward):
        res.flags.append("exception_fallback")
        res.notes.append("forward catches an exception and calls PyTorch compute in the handler")
    return res


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _compute_calls(nodes) -> set[str]:
    found = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = _dotted(sub.func)
                head, _, last = name.rpartition(".")
                if last in TORCH_COMPUTE and head.split(".")[0] in ("torch", "F", "nn", "functional"):
                    found.add(name)
            elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                found.add("@")
    return found


def _torch_compute_on_forward(cls: ast.ClassDef, forward: ast.FunctionDef) -> set[str]:
    found = _compute_calls(forward.body)
    # self.<attr>(...) where <attr> was built from an nn compute module in __init__
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    modules = set()
    if init is not None:
        for sub in ast.walk(init):
            if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                ctor = _dotted(sub.value.func).rpartition(".")[2]
                if ctor in TORCH_MODULES or ctor == "Model":
                    for t in sub.targets:
                        if isinstance(t, ast.Attribute) and _dotted(t.value) == "self":
                            modules.add(t.attr)
    for sub in ast.walk(forward):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if _dotted(sub.func.value) == "self" and sub.func.attr in modules:
                found.add(f"self.{sub.func.attr}()")
        if isinstance(sub, ast.Call) and _dotted(sub.func) == "Model":
            found.add("Model")
    return found


def _has_torch_fallback_handler(forward: ast.FunctionDef) -> bool:
    for node in ast.walk(forward):
        if isinstance(node, ast.Try):
            for h in node.handlers:
                if _compute_calls(h.body):
                    return True
    return False
