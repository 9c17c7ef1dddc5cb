"""The package's layout: no import cycles, and each evaluator stage a documented sub-package.

The import graph is read from the source with ``ast`` (nothing is imported): ``import`` and
``from`` statements, and ``__import__``/``import_module`` calls with a literal name."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
EVALUATOR = SRC / "kernelsearch" / "evaluator"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "kernelsearch").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if all(p.isidentifier() for p in parts):
            found[".".join(parts)] = path
    return found


def _graph(top_level: bool) -> dict[str, set[str]]:
    """module -> modules it imports; ``top_level``: only imports that run when it is imported
    (not those in functions, nor under ``if TYPE_CHECKING``)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        return ".".join(parts) or None

    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        edges: set[str] = set()
        stack: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
        while stack:
            node = stack.pop()
            if top_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                stack.extend(node.orelse)
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                f = node.func
                fname = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                if fname in ("__import__", "import_module") and isinstance(node.args[0].value, str):
                    names = [node.args[0].value]
            edges |= {t for t in map(resolve, names) if t and t != mod}
            stack.extend(ast.iter_child_nodes(node))
        graph[mod] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, recursive)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_at_import_time():
    assert _cycles(_graph(top_level=True)) == []


def test_no_import_cycles_even_lazy_ones():
    """A lazy import (inside a function, or a role dispatched by name) still closes a circle:
    each side needs the other to exist."""
    assert _cycles(_graph(top_level=False)) == []


def test_no_cycles_between_sibling_packages():
    """Within each package, its sub-packages and modules import each other in one direction
    (``lint-imports`` checks the order itself: [tool.importlinter] in pyproject.toml)."""
    graph = _graph(top_level=False)
    for pkg in sorted({m.rsplit(".", 1)[0] for m in graph if "." in m}):
        depth = pkg.count(".") + 2

        def child(m: str, pkg: str = pkg, depth: int = depth) -> str | None:
            return ".".join(m.split(".")[:depth]) if m.startswith(pkg + ".") else None

        siblings: dict[str, set[str]] = {}
        for m, targets in graph.items():
            if (a := child(m)) is not None:
                siblings.setdefault(a, set())
                siblings[a] |= {b for t in targets if (b := child(t)) is not None and b != a}
        for targets in list(siblings.values()):
            for b in targets:
                siblings.setdefault(b, set())
        assert _cycles(siblings) == [], pkg


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_evaluator_stages_are_documented_sub_packages():
    for d in sorted(p for p in EVALUATOR.iterdir() if p.is_dir() and any(p.glob("*.py"))):
        init = d / "__init__.py"
        assert init.is_file(), f"{d.name}/ has no __init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{d.name}/__init__.py says nothing"


def test_worker_entry_point_is_a_runnable_package():
    assert importlib.util.find_spec("kernelsearch.evaluator.worker.__main__") is not None
