"""The technique playbook: its notes, the selection rules on real problem descriptions, and
the notes reaching the prompts and the archive through the search pipeline."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest
from search_support import code_answer, fake_evaluate, run_config, torch_source

from kernelsearch.archive.db import MIGRATIONS, Archive
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.prompts import render_prompt
from kernelsearch.playbook import choose, load_notes, render
from kernelsearch.playbook.exemplars import exemplar_of
from kernelsearch.playbook.notes import parse
from kernelsearch.playbook.select import kinds_of, sm_of
from kernelsearch.problems.describe import describe_cached
from kernelsearch.problems.loader import SUITE_DIR, load_problem
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog
from kernelsearch.search.config import RunConfig
from kernelsearch.search.report import trajectory

A100 = "GPU: NVIDIA A100-SXM4-80GB, compute capability 8.0, 108 SMs, ~2,039 GB/s memory bandwidth."
H100 = "GPU: NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs, ~3,350 GB/s memory bandwidth."
TENSOR_CORE_NOTES = {"mma-ldmatrix", "wgmma-tma", "smem-swizzle", "cp-async-pipeline"}


def _problem(stem: str):
    [path] = list(SUITE_DIR.rglob(f"{stem}.py"))
    return load_problem(path)


def _ids(stem: str, hardware: str = A100, backend: str = "cuda", **kw) -> list[str]:
    p = _problem(stem)
    return [c.note.id for c in choose(describe_cached(p, "cuda"), backend=backend, source=p.source,
                                      hardware=hardware, **kw)]


class _Result:
    """What selection reads of an evaluation result."""

    def __init__(self, kernels: list[str], bound: str = "compute") -> None:
        self.status = "correct"
        self.roofline = {"bound": bound}
        self.profile = {"kernels": [{"name": k, "calls": 1} for k in kernels]}


def test_notes_load_with_front_matter():
    notes = load_notes()
    assert set(notes) == {"mma-ldmatrix", "wgmma-tma", "cp-async-pipeline", "smem-swizzle", "split-k-stream-k",
                          "persistent-kernels", "clusters-dsmem", "online-softmax", "welford"}
    for n in notes.values():
        assert n.title and n.tags and n.backends <= {"cuda", "triton"}
        assert 150 <= len(n.body.split()) <= 320, n.id
        assert "**Pitfalls:**" in n.body and "**Verify:**" in n.body
    assert render([]) == ""


def test_every_note_has_an_exemplar_that_exists():
    """Each note names a kernel of ours in seedbank/exemplars/ and the problem it solves
    (tests/test_exemplars.py screens, compiles and, on a GPU, evaluates them)."""
    for n in load_notes().values():
        ex = exemplar_of(n)
        assert ex is not None and ex.path.is_file(), n.id
        assert ex.load_problem().name == n.exemplar_problem
        assert "class ModelNew" in ex.source() and "cuda_sources" in ex.source()
    with pytest.raises(ValueError, match="go together"):
        parse("---\nid: x\ntitle: t\ntags: a\nbackends: cuda\nexemplar: y\n---\nbody")


def test_fp16_gemm_gets_the_tensor_core_notes():
    a100 = _ids("w01_gemm_fp16")
    assert a100[0] == "mma-ldmatrix" and len(a100) == 3 and set(a100) <= TENSOR_CORE_NOTES
    assert _ids("w01_gemm_fp16", H100)[:2] == ["wgmma-tma", "mma-ldmatrix"]
    p = _problem("w02_gemm_bf16")
    [first, *_] = choose(describe_cached(p, "cuda"), backend="cuda", hardware=A100,
                         result=_Result(["void gemv_fp32_kernel<128>"]))
    assert first.note.id == "mma-ldmatrix" and "no tensor-core kernel in the profile" in first.reason
    assert "measured" in first.reason


def test_a_profile_with_tensor_cores_moves_on():
    ids = _ids("w01_gemm_fp16", result=_Result(["ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn"]))
    assert "mma-ldmatrix" not in ids and ids[0] == "cp-async-pipeline"
    assert "wgmma-tma" in _ids("w01_gemm_fp16", H100, result=_Result(["sm80_xmma_gemm_f16f16_f32"]))


@pytest.mark.parametrize(("stem", "note"), [("02_softmax", "online-softmax"), ("03_layernorm", "welford"),
                                            ("09_residual_rmsnorm", "welford"),
                                            ("w04_causal_attention_fp16", "online-softmax")])
def test_rows_get_online_softmax_or_welford(stem, note):
    assert _ids(stem)[0] == note


def test_memory_bound_elementwise_gets_no_tensor_core_note():
    assert not set(_ids("06_gelu")) & TENSOR_CORE_NOTES
    assert not set(_ids("06_gelu", H100, result=_Result(["vectorized_elementwise_kernel"], "memory"))) \
        & TENSOR_CORE_NOTES


def test_off_cpp_and_triton():
    assert _ids("w01_gemm_fp16", mode="off") == []
    assert _ids("w01_gemm_fp16", backend="cpp") == []
    assert set(_ids("02_softmax", backend="triton")) == {"online-softmax"}  # mma/wgmma are cuda notes


def test_kinds_and_sm_from_text():
    assert kinds_of(source="return torch.softmax(q @ k.transpose(-1, -2), -1) @ v") >= {"matmul", "softmax",
                                                                                      "attention"}
    assert kinds_of(["native_layer_norm", "addmm"]) == {"norm", "matmul"}
    assert kinds_of(["gelu", "add"]) == frozenset()
    assert (sm_of(H100), sm_of("sm_80 box"), sm_of("NVIDIA L4"), sm_of("CPU: 2 cores")) == (90, 80, 89, None)


def test_prompt_placeholder_renders_empty_or_the_notes():
    ctx = {"problem_source": "x = 1", "backend": "cuda", "idea": "tile it"}
    plain = render_prompt("implement", ctx)
    assert "Technique notes" not in plain and "\n\n\n" not in plain
    p = _problem("w01_gemm_fp16")
    notes = choose(describe_cached(p, "cuda"), backend="cuda", hardware=A100)
    text = render_prompt("implement", {**ctx, "playbook": render(notes)})
    assert all(f"### {c.note.title}" in text and c.reason in text for c in notes)


def test_config_keeps_playbook_and_old_runs_resume_without_it():
    config = run_config("single", "scripted:x").with_(playbook="off")
    assert RunConfig.from_dict(config.to_dict()).playbook == "off"
    assert RunConfig.from_dict(config.with_(playbook="notes").to_dict()).playbook == "notes"
    old = config.to_dict()
    del old["playbook"]
    assert RunConfig.from_dict(old).playbook == "off"
    assert run_config("single", "scripted:x").playbook == "on"
    with pytest.raises(ValueError):
        config.with_(playbook="maybe")


def test_an_older_archive_gets_the_column(tmp_path):
    db = sqlite3.connect(tmp_path / "old.sqlite")
    for script in MIGRATIONS[:5]:
        db.executescript(script)
    db.execute("PRAGMA user_version=5")
    db.commit()
    db.close()
    with Archive(tmp_path / "old.sqlite") as a:
        cols = {r[1] for r in a.conn.execute("PRAGMA table_info(llm_calls)")}
        assert "playbook" in cols and a.schema_version() == len(MIGRATIONS)


def _gemm_run(tmp_path, playbook: str):
    """A refine run on the fp16 GEMM (cuda backend, fake evaluations on the CPU): round 0 from
    the reference, round 1 from a kernel whose profile shows tensor cores."""
    class Profiled:  # the archive, recording each result with a roofline and a tensor-core profile
        def __init__(self, archive) -> None:
            self.archive = archive

        def add_candidate(self, *a):
            return self.archive.add_candidate(*a)

        def add_evaluation(self, r):
            r.roofline = {"bound": "compute", "floor_ms": 0.1, "flops": 2e12, "tflops": 300.0, "rate_dtype": "fp16"}
            r.profile = {"kernels": [{"name": "my_hmma_gemm_kernel", "calls": 1}], "summary": ""}
            return self.archive.add_evaluation(r)

    def evaluate(problem, candidate, config, archive):
        return fake_evaluate(problem, candidate, config, Profiled(archive))

    problem = _problem("w01_gemm_fp16")
    config = run_config("refine", "scripted:x", Budgets(rounds=2), n=1)
    config = replace(config, problem_name=problem.name, backend="cuda", hardware=A100, playbook=playbook)
    run_id = create_run(tmp_path / "run", problem, config, [])
    store = RunStore(tmp_path / "run")
    from search_support import ScriptedProvider

    provider = ScriptedProvider(lambda r: code_answer(torch_source(f"a.float() @ b.float() + {len(provider.calls)}",
                                                                   speed=2.0)))
    Driver(store, evaluate_fn=evaluate,
           client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id))).run()
    return store, provider


def test_search_puts_notes_in_prompts_and_archive(tmp_path):
    store, provider = _gemm_run(tmp_path, "on")
    assert len(provider.calls) == 2
    first, second = (r.messages[-1].content for r in provider.calls)
    titles = {n.id: n.title for n in load_notes().values()}
    assert titles["mma-ldmatrix"] in first and "Technique notes" in first
    # a refine prompt carries an exemplar's source, never one written for the searched problem (w01)
    assert "gemm_mma_ldmatrix_kernel" not in first and "```python" in first
    assert titles["mma-ldmatrix"] not in second  # its profile shows tensor cores: the next notes
    assert titles["cp-async-pipeline"] in second
    calls = sorted(store.calls(), key=lambda c: c["round"])
    used = [[n["id"] for n in json.loads(c["playbook"])] for c in calls]
    assert used[0][0] == "mma-ldmatrix" and used[1][0] == "cp-async-pipeline"
    assert all(n["reason"] for c in calls for n in json.loads(c["playbook"]))
    rounds = {r["round"]: r["playbook"] for r in trajectory(store)["rounds"]}
    assert rounds[0] == dict.fromkeys(used[0], 1) and rounds[1] == dict.fromkeys(used[1], 1)


def test_an_exemplar_of_the_searched_problem_is_cited_not_shown():
    p = _problem("w01_gemm_fp16")
    notes = choose(describe_cached(p, "cuda"), backend="cuda", source=p.source, hardware=A100)
    assert notes and exemplar_of(notes[0].note).problem == "w01_gemm_fp16"
    own = exemplar_of(notes[0].note).source()
    assert own in render(notes, code=True, problem="02_softmax")  # another problem: the first exemplar's source
    shown = render(notes, code=True, problem="w01_gemm_fp16")
    assert own not in shown and f"seedbank/exemplars/{exemplar_of(notes[0].note).name}.py" in shown
    shown_problems = [e.problem for c in notes if (e := exemplar_of(c.note)) and e.source() in shown]
    assert len(shown_problems) <= 1 and "w01_gemm_fp16" not in shown_problems


def test_search_with_notes_only_cites_the_exemplars(tmp_path):
    store, provider = _gemm_run(tmp_path, "notes")
    first = provider.calls[0].messages[-1].content
    assert load_notes()["mma-ldmatrix"].title in first and "seedbank/exemplars/mma_ldmatrix_gemm_fp16.py" in first
    assert "gemm_mma_ldmatrix_kernel" not in first
    assert all(c["playbook"] for c in store.calls())


def test_search_with_playbook_off(tmp_path):
    store, provider = _gemm_run(tmp_path, "off")
    assert provider.calls and all("Technique notes" not in r.messages[-1].content for r in provider.calls)
    assert all(n.title not in r.messages[-1].content for r in provider.calls for n in load_notes().values())
    assert all(c["playbook"] is None for c in store.calls())
    assert all(r["playbook"] == {} for r in trajectory(store)["rounds"])
