"""GPU tests (marker ``gpu``) of the stream-order check (evaluator/worker/streams.py), in this
process, on torch's pool streams (the stream shim, which the candidate's worker loads before
torch, is exercised by the red-team corpus). Each forward pauses on the host after queuing its
side work, so that in an ordinary call that work is done before forward returns: the check must
not depend on the side work being slow."""

from __future__ import annotations

import time

import pytest

from kernelsearch.evaluator.config import STREAM_ORDER_CALLS

pytestmark = pytest.mark.gpu
PAUSE_S = 0.005


def _inputs(k: int) -> list:
    import torch

    g = torch.Generator(device="cuda").manual_seed(1000 + k)
    return [torch.randn(1 << 20, device="cuda", generator=g) for _ in range(2)]


def _check(forward):
    from kernelsearch.evaluator.worker.streams import StreamOrder

    return StreamOrder(None, "in-process test").check(forward, _inputs, 1 + STREAM_ORDER_CALLS, lambda: None,
                                                      lambda out, label: None)


def _expected(k: int) -> object:
    a, b = _inputs(k)
    return a * 2 + b


def _side():
    import torch

    return torch.cuda.Stream()


def test_unjoined_pool_stream_is_rejected_though_it_finished_in_time():
    import torch

    from kernelsearch.evaluator.worker.guards import GuardViolation

    side = _side()

    def forward(args):
        a, b = args
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = a * 2 + b
        time.sleep(PAUSE_S)
        return out

    out = forward(_inputs(0))
    torch.cuda.current_stream().synchronize()  # the caller's stream only: the side work is done anyway
    assert torch.equal(out, _expected(0))
    with pytest.raises(GuardViolation, match="that the caller's stream does not wait for"):
        _check(forward)


def test_event_join_is_ordered():
    import torch

    side = _side()

    def forward(args):
        a, b = args
        main = torch.cuda.current_stream()
        ready = torch.cuda.Event()
        ready.record(main)
        side.wait_event(ready)
        with torch.cuda.stream(side):
            out = a * 2 + b
        done = torch.cuda.Event()
        done.record(side)
        main.wait_event(done)
        out.record_stream(main)
        return out

    snap, report = _check(forward)
    assert report.outcome == "waited" and report.attempts == STREAM_ORDER_CALLS
    assert report.pool_streams > 0 and report.gate_ms > report.call_ms
    assert torch.equal(snap, _expected(report.input))


def test_host_synchronise_is_ordered():
    import torch

    side = _side()

    def forward(args):
        a, b = args
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = a * 2 + b
        torch.cuda.synchronize()
        return out

    snap, report = _check(forward)
    assert report.outcome == "waited" and torch.equal(snap, _expected(report.input))


def test_caller_stream_only_decides_at_once():
    import torch

    snap, report = _check(lambda args: args[0] * 2 + args[1])
    assert report.outcome == "caller_first" and report.attempts == 1
    assert torch.equal(snap, _expected(report.input))


def test_result_read_before_the_side_stream_wrote_it_is_wrong_in_the_snapshot():
    """The output itself never changes (the side stream writes a temporary), so the worker's
    comparison passes; the snapshot, which the judge checks, is wrong."""
    import torch

    side = _side()

    def forward(args):
        a, b = args
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            twice = a * 2
        time.sleep(PAUSE_S)
        return twice + b

    snap, report = _check(forward)
    assert report.outcome == "caller_first"
    assert not torch.allclose(snap, _expected(report.input))


def test_a_switched_current_stream_is_rejected():
    import torch

    from kernelsearch.evaluator.worker.guards import GuardViolation

    side = _side()

    def forward(args):
        torch.cuda.set_stream(side)
        return args[0] * 2 + args[1]

    try:
        with pytest.raises(GuardViolation, match="not the default stream"):
            _check(forward)
    finally:
        torch.cuda.set_stream(torch.cuda.default_stream())
