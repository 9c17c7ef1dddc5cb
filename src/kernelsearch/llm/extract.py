"""Pull the candidate code, or a list of ideas, out of a model's free-form answer.

Answers are messy: several code blocks (a sketch, then the final file), CRLF line ends, `~~~`
fences, tags like ```` ```python title="model_new.py" ````, a final block cut off by the token
limit, or a final block the model simply never closed. `extract_code` takes the last complete
block that defines `class ModelNew` and says plainly when nothing usable came back, so the
search can tell "no code" from "truncated".

A last block without its closing fence is read as a careful reader would: when the provider
did not report a length cut-off (`cut_by_length`) and the code parses, it is the answer
(outcome `unclosed_fence`); when the answer hit the token limit, or the code does not parse,
it is `truncated`. `read_ideas` applies the same rule to an unclosed ```json block.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["ok", "unclosed_fence", "no_code", "truncated"]
IdeasOutcome = Literal["ideas", "unclosed_fence", "no_ideas", "truncated"]

PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3", "ipython"})
JSON_TAGS = frozenset({"json", "jsonc", "json5", ""})
# finish / stop reasons that mean "the answer was cut at the token limit", as providers spell
# them once lower-cased: OpenAI and vLLM "length"; Anthropic, Gemini ("MAX_TOKENS"), Bedrock
# and Cohere "max_tokens"; the OpenAI Responses API "max_output_tokens"; Anthropic's
# "model_context_window_exceeded" (the context, not max_tokens, ran out).
LENGTH_FINISH = frozenset({"length", "max_tokens", "max_output_tokens", "max_completion_tokens",
                           "model_context_window_exceeded", "model_length", "token_limit"})

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


def cut_by_length(finish_reason: object) -> bool:
    """True when a provider's finish reason says the answer stopped at the token limit
    (`"length"`, `"max_tokens"`, `"MAX_TOKENS"`, `"max-output-tokens"`, ...)."""
    if not finish_reason:
        return False
    return re.sub(r"[\s-]+", "_", str(finish_reason).strip().lower()) in LENGTH_FINISH


def _python_error(block: CodeBlock) -> str | None:
    """None when the block's code parses as Python, else where (a line of the answer) and why not."""
    try:
        ast.parse(block.body)
    except SyntaxError as e:
        return f"SyntaxError at line {block.line + (e.lineno or 0)}: {e.msg}"
    except ValueError as e:  # null bytes
        return f"{type(e).__name__}: {e}"
    return None


