"""The configuration's string choices: a typo raises, naming the field and what it may be."""

from __future__ import annotations

import argparse

import pytest

from kernelsearch.evaluator.config import EvalConfig, Limits
from kernelsearch.records.choices import (
    DEVICES,
    DISTRIBUTIONS,
    FALLBACK_POLICIES,
    HANDOVER_MODES,
    SANDBOX_MODES,
)
from kernelsearch.search.config import STRATEGIES, RunConfig


@pytest.mark.parametrize(("field", "typo"), [("torch_fallback", "rejct"), ("handover", "file"),
                                            ("device", "cdua"), ("distribution", "gaussian")])
def test_eval_config_typo_raises(field: str, typo: str) -> None:
    with pytest.raises(ValueError, match=rf"EvalConfig\.{field} must be one of .*not '{typo}'"):
        EvalConfig(**{field: typo})


def test_limits_sandbox_typo_raises() -> None:
    with pytest.raises(ValueError, match=r"Limits\.sandbox must be one of 'auto', 'bwrap', 'none', not 'bwarp'"):
        Limits(sandbox="bwarp")


def test_every_allowed_choice_is_taken() -> None:
    for device in DEVICES:
        assert EvalConfig(device=device).device == device
    for value in FALLBACK_POLICIES:
        assert EvalConfig(torch_fallback=value).torch_fallback == value
    for value in HANDOVER_MODES:
        assert EvalConfig(handover=value).handover == value
    for value in DISTRIBUTIONS:
        assert EvalConfig(distribution=value).distribution == value
    for value in SANDBOX_MODES:
        assert Limits(sandbox=value).sandbox == value
    # with_ goes through __post_init__ too
    with pytest.raises(ValueError, match="torch_fallback"):
        EvalConfig().with_(torch_fallback="Reject")


def test_run_config_strategy_typo_raises() -> None:
    base = {"llm": "replay:x", "problem_name": "p", "backend": "cpp"}
    for s in STRATEGIES:
        assert RunConfig(strategy=s, **base).strategy == s
    with pytest.raises(ValueError, match=r"RunConfig\.strategy must be one of .*'best-of-n'.*not 'best_of_n'"):
        RunConfig(strategy="best_of_n", **base)
    with pytest.raises(ValueError, match=r"RunConfig\.torch_fallback"):
        RunConfig(strategy="single", torch_fallback="alow", **base)


def test_cli_choices_are_the_records() -> None:
    """The eval command's --torch-fallback and --device take exactly the config's choices."""
    from kernelsearch.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    ev = sub.choices["eval"]
    opts = {a.dest: a for a in ev._actions}
    assert tuple(opts["torch_fallback"].choices) == FALLBACK_POLICIES
    assert tuple(opts["device"].choices) == DEVICES
    with pytest.raises(SystemExit):
        ev.parse_args(["p", "c.py", "--torch-fallback", "rejct"])
