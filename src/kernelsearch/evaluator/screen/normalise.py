"""A candidate's normalised identity: two sources that differ only in formatting get one hash.

Language models often return the same program twice with other comments, blank lines or
indentation. Evaluating both costs a build (40-50 s for a CUDA extension) and a GPU slot for
no new information, so the executors evaluate one and give the other the same result.

What counts as "only formatting" must never change what runs, or a candidate could borrow
another's verdict. So:

- Python: the program is compared as its abstract syntax tree (``ast.dump`` without
  positions): comments, blank lines, line breaks inside brackets, parentheses and quote styles
  do not count; every name, constant and docstring does (a docstring can be read at run time).
- C++/CUDA text: a string is normalised only where it is nothing but compiler input, that is
  a literal passed to ``load_inline(cpp_sources=..., cuda_sources=...)`` directly, or through
  module-level names assigned once and read nowhere else. There ``//`` and ``/* */`` comments
  are dropped and runs of blanks collapse to one (never to none, so tokens stay apart); string
  and character literals, raw strings and ``#include`` lines are kept verbatim; blank lines go
  unless the text uses ``__LINE__`` or ``#line``. Anything the small lexer is unsure of (an
  unterminated literal or comment, a ``//`` comment continued by a backslash) leaves that
  string verbatim.
- A source that does not parse, or that reaches its own namespace dynamically (``globals()``,
  ``vars()``, ``locals()``, ``__dict__``), is identified by its exact text.
"""

from __future__ import annotations

import ast
import hashlib
import re

_SOURCE_KWARGS = ("cpp_sources", "cuda_sources")
_DYNAMIC = re.compile(r"\b(globals|vars|locals)\s*\(|__dict__|\b(exec|eval|compile)\s*\(")
_LOADERS = ("load_inline",)


def normalised_hash(source: str, backend: str = "") -> str:
    """16 hex digits; equal for sources that differ only as described in the module docstring."""
    return hashlib.sha256(f"{backend}\0{normalised_form(source)}".encode()).hexdigest()[:16]


def normalised_form(source: str) -> str:
    """The text the hash is taken of (exposed for tests and for explaining a match)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "raw\0" + source
    if not _DYNAMIC.search(source):
        for const in _compiler_only_strings(tree):
            text = normalise_cpp(const.value)
            if text is not None:
                const.value = text
    return "ast\0" + ast.dump(tree, annotate_fields=False, include_attributes=False)


# -- which string constants are compiler input only --------------------------------------------
def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _parts(node: ast.expr) -> tuple[list[ast.Constant], list[ast.Name]]:
    """String constants and names an expression is built from (lists, tuples, + chains);
    anything else makes the whole expression opaque (returns nothing usable)."""
    consts: list[ast.Constant] = []
    names: list[ast.Name] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            consts.append(n)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            names.append(n)
        elif isinstance(n, (ast.List, ast.Tuple)):
            stack.extend(n.elts)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            stack.extend((n.left, n.right))
        else:
            return [], [ast.Name(id="\0opaque", ctx=ast.Load())]
    return consts, names


def _loader_is_torchs(tree: ast.Module) -> bool:
    """``load_inline`` must be torch's: a function of that name defined or rebound in the
    module could read the comments it is given."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in _LOADERS:
            return False
        if isinstance(n, ast.Name) and n.id in _LOADERS and isinstance(n.ctx, (ast.Store, ast.Del)):
            return False
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                bound = a.asname or a.name
                if bound in _LOADERS and not (isinstance(n, ast.ImportFrom) and
                                              n.module == "torch.utils.cpp_extension" and a.asname is None):
                    return False
    return True


def _compiler_only_strings(tree: ast.Module) -> list[ast.Constant]:
    if not _loader_is_torchs(tree):
        return []
    # how often each name is bound anywhere in the module
    stores: dict[str, int] = {}
    for n in ast.walk(tree):
        bound: list[str] = []
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound = [n.id]
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound = list(n.names) * 2  # written from a function: never a constant
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [n.name]
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound = [(a.asname or a.name).split(".")[0] for a in n.names]
        elif isinstance(n, ast.arg):
            bound = [n.arg]
        for name in bound:
            stores[name] = stores.get(name, 0) + 1
    assigned: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node

    # the expressions handed to load_inline as sources
    roots: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _callee(n.func) in _LOADERS:
            roots += [kw.value for kw in n.keywords if kw.arg in _SOURCE_KWARGS]
            roots += n.args[1:3]  # load_inline(name, cpp_sources, cuda_sources, ...)

    # literals in those expressions, and in module-level names (bound once) they are built from
    consts: list[ast.Constant] = []
    source_names: set[str] = set()
    allowed_loads: set[int] = set()  # id() of Name nodes read in a source context
    todo = list(roots)
    while todo:
        c, names = _parts(todo.pop())
        consts += c
        for nm in names:
            allowed_loads.add(id(nm))
            if nm.id in source_names or nm.id not in assigned or stores.get(nm.id, 0) != 1:
                continue
            source_names.add(nm.id)
            todo.append(assigned[nm.id].value)

    # such a name may be read only in source contexts, and named in no string
    bad = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
           and n.id in source_names and id(n) not in allowed_loads}
    bad |= {s for s in source_names for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and s in n.value}
    excluded: set[int] = set()
    for name in bad:
        excluded |= {id(c) for c in _reachable_consts(assigned[name].value, assigned, source_names)}
    return [c for c in consts if id(c) not in excluded]


