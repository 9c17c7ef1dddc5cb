"""The class of an audited kernel's verdict: a fixed, documented set, recognised from the status,
the reason and the flags the evaluator gave it.

The evaluator decides a status with a free-text reason (evaluator/verdict/decide.py and the
phrases of the screen, the guards and the judge it quotes). An audit of thousands of kernels
needs counts by *kind of failure*, so each reason is mapped to one class here, by the first rule
that matches, in the order of ``RULES``. The class of a result is that of the failure that
decided its status; ``EvalResult.failures`` lists every failure, each classed the same way.

``CLASSES`` is the table (class, what it means, how it is recognised) that docs/audit.md shows;
tests/test_audit.py checks every rule against reasons real evaluations produced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One class: ``statuses`` it applies to (empty: any failing status) and reason patterns
    (case-insensitive regular expressions; empty: every reason of those statuses)."""

    name: str
    meaning: str
    recognised: str
    statuses: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    def matches(self, status: str, reason: str) -> bool:
        if self.statuses and status not in self.statuses:
            return False
        return not self.patterns or any(re.search(p, reason, re.I) for p in self.patterns)


FAILING = ("incorrect", "compile_error", "runtime_error", "timeout", "crashed", "rejected")

# In order: the first match names the class. Specific rejections come before the status-wide
# classes (an input mutation is ``incorrect`` too, but not a wrong value).
RULES: tuple[Rule, ...] = (
    Rule("output_reuse", "a later call overwrote an earlier call's output (one buffer returned every call, or "
         "work deferred into the next call)", "rejected: 'the output of ... changed during ... (output buffer "
         "reused'", ("rejected",), (r"the output of .* changed during",)),
    Rule("stream_race", "work left running on a side stream or thread after forward returned, not ordered "
         "before the caller's stream", "'side stream', 'stream-order', 'caller's stream', 'output changed after "
         "forward returned', 'not the default stream'",
         FAILING, (r"side (cuda )?stream", r"stream.order", r"caller's stream", r"output changed after forward "
                   r"returned", r"not the default stream")),
    Rule("thread", "started threads or background work that outlive the call", "'thread(s) started during "
         "forward', imports threading/_thread/concurrent/asyncio, torch.jit.fork, torch futures",
         ("rejected",), (r"thread\(s\) started during forward", r"starts threads", r"background work",
                         r"background tasks")),
    Rule("exception_fallback", "forward falls back to PyTorch in an exception handler (the kernel may never "
         "run)", "'falls back to PyTorch compute in an exception handler'", ("rejected",),
         (r"exception handler",)),
    Rule("torch_fallback", "PyTorch (or the reference Model) does the work: correct and flagged torch_fallback, "
         "or rejected under --torch-fallback reject", "correct with the flag torch_fallback; rejected: 'uses "
         "PyTorch compute', 'PyTorch/library kernels took', 'subclasses the reference Model'",
         ("rejected",), (r"uses pytorch compute", r"pytorch/library kernels", r"subclasses the reference model")),
    Rule("never_ran_kernel", "declares a compiled kernel but forward never built, loaded or called it",
         "'never called its compiled kernel', 'never built or loaded one', 'none of the kernels it defines'",
         ("rejected",), (r"never called its compiled kernel", r"never built or loaded", r"none of the kernels it "
                         r"defines")),
    Rule("impossible_time", "timed faster than the device's roofline floor, or its kernels' GPU time escaped "
         "the timer", "'impossible timing', 'work escaped the timer'", ("rejected",),
         (r"impossible timing", r"escaped the timer")),
    Rule("input_mutation", "forward modified its inputs (computes in place in the caller's tensors)",
         "incorrect: 'forward modified its input'", ("incorrect",), (r"modified its input",)),
    Rule("tensor_subclass", "returns or builds Tensor subclasses or torch modes (lazy results that defer work "
         "into the check)", "'Tensor subclass', 'subclasses torch.Tensor', '__class__', 'intercepts torch calls', "
         "'torch function mode', 'torch dispatch mode'", ("rejected",),
         (r"tensor subclass", r"subclasses torch\.", r"__class__", r"intercepts torch calls", r"torch (function|"
          r"dispatch) mode", r"builds tensor subclasses")),
    Rule("patching", "replaced a timer, a torch function or a harness function at run time",
         "'was replaced', 'patches a module' (but not os.environ: forbidden_access)", ("rejected",),
         (r"^(?!.*os\.environ).*(was replaced|patches a module)",)),
    Rule("forged_report", "wrote its own reports into the harness's result channel", "'forged', 'result "
         "channel'", FAILING, (r"forged", r"result channel")),
    Rule("forbidden_access", "reaches outside its computation: files, network, other processes, environment "
         "writes, the harness or the interpreter (introspection, raw memory, random-number state)",
         "'accesses files', 'network', 'runs other programs', 'starts processes', '/proc', 'introspects', "
         "'harness', 'ctypes', 'exec', 'random-number state', 'assigns to os.environ', ...; a runtime "
         "PermissionError (the sandbox refused it)", ("rejected", "runtime_error"),
         (r"accesses files", r"network", r"other programs", r"starts processes", r"/proc", r"introspect",
          r"inspects", r"harness", r"ctypes|cffi", r"raw memory", r"maps files", r"file descriptors", r"pickled",
          r"code objects", r"builtins", r"at run time \((exec|eval|compile)\)", r"dynamic import",
          r"random-number state", r"tracer|profiler hook", r"hooks the (import system|interpreter)",
          r"signal handlers", r"debugger", r"computed name", r"assigns to os\.environ", r"other ranks",
          r"PermissionError", r"operation not permitted", r"permission denied")),
    Rule("cache_warming", "keeps data cached between timed calls (an L2 persisting window)",
         "'L2 persisting-cache window'", ("rejected",), (r"persisting-cache",)),
    Rule("shape_dispatch", "takes a special path only at the benchmarked shape", "'hard-coded shape dispatch'",
         ("rejected",), (r"shape dispatch",)),
    Rule("problem_error", "the reference (the release's problem) failed, not the kernel", "crashed: 'the judge "
         "(reference) failed', 'the problem's get_inputs() raised'", ("crashed",),
         (r"the judge \(reference\) failed", r"the problem's get_(init_)?inputs")),
    Rule("wrong_values", "ran, but its outputs differ from the reference (values, shape, dtype, NaN)",
         "status incorrect (any other reason)", ("incorrect",)),
    Rule("build_failure", "did not build (compiler error, syntax error)", "status compile_error",
         ("compile_error",)),
    Rule("runtime_error", "raised while running", "status runtime_error (any other reason)", ("runtime_error",)),
    Rule("timeout", "did not finish in time", "status timeout", ("timeout",)),
    Rule("crashed", "the worker died (signal, memory or output limit) or the problem does not fit",
         "status crashed (any other reason)", ("crashed",)),
)

