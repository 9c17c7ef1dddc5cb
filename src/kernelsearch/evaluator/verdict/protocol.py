"""Checks, in the parent, that the candidate worker's messages follow the worker's protocol.

The candidate shares a process with the code that reports on it, so it can write to the result
pipe itself: a second ``timing`` message with better numbers, a ``done`` before the work, spot
outputs that name files or inputs the harness never chose. The honest worker sends each report
once, in order, with exactly the spot checks it was asked for; anything else is forged.
"""

from __future__ import annotations

import re

from kernelsearch.evaluator.config import INPLACE_FILE, ORDER_FILE, TimingConfig
from kernelsearch.records.protocol import Kind

_ONCE = (Kind.BUILT, Kind.TIMING, Kind.DONE, Kind.OBSERVED, Kind.PROFILE, Kind.STREAM_ORDER, Kind.PARAMS, Kind.INPLACE)
_SPOT_FILE = re.compile(r"timed\d+\.kst")


def protocol_violation(messages: list[dict], trials: int, timing: TimingConfig, n_seeds: int,
                       order_seeds: int = 0, refused: str = "", inplace: bool = False) -> str:
    """A reason if the messages cannot have come from the honest worker, else "".
    ``order_seeds``: inputs the job gave the stream-order check (0: no check asked for);
    ``refused``: why a message was refused on receipt (``WorkerOutcome.protocol_error``);
    ``inplace``: the job asked for the in-place change's call pair."""
    if refused:
        return f"the result channel carries {refused} (forged by the candidate)"
    events = [m.get("event") for m in messages]
    for name in _ONCE:
        if events.count(name) > 1:
            return f"the result channel carries {events.count(name)} '{name}' reports (forged by the candidate)"
    if Kind.DONE in events and events.index(Kind.DONE) != len(events) - 1:
        return "the result channel carries reports after 'done' (forged by the candidate)"
    indices = [m.get("index") for m in messages if m.get("event") == Kind.TRIAL]
    if indices != list(range(trials)):
        return f"the result channel reports trials {indices[:8]}, expected 0..{trials - 1} once each (forged)"
    forged = _stream_order_violation(messages, order_seeds) or _inplace_violation(messages, inplace)
    if forged:
        return forged
    timed = next((m for m in messages if m.get("event") == Kind.TIMING), None)
    if timed is None:
        return ""
    order = [e for e in events if e in (Kind.TRIAL, Kind.OBSERVED, Kind.STREAM_ORDER, Kind.TIMING)]
    if order[-1] != Kind.TIMING or Kind.OBSERVED not in order:
        return "the timing report arrived before the correctness trials finished (forged by the candidate)"
    if order_seeds and Kind.STREAM_ORDER not in order:
        return "the timing report arrived without the stream-order check's report (forged by the candidate)"
    if inplace and Kind.INPLACE not in events:
        return "the timing report arrived without the in-place change's report (forged by the candidate)"
    samples, spots = timed.get("samples_ms"), timed.get("spots")
    if not isinstance(samples, list) or not isinstance(spots, list):
        return "the timing report is malformed (forged by the candidate)"
    lo, hi = min(timing.min_reps, timing.max_reps), timing.max_reps
    if not lo <= len(samples) <= hi:
        return f"the timing report has {len(samples)} samples, outside {lo}..{hi} (forged by the candidate)"
    want = min(timing.spot_checks, timing.min_reps)
    if len(spots) != want:
        return f"the timing report has {len(spots)} spot-checked outputs, expected {want} (forged by the candidate)"
    seen_sets, seen_files = set(), set()
    for s in spots:
        k, f = s.get("input_set") if isinstance(s, dict) else None, s.get("file") if isinstance(s, dict) else None
        if type(k) is not int or not 0 <= k < n_seeds or k in seen_sets:
            return f"the timing report names input set {k!r}, which the harness did not give it (forged)"
        if timing.fresh_inputs and n_seeds >= timing.warmup + timing.max_reps and k < timing.warmup:
            return f"the timing report spot-checks warm-up call {k} (forged by the candidate)"
        if not isinstance(f, str) or not _SPOT_FILE.fullmatch(f) or f in seen_files:
            return f"the timing report names output file {f!r} (forged by the candidate)"
        seen_sets.add(k)
        seen_files.add(f)
    return ""


def _stream_order_violation(messages: list[dict], order_seeds: int) -> str:
    """The stream-order report: only when asked for, after the trials, naming the one file and
    one of the check's own inputs."""
    events = [m.get("event") for m in messages]
    if Kind.STREAM_ORDER not in events:
        return ""
    report = messages[events.index(Kind.STREAM_ORDER)]
    if not order_seeds:
        return "the result channel carries a stream-order report the harness did not ask for (forged)"
    if Kind.OBSERVED not in events or events.index(Kind.OBSERVED) > events.index(Kind.STREAM_ORDER):
        return "the stream-order report arrived before the correctness trials finished (forged by the candidate)"
    k = report.get("input")
    if type(k) is not int or not 1 <= k < order_seeds:
        return f"the stream-order report names input {k!r}, which the harness did not give it (forged)"
    if report.get("file") != ORDER_FILE:
        return f"the stream-order report names output file {report.get('file')!r} (forged by the candidate)"
    return ""


def _inplace_violation(messages: list[dict], asked: bool) -> str:
    """The in-place change's report: only when asked for, after the last trial and before the
    trials' end (``observed``), naming its one file (or none: no input could be changed)."""
    events = [m.get("event") for m in messages]
    if Kind.INPLACE not in events:
        return ""
    at = events.index(Kind.INPLACE)
    if not asked:
        return "the result channel carries an in-place change report the harness did not ask for (forged)"
    last_trial = max((i for i, e in enumerate(events) if e == Kind.TRIAL), default=-1)
    if at < last_trial or (Kind.OBSERVED in events and events.index(Kind.OBSERVED) < at):
        return "the in-place change report arrived out of order (forged by the candidate)"
    f, k = messages[at].get("file"), messages[at].get("input")
    if not ((f == INPLACE_FILE and type(k) is int and k >= 0) or (f == "" and k == -1)):
        return f"the in-place change report names output file {f!r} of input {k!r} (forged by the candidate)"
    return ""
