"""Load KernelBench-format problem files and resolve suite names.

A problem file is user input: a missing ``Model`` or ``get_inputs`` is reported by name, as a
``ProblemError``, not a traceback from deep inside an evaluation. In a directory (or the suite)
one bad file does not hide the rest: ``load_problems`` returns the problems that loaded and a
``LoadFailure`` (file, error, hint such as the module to install) for each file that did not.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import json
import sys
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelsearch.problems.own_precision import OwnPrecision, infer_precision

SUITE_DIR = Path(__file__).parent / "suite"
LEVELS = (1, 2, 3)  # `suite` is these; `suite:wall` (SUITE_DIR / "wall") is asked for by name
WALL = "wall"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
# Precision modes as KernelBench v0.2 has them: floating parameters, buffers and inputs are cast
# to the dtype, and a problem that sets no tolerance is compared at that precision's default
# (torchbench's: 1e-4 for fp32, 1e-2 for fp16 and bf16). KernelBench v0.1 compared at 1e-2.
PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
DEFAULT_PRECISION = "fp32"
PRECISION_TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
ROOFLINE_DTYPES = ("float32", "tf32", "float16", "bfloat16")  # the rates ceilings.py measures



def torch_dtype(precision: str):
    """The torch dtype of a precision ("fp32" -> torch.float32)."""
    import torch

    return getattr(torch, PRECISIONS[precision])


def cast_floating(x: Any, precision: str | None) -> Any:
    """``x`` in ``precision``'s dtype when it is a floating tensor; anything else (integer and bool
    tensors, numbers) as it is. KernelBench casts integer tensors too, which turns a class-index
    target into floats: a named difference. The one casting rule of the evaluator and ``describe``."""
    import torch

    if precision is None or not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return x
    return x.to(torch_dtype(precision))

class ProblemError(ValueError):
    """A problem file or name that cannot be used, with a message saying why.

    ``path``, ``detail`` (the message without the path) and ``hint`` (what to do about it,
    such as the module to install) are set where the error is about one file."""

    def __init__(self, message: str, *, path: Path | None = None, detail: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail or message
        self.hint = hint


def _file_error(path: Path, detail: str, hint: str = "") -> ProblemError:
    """A ProblemError about one file: "<path>: <detail> (<hint>)"."""
    return ProblemError(f"{path}: {detail}" + (f" ({hint})" if hint else ""), path=path, detail=detail, hint=hint)


class ProblemsFailed(Exception):
    """Every problem file of a directory failed to load (each one is in ``failures``)."""

    def __init__(self, spec: str, failures: list[LoadFailure]) -> None:
        super().__init__(f"{spec}: none of its {len(failures)} problem file(s) could be loaded")
        self.failures = failures


@dataclass(frozen=True)
class LoadFailure:
    """A file of a directory that could not be loaded as a problem."""

    path: Path
    error: str  # one line: what went wrong
    hint: str = ""  # what to do about it ("missing module 'einops': pip install einops")

    @property
    def name(self) -> str:
        return self.path.stem

    def line(self) -> str:
        return f"{self.path}: {self.error}" + (f" (hint: {self.hint})" if self.hint else "")

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "path": str(self.path), "error": self.error, "hint": self.hint}


# import name -> pip package, where the two differ
_PIP_NAMES = {"cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn", "skimage": "scikit-image",
              "yaml": "pyyaml", "bs4": "beautifulsoup4", "attr": "attrs", "Crypto": "pycryptodome"}


# modules KernelBench's problems import beyond torch: the extra that installs them all
_EXTRAS = {"einops": "kernelbench", "transformers": "kernelbench"}


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def import_hint(error: BaseException) -> str:
    """What to do about an exception raised while importing a problem file."""
    if isinstance(error, ModuleNotFoundError):
        if not error.name:
            return "a module the file imports is not installed"
        top = error.name.split(".")[0]
        hint = f"missing module {top!r}: pip install {_PIP_NAMES.get(top, top)}"
        extra = _EXTRAS.get(top)
        return hint + (f", or every KernelBench dependency: pip install 'kernelsearch[{extra}]'" if extra else "")
    if isinstance(error, ImportError):
        return (f"{error.name!r} is installed but lacks what the file imports: check its version"
                if error.name else "")
    if isinstance(error, SyntaxError):
        where = f"line {error.lineno}" if error.lineno else "the file"
        text = (error.text or "").strip()
        return f"syntax error at {where}" + (f": {_one_line(text, 120)}" if text else "")
    if isinstance(error, SystemExit):
        return "the file exits when imported"
    if isinstance(error, OSError) and "huggingface" in str(error).lower():
        return ("it downloads a model from the Hugging Face Hub when imported: give it network access, or fill "
                "the Hugging Face cache beforehand (HF_HOME) and set HF_HUB_OFFLINE=1")
    return ""


@dataclass(frozen=True)
class Problem:
    """A reference problem: its file and the facts the evaluator needs without importing it."""

    name: str
    path: Path
    source: str
    level: int | None = None
    cpu_sizes: dict[str, Any] = field(default_factory=dict)
    # the precision it is evaluated at (``at``): its own (module-level PRECISION, else fp32)
    # unless the user asked for another
    precision: str = DEFAULT_PRECISION
    own_precision: str = DEFAULT_PRECISION
    # where own_precision came from: "declared" (PRECISION), "inferred" (the dtype all its floating
    # tensors share, problems/own_precision.py) or "default" (fp32); precision_note says why a
    # default is one where it is not plain absence of floating tensors (a mixture of dtypes)
    precision_source: str = "default"
    precision_note: str = ""
    # module-level ATOL / RTOL: calibrated for its own precision, so they apply there only
    declared_atol: float | None = None
    declared_rtol: float | None = None
    # the library kernel eager PyTorch runs for it (module-level LIBRARY, e.g. "cuBLAS (torch.matmul)"):
    # reports call the eager baseline by this name, and "% of library" is eager_ms / kernel_ms
    library: str = ""
    # the matmul rate its roofline floor is computed at (module-level ROOFLINE_DTYPE, e.g. "tf32"
    # for an fp32 problem whose tolerance admits TF32); "" for the dtype of its first float input
    roofline_dtype: str = ""

    @property
    def group(self) -> str:
        """"level1".."level3", "wall" for a bundled problem; "" for any other file."""
        parent = self.path.parent
        return parent.name if parent.parent == SUITE_DIR.resolve() else ""

    @property
    def id(self) -> str:
        """Content hash: two runs of the same problem file share baselines and archive rows."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def at(self, precision: str | None) -> Problem:
        """This problem evaluated at ``precision`` (None: as it is)."""
        if precision is None:
            return self
        if precision not in PRECISIONS:
            raise ProblemError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
        return self if precision == self.precision else replace(self, precision=precision)

    @property
    def atol(self) -> float:
        return self._tolerance(self.declared_atol)

    @property
    def rtol(self) -> float:
        return self._tolerance(self.declared_rtol)

    def _tolerance(self, declared: float | None) -> float:
        """The problem's own where it set one and runs at its own precision, else the precision's."""
        if declared is not None and self.precision == self.own_precision:
            return declared
        return PRECISION_TOL[self.precision]