# classes that no reason rule gives: decided by the flags or before any evaluation
EXTRA: tuple[tuple[str, str, str], ...] = (
    ("none", "correct, and the work was its own kernel's", "status correct without the flag torch_fallback"),
    ("other", "a failure no rule above names (a backend the device cannot run, no ModelNew, ...)",
     "any other failing reason"),
    ("bad_row", "the release's row could not be read (not JSON, a field missing or not a string, a name "
     "clash)", "the source reader; never evaluated"),
    ("no_kernel", "the release has no kernel for this problem (empty source, or no solution file)",
     "the source reader; never evaluated"),
    ("not_judged", "not judged yet: a --report-only report of a state that holds no evaluation of it "
     "(left out of the summary's figures)", "the state; never evaluated"),
)

CLASSES: tuple[tuple[str, str, str], ...] = (
    ("none", EXTRA[0][1], EXTRA[0][2]),
    *((r.name, r.meaning, r.recognised) for r in RULES),
    *EXTRA[1:],
)
CLASS_NAMES: tuple[str, ...] = tuple(c for c, _, _ in CLASSES)


def classify_reason(status: str, reason: str, flags: Iterable[str] = ()) -> str:
    """The class of a verdict given as strings (a stored row, or an EvalResult's fields)."""
    if status == "correct":
        return "torch_fallback" if "torch_fallback" in flags else "none"
    for rule in RULES:
        if rule.matches(status, reason):
            return rule.name
    return "other"

