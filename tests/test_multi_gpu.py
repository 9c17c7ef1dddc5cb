"""benchmarks/multi_gpu.py on the CPU: the command lines each configuration gets (GPUs, Ray's GPU
count), `report` from canned runs (speedup, verdict differences, time ratios, lane overlap), a
slimmed wheel, and a real `run` with two CPU lanes over two plain-PyTorch candidates (no build),
resumed by a second call."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import DATA
from test_kernelbench import _script


@pytest.fixture(scope="module")
def mg():
    return _script("multi_gpu")


def test_configs_and_their_command_lines(mg, tmp_path):
    cfgs = mg.parse_configs("local:1, local:2,ray:2")
    assert [c.label for c in cfgs] == ["local-1", "local-2", "ray-2"]
    for bad in ("local:0", "slurm:2", "ray", "local:1,local:1"):
        with pytest.raises(SystemExit):
            mg.parse_configs(bad)
    args = mg.parser().parse_args(["run", "--out", str(tmp_path), "--bench-arg=--max-reps=20"])
    p, s, a = Path("P"), Path("S"), Path("A.sqlite")
    cmd, env = mg.bench_command(cfgs[1], "cuda", p, s, a, args)
    assert cmd[cmd.index("--gpus") + 1] == "0,1" and not env
    assert {"--confirm", "--no-compile", "--matched-only", "--json"} <= set(cmd) and cmd[-1] == "--max-reps=20"
    assert cmd[cmd.index("--seed") + 1] == "1" and cmd[cmd.index("--atol") + 1] == "0.0001"
    cmd, env = mg.bench_command(cfgs[2], "cuda", p, s, a, args)
    assert "--executor" in cmd and "--gpus" not in cmd
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "RAY_OVERRIDE_RESOURCES": '{"GPU": 2}',
                   "RAY_memory_monitor_refresh_ms": "0"}
    cmd, env = mg.bench_command(cfgs[2], "cpu", p, s, a, args)
    assert cmd[cmd.index("--lanes") + 1] == "2" and "CUDA_VISIBLE_DEVICES" not in env
    base = mg._base_env(tmp_path)
    assert base["NCCL_NVLS_ENABLE"] == "0" and base["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert base["NVSHMEM_DISABLE_NVLS"] == "1" and base["KERNELSEARCH_HOME"] == str(tmp_path)


def _row(key, verdict, ms=None, eager=None, gpu=None, start=None, end=None):
    r = {"key": key, "kind": "custom", "expect": "correct", "verdict": verdict, "reason": f"why {key}",
         "candidate_ms": ms, "eager_ms": eager, "gpu": gpu, "candidate_rel_spread": 0.01}
    if start is not None:
        r.update(start_s=start, end_s=end, eval_s=end - start)
    return r


def _canned(d: Path, config: str, wall: float, rows: list[dict], stopped: bool = False) -> None:
    d.mkdir(parents=True, exist_ok=True)
    judged = sum(r["verdict"] != "not_run" for r in rows)
    (d / f"{config.replace(':', '-')}.json").write_text(json.dumps({
        "config": config, "label": config.replace(":", "-"), "device": "cuda", "wall_s": wall, "rc": 0,
        "stopped": stopped, "judged": judged, "candidates": len(rows),
        "candidates_per_hour": judged / wall * 3600, "settings": {"seed": 1},
        "env": {"host": "h", "gpus": ["NVIDIA H200", "NVIDIA H200"], "cpu_count": 32, "torch": "2.11", "ray": "2.60.0"},
        "results": rows}))


def test_report_from_canned_runs(mg, tmp_path):
    keys = ["level1/a.py", "level1/b.py", "level2/c.py", "level2/d.py"]
    _canned(tmp_path / "one", "local:1", 100.0, [
        _row(keys[0], "correct", 1.0, 2.0, 0, 0, 10), _row(keys[1], "correct", 2.0, 2.0, 0, 10, 20),
        _row(keys[2], "incorrect"), _row(keys[3], "correct", 4.0, 4.0, 0, 20, 30)])
    (tmp_path / "one" / "warm.json").write_text(json.dumps({"built": 13, "failed": 3, "cached": 0, "wall_s": 61.0}))
    _canned(tmp_path / "two", "local:2", 50.0, [   # a (GPU 0) ran while b and d ran on GPU 1
        _row(keys[0], "correct", 1.10, 2.0, 0, 0, 10), _row(keys[1], "correct", 2.02, 2.1, 1, 0, 4),
        _row(keys[2], "correct", 3.0, 3.0, 1, 4, 6), _row(keys[3], "correct", 3.9, 4.0, 1, 8, 12)])
    _canned(tmp_path / "two", "ray:2", 80.0, [_row(k, "not_run") for k in keys], stopped=True)
    text = mg.render([tmp_path / "one", tmp_path / "two"])
    lines = text.splitlines()
    assert "13 extensions built, 3 failed" in text and "2 GPUs" in text
    row2 = next(ln for ln in lines if ln.startswith("| local:2 |"))
    cells = [c.strip() for c in row2.strip("|").split("|")]
    # judged, wall, per hour, speedup, verdicts equal, then candidate ratios: median of 1.10, 1.01, 0.975
    assert cells[1:6] == ["4/4", "50.0", "288", "2.00x", "3/4"]
    assert cells[6] == "1.010" and cells[8] == "1/3" and cells[7].startswith("0.095")
    assert any("local:2: level2/c.py: incorrect in local:1, correct here" in ln for ln in lines)
    ray = next(ln for ln in lines if ln.startswith("| ray:2 |"))
    assert "0/4 (stopped)" in ray and "| - |" in ray
    slow = next(ln for ln in lines if ln.startswith("| local:2 | level1/a.py |"))
    assert "| 1.100 |" in slow and "8.0 / 10.0" in slow   # b (4 s) and d (2 of its 4 s) overlapped a; c too
    assert not any(ln.startswith("| local:2 | level1/b.py") for ln in lines)  # within 5 %


def test_slim_wheel_drops_a_folder_and_its_record_lines(mg, tmp_path):
    src, dest = tmp_path / "w-1.0-py3-none-any.whl", tmp_path / "out" / "w-1.0-py3-none-any.whl"
    dest.parent.mkdir()
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("w/__init__.py", "x = 1\n")
        z.writestr("w/jars/big.jar", b"\0" * 1000)
        z.writestr("w-1.0.dist-info/RECORD", "w/__init__.py,sha256=a,6\nw/jars/big.jar,sha256=b,1000\nw-1.0.dist-info/RECORD,,\n")
    assert mg.slim_wheel(src, dest, drop=("w/jars/",)) == 1000
    with zipfile.ZipFile(dest) as z:
        assert sorted(z.namelist()) == ["w-1.0.dist-info/RECORD", "w/__init__.py"]
        assert "jars" not in z.read("w-1.0.dist-info/RECORD").decode()


ROW_NORM_WRONG = '''"""Forgets the variance: wrong."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x - x.mean(-1, keepdim=True)
'''


def _layout(work: Path) -> None:
    """A two-candidate kbtp-style layout: a correct plain-PyTorch one and a wrong one."""
    for sub in ("ks/problems", "ks/solutions"):
        (work / sub).mkdir(parents=True)
    entries = []
    for i, (name, kind, expect, cand) in enumerate((
            ("scale_add", "reference", "correct", (DATA / "candidates" / "py_correct.py").read_text()),
            ("row_norm", "wrong", "incorrect", ROW_NORM_WRONG)), start=1):
        (work / "ks" / "problems" / f"{name}.py").write_text((DATA / "problems" / f"{name}.py").read_text())
        (work / "ks" / "solutions" / f"{name}.py").write_text(cand)
        entries.append({"level": 1, "file": f"{name}.py", "name": name, "key": f"level1/{name}.py", "kind": kind,
                        "expect": expect, "problem_id": i})
    (work / "manifest.json").write_text(json.dumps({"entries": entries}))


def test_run_with_two_cpu_lanes_then_resume(mg, tmp_path, capsys):
    work, out = tmp_path / "work", tmp_path / "out"
    _layout(work)
    argv = ["run", "--work", str(work), "--out", str(out), "--configs", "local:1,local:2", "--device", "cpu",
            "--stop-by-s", "300", "--bench-arg=--max-reps=20", "--bench-arg=--trials=2", "--bench-arg=--no-profile"]
    assert mg.main(argv) == 0
    warm = json.loads((out / "warm.json").read_text())
    assert warm["rc"] == 0 and warm["need_build"] == 0 and warm["ceilings"]
    runs = {c: json.loads((out / f"local-{c}.json").read_text()) for c in (1, 2)}
    for c, r in runs.items():
        assert r["judged"] == 2 and not r["stopped"] and r["rc"] == 0 and r["lanes"] == c
        assert {x["key"]: x["verdict"] for x in r["results"]} == {"level1/scale_add.py": "correct",
                                                                  "level1/row_norm.py": "incorrect"}
        ok = next(x for x in r["results"] if x["verdict"] == "correct")
        assert ok["candidate_ms"] > 0 and ok["eager_ms"] > 0 and ok["end_s"] > ok["start_s"] >= 0
    assert "--lanes" in runs[2]["command"] and runs[1]["env"]["NCCL_NVLS_ENABLE"] == "0"
    report = (out / "report.md").read_text()
    assert "| local:2 | 2/2 |" in report and "Verdicts that differ from the base: none." in report
    capsys.readouterr()
    assert mg.main(argv) == 0  # both finished: nothing runs again
    said = capsys.readouterr().out
    assert said.count("finished in an earlier call") == 2 and "warm-up:" not in said
