"""`exchange:DIR`: questions and answers as files, for a person or an outside agent to answer.

For each request the provider writes `DIR/requests/<id>.json` (atomically: a temporary file
renamed into place) and waits for `DIR/responses/<id>.json`::

    request:  {"id", "model", "messages": [{"role", "content"}], "temperature",
               "max_tokens", "sample_index", "stop", "extra", "metadata",
               "created", "response_file"}
    response: {"content": "..."}  with optional  "usage": {"input_tokens", "output_tokens"},
              "model", "finish_reason";  or  {"error": "..."}  to refuse the request.

`<id>` is the request key, so a later run asking the same question finds the same files:
when the wait runs out (`timeout` seconds; 0 = look once, don't wait; None = wait forever)
PendingResponse is raised, the request file stays, and the next run picks up the answer.
Nothing is lost and nothing is asked twice. Write answers atomically too (tmp + rename); a
response file that stays unparsable for `malformed_grace_s` is reported as an LLMError
naming the file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelsearch.llm.base import (
    DEFAULT_TIMEOUT_S,
    LLMError,
    LLMRequest,
    LLMResponse,
    PendingResponse,
    Provider,
    Usage,
)

# The answer format: the README.txt written into every exchange directory, and docs/search.md
# (a test checks that the page quotes it as it is here).
ANSWER_FORMAT = """\
requests/<id>.json   questions written by kernelsearch (messages, model, temperature, ...)
responses/<id>.json  answers: {"content": "..."}, optional "usage":
                     {"input_tokens": N, "output_tokens": N}, "model", "finish_reason";
                     or {"error": "why"} to refuse.

Write each answer to a temporary name in responses/ and rename it to <id>.json."""


def resume_instructions(run_dir: str = "RUN_DIR") -> str:
    """What to do once the requests are answered: the one text the README and a waiting run give."""
    return f"`kernelsearch run --resume {run_dir}` picks the answers up (nothing answered is asked again)"


def wait_text(timeout: float | None) -> str:
    """How long the provider waits for each answer, in words."""
    if timeout is None:
        return "waits for each answer until it comes"
    if timeout <= 0:
        return "does not wait: the run stops at once and resumes once answered"
    return f"waits up to {timeout:g} s for each answer (--llm-timeout), then the run stops until answered"


_README = f"""\
kernelsearch exchange directory.

{ANSWER_FORMAT}
{textwrap.fill(f"Once answered, {resume_instructions()}; RUN_DIR is the run that asked (its message names it).")}
"""


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _NotYetParsable(Exception):
    """The response file exists but is not valid JSON (maybe still being written)."""


def parse_response_file(path: Path) -> dict[str, Any]:
    """Validated answer fields; LLMError naming the file for anything malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise LLMError(f"exchange: response file {path} is not UTF-8 text: {e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _NotYetParsable(f"exchange: response file {path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise LLMError(
            f"exchange: response file {path} must hold a JSON object, got {type(data).__name__}"
        )
    if "error" in data and "content" not in data:
        raise LLMError(f"exchange: response file {path} refuses the request: {data['error']}")
    content = data.get("content")
    if not isinstance(content, str):
        raise LLMError(f'exchange: response file {path} needs a string "content" field')
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise LLMError(f'exchange: response file {path}: "usage" must be an object')
    try:
        tokens = Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
    except (TypeError, ValueError) as e:
        raise LLMError(f"exchange: response file {path}: bad token counts in usage: {e}") from e
    return {
        "content": content,
        "usage": tokens,
        "model": data.get("model"),
        "finish_reason": data.get("finish_reason"),
    }


class ExchangeProvider(Provider):
    name = "exchange"
    priced = False

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        model: str = "exchange",
        timeout: float | None = DEFAULT_TIMEOUT_S,
        poll_interval: float = 0.5,
        malformed_grace_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        """``announce``: where the first question's notice goes (default: stderr), so a run
        that waits says at once for what, where and how long."""
        self.root = Path(directory)
        self.model = model
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.malformed_grace_s = malformed_grace_s
        self._clock = clock
        self._sleep = sleep
        self._announce = announce or (lambda text: print(text, file=sys.stderr, flush=True))
        self._announced = False
        self._lock = threading.Lock()

    def request_path(self, request_id: str) -> Path:
        return self.root / "requests" / f"{request_id}.json"

    def response_path(self, request_id: str) -> Path:
        return self.root / "responses" / f"{request_id}.json"

    def _post(self, request: LLMRequest, request_id: str) -> Path:
        path = self.request_path(request_id)
        if not path.exists():  # asked before: leave it untouched
            body = {"id": request_id, **request.to_dict()}
            body["model"] = request.model or self.model
            body["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            body["response_file"] = f"responses/{request_id}.json"
            write_json_atomic(path, body)
        (self.root / "responses").mkdir(parents=True, exist_ok=True)
        readme = self.root / "README.txt"
        if not readme.exists():
            readme.write_text(_README, encoding="utf-8")
        with self._lock:
            first, self._announced = not self._announced, True
        if first:
            self._announce(f"exchange: questions in {self.root / 'requests'}, answers expected in "
                           f"{self.root / 'responses'} (how: {readme}); kernelsearch {wait_text(self.timeout)}")
        return path

    def _try_read(self, path: Path) -> dict[str, Any] | None:
        """The answer, None if absent or (recently written and) not yet parsable."""
        if not path.exists():
            return None
        try:
            return parse_response_file(path)
        except _NotYetParsable as e:
            try:
                age = time.time() - path.stat().st_mtime
            except FileNotFoundError:
                return None
            if age >= self.malformed_grace_s:
                raise LLMError(str(e)) from e
            return None

    def complete(self, request: LLMRequest) -> LLMResponse:
        request_id = request.key()
        model = request.model or self.model
        answer_path = self.response_path(request_id)
        answer = self._try_read(answer_path)
        if answer is None:
            request_path = self._post(request, request_id)
            deadline = None if self.timeout is None else self._clock() + self.timeout
            while answer is None:
                now = self._clock()
                if deadline is not None and now >= deadline and not answer_path.exists():
                    raise PendingResponse(request_id, request_path)
                if deadline is not None and now >= deadline + self.malformed_grace_s:
                    raise PendingResponse(request_id, request_path)
                self._sleep(self.poll_interval)
                answer = self._try_read(answer_path)
        return LLMResponse(
            content=answer["content"],
            usage=answer["usage"],
            provider=self.name,
            model=answer["model"] or model,
            request_id=request_id,
            finish_reason=answer["finish_reason"],
        )
