"""The red-team corpus: every exploit in tests/redteam/exploits must get a non-correct status with
its expected reason, and every honest kernel in tests/redteam/honest must be judged correct.

Each corpus file says what it expects in a header after its docstring:

    # class: A..E          (the exploit class of ../shared/docs/threats.md it belongs to or probes)
    # expect: STATUS | reason: SUBSTRING   (case-insensitive substring of the verdict's reason:
                           a secondary check, for a person; the code is what pins the item)
    # code: CODE           (exploits: the verdict's code, records/codes.py; ``none`` for an
                           exploit caught by the torch_fallback mark, which has no code)
    # problem: NAME        (tests/redteam/problems, tests/data/problems, or a bundled name)
    # device: cpu|cuda     (cuda items carry the gpu marker)
    # config: k=v, ...     (optional EvalConfig overrides, e.g. torch_fallback=reject)
    # flags: none          (optional: the result must carry no flags)
    # flags: torch_fallback | note: SUBSTRING   (optional: the result must carry these flags, and
                           one of its notes, `errors`, the substring: which layer marked it)
    # failures: rejected, incorrect   (optional: the statuses of every failed check, in order)

An exploit is caught by a status other than correct, or by the torch_fallback mark: under the
default policy it is correct with that flag, and a search never ranks it (docs/search.md).

Run the corpus alone with ``python -m pytest -m redteam``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.codes import INFO, Code
from kernelsearch.records.codes import parse as parse_code
from kernelsearch.records.result import Status

CORPUS = Path(__file__).parent / "redteam"
_HEADER = re.compile(r"^# (class|expect|code|problem|device|config|flags|failures): (.+)$", re.M)


@dataclass(frozen=True)
class Case:
    path: Path
    kind: str  # "exploit" or "honest"
    klass: str
    status: str
    reason: str
    problem: str
    device: str
    config: dict
    flags: str  # "none", or flags the result must carry (comma-separated), or ""
    note: str = ""  # substring of one of the result's notes (EvalResult.errors)
    failures: str = ""  # the statuses of EvalResult.failures, comma-separated, in order
    code: str | None = None  # the verdict's code ("" for none); None: no header (honest kernels)

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.path.stem}"


def _parse(path: Path, kind: str) -> Case:
    head = dict(_HEADER.findall(path.read_text()))
    status, _, reason = head["expect"].partition("| reason:")
    config = {}
    for item in filter(None, (p.strip() for p in head.get("config", "").split(","))):
        key, _, value = item.partition("=")
        config[key.strip()] = value.strip()
    flags, _, note = head.get("flags", "").partition("| note:")
    code = head["code"].strip() if "code" in head else None
    return Case(path, kind, head["class"].strip(), status.strip(), reason.strip(), head["problem"].strip(),
                head["device"].strip(), config, flags.strip(), note.strip(), head.get("failures", "").strip(),
                "" if code == "none" else code)


def load_corpus() -> list[Case]:
    return [_parse(p, kind) for kind, sub in (("exploit", "exploits"), ("honest", "honest"))
            for p in sorted((CORPUS / sub).glob("*.py"))]


CASES = load_corpus()


def _resolve(name: str):
    for where in (CORPUS / "problems", DATA / "problems"):
        if (where / f"{name}.py").is_file():
            return load_problem(where / f"{name}.py")
    return load_problem(name)


def _config(case: Case, home: Path) -> EvalConfig:
    """Small but real, like conftest's cpu_config, with two timed-call spot checks."""
    if case.device == "cuda":
        cfg = EvalConfig(device="cuda", trials=5, compile_baseline=False, home=home,
                         timing=TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=5.0, spot_checks=2),
                         limits=Limits(build_timeout_s=900, run_timeout_s=300))
    else:
        cfg = EvalConfig(device="cpu", trials=5, compile_baseline=False, home=home,
                         timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, budget_s=2.0, spot_checks=2),
                         limits=Limits(build_timeout_s=600, run_timeout_s=60, memory_bytes=3 << 30,
                                       output_bytes=1 << 20))
    types = {f.name: str(f.type).removesuffix(" | None") for f in fields(EvalConfig)}
    cast = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes")}
    return cfg.with_(**{k: cast.get(types[k], str)(v) for k, v in case.config.items()})


