"""The verdict mapping: from what happened in an evaluation to a status and a reason.

Every path that gives a candidate its verdict decides it here: the static screen, the
candidate worker's end (``candidate_failure``, also for a build that an executor ran ahead),
its report (protocol, PyTorch compute on the forward path, timings), the judge's end and its
checks, the profiler's cross-check, and what makes a kernel correct. Each decision is a
function that returns a ``Verdict`` or None (nothing to object to); ``set_verdict`` writes one
into a result. ``evaluate``, the executors and ``confirm`` call these and nothing else to decide.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelsearch.evaluator.config import STALE_TAG, EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.timing.library import library_share
from kernelsearch.evaluator.verdict.protocol import protocol_violation
from kernelsearch.evaluator.verdict.roofline import impossible
from kernelsearch.evaluator.verdict.weights import init_difference
from kernelsearch.records.codes import Code
from kernelsearch.records.codes import parse as parse_code
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import Baselines, EvalResult, Status, TimingStats, TrialCheck

if TYPE_CHECKING:
    from kernelsearch.evaluator.sandbox.process import WorkerOutcome
    from kernelsearch.evaluator.screen.python import ScreenResult
    from kernelsearch.problems.loader import Problem

REASON_LIMIT = 500  # the first line of a reason, cut here (a failed check's: FAILED_CHECK_LIMIT)
FAILED_CHECK_LIMIT = 1000

SIGNALS = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error",
    signal.SIGABRT: "abort",
    signal.SIGFPE: "floating-point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGKILL: "killed",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGXCPU: "CPU time limit exceeded",
}

# build-worker kills that the candidate worker's build phase would suffer the same way
BUILD_KILLS = ("timeout:build", "memory", "output", "processes")


@dataclass(frozen=True)
class Verdict:
    """A status and why; ``log`` is the build or crash log that goes with a candidate's failure;
    ``code`` names the check that failed (records/codes.py; ``Code.NONE`` only for correct)."""

    status: Status
    reason: str
    log: str = ""
    limit: int = REASON_LIMIT
    code: Code = Code.NONE


def set_verdict(res: EvalResult, status: Status, reason: str, limit: int = REASON_LIMIT,
                code: Code = Code.NONE) -> EvalResult:
    """Write a verdict into ``res``: the reason's first line, at most ``limit`` characters (the
    status's name when there is none), and its code ("" for a correct one)."""
    res.status, res.reason = status, reason.strip().splitlines()[0][:limit] if reason.strip() else status.value
    res.code = "" if status is Status.CORRECT else Code(code).value
    return res


def apply(res: EvalResult, verdict: Verdict) -> EvalResult:
    """``set_verdict`` for a ``Verdict``; a candidate's failure also leaves its log in ``build_log``
    and is the result's one failure."""
    return conclude(res, [verdict])


# which failure decides the status when several checks failed: a rejection names a hack, which
# says more than the wrong values or the crash that came with it
_PRECEDENCE = {Status.REJECTED: 0, Status.INCORRECT: 1}


def conclude(res: EvalResult, verdicts: list[Verdict | None]) -> EvalResult:
    """Every failed check into ``res.failures`` (the deciding one first), the deciding one into
    its status and reason; no failure leaves ``res`` as it is."""
    failed = sorted((v for v in verdicts if v is not None and v.status is not Status.CORRECT),
                    key=lambda v: _PRECEDENCE.get(v.status, 2))  # stable: in order of the run among equals
    res.failures = [{"status": v.status.value, "code": Code(v.code).value, "reason": v.reason.strip()[:v.limit]}
                    for v in failed]
    decisive = failed[0] if failed else next((v for v in verdicts if v is not None), None)
    if decisive is None:
        return res
    if decisive.log:
        res.build_log = decisive.log
    return set_verdict(res, decisive.status, decisive.reason, decisive.limit, decisive.code)


# -- before any worker runs ---------------------------------------------------------------

def screen_verdict(sc: ScreenResult, backend: str, config: EvalConfig, backends: tuple[str, ...]) -> Verdict | None:
    """The static screen's verdict (``backends``: those the device runs), or None to go on."""
    if sc.syntax_error:
        return Verdict(Status.COMPILE_ERROR, sc.syntax_error, code=Code.BUILD_FAILURE)
    if sc.reject and config.static_screen:
        return Verdict(Status.REJECTED, sc.reject, code=sc.code)
    if backend not in backends:
        return Verdict(Status.REJECTED, f"a {backend} candidate cannot run on the {config.device} device",
                       code=Code.WRONG_DEVICE_BACKEND)
    if config.torch_fallback == "reject" and config.static_screen and (
            "torch_fallback" in sc.flags or "exception_fallback" in sc.flags):
        return Verdict(Status.REJECTED, "uses PyTorch compute on the forward path: " + "; ".join(sc.notes),
                       code=Code.TORCH_FALLBACK)
    return None


