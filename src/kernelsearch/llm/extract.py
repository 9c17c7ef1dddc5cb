"""Pull the candidate code, or a list of ideas, out of a model's free-form answer.

Answers are messy: several code blocks (a sketch, then the final file), CRLF line ends, `~~~`
fences, tags like ```` ```python title="model_new.py" ````, a final block cut off by the token
limit. `extract_code` takes the last complete block that defines `class ModelNew` and says
plainly when nothing usable came back, so the search can tell "no code" from "truncated".
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["ok", "no_code", "truncated"]

PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3", "ipython"})
LENGTH_FINISH = frozenset({"length", "max_tokens", "max_output_tokens"})

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_LANG = re.compile(r"[{.\s]*([A-Za-z0-9_+#-]*)")
_JSON_START = re.compile(r"[\[{]")
_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)


@dataclass(frozen=True)
class CodeBlock:
    lang: str  # first word of the info string, lower case ("" for a bare fence)
    info: str
    body: str
    closed: bool
    line: int  # 1-based line of the opening fence

    @property
    def defines_model_new(self) -> bool:
        return bool(_MODEL_NEW.search(self.body))


@dataclass(frozen=True)
class ExtractResult:
    code: str | None
    outcome: Outcome
    note: str = ""


def _dedent(line: str, width: int) -> str:
    i = 0
    while i < width and i < len(line) and line[i] in " \t":
        i += 1
    return line[i:]


def find_code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block, in order; the last may be unclosed (closed=False)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        fence, info = m["fence"], m["info"].strip()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            body.append(_dedent(lines[j], len(m["indent"])))
            j += 1
        lang_match = _LANG.match(info)
        blocks.append(
            CodeBlock(
                lang=(lang_match.group(1) if lang_match else "").lower(),
                info=info,
                body="\n".join(body).strip("\n") + "\n",
                closed=j < len(lines),
                line=i + 1,
            )
        )
        i = j + 1
    return blocks


def _whole_text_is_python(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def extract_code(text: str, finish_reason: str | None = None) -> ExtractResult:
    """The last complete fenced block defining `class ModelNew`, or why there is none.

    `finish_reason` (from the response) turns "no code" into "truncated" when the model ran
    out of tokens before writing any.
    """
    blocks = find_code_blocks(text)
    complete = [b for b in blocks if b.closed and b.defines_model_new]
    python = [b for b in complete if b.lang in PYTHON_TAGS]
    chosen = python[-1] if python else (complete[-1] if complete else None)
    cut = blocks[-1] if blocks and not blocks[-1].closed else None
    cut_off_by_limit = finish_reason in LENGTH_FINISH

    if chosen is not None:
        notes = []
        if cut is not None:
            notes.append(
                f"the last code block (line {cut.line}) is cut off; "
                f"used the complete block at line {chosen.line}"
            )
        if len(complete) > 1:
            notes.append(f"{len(complete)} blocks define ModelNew; took the last")
        if chosen.lang not in PYTHON_TAGS:
            notes.append(f"block is tagged {chosen.lang!r}, not python")
        return ExtractResult(chosen.body, "ok", "; ".join(notes))
    if cut is not None:
        return ExtractResult(
            None, "truncated", f"code block opened at line {cut.line} is never closed"
        )
    if not blocks and _whole_text_is_python(text):
        return ExtractResult(text.strip("\n") + "\n", "ok", "no fences; the whole answer is Python")
    if cut_off_by_limit:
        return ExtractResult(None, "truncated", "the answer hit the token limit before any code")
    if blocks:
        return ExtractResult(
            None, "no_code", f"{len(blocks)} code block(s), none defines class ModelNew"
        )
    return ExtractResult(None, "no_code", "no fenced code block in the answer")


# ---- ideas -----------------------------------------------------------------------------

FAMILIES = (
    "memory_hierarchy",
    "async_latency",
    "precision",
    "instruction_efficiency",
    "occupancy_parallelism",
    "control_flow",
)
OTHER = "other"

# Single words that name a family on their own ("memory", "latency", ...).
_WORD_FAMILY = {
    "memory": "memory_hierarchy",
    "mem": "memory_hierarchy",
    "hierarchy": "memory_hierarchy",
    "async": "async_latency",
    "asynchronous": "async_latency",
    "asynchrony": "async_latency",
    "latency": "async_latency",
    "pipelining": "async_latency",
    "precision": "precision",
    "numerics": "precision",
    "instruction": "instruction_efficiency",
    "instructions": "instruction_efficiency",
    "occupancy": "occupancy_parallelism",
    "parallelism": "occupancy_parallelism",
    "control": "control_flow",
    "controlflow": "control_flow",
    "branching": "control_flow",
    "divergence": "control_flow",
}
_STOPWORDS = {"and", "or", "the", "of", "optimization", "optimisation", "efficiency", "flow"}


@dataclass(frozen=True)
class Idea:
    text: str
    family: str = OTHER


def normalize_family(name: object) -> str:
    """Map close spellings ("Memory hierarchy", "occupancy/parallelism", "memroy") to a family."""
    s = re.sub(r"[^a-z0-9]+", "_", str(name or "").lower()).strip("_")
    if not s:
        return OTHER
    if s in FAMILIES:
        return s
    squashed = s.replace("_", "")
    for fam in FAMILIES:
        if squashed == fam.replace("_", ""):
            return fam
    close = difflib.get_close_matches(s, FAMILIES, n=1, cutoff=0.8)
    if close:
        return close[0]
    words = [w for w in s.split("_") if w not in _STOPWORDS]
    for w in words:
        if w not in _WORD_FAMILY:  # allow a typo: "memroy", "paralellism"
            w = next(iter(difflib.get_close_matches(w, list(_WORD_FAMILY), n=1, cutoff=0.85)), "")
        if w:
            return _WORD_FAMILY[w]
    return OTHER


_TEXT_KEYS = ("idea", "text", "description", "summary", "details", "proposal")
_TITLE_KEYS = ("title", "name")
_FAMILY_KEYS = ("family", "category", "type", "kind")


def _idea_from_obj(item: Any, family: str | None = None) -> Idea | None:
    if isinstance(item, str):
        text, fam = _split_family(item)
        return Idea(text, family or fam) if text else None
    if not isinstance(item, dict):
        return None
    body = next((str(item[k]) for k in _TEXT_KEYS if isinstance(item.get(k), str)), "")
    title = next((str(item[k]) for k in _TITLE_KEYS if isinstance(item.get(k), str)), "")
    text = f"{title}: {body}" if title and body and title not in body else (body or title)
    fam = next((item[k] for k in _FAMILY_KEYS if item.get(k)), None)
    if not text.strip():
        return None
    return Idea(text.strip(), normalize_family(fam) if fam else (family or OTHER))


def _ideas_from_json(data: Any) -> list[Idea]:
    if isinstance(data, dict):
        for key in ("ideas", "proposals", "items"):
            if isinstance(data.get(key), list):
                return _ideas_from_json(data[key])
        # {"memory_hierarchy": ["...", ...], ...}
        ideas = []
        for fam, items in data.items():
            if isinstance(items, list):
                ideas += [i for x in items if (i := _idea_from_obj(x, normalize_family(fam)))]
        if ideas:
            return ideas
        one = _idea_from_obj(data)
        return [one] if one else []
    if isinstance(data, list):
        return [i for x in data if (i := _idea_from_obj(x))]
    return []


def _json_candidates(text: str) -> Iterator[Any]:
    """Fenced JSON blocks first, then each bare JSON list/object in the text, in order."""
    for b in find_code_blocks(text):
        if b.lang in ("json", "jsonc", "json5", ""):
            try:
                yield json.loads(b.body)
            except json.JSONDecodeError:
                pass
    decoder = json.JSONDecoder()
    pos = 0
    while (m := _JSON_START.search(text, pos)) is not None:
        try:
            obj, end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            pos = m.start() + 1
            continue
        yield obj
        pos = end


_LEAD_TAG = re.compile(r"^\s*(?:\*\*|__)?\s*[\[(]([^\])]{2,40})[\])]\s*(?:\*\*|__)?\s*[:\-–—]?\s*")
_LEAD_LABEL = re.compile(r"^\s*(?:\*\*|__)?([A-Za-z][A-Za-z _/&-]{1,40}?)(?:\*\*|__)?\s*[:\-–—]\s+")
_INLINE = re.compile(
    r"\s*[(\[]?\s*\b(?:family|category)\b\s*[:=]\s*[`*_]*([A-Za-z][A-Za-z_ /&-]*[A-Za-z])[`*_]*\s*[)\]]?\.?",
    re.IGNORECASE,
)


def _split_family(text: str) -> tuple[str, str]:
    """(text without its family annotation, family) for one list item."""
    m = _INLINE.search(text)
    if m and normalize_family(m.group(1)) != OTHER:
        return (text[: m.start()] + text[m.end() :]).strip(), normalize_family(m.group(1))
    for pattern in (_LEAD_TAG, _LEAD_LABEL):
        m = pattern.match(text)
        if m and normalize_family(m.group(1)) != OTHER:
            return text[m.end() :].strip(), normalize_family(m.group(1))
    return text.strip(), OTHER


_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|#{1,4}\s*\d{1,3}[.):]?)\s+(.*)$")


def _ideas_from_list(text: str) -> list[Idea]:
    items: list[list[str]] = []
    current: list[str] | None = None
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        m = _ITEM.match(line)
        if m:
            current = [m.group(1).strip()]
            items.append(current)
        elif current is not None and line.strip() and line[:1] in " \t":
            current.append(line.strip())  # indented continuation of the item
        elif line.strip():
            current = None  # unindented prose ends the list item
    ideas = []
    for parts in items:
        text_, fam = _split_family(" ".join(parts))
        if text_:
            ideas.append(Idea(text_, fam))
    return ideas


def extract_ideas(text: str) -> list[Idea]:
    """Ideas from a JSON answer (list, {"ideas": [...]}, fenced or bare) or a numbered list.

    Duplicates (same text up to case and spacing) are dropped; unknown families become "other".
    """
    ideas: list[Idea] = []
    for data in _json_candidates(text):
        ideas = _ideas_from_json(data)
        if ideas:
            break
    if not ideas:
        ideas = _ideas_from_list(text)
    seen: set[str] = set()
    unique = []
    for idea in ideas:
        k = " ".join(idea.text.lower().split())
        if k not in seen:
            seen.add(k)
            unique.append(idea)
    return unique
