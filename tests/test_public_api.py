"""The top-level `kernelsearch` package is the public API: exactly these names, each resolving to
the object its defining module has, listed alike by `__all__` and `dir()`, and imported lazily
so that `import kernelsearch` loads neither torch nor the evaluator."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

import kernelsearch

PUBLIC = {
    "evaluate": ("kernelsearch.evaluator.evaluate", "evaluate"),
    "Candidate": ("kernelsearch.records.candidate", "Candidate"),
    "EvalConfig": ("kernelsearch.evaluator.config", "EvalConfig"),
    "EvalResult": ("kernelsearch.records.result", "EvalResult"),
    "Status": ("kernelsearch.records.result", "Status"),
    "load_problem": ("kernelsearch.problems.loader", "load_problem"),
    "reward": ("kernelsearch.rl", "reward"),
    "Reward": ("kernelsearch.rl", "Reward"),
    "RewardSpec": ("kernelsearch.rl", "RewardSpec"),
    "RunConfig": ("kernelsearch.search.config", "RunConfig"),
    "Budgets": ("kernelsearch.search.config", "Budgets"),
    "create_run": ("kernelsearch.search.driver", "create_run"),
    "Driver": ("kernelsearch.search.driver", "Driver"),
    "RunStore": ("kernelsearch.search.store", "RunStore"),
    "Stop": ("kernelsearch.search.budgets", "Stop"),
}


def test_all_is_exactly_the_public_api():
    assert sorted(kernelsearch.__all__) == sorted([*PUBLIC, "__version__"])
    assert len(set(kernelsearch.__all__)) == len(kernelsearch.__all__)


def test_dir_and_all_agree():
    assert sorted(dir(kernelsearch)) == sorted(kernelsearch.__all__)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_name_is_its_defining_modules_object(name):
    import importlib

    module, attr = PUBLIC[name]
    assert getattr(kernelsearch, name) is getattr(importlib.import_module(module), attr)


def test_star_import_gives_every_name():
    ns: dict = {}
    exec("from kernelsearch import *", ns)
    assert set(PUBLIC) <= set(ns) and ns["Driver"] is kernelsearch.Driver


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'candidate'"):
        kernelsearch.candidate  # noqa: B018 (the old deep name is not public)


def test_import_loads_nothing_heavy():
    code = ("import sys, kernelsearch; heavy = [m for m in ('torch', 'kernelsearch.evaluator', "
            "'kernelsearch.search', 'kernelsearch.rl') if m in sys.modules]; print(heavy)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