def too_large(why: str) -> Verdict | None:
    """A problem the device cannot hold (evaluator/feasibility.py says why): ``crashed``, the
    status the memory watchdog's kill would give, without waiting for it."""
    return Verdict(Status.CRASHED, why, code=Code.TOO_LARGE) if why else None


# -- the candidate worker ----------------------------------------------------------------

def candidate_failure(out: WorkerOutcome, limits: Limits) -> Verdict | None:
    """What happened to the candidate's worker (or a build worker run the same way), as a
    verdict with its log; None if it finished."""
    if out.killed == "processes":
        return Verdict(Status.CRASHED, f"exceeded the process limit of {limits.max_tasks} tasks (processes + threads)",
                       code=Code.PROCESS_LIMIT)
    if out.killed == "sandbox":
        return Verdict(Status.CRASHED, out.output, code=Code.SANDBOX_FAILURE)
    if out.killed.startswith("timeout:"):
        phase = out.killed.split(":", 1)[1]
        timeouts = limits.candidate_timeouts()
        limit = timeouts.get(phase, timeouts["default"])
        limit += limits.build_timeout_s if phase == "total" else 0
        what = {"build": "build", "start": "worker start-up"}.get(phase, "run")
        return Verdict(Status.TIMEOUT, f"{what} did not finish within {limit:g} s (phase: {phase})", code=Code.TIMEOUT)
    if out.killed == "memory":
        return Verdict(Status.CRASHED, f"exceeded the memory limit of {limits.memory_bytes / 2**30:g} GiB",
                       code=Code.MEMORY_LIMIT)
    if out.killed == "output":
        return Verdict(Status.CRASHED, f"printed more than {limits.output_bytes / 2**20:g} MiB of output",
                       code=Code.OUTPUT_LIMIT)
    if out.killed == "channel":
        return Verdict(Status.CRASHED, "wrote garbage to the result channel", code=Code.CHANNEL_GARBAGE)
    err = out.first(Kind.ERROR)
    if err is not None:
        kind = err.get("kind")
        msg = str(err.get("message", ""))
        log = excerpt(msg + "\n" + str(err.get("traceback", "")))
        sent = parse_code(err.get("code"))  # the code the worker's failed check named
        if kind == "compile_error":
            return Verdict(Status.COMPILE_ERROR, "build failed: " + first_compiler_error(msg), log,
                           code=Code.BUILD_FAILURE)
        if kind == "rejected":  # the protocol refuses a rejection without a code; rejected whatever it names
            return Verdict(Status.REJECTED, msg, log, code=sent or Code.FORGED_REPORT)
        if kind == "harness_error":
            return Verdict(Status.CRASHED, f"worker failed outside the candidate: {msg}", log, code=Code.HARNESS_ERROR)
        if kind == "problem_error":  # the problem's get_inputs()/get_init_inputs() raised: not the candidate's fault
            return Verdict(Status.CRASHED, msg, log, code=Code.PROBLEM_ERROR)
        code = sent if sent is Code.SANDBOX_DENIED else Code.RUNTIME_ERROR  # no other code passes for a raise
        return Verdict(Status.RUNTIME_ERROR, f"{err.get('phase')}: {msg}", log, code=code)
    if out.first(Kind.DONE) is not None:
        return None
    rc = out.returncode
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc)
            name = f"{sig.name} ({SIGNALS.get(sig, 'signal')})"
        except ValueError:
            name = f"signal {-rc}"
        return Verdict(Status.CRASHED, f"worker killed by {name} during {out.phase}", excerpt(out.output),
                       code=Code.SIGNAL)
    return Verdict(Status.CRASHED, f"worker exited with code {rc} during {out.phase} before reporting",
                   excerpt(out.output), code=Code.WORKER_EXIT)


def build_failure(out: WorkerOutcome | None, limits: Limits) -> Verdict | None:
    """The verdict for a build worker's failure that the evaluation's own build would repeat
    (the same compiler on the same source and flags, the same limits), else None: the
    evaluation then runs and decides."""
    if out is None:
        return None
    err = out.first(Kind.ERROR) or {}
    if not (err.get("kind") == "compile_error" or (out.killed in BUILD_KILLS and out.phase == "build")):
        return None
    verdict = candidate_failure(out, limits)
    if verdict is None or verdict.status not in (Status.COMPILE_ERROR, Status.TIMEOUT, Status.CRASHED):
        return None
    return verdict