def _whole_text_is_python(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def extract_code(text: str, finish_reason: str | None = None) -> ExtractResult:
    """The last complete fenced block defining `class ModelNew`, or why there is none.

    `finish_reason` (from the response) turns "no code" into "truncated" when the model ran
    out of tokens before writing any, and decides what a last block without its closing fence
    is: the answer (`unclosed_fence`) when the answer was not cut at the token limit and the
    code parses; `truncated` otherwise.
    """
    blocks = find_code_blocks(text)
    cut = blocks[-1] if blocks and not blocks[-1].closed else None
    cut_off_by_limit = cut_by_length(finish_reason)
    why_cut = ""  # why the unclosed last block is not used
    if cut is not None:
        if cut_off_by_limit:
            why_cut = (f"code block opened at line {cut.line} is never closed: the answer hit the token "
                       f"limit (finish_reason {finish_reason!r})")
        elif not cut.defines_model_new:
            why_cut = f"code block opened at line {cut.line} is never closed"
        elif (err := _python_error(cut)) is not None:
            why_cut = (f"code block opened at line {cut.line} is never closed and its code does not parse "
                       f"({err}; finish_reason {finish_reason!r})")
    usable_cut = cut is not None and not why_cut

    complete = [b for b in blocks if (b.closed or (b is cut and usable_cut)) and b.defines_model_new]
    python = [b for b in complete if b.lang in PYTHON_TAGS]
    chosen = python[-1] if python else (complete[-1] if complete else None)

    if chosen is not None:
        notes = []
        outcome: Outcome = "ok"
        if chosen is cut:
            outcome = "unclosed_fence"
            notes.append(f"unclosed_fence: the code block opened at line {cut.line} has no closing fence; "
                         f"used it (finish_reason {finish_reason!r}, the code parses)")
        elif cut is not None:
            notes.append(
                f"the last code block (line {cut.line}) is cut off; "
                f"used the complete block at line {chosen.line}"
            )
        if len(complete) > 1:
            notes.append(f"{len(complete)} blocks define ModelNew; took the last")
        if chosen.lang not in PYTHON_TAGS:
            notes.append(f"block is tagged {chosen.lang!r}, not python")
        return ExtractResult(chosen.body, outcome, "; ".join(notes))
    if cut is not None:
        return ExtractResult(None, "truncated", why_cut)
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


def _is_json_block(block: CodeBlock) -> bool:
    """Tagged json (or untagged with a JSON list or object in it)."""
    return block.lang in JSON_TAGS and (block.lang != "" or block.body.lstrip()[:1] in ("[", "{"))


def _bare_json(text: str) -> Iterator[Any]:
    """Each bare JSON list/object in the text, in order."""
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


@dataclass(frozen=True)
class IdeasResult:
    ideas: list[Idea]
    outcome: IdeasOutcome  # "ideas", "unclosed_fence" (read from a final ```json block never closed), "no_ideas", "truncated"
    note: str = ""


def read_ideas(text: str, finish_reason: str | None = None) -> IdeasResult:
    """Ideas from a JSON answer (list, {"ideas": [...]}, fenced or bare) or a numbered list,
    and how they were read.

    Closed fenced JSON blocks come first, in order; then a last ```json block without its
    closing fence, used (`unclosed_fence`) when the answer was not cut at the token limit and
    the JSON parses; then bare JSON and numbered lists in the text before such a block. An
    unclosed JSON block that cannot be used, with nothing else to read, is `truncated`.
    Duplicates (same text up to case and spacing) are dropped; unknown families become "other".
    """
    blocks = find_code_blocks(text)
    cut = blocks[-1] if blocks and not blocks[-1].closed and _is_json_block(blocks[-1]) else None
    why_cut = ""
    from_cut: list[Idea] = []
    if cut is not None:
        if cut_by_length(finish_reason):
            why_cut = (f"JSON block opened at line {cut.line} is never closed: the answer hit the token limit "
                       f"(finish_reason {finish_reason!r})")
        else:
            try:
                from_cut = _ideas_from_json(json.loads(cut.body))
            except json.JSONDecodeError as e:
                why_cut = (f"JSON block opened at line {cut.line} is never closed and does not parse "
                           f"({e.msg} at line {cut.line + e.lineno}; finish_reason {finish_reason!r})")
            else:
                if not from_cut:
                    why_cut = f"JSON block opened at line {cut.line} is never closed and holds no ideas"
    head = text
    if cut is not None:  # what precedes the unclosed block: nothing is salvaged from inside it
        head = "\n".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[: cut.line - 1])

    outcome: IdeasOutcome = "ideas"
    ideas: list[Idea] = []
    for b in blocks:
        if b.closed and b.lang in JSON_TAGS:
            try:
                ideas = _ideas_from_json(json.loads(b.body))
            except json.JSONDecodeError:
                continue
            if ideas:
                break
    if not ideas and from_cut:
        ideas, outcome = from_cut, "unclosed_fence"
    if not ideas:
        ideas = next((found for data in _bare_json(head) if (found := _ideas_from_json(data))), [])
    if not ideas:
        ideas = _ideas_from_list(head)
    seen: set[str] = set()
    unique = []
    for idea in ideas:
        k = " ".join(idea.text.lower().split())
        if k not in seen:
            seen.add(k)
            unique.append(idea)
    if unique:
        if outcome == "unclosed_fence" and cut is not None:
            note = (f"unclosed_fence: the JSON block opened at line {cut.line} has no closing fence; "
                    f"used it (finish_reason {finish_reason!r}, the JSON parses)")
        else:
            note = f"ignored the last block: {why_cut}" if why_cut else ""
        return IdeasResult(unique, outcome, note)
    if why_cut:
        return IdeasResult([], "truncated", why_cut)
    if cut_by_length(finish_reason):
        return IdeasResult([], "truncated", "the answer hit the token limit before any ideas")
    return IdeasResult([], "no_ideas", "no ideas could be read from the answer")


def extract_ideas(text: str, finish_reason: str | None = None) -> list[Idea]:
    """The ideas `read_ideas` finds ([] when none)."""
    return read_ideas(text, finish_reason).ideas
