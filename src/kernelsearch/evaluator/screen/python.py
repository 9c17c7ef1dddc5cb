"""Static screen: a cheap first net over the candidate's source, before anything runs.

It is not the defence (a determined candidate can hide anything from an AST walk); the
isolated judge and the dynamic guards in the worker are. It catches the common shapes early
with a specific reason, and marks results that lean on PyTorch for the real work so fast_p can
report them apart. Each rule names what it found, so a rejected author knows what to change.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelsearch.evaluator.screen.native import (
    Finding,
    defined_kernels,
    extension_builds,
    native_compute,
    native_reject,
    native_sources,
)
from kernelsearch.records.choices import EXCEPTION_FALLBACK, TORCH_FALLBACK
from kernelsearch.records.codes import Code

# Modules whose use in a candidate means background work, escape from the worker, or
# reaching around the harness.
FORBIDDEN_MODULES = {
    "threading": "starts threads (work after the timer stops)",
    "_thread": "starts threads (work after the timer stops)",
    "multiprocessing": "starts processes",
    "concurrent": "starts threads or processes",
    "subprocess": "runs other programs",
    "pty": "runs other programs",
    "socket": "opens network connections",
    "ssl": "opens network connections",
    "urllib": "opens network connections",
    "http": "opens network connections",
    "requests": "opens network connections",
    "httpx": "opens network connections",
    "ftplib": "opens network connections",
    "smtplib": "opens network connections",
    "asyncio": "runs background tasks",
    "signal": "installs signal handlers",
    "gc": "inspects the interpreter's objects",
    "inspect": "inspects the harness",
    "ctypes": "reaches raw memory and C functions (ctypes)",
    "cffi": "reaches raw memory and C functions (cffi)",
    "mmap": "maps files or memory",
    "pathlib": "accesses files (pathlib)",
    "shutil": "accesses files (shutil)",
    "glob": "accesses files (glob)",
    "fcntl": "manipulates file descriptors",
    "pickle": "loads or stores pickled objects",
    "marshal": "loads or stores code objects",
    "importlib": "imports modules dynamically",
    "builtins": "reaches the interpreter's builtins",
    "kernelsearch": "imports the harness",
}

# the modules above whose use is background work (code THREAD); the rest are FORBIDDEN_ACCESS
_MODULE_CODES = {m: Code.THREAD for m in ("threading", "_thread", "concurrent", "asyncio")}

# Dotted names (and everything below them) a candidate may not touch, even through an alias.
FORBIDDEN_NAMES = {
    # tempfile's directories are allowed (gettempdir, mkdtemp: a build_directory for load_inline,
    # inside the worker's own temporary directory); its files are file access
    "tempfile.mkstemp": "accesses files (tempfile)",
    "tempfile.mktemp": "accesses files (tempfile)",
    "tempfile.NamedTemporaryFile": "accesses files (tempfile)",
    "tempfile.TemporaryFile": "accesses files (tempfile)",
    "tempfile.SpooledTemporaryFile": "accesses files (tempfile)",
    "torch.jit.fork": "starts background work (torch.jit.fork runs after forward returns)",
    "torch.jit._fork": "starts background work (torch.jit.fork runs after forward returns)",
    "torch.jit.wait": "starts background work (torch.jit futures)",
    "torch.futures": "starts background work (torch futures)",
    "torch.multiprocessing": "starts processes",
    "torch.distributed": "starts processes or talks to other ranks",
    "sys._getframe": "inspects the harness's stack frames (sys._getframe)",
    "sys._current_frames": "inspects the harness's stack frames",
    "sys.settrace": "installs a tracer over the harness",
    "sys.setprofile": "installs a profiler hook over the harness",
    "sys.modules": "reaches the harness's modules (sys.modules)",
    "sys.meta_path": "hooks the import system",
    "sys.addaudithook": "hooks the interpreter",
    "torch.initial_seed": "reads the harness's random-number state (predicting inputs)",
    "torch.seed": "reads the harness's random-number state (predicting inputs)",
    "torch.get_rng_state": "reads the harness's random-number state (predicting inputs)",
    "torch.random.get_rng_state": "reads the harness's random-number state (predicting inputs)",
    "torch.random.initial_seed": "reads the harness's random-number state (predicting inputs)",
    "torch.random.seed": "reads the harness's random-number state (predicting inputs)",
    "torch.random.default_generator": "reads the harness's random-number state (predicting inputs)",
    "torch.default_generator": "reads the harness's random-number state (predicting inputs)",
    "torch.cuda.get_rng_state": "reads the harness's random-number state (predicting inputs)",
    "torch.cuda.get_rng_state_all": "reads the harness's random-number state (predicting inputs)",
    "torch.cuda.initial_seed": "reads the harness's random-number state (predicting inputs)",
    "torch.cuda.default_generators": "reads the harness's random-number state (predicting inputs)",
    "numpy.random.get_state": "reads the harness's random-number state (predicting inputs)",
    "torch.overrides.TorchFunctionMode": "installs a torch function mode over the harness",
    "torch.utils._python_dispatch": "installs a torch dispatch mode over the harness",
    "torch._C._push_on_torch_function_stack": "installs a torch function mode over the harness",
}

_FILE_CALLS = {
    "open", "io.open", "io.FileIO", "codecs.open", "os.open", "os.fdopen", "os.read", "os.write", "os.pread",
    "os.pwrite", "os.sendfile", "os.listdir", "os.scandir", "os.walk", "os.remove", "os.unlink",
    "os.rename", "os.replace", "os.mkdir", "os.makedirs", "os.rmdir", "os.chdir", "os.symlink",
    "os.link", "os.truncate", "os.dup", "os.dup2", "os.pipe", "os.mkfifo", "os.memfd_create",
    "os.readlink", "torch.save", "torch.load", "torch.from_file", "numpy.save", "numpy.savez",
    "numpy.load", "numpy.fromfile", "numpy.memmap", "numpy.savetxt", "numpy.loadtxt",
    "numpy.genfromtxt",
}
_BUILD_DIR_CALLS = {"os.makedirs", "os.mkdir"}  # allowed for a load_inline build_directory
_FILE_METHODS = {"tofile", "from_file", "read_text", "write_text", "read_bytes", "write_bytes"}
_PROCESS_CALLS = {
    "os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.kill",
    "os.killpg", "os.register_at_fork", "os.setsid", "os.setpgid", "os.wait", "os.waitpid",
}
_PROCESS_PREFIXES = ("os.exec", "os.spawn")
_CODE_CALLS = {"exec": "runs code built at run time (exec)", "eval": "runs code built at run time (eval)",
               "compile": "compiles code at run time (compile)", "vars": "introspects objects (vars)",
               "globals": "introspects the module's globals", "breakpoint": "enters a debugger"}
_INTROSPECTION_ATTRS = {
    "__dict__", "__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__",
    "__getattribute__", "__setattr__", "__delattr__", "__bases__", "__mro__", "__base__",
    "f_back", "f_globals", "f_locals", "f_builtins", "gi_frame", "tb_frame", "cr_frame",
}
_SUBCLASS_CALLS = {"_make_subclass", "_make_wrapper_subclass", "as_subclass"}
_MODE_NAMES = {"TorchFunctionMode", "TorchDispatchMode", "enable_torch_function_mode", "_push_mode",
               "__torch_function__", "__torch_dispatch__"}
_STREAM_NAMES = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.ExternalStream",
                 "torch.cuda.set_stream", "torch.Stream", "torch.cuda.streams.Stream", "torch.cuda.streams.ExternalStream"}
_STREAM_SYNC_ATTRS = {"wait_stream", "wait_event", "synchronize"}
# Settings a kernel may legitimately change (precision modes, compiler knobs): not patching.
_CONFIG_PREFIXES = ("torch.backends.", "torch._dynamo.config.", "torch._inductor.config.")
# Environment variables a candidate may set for its own build (os.environ[...] = ...): read by
# torch's extension builder in the candidate's process only, e.g. "9.0a" for wgmma kernels.
_BUILD_SETTINGS = {"TORCH_CUDA_ARCH_LIST"}
# Modules known by name even where the candidate reached them without an import statement.
_WELL_KNOWN = {"torch", "time", "os", "sys", "builtins", "numpy", "random", "math", "triton", "json"}

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
    code: Code = Code.NONE  # the rejecting rule's verdict code (records/codes.py)
    syntax_error: str = ""
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # CUDA/Triton kernels the source defines

    def rejected(self, found: Finding) -> ScreenResult:
        """This result, rejected by the rule that found ``found`` (its reason and code)."""
        self.reject, self.code = str(found), found.code
        return self


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
        return res.rejected(Finding(Code.NO_MODEL_NEW, "no class ModelNew defined"))
    for base in model_new.bases:
        if isinstance(base, ast.Name) and base.id == "Model":
            return res.rejected(Finding(Code.TORCH_FALLBACK, "ModelNew subclasses the reference Model"))
    names = _Names(tree)
    if found := _reach_rules(tree, names) or _patch_rules(tree, names) or _tensor_rules(tree, names):
        return res.rejected(found)
    forward = next(
        (f for f in model_new.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None
    )
    if forward is None:
        return res.rejected(Finding(Code.NO_MODEL_NEW, "ModelNew has no forward method"))
    sources = native_sources(tree)
    res.kernels = defined_kernels(sources, source)
    if found := _stream_rule(tree, names) or native_reject(sources) or _shape_dispatch(model_new):
        return res.rejected(found)
    if _has_torch_fallback_handler(forward):
        res.flags.append(EXCEPTION_FALLBACK)
        res.notes.append("forward catches an exception and calls PyTorch compute in the handler")
        return res.rejected(Finding(Code.EXCEPTION_FALLBACK,
                                    "forward falls back to PyTorch compute in an exception handler"))
    uses = _torch_compute_on_forward(model_new, forward)
    if uses:
        res.flags.append(TORCH_FALLBACK)
        res.notes.append("forward path calls PyTorch compute: " + ", ".join(sorted(uses)[:8]))
    native = native_compute(sources)
    if native:
        if TORCH_FALLBACK not in res.flags:
            res.flags.append(TORCH_FALLBACK)
        res.notes.append("compiled code calls library compute: " + ", ".join(native[:8]))
    return res


class _Names:
    """What the names in a file stand for: import aliases resolved to dotted module paths, and
    local aliases of modules (``clock = time``), so ``clock.perf_counter = f`` reads as time's."""

    def __init__(self, tree: ast.Module):
        self.alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.alias[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"
        for _ in range(3):  # aliases of aliases
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    if isinstance(node.value, (ast.Name, ast.Attribute)):
                        full = self.canonical(node.value)
                        if full and full.split(".")[0] in self._roots():
                            self.alias.setdefault(node.targets[0].id, full)

    def _roots(self) -> set[str]:
        return {v.split(".")[0] for v in self.alias.values()} | _WELL_KNOWN

    def canonical(self, node: ast.expr) -> str:
        """``np.save`` -> ``numpy.save`` (as imported); "" for anything not rooted at a module."""
        dotted = _dotted(node)
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        if head in self.alias:
            full = self.alias[head]
        elif head in _WELL_KNOWN:
            full = head
        else:
            return ""
        return f"{full}.{rest}" if rest else full

    def is_module_root(self, node: ast.expr) -> bool:
        return bool(self.canonical(node)) and _root(node) != "self"


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        return ""
    return ".".join(reversed(parts))


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _under(name: str, table: dict[str, str] | set[str]) -> str:
    for key in table:
        if name == key or name.startswith(key + "."):
            return key
    return ""


def _name_code(key: str) -> Code:
    """The code of a FORBIDDEN_NAMES entry: background work, a torch mode, or forbidden access."""
    if key.startswith(("torch.jit", "torch.futures")):
        return Code.THREAD
    if key.startswith(("torch.overrides", "torch.utils._python_dispatch", "torch._C._push_on_torch_function")):
        return Code.TENSOR_SUBCLASS
    return Code.FORBIDDEN_ACCESS


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _reach_rules(tree: ast.Module, names: _Names) -> Finding | str:
    """Imports, calls and names that reach outside the candidate's own computation."""
    prose = _docstrings(tree)
    build_dirs = _build_directories(tree)
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names if node.module]
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("__import__", "importlib.import_module"):
            return Finding(Code.FORBIDDEN_ACCESS, "dynamic import")
        for m in mods:
            top = m.split(".")[0]
            if top in FORBIDDEN_MODULES:
                return Finding(_MODULE_CODES.get(top, Code.FORBIDDEN_ACCESS), f"imports {m}: {FORBIDDEN_MODULES[top]}")
            if top.startswith("ks_"):
                return Finding(Code.FORBIDDEN_ACCESS,
                               f"imports {m}: the harness's own copy of the problem (reference outputs and inputs)")
            if key := _under(m, FORBIDDEN_NAMES):
                return Finding(_name_code(key), f"imports {m}: {FORBIDDEN_NAMES[key]}")
        if isinstance(node, (ast.Attribute, ast.Name)):
            if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION_ATTRS:
                return Finding(Code.FORBIDDEN_ACCESS, f"uses .{node.attr}: introspects the interpreter or the harness")
            if isinstance(node, ast.Name) and node.id in ("__builtins__",):
                return Finding(Code.FORBIDDEN_ACCESS, "uses __builtins__: reaches the interpreter's builtins")
            full = names.canonical(node)
            if full and (key := _under(full, FORBIDDEN_NAMES)):
                return Finding(_name_code(key), f"uses {full}: {FORBIDDEN_NAMES[key]}")
        if isinstance(node, ast.Call):
            full = names.canonical(node.func) or _dotted(node.func)
            if full == "getattr" and len(node.args) >= 2 and names.is_module_root(node.args[0]):
                attr = node.args[1]
                if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    return Finding(Code.FORBIDDEN_ACCESS, f"calls getattr() on {names.canonical(node.args[0])} with a "
                                   "computed name: hides what it uses")
                full = f"{names.canonical(node.args[0])}.{attr.value}"
                if key := _under(full, FORBIDDEN_NAMES):
                    return Finding(_name_code(key), f"uses {full}: {FORBIDDEN_NAMES[key]}")
            if isinstance(node.func, ast.Name) and node.func.id in _CODE_CALLS and node.func.id not in names.alias:
                return Finding(Code.FORBIDDEN_ACCESS, f"calls {node.func.id}(): {_CODE_CALLS[node.func.id]}")
            if full in _FILE_CALLS and not (full in _BUILD_DIR_CALLS and _makes_build_dir(node, build_dirs)):
                return Finding(Code.FORBIDDEN_ACCESS, f"calls {full}(): accesses files")
            if isinstance(node.func, ast.Attribute) and node.func.attr in _FILE_METHODS:
                return Finding(Code.FORBIDDEN_ACCESS, f"calls .{node.func.attr}(): accesses files")
            if full in _PROCESS_CALLS or full.startswith(_PROCESS_PREFIXES):
                return Finding(Code.FORBIDDEN_ACCESS, f"calls {full}(): runs other programs or processes")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            if text.startswith("/proc") or "/proc/" in text or text.startswith("/dev/mem"):
                return Finding(Code.FORBIDDEN_ACCESS,
                               f"refers to {text[:40]!r}: reads process memory or state from /proc")
    return ""