def _reachable_consts(expr: ast.expr, assigned: dict[str, ast.Assign], names: set[str]) -> list[ast.Constant]:
    out: list[ast.Constant] = []
    todo, seen = [expr], set()
    while todo:
        c, ns = _parts(todo.pop())
        out += c
        for n in ns:
            if n.id in names and n.id not in seen:
                seen.add(n.id)
                todo.append(assigned[n.id].value)
    return out


# -- the C++/CUDA text --------------------------------------------------------------------------
_IDENT = re.compile(r"[A-Za-z0-9_]")
_RAW_PREFIX = ("", "u8", "u", "U", "L")


def normalise_cpp(text: str) -> str | None:
    """Comments out, blanks collapsed, literals verbatim; None where unsure (use the text as is)."""
    keep_lines = "__LINE__" in text or re.search(r"^\s*#\s*line\b", text, re.M) is not None
    out: list[str] = []  # the normalised text, built line by line
    line: list[str] = []
    i, n = 0, len(text)
    pending_space = False

    def emit(s: str) -> None:
        nonlocal pending_space
        # a blank at the start of a continued line stays: the splice would join the tokens
        if pending_space and (line or (out and out[-1].endswith("\\"))):
            line.append(" ")
        pending_space = False
        line.append(s)

    def end_line() -> None:
        nonlocal pending_space
        pending_space = False
        s = "".join(line).rstrip(" ")
        line.clear()
        # an empty line after a backslash continuation ends a macro: it must stay
        if s or keep_lines or (out and out[-1].endswith("\\")):
            out.append(s)

    while i < n:
        ch = text[i]
        if ch == "\n":
            end_line()
            i += 1
        elif ch in " \t\f\v\r":
            pending_space = True
            i += 1
        elif ch == "#" and not "".join(line).strip() and re.match(r"#\s*include\b", text[i:]):
            j = text.find("\n", i)
            j = n if j < 0 else j
            emit(text[i:j].rstrip())  # an include line verbatim (header names may hold //)
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            if text[i:j].rstrip().endswith("\\"):
                return None  # a comment continued onto the next line: leave it to the compiler
            pending_space = True
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return None
            pending_space = True  # a comment is one space to the compiler
            i = j + 2
        elif ch == '"':
            raw = _raw_string_at(text, i)
            if raw is not None:
                j = raw
            else:
                j = _quoted_end(text, i, '"')
            if j is None:
                return None
            emit(text[i:j])
            i = j
        elif ch == "'":
            prev = "".join(line)
            run = re.search(r"[A-Za-z0-9_.]*$", prev).group(0) if not pending_space else ""
            if run[:1].isdigit():  # a digit separator (1'000'000)
                emit("'")
                i += 1
                continue
            j = _quoted_end(text, i, "'")
            if j is None:
                return None
            emit(text[i:j])
            i = j
        else:
            j = i + 1
            while j < n and text[j] not in " \t\f\v\r\n\"'/#":
                j += 1
            if j == i + 1 and text[i] in "/#":
                emit(text[i])
            else:
                emit(text[i:j])
            i = j
    end_line()
    return "\n".join(out)


def _quoted_end(text: str, i: int, quote: str) -> int | None:
    """Index just past the literal starting at text[i] (a quote), or None if unterminated."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            return None
        j += 1
    return None


def _raw_string_at(text: str, i: int) -> int | None:
    """If text[i] opens a raw string (R"delim( ... )delim"), the index just past it."""
    k = i - 1
    if k < 0 or text[k] != "R":
        return None
    start = k
    while start > 0 and _IDENT.match(text[start - 1]):
        start -= 1
    if text[start:k] not in _RAW_PREFIX:
        return None
    m = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
    if m is None:
        return None
    close = ")" + m.group(1) + '"'
    j = text.find(close, i + m.end())
    return None if j < 0 else j + len(close)