def declared_string(source: str, name: str) -> str:
    """A module-level ``NAME = "literal"`` of a problem's source, "" where there is none: read
    without importing, so `show` can name a run's library kernel from the stored source alone."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    value = ""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name):
            value = node.value.value if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) else ""
    return value


def load_module(path: Path, device: str | None = None, name: str | None = None) -> types.ModuleType:
    """Import a problem file as a fresh module; apply CPU_SIZES when running on the CPU."""
    path = Path(path)
    mod_name = name or f"ks_problem_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise _file_error(path, "cannot be imported as a Python file", "problem files end in .py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # the file's own error, reported with its location
        sys.modules.pop(mod_name, None)
        raise _file_error(path, f"failed to import: {type(e).__name__}: {_one_line(str(e))}", import_hint(e)) from e
    if device == "cpu":
        for key, value in (getattr(module, "CPU_SIZES", None) or {}).items():
            setattr(module, key, value)
    return module


def in_eval_mode(module) -> bool:
    """A problem runs its modules as constructed (training mode, PyTorch's default and what
    KernelBench runs: batch norms use the batch's statistics) unless it sets ``EVAL_MODE =
    True``; then Model and ModelNew are switched to ``.eval()`` (running statistics, no dropout)."""
    return getattr(module, "EVAL_MODE", False) is True


def set_mode(model, module):
    return model.eval() if in_eval_mode(module) else model


def load_problem(path: str | Path) -> Problem:
    """Load and validate one problem file (or a bundled problem by name)."""
    p = _find(path)
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise _file_error(p, f"cannot read: {e}") from e
    module = load_module(p)
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise _file_error(p, f"not a KernelBench-format problem: missing {', '.join(missing)}",
                          "a problem defines class Model(nn.Module), get_inputs() and get_init_inputs()")
    import torch.nn as nn

    if not (inspect.isclass(module.Model) and issubclass(module.Model, nn.Module)):
        raise _file_error(p, "Model must be a subclass of torch.nn.Module")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn)):
            raise _file_error(p, f"{fn} must be a function")
    cpu_sizes = getattr(module, "CPU_SIZES", None) or {}
    if not isinstance(cpu_sizes, dict):
        raise _file_error(p, "CPU_SIZES must be a dict of module globals to replace")
    unknown = [k for k in cpu_sizes if not hasattr(module, k)]
    if unknown:
        raise _file_error(p, f"CPU_SIZES names globals the file does not define: {unknown}")
    try:
        json.dumps(cpu_sizes)
    except TypeError as e:
        raise _file_error(p, f"CPU_SIZES values must be plain numbers/lists: {e}") from e
    tolerances: dict[str, float | None] = {}
    for name in ("ATOL", "RTOL"):
        try:
            tolerances[name] = float(getattr(module, name)) if hasattr(module, name) else None
        except (TypeError, ValueError) as e:
            raise _file_error(p, f"{name} must be a number: {e}") from e
    text: dict[str, str] = {}
    for name in ("LIBRARY", "ROOFLINE_DTYPE", "PRECISION"):
        value = declared_string(source, name)
        if hasattr(module, name) and getattr(module, name) != value:
            raise _file_error(p, f"{name} must be a module-level string literal")
        text[name] = value.strip()
    if text["ROOFLINE_DTYPE"] not in ("", *ROOFLINE_DTYPES):
        raise _file_error(p, f"ROOFLINE_DTYPE must be one of {ROOFLINE_DTYPES}, not {text['ROOFLINE_DTYPE']!r}")
    if text["PRECISION"]:
        own = OwnPrecision(text["PRECISION"], "declared")
        if own.precision not in PRECISIONS:
            raise _file_error(p, f"PRECISION must be one of {tuple(PRECISIONS)}, not {own.precision!r}")
    else:
        own = infer_precision(module, PRECISIONS, DEFAULT_PRECISION)
    return Problem(
        name=p.stem,
        path=p.resolve(),
        source=source,
        level=level_of(p),
        cpu_sizes=cpu_sizes,
        precision=own.precision,
        own_precision=own.precision,
        precision_source=own.source,
        precision_note=own.note,
        declared_atol=tolerances["ATOL"],
        declared_rtol=tolerances["RTOL"],
        library=text["LIBRARY"],
        roofline_dtype=text["ROOFLINE_DTYPE"],
    )


def suite_files(level: int | str | None = None) -> list[Path]:
    """The bundled files of one group (1..3 or "wall"); None: levels 1-3, what `suite` means."""
    groups = [f"level{lv}" for lv in LEVELS] if level is None else [
        level if isinstance(level, str) else f"level{level}"]
    return sorted(f for g in groups for f in (SUITE_DIR / g).glob("*.py"))


def bundled_files() -> list[Path]:
    """Every bundled problem, wall included: what a bundled name is looked up among."""
    return suite_files() + suite_files(WALL)


def _problem_files(spec: str | Path) -> list[Path] | None:
    """The files a suite selector or a directory names; None for a single file or name."""
    s = str(spec)
    if s == "suite" or s.startswith("suite:"):
        level: int | str | None = None
        if ":" in s:
            tail = s.split(":", 1)[1]
            if tail == WALL:
                level = WALL
            elif tail.startswith("level") and tail[5:].isdigit() and int(tail[5:]) in LEVELS:
                level = int(tail[5:])
            else:
                raise ProblemError(f"unknown suite selector {s!r}; use suite, suite:level1, suite:level2, "
                                   "suite:level3 or suite:wall")
        files = suite_files(level)
        if not files:
            raise ProblemError(f"{s}: no bundled problems found")
        return files
    p = Path(s)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.py") if not f.name.startswith("_"))
        if not files:
            raise ProblemError(f"{p}: directory holds no problem files (*.py)")
        return files
    return None


def resolve_problems(spec: str | Path) -> list[Problem]:
    """A file, a directory of problem files, ``suite``, ``suite:level2``, ``suite:wall`` or a bundled name.
    Strict: the first file that fails to load raises its ProblemError (see ``load_problems``)."""
    files = _problem_files(spec)
    return [load_problem(f) for f in files] if files is not None else [load_problem(spec)]


def load_problems(spec: str | Path) -> tuple[list[Problem], list[LoadFailure]]:
    """Like ``resolve_problems``, but a directory or suite is more than its worst file: the
    problems that load, and a ``LoadFailure`` for each file that does not (in file order).
    A single file or bundled name that fails raises its ProblemError, as does a spec that
    names nothing; ``ProblemsFailed`` when no file of a directory loads."""
    files = _problem_files(spec)
    if files is None:
        return [load_problem(spec)], []
    problems: list[Problem] = []
    failures: list[LoadFailure] = []
    for f in files:
        try:
            problems.append(load_problem(f))
        except ProblemError as e:
            failures.append(LoadFailure(f, _one_line(e.detail), e.hint))
        except Exception as e:  # noqa: BLE001 - one odd file must not hide the rest
            failures.append(LoadFailure(f, f"{type(e).__name__}: {_one_line(str(e))}", import_hint(e)))
    if not problems:
        raise ProblemsFailed(str(spec), failures)
    return problems, failures


def _find(spec: str | Path) -> Path:
    p = Path(spec)
    if p.is_file():
        return p
    if p.exists():
        raise ProblemError(f"{p}: not a file")
    stem = p.name.removesuffix(".py")
    hits = [f for f in bundled_files() if f.stem == stem or f.stem.split("_", 1)[-1] == stem]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ProblemError(f"{spec!s}: ambiguous bundled problem name: {[h.stem for h in hits]}")
    raise ProblemError(f"{spec!s}: no such file or bundled problem (see `kernelsearch problems`)")


def level_of(p: Path) -> int | None:
    parent = p.parent.name
    return int(parent[5:]) if parent.startswith("level") and parent[5:].isdigit() else None