def forged(messages: list[dict], trials: int, timing: TimingConfig, n_timing: int, n_order: int,
           refused: str = "", inplace: bool = False) -> Verdict | None:
    """A report the harness could not have sent (verdict/protocol.py; ``refused``: why the parent
    refused a message on receipt, records/protocol.py; ``inplace``: the in-place pair was asked
    for): ``rejected``."""
    why = protocol_violation(messages, trials, timing, n_timing, n_order, refused=refused, inplace=inplace)
    return Verdict(Status.REJECTED, why, code=Code.FORGED_REPORT) if why else None


def observed_torch_compute(cand: WorkerOutcome, res: EvalResult) -> str:
    """PyTorch compute the worker saw on the forward path (the dynamic half of the
    torch-fallback mark): flags the result and returns a summary, or ""."""
    seen = (cand.first(Kind.OBSERVED) or {}).get("torch_compute") or {}
    if not isinstance(seen, dict) or not seen:
        return ""
    summary = ", ".join(f"{name} x{n}" for name, n in sorted(seen.items(), key=lambda kv: -int(kv[1]))[:6])
    mark_fallback(res, "forward ran PyTorch compute: " + summary)
    return summary


def library_compute(cand: WorkerOutcome, res: EvalResult) -> str:
    """PyTorch's own kernels doing the work inside a CUDA extension, seen in the profiled
    forward (timing/library.py): flags the result and returns a summary, or ""."""
    share = library_share(cand.first(Kind.PROFILE)) if res.device == "cuda" else None
    if share is None or not share.fallback:
        return ""
    mark_fallback(res, share.describe())
    return share.describe()


def mark_fallback(res: EvalResult, note: str) -> None:
    """The torch_fallback mark, once, and what was seen, in the result's notes."""
    if "torch_fallback" not in res.flags:
        res.flags.append("torch_fallback")
    res.errors.append(note)


def fallback_verdict(cand: WorkerOutcome, res: EvalResult, policy: str) -> Verdict | None:
    """PyTorch compute seen while the candidate ran: marked on the result always, ``rejected``
    under the ``reject`` policy."""
    seen = "; ".join(filter(None, (observed_torch_compute(cand, res), library_compute(cand, res))))
    if seen and policy == "reject":
        return Verdict(Status.REJECTED, "uses PyTorch compute on the forward path (seen while it ran: " + seen + ")",
                       code=Code.TORCH_FALLBACK)
    return None


def valid_samples(samples: object) -> bool:
    return bool(samples) and all(isinstance(s, (int, float)) and s > 0 and s == s and s != float("inf")
                                 for s in samples)  # type: ignore[union-attr]


def no_timings(samples: object) -> Verdict | None:
    """Timings that are not a list of positive finite figures: ``crashed``."""
    return None if valid_samples(samples) else Verdict(Status.CRASHED, "worker reported no valid timings",
                                                       code=Code.NO_TIMINGS)


def too_fast(samples: list[float], problem: Problem, device: str, device_name: str) -> Verdict | None:
    """A median under the device's roofline floor (verdict/roofline.py): ``rejected``."""
    why = impossible(samples, problem, device, device_name)
    return Verdict(Status.REJECTED, why, code=Code.IMPOSSIBLE_TIME) if why else None


# -- the judge ----------------------------------------------------------------------------

def handover_failure(error: OSError) -> Verdict:
    return Verdict(Status.CRASHED, f"the outputs in device memory could not be passed to the judge: {error}",
                   code=Code.HANDOVER_FAILURE)


def judge_failure(judge: WorkerOutcome) -> Verdict | None:
    """The judge (the reference) did not finish: ``crashed``, whatever the candidate did."""
    if judge.first(Kind.DONE) is not None and not judge.protocol_error:
        return None
    err = judge.first(Kind.ERROR) or {}
    why = err.get("message") or judge.killed or judge.protocol_error or f"exit code {judge.returncode}"
    if err.get("kind") == "problem_error":  # the problem's input functions raised, as in the candidate's worker
        return Verdict(Status.CRASHED, str(why)[:REASON_LIMIT], code=Code.PROBLEM_ERROR)
    return Verdict(Status.CRASHED, f"the judge (reference) failed: {why}"[:REASON_LIMIT], code=Code.REFERENCE_FAILED)


def judge_checks(judge: WorkerOutcome) -> list[TrialCheck]:
    """The judge's comparisons, as records."""
    return [TrialCheck(**{k: m.get(k) for k in TrialCheck.__dataclass_fields__}) for m in judge.events(Kind.CHECK)]


def worst_errors(checks: list[TrialCheck]) -> tuple[float | None, float | None]:
    """The largest absolute and norm errors over the checks (determinism re-runs aside)."""
    errs = [c.max_abs_error for c in checks if c.max_abs_error is not None and c.tag != "determinism"]
    norms = [c.norm_error for c in checks if c.norm_error is not None and c.tag != "determinism"]
    return (max(errs) if errs else None), (max(norms) if norms else None)