@pytest.fixture(scope="module")
def redteam_archive(tmp_path_factory):
    """One archive per worker, so the eager baseline of each problem is timed once."""
    from kernelsearch.archive import Archive

    with Archive(tmp_path_factory.mktemp("redteam") / "archive.sqlite") as a:
        yield a


# Python DSLs a GPU machine may lack: their items are skipped there, saying what to install
_DSL_PACKAGES = {"cute": ("cutlass.cute", "cute"), "tilelang": ("tilelang", "tilelang")}


def _missing_dsl(case: Case) -> str:
    module, extra = _DSL_PACKAGES.get(Candidate.from_file(case.path).backend, ("", ""))
    if not module:
        return ""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return "" if found else f"{module} is not installed (pip install -e '.[{extra}]')"


def _marks(case: Case) -> list:
    marks = [pytest.mark.redteam]
    if case.device == "cuda":
        marks.append(pytest.mark.gpu)
        if why := _missing_dsl(case):
            marks.append(pytest.mark.skip(reason=why))
    return marks


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CASES])
def test_redteam(case: Case, redteam_archive, monkeypatch):
    monkeypatch.setenv("KS_TEST_SECRET", "hunter2")
    problem = _resolve(case.problem)
    home = Path(os.environ["KERNELSEARCH_HOME"])
    r = evaluate(problem, Candidate.from_file(case.path), _config(case, home), redteam_archive)
    detail = (r.status.value, r.code, r.reason, r.flags, r.build_log[-1500:], r.output_excerpt[-1500:],
              (r.profile or {}).get("summary"))  # on CUDA: the kernels the profiled forward ran
    assert r.status.value == case.status, detail
    assert r.code == (case.code or ""), detail  # an honest kernel has none
    assert case.reason.lower() in r.reason.lower(), detail
    if case.flags == "none":
        assert r.flags == [], detail
    elif case.flags:
        assert {f.strip() for f in case.flags.split(",")} <= set(r.flags), detail
    if case.note:
        assert case.note.lower() in " ".join(r.errors).lower(), (*detail, r.errors)
    if case.failures:
        assert [f["status"] for f in r.failures] == [s.strip() for s in case.failures.split(",")], (*detail, r.failures)
    if case.kind == "honest":
        assert r.status is Status.CORRECT and r.speedup_vs_eager is not None, detail
    elif r.status is Status.CORRECT:  # caught by the mark: a search never ranks it
        assert "torch_fallback" in r.flags, detail
    else:
        assert r.speedup_vs_eager is None, detail


@pytest.mark.redteam
def test_corpus_covers_the_threat_classes():
    """The corpus itself: size, classes, well-formed headers, a bounded number of CPU builds."""
    exploits = [c for c in CASES if c.kind == "exploit"]
    honest = [c for c in CASES if c.kind == "honest"]
    assert len(exploits) >= 25 and len(honest) >= 40, (len(exploits), len(honest))
    assert {c.klass for c in exploits} >= {"A", "B", "C", "D", "E"}
    assert {c.klass for c in exploits if c.device == "cpu"} >= {"A", "B", "C", "D", "E"}
    statuses = {s.value for s in Status}
    for c in CASES:
        # every exploit names its code, one of the closed set with the status it expects
        assert c.kind == "honest" or c.code is not None, c.id
        if c.code:
            assert parse_code(c.code) and INFO[Code(c.code)].status == c.status, c.id
        else:
            assert c.status == "correct", c.id
        assert ast.get_docstring(ast.parse(c.path.read_text())), c.id
        assert c.status in statuses and c.reason and c.device in ("cpu", "cuda"), c.id
        # an exploit may be expected correct only when the torch_fallback mark is what catches it
        assert c.kind == "exploit" or c.status == "correct", c.id
        assert c.kind == "honest" or c.status != "correct" or "torch_fallback" in c.flags, c.id
        assert set(c.config) <= {f.name for f in fields(EvalConfig)}, c.id
        _resolve(c.problem)
    cpu_builds = [c for c in CASES if c.device == "cpu" and Candidate.from_file(c.path).backend == "cpp"
                  and not screen(c.path.read_text()).reject and "BUILD = False" not in c.path.read_text()]
    assert len(cpu_builds) <= 10, [c.id for c in cpu_builds]  # ~45 s each on a 2-core CI machine
