"""Compile the playbook's exemplar kernels with nvcc, no GPU needed: the same CUDA text and
flags `load_inline` would use (its prelude, torch's nvcc flags, the exemplar's own
`extra_cuda_cflags`), for sm_90a unless the exemplar names its own arch, plus `ptxas -v`
(registers, spills). `--bindings` also compiles the generated pybind11 module with the C++
compiler. Works with a CPU-only torch (a stub stands in for the one CUDA build header it lacks).

    python scripts/compile_exemplars.py [NAME ...] [--arch sm_90a] [--bindings] [-j 2] [--keep DIR]

Exit 0 when every exemplar compiled.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelsearch.playbook.exemplars import Exemplar, build_sources, exemplars, kernel_arch_flags

PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


def includes(work: Path) -> list[str]:
    import torch.utils.cpp_extension as ext

    dirs = [Path(d) for d in ext.include_paths()]
    if not any((d / "c10/cuda/impl/cuda_cmake_macros.h").is_file() for d in dirs):
        stub = work / "stub" / "c10/cuda/impl"
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        dirs.insert(0, work / "stub")
    return [f"-I{d}" for d in dirs] + [f"-I{sysconfig.get_paths()['include']}"]


def compile_one(ex: Exemplar, arch: str, work: Path, bindings: bool) -> tuple[bool, str]:
    import torch.utils.cpp_extension as ext

    src = build_sources(ex.source())
    d = work / ex.name
    d.mkdir(parents=True, exist_ok=True)
    cu = d / "cuda.cu"
    cu.write_text(PRELUDE + "\n".join(src.cuda_sources))
    arch_flags = kernel_arch_flags(src) or [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    cmd = ["nvcc", "-c", str(cu), "-o", str(d / "cuda.o"), *includes(work), "-std=c++20", "-Xcompiler", "-fPIC",
           *ext.COMMON_NVCC_FLAGS, *src.extra_cuda_cflags, "-Xptxas", "-v"]
    if not kernel_arch_flags(src):
        cmd += arch_flags
    out = subprocess.run(cmd, capture_output=True, text=True)
    log = out.stdout + out.stderr
    ok = out.returncode == 0
    lines = [f"{ex.name} ({ex.note_id}, {ex.problem}): {'ok' if ok else 'FAILED'}  [{' '.join(arch_flags)}]"]
    if ok:
        for m in re.finditer(r"Compiling entry function '(\w+)'[\s\S]*?Used (\d+) registers[^\n]*", log):
            spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                              log[m.start():m.end() + 400])
            lines.append(f"    {m.group(1)[:70]}: {m.group(2)} registers"
                         + (f", spills {spill.group(1)}/{spill.group(2)} B" if spill else ""))
        warn = [ln for ln in log.splitlines() if "warning" in ln.lower() and "torch/include" not in ln]
        lines += [f"    {w.strip()[:200]}" for w in warn[:10]]
    else:
        lines += [f"    {ln}" for ln in log.splitlines() if "error" in ln.lower()][:30]
    if ok and bindings:
        main = d / "main.cpp"
        defs = "\n".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in src.functions)
        main.write_text("#include <torch/extension.h>\n" + "\n".join(src.cpp_sources)
                        + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n")
        cxx = subprocess.run(["c++", "-c", str(main), "-o", str(d / "main.o"), *includes(work), "-std=c++20", "-fPIC",
                              "-DTORCH_EXTENSION_NAME=ks_check"], capture_output=True, text=True)
        ok = cxx.returncode == 0
        lines.append(f"    bindings: {'ok' if ok else 'FAILED'}")
        if not ok:
            lines += [f"    {ln}" for ln in (cxx.stdout + cxx.stderr).splitlines() if "error" in ln][:20]
    return ok, "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="exemplar file stems or note ids (default: all)")
    ap.add_argument("--arch", default="sm_90a", help="target where an exemplar names none (default sm_90a)")
    ap.add_argument("--bindings", action="store_true", help="also compile the pybind11 module (C++ side)")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="build here and keep the files")
    args = ap.parse_args()
    chosen = [e for e in exemplars() if not args.names or e.name in args.names or e.note_id in args.names]
    if not chosen:
        print("no such exemplar", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        includes(work)  # make the stub once, before the workers start
        with ThreadPoolExecutor(args.j) as pool:
            results = list(pool.map(lambda e: compile_one(e, args.arch, work, args.bindings), chosen))
    for _, text in results:
        print(text, flush=True)
    bad = sum(not ok for ok, _ in results)
    print(f"{len(results) - bad}/{len(results)} exemplars compiled")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