def checks_verdict(checks: list[TrialCheck], expected: int, mutated: list[dict],
                   cand_digest: object = None, judge_digest: object = None) -> Verdict | None:
    """What the judge's checks say: an input the forward modified or a failed check is
    ``incorrect`` (with the weights' difference when the two processes built different ones),
    fewer checks than outputs is ``crashed``; None when every output passed."""
    if mutated:
        args = sorted({i for m in mutated for i in m["mutated_inputs"]})
        return Verdict(Status.INCORRECT, f"forward modified its input argument(s) {args}", code=Code.INPUT_MUTATION)
    failed = [c for c in checks if not c.ok and not c.tag.startswith(STALE_TAG)]  # stale_output's
    if failed:  # before the count: a trial that failed leaves checks that build on it undone
        first = failed[0]
        hint = init_difference(cand_digest, judge_digest)
        # the stream-order call's snapshot (judge/run.py's tag): work the caller's stream did not wait for
        code = Code.UNORDERED_OUTPUT if first.tag == "stream order" else Code.WRONG_VALUES
        return Verdict(Status.INCORRECT, f"{first.tag}: {first.reason[:300]}" + (f" ({hint})" if hint else ""),
                       limit=FAILED_CHECK_LIMIT, code=code)
    if len(checks) < expected:
        return Verdict(Status.CRASHED, "the judge did not check every output", code=Code.MISSING_CHECKS)
    return None


def stale_output(checks: list[TrialCheck]) -> Verdict | None:
    """The output after a partial in-place change of an input (same tensor, same address, its
    head kept) that matched the reference on the input before the change, not after it: a
    result cached by address and a sample of the contents, stale for a caller who updates a
    tensor in place (worker/inplace.py, judge/run.py): ``rejected``."""
    stale = next((c for c in checks if not c.ok and c.tag.startswith(STALE_TAG)), None)
    if stale is None:
        return None
    which = stale.tag.removeprefix(STALE_TAG)
    return Verdict(Status.REJECTED, f"the output did not follow a partial in-place change of input {which} "
                   "(a stale, cached result)", code=Code.STALE_OUTPUT)


def profile_mismatch(profile: dict | None, timing: TimingStats | None) -> Verdict | None:
    """The profiler cross-check (CUDA): a median far below the time the GPU spent in the
    candidate's kernels in one profiled call means work escaped the timer: ``rejected``."""
    busy = (profile or {}).get("busy_ms")
    if timing is None or not isinstance(busy, (int, float)) or busy <= 0:
        return None
    if timing.median_ms < 0.5 * busy:
        return Verdict(Status.REJECTED, f"timed at {timing.median_ms:.3g} ms (median), but its kernels kept the GPU "
                       f"busy for {busy:.3g} ms in a profiled call: work escaped the timer", code=Code.TIMER_ESCAPE)
    return None


def correct(res: EvalResult) -> Verdict:
    """The verdict of a kernel every check passed: how many, and its speedups."""
    parts = [f"{len(res.checks)} checks passed"]
    if res.speedup_vs_eager is not None:
        parts.append(f"{res.speedup_vs_eager:.2f}x vs eager")
    if res.speedup_vs_compile is not None:
        parts.append(f"{res.speedup_vs_compile:.2f}x vs torch.compile")
    return Verdict(Status.CORRECT, ", ".join(parts))


def adopt_baselines(res: EvalResult, stored: Baselines) -> EvalResult:
    """Take the torch.compile baseline another process cached first; a correct kernel's reason
    (its speedups) is stated against it."""
    res.compile_timing, res.compile_error = stored.compiled, stored.compile_error
    return apply(res, correct(res)) if res.status is Status.CORRECT else res


# -- over several evaluations -------------------------------------------------------------

def not_confirmed(res: EvalResult) -> str:
    """Why one of ``confirm``'s evaluations does not confirm a kernel ("" if it does): its
    verdict, or timings missing from a correct one."""
    if res.status is not Status.CORRECT or res.candidate_timing is None or res.eager_timing is None:
        return f"{res.status.value}: {res.reason}"[:REASON_LIMIT]
    return ""


# -- helpers ------------------------------------------------------------------------------

def first_compiler_error(msg: str) -> str:
    """The compiler's first error line in a build log (else its first line)."""
    for line in msg.splitlines():
        low = line.lower()
        if "error" in low and "error building extension" not in low:
            return line.strip()[:300]
    return msg.strip().splitlines()[0][:300] if msg.strip() else "unknown build error"


def excerpt(text: str, n: int = 8000) -> str:
    """The start and (more of) the end of a long log."""
    return text if len(text) <= n else text[: n // 4] + "\n[...]\n" + text[-3 * n // 4 :]
