"""The partial in-place change (evaluator/worker/inplace.py): where it goes and what it keeps, the
verdict on a stale output (decide.stale_output) and the protocol's rules for its report. The
evaluations themselves are in the red-team corpus (c_memo_sampled_contents and its C++ and CUDA
twins rejected; the honest caches and static buffers correct)."""

from __future__ import annotations

import torch

from kernelsearch.evaluator.config import INPLACE_FILE, INPLACE_TAG, STALE_TAG, TimingConfig
from kernelsearch.evaluator.verdict import decide
from kernelsearch.evaluator.verdict.protocol import protocol_violation
from kernelsearch.evaluator.worker import inplace
from kernelsearch.records.result import Status, TrialCheck


def _draw(seed: int, *shapes) -> list:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


def _changed(inputs: list, donor: list, seed: int):
    before = [x.clone() for x in inputs]
    ptrs = [x.data_ptr() for x in inputs]
    change = inplace.plan(inputs, donor, seed)
    assert change is not None
    inplace.apply(inputs, inplace.values(donor, change), change)
    assert [x.data_ptr() for x in inputs] == ptrs  # the same storage, changed in place
    return change, before


def test_the_head_is_kept_and_a_far_block_takes_the_donors_values():
    for seed in range(20):
        inputs, donor = _draw(1, (4096,), (4096,)), _draw(2, (4096,), (4096,))
        change, before = _changed(inputs, donor, seed)
        x, old, d = inputs[change.index], before[change.index], donor[change.index]
        assert torch.equal(x[:2048], old[:2048])  # the head: the first half
        assert change.start >= 2048 and change.stop - change.start == 4096 // inplace.BLOCK
        assert torch.equal(x[change.start:change.stop], d[change.start:change.stop])
        assert not torch.equal(x, old)
        assert torch.equal(inputs[1 - change.index], before[1 - change.index])  # one input changes
    places = {(c.index, c.start) for c in (inplace.plan(_draw(1, (4096,), (4096,)), _draw(2, (4096,), (4096,)), s)
                                            for s in range(20))}
    assert len(places) > 5  # the seed decides the input and the place


def test_the_same_seed_makes_the_same_change_in_both_processes():
    a = inplace.plan(_draw(1, (64, 32)), _draw(2, (64, 32)), 7)
    b = inplace.plan(_draw(1, (64, 32)), _draw(2, (64, 32)), 7)
    assert a == b


def test_whole_rows_change_so_per_row_structure_survives():
    x = torch.randn(64, 33).softmax(-1)
    d = torch.randn(64, 33).softmax(-1)
    change, _ = _changed([x], [d], 3)
    assert change.start % 33 == 0 and change.stop % 33 == 0
    assert torch.allclose(x.sum(-1), torch.ones(64))


def test_position_wise_structure_survives_a_triangular_input():
    x, d = torch.tril(torch.randn(128, 128)), torch.tril(torch.randn(128, 128))
    _changed([x], [d], 5)
    assert torch.equal(x, torch.tril(x))


def test_a_symmetric_input_stays_symmetric():
    x, d = torch.randn(96, 96), torch.randn(96, 96)
    x, d = (x + x.T) / 2, (d + d.T) / 2
    change, before = _changed([x], [d], 11)
    assert change.symmetric and torch.equal(x, x.T) and not torch.equal(x, before[0])


def test_inputs_that_cannot_be_split_are_skipped():
    ints = torch.arange(1024)
    small = torch.randn(8)
    strided = torch.randn(64, 64).T  # not contiguous
    same = torch.ones(256)  # a donor equal to it: nothing would change
    assert inplace.plan([ints, small, strided, same, 3.0],
                        [ints + 1, torch.randn(8), torch.randn(64, 64).T, torch.ones(256), 4.0], 1) is None
    change = inplace.plan([small, torch.randn(256)], [torch.randn(8), torch.randn(256)], 1)
    assert change is not None and change.index == 1


def test_a_stale_output_is_rejected_and_a_wrong_one_is_incorrect():
    ok = TrialCheck("trial0", True)
    stale = TrialCheck(f"{STALE_TAG}1", False, "it equals the output for the input before the change: ...")
    v = decide.stale_output([ok, stale])
    assert v is not None and v.status is Status.REJECTED
    assert v.reason == "the output did not follow a partial in-place change of input 1 (a stale, cached result)"
    assert decide.checks_verdict([ok, stale], 2, []) is None  # decided by stale_output alone
    wrong = TrialCheck(f"{INPLACE_TAG}0", False, "12/4096 elements outside atol")
    assert decide.stale_output([ok, wrong]) is None
    v = decide.checks_verdict([ok, wrong], 2, [])
    assert v is not None and v.status is Status.INCORRECT and v.reason.startswith(INPLACE_TAG)
    assert decide.stale_output([ok, TrialCheck(f"{INPLACE_TAG}0", True)]) is None


def _messages(report: dict | None, at: str = "before observed") -> list[dict]:
    msgs = [{"event": "built"}, {"event": "trial", "index": 0}, {"event": "trial", "index": 1}]
    tail = [{"event": "observed"},
            {"event": "timing", "samples_ms": [1.0] * 5, "spots": [{"file": "timed0.kst", "input_set": 3}]},
            {"event": "done"}]
    if report is None:
        return msgs + tail
    item = [{"event": "inplace", **report}]
    if at == "between trials":
        return msgs[:2] + item + msgs[2:] + tail
    if at == "after observed":
        return msgs + tail[:1] + item + tail[1:]
    return msgs + item + tail


def test_the_protocol_checks_the_in_place_report():
    cfg = TimingConfig(warmup=1, min_reps=5, max_reps=20, spot_checks=1)
    n = cfg.warmup + cfg.max_reps
    good = {"file": INPLACE_FILE, "input": 0}

    def why(msgs, asked=True):
        return protocol_violation(msgs, 2, cfg, n, 0, inplace=asked)

    assert why(_messages(good)) == ""
    assert why(_messages({"file": "", "input": -1})) == ""  # no input could be changed
    assert why(_messages(None), asked=False) == ""
    assert "without the in-place change's report" in why(_messages(None))
    assert "did not ask for" in why(_messages(good), asked=False)
    assert "out of order" in why(_messages(good, "between trials"))
    assert "out of order" in why(_messages(good, "after observed"))
    assert "names output file" in why(_messages({"file": "../trial0.kst", "input": 0}))
    assert "names output file" in why(_messages({"file": "", "input": 0}))
    assert "names output file" in why(_messages({"file": INPLACE_FILE, "input": -1}))
    msgs = _messages(good)
    assert "2 'inplace' reports" in why(msgs[:3] + msgs[3:4] + msgs[3:])