def _build_directories(tree: ast.Module) -> set[str]:
    """The ``build_directory=`` arguments of the source's extension builds (``load_inline``,
    ``load``), as AST dumps: a directory made for one of them is part of the build."""
    return {ast.dump(kw.value) for node in extension_builds(tree) for kw in node.keywords
            if kw.arg == "build_directory"}


def _makes_build_dir(call: ast.Call, build_dirs: set[str]) -> bool:
    """``os.makedirs(d, ...)``/``os.mkdir(d)`` for a ``d`` passed as a build directory. Where it
    may be written is the sandbox's business: the worker's own directory (its working and
    temporary directory, TORCH_EXTENSIONS_DIR) and nothing else."""
    return bool(call.args) and ast.dump(call.args[0]) in build_dirs


def _patch_rules(tree: ast.Module, names: _Names) -> Finding | str:
    """Assignments into modules (timers, torch, the harness) and setattr on them."""

    def target_reason(t: ast.expr) -> Finding | str:
        if isinstance(t, (ast.Tuple, ast.List)):
            return next((r for e in t.elts if (r := target_reason(e))), "")
        if isinstance(t, ast.Starred):
            return target_reason(t.value)
        if isinstance(t, ast.Attribute) and t.attr == "__class__":
            return Finding(Code.TENSOR_SUBCLASS, "assigns to __class__: turns a tensor into another type")
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            base = t if isinstance(t, ast.Attribute) else t.value
            if names.is_module_root(base):
                full = names.canonical(base)
                build_setting = (full == "os.environ" and isinstance(t, ast.Subscript)
                                 and isinstance(t.slice, ast.Constant) and t.slice.value in _BUILD_SETTINGS)
                if not full.startswith(_CONFIG_PREFIXES) and not build_setting:
                    code = Code.FORBIDDEN_ACCESS if full == "os.environ" else Code.PATCHING  # environment writes reach out
                    return Finding(code, f"assigns to {full}: patches a module (timer, torch or harness) at run time")
        return ""

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for t in targets:
            if why := target_reason(t):
                return why
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and names.is_module_root(node.args[0]):
                return Finding(Code.PATCHING, f"calls {node.func.id}() on {names.canonical(node.args[0])}: patches a "
                               "module at run time")
    return ""


def _tensor_rules(tree: ast.Module, names: _Names) -> Finding | str:
    """Tensor subclasses and torch modes: a lazy tensor can defer work into the checker."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                full = names.canonical(base) or _dotted(base)
                if full.rpartition(".")[2] in ("Tensor", "Parameter", "TensorBase"):
                    return Finding(Code.TENSOR_SUBCLASS,
                                   f"class {node.name} subclasses {full}: a Tensor subclass can defer or fake work")
        if isinstance(node, ast.FunctionDef) and node.name in _MODE_NAMES:
            return Finding(Code.TENSOR_SUBCLASS, f"defines {node.name}: intercepts torch calls")
        if isinstance(node, ast.Attribute) and (node.attr in _SUBCLASS_CALLS or node.attr in _MODE_NAMES):
            return Finding(Code.TENSOR_SUBCLASS, f"uses {node.attr}: builds Tensor subclasses or torch modes")
        if isinstance(node, ast.Name) and node.id in _MODE_NAMES:
            return Finding(Code.TENSOR_SUBCLASS, f"uses {node.id}: intercepts torch calls")
    return ""


def _stream_rule(tree: ast.Module, names: _Names) -> Finding | str:
    """A side stream is fine only if the current stream is made to wait for it."""
    used = ""
    synced = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            full = names.canonical(node)
            if full in _STREAM_NAMES:
                used = used or full
            if isinstance(node, ast.Attribute) and node.attr in _STREAM_SYNC_ATTRS:
                synced = True
    if used and not synced:
        return Finding(Code.STREAM_RACE, f"uses {used} without wait_stream/wait_event/synchronize: work on a side "
                       "stream escapes the timer")
    return ""


def _shape_expr(node: ast.expr, derived: set[str]) -> bool:
    """x.shape, x.shape[i], x.size(), x.size(i), x.numel(), tuple(x.shape), or a name bound to one."""
    if isinstance(node, ast.Name):
        return node.id in derived
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Subscript):
        return _shape_expr(node.value, derived)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "numel"):
            return True
        if isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list") and node.args:
            return _shape_expr(node.args[0], derived)
    return False


def _big_literal(node: ast.expr) -> int | None:
    """An int literal >= 2 (0 and 1 are emptiness and broadcasting checks), or a tuple holding one."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((v for e in node.elts if (v := _big_literal(e)) is not None), None)
    return None


def _shape_dispatch(cls: ast.ClassDef) -> Finding | str:
    """Equality tests of a shape against literals: a path taken only at the benchmarked size."""
    for fn in (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name != "__init__"):
        derived: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _shape_expr(node.value, derived):
                for t in node.targets:
                    elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                    derived |= {e.id for e in elts if isinstance(e, ast.Name)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            for op, a, b in zip(node.ops, sides, sides[1:], strict=False):
                if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)):
                    continue
                for s, lit in ((a, b), (b, a)):
                    value = _big_literal(lit)
                    if value is not None and _shape_expr(s, derived):
                        return Finding(Code.SHAPE_DISPATCH, f"hard-coded shape dispatch in {fn.name}: compares "
                                       f"{ast.unparse(s)} with {value} (a path taken only at the benchmarked size)")
    return ""


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
