# Temporary device check for the cuda/triton seed bank (removed after use).
import importlib.util
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]  # src/kernelsearch/seedbank
SUITE = ROOT.parent / "problems" / "suite"
SMALL = "--small" in sys.argv  # compute-sanitizer mode: small sizes only, no timing
ONLY = [a for a in sys.argv[1:] if not a.startswith("--")]
CUDA_ONLY = "--cuda-only" in sys.argv
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
FAIL = []


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def problem(stem):
    (p,) = list(SUITE.glob(f"level*/{stem}.py"))
    return load(p, "prob_" + stem)


def build(P, M, init, seed=0):
    with torch.device("cuda"):
        torch.manual_seed(seed)
        ref = P.Model(*init)
        torch.manual_seed(seed)
        new = M.ModelNew(*init)
    sr, sn = ref.state_dict(), new.state_dict()
    assert list(sr) == list(sn), (list(sr), list(sn))
    for k in sr:
        assert torch.equal(sr[k], sn[k]), k
    return ref, new


def cmp(tag, out, exp, atol, rtol, hi=None):
    ok = out.shape == exp.shape and out.dtype == exp.dtype
    err = float("nan")
    if ok:
        err = (out - exp).abs().max().item() if out.numel() else 0.0
        ok = torch.allclose(out, exp, atol=atol, rtol=rtol, equal_nan=True)
    extra = ""
    if hi is not None and out.numel():
        extra = f" err_vs_fp64={(out.double() - hi).abs().max().item():.3e}"
    print(f"  {'ok ' if ok else 'BAD'} {tag} shape={tuple(out.shape)} maxerr={err:.3e}{extra}", flush=True)
    if not ok:
        FAIL.append(tag)


def misalign(t):
    buf = torch.empty(t.numel() + 1, device=t.device, dtype=t.dtype)
    m = buf[1:].view(t.shape)
    m.copy_(t)
    assert m.is_contiguous() and m.data_ptr() % 16 != 0
    return m


def timeit(fn, args, reps=20):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    s = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        s[i].record()
        fn(*args)
        e[i].record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) for a, b in zip(s, e, strict=True))
    return ts[len(ts) // 2]


def run_problem(stem, init, cases, backends, bench_args=None, extra=None):
    if ONLY and stem not in ONLY:
        return
    print(f"=== {stem}", flush=True)
    P = problem(stem)
    atol, rtol = getattr(P, "ATOL", 1e-2), getattr(P, "RTOL", 1e-2)
    mods = {}
    for b in backends:
        if CUDA_ONLY and b != "cuda":
            continue
        f = ROOT / b / f"{stem}.py"
        t0 = time.time()
        try:
            mods[b] = load(f, f"cand_{b}_{stem}")
            print(f"  loaded {b} in {time.time() - t0:.1f}s", flush=True)
        except Exception:
            traceback.print_exc()
            FAIL.append(f"{stem}/{b} import")
    for b, M in mods.items():
        for ci, (cinit, make, note) in enumerate(cases):
            try:
                ref, new = build(P, M, cinit or init, seed=ci)
                torch.manual_seed(100 + ci)
                with torch.device("cuda"):
                    args = make()
                with torch.no_grad():
                    exp = ref(*args)
                    out = new(*args)
                    torch.cuda.synchronize()
                hi = None
                if extra is not None and exp.numel() < 50_000_000:
                    hi = extra(ref, args)
                cmp(f"{stem}/{b}/{note}", out, exp, atol, rtol, hi)
            except Exception:
                traceback.print_exc()
                FAIL.append(f"{stem}/{b}/{note}")
            torch.cuda.empty_cache()
    if SMALL or bench_args is None:
        return
    try:
        ref, _ = build(P, mods[backends[0]], init)
        torch.manual_seed(7)
        with torch.device("cuda"):
            args = bench_args()
        with torch.no_grad():
            line = f"  TIME {stem}: eager {timeit(ref, args):.3f} ms"
            for b, M in mods.items():
                _, new = build(P, M, init)
                line += f" | {b} {timeit(new, args):.3f} ms"
        print(line, flush=True)
        del args
    except Exception:
        traceback.print_exc()
        FAIL.append(f"{stem} timing")
    torch.cuda.empty_cache()


r = torch.randn

# ---------------------------------------------------------------- softmax
def softmax_cases():
    dims = [1, 3, 4, 7, 33, 1000, 4096, 4097] + ([] if SMALL else [32768, 65540, 100003, 300000])
    cs = [((), (lambda d=d: [r(5, d)]), f"dim{d}") for d in dims]
    cs.append(((), lambda: [r(2, 3, 50)], "3d"))
    cs.append(((), lambda: [misalign(r(3, 4100))], "misaligned4100"))
    cs.append(((), lambda: [misalign(r(2, 70000))], "misaligned70000"))

    def neg_inf():
        x = r(4, 9000)
        x[0, ::3] = -float("inf")
        x[1, :5000] = -float("inf")
        return [x]

    cs.append(((), neg_inf, "some-inf"))
    if not SMALL:
        cs.append(((), lambda: [r(8192, 32768)], "gpu-size"))
        cs.append(((), lambda: [r(64, 4096)], "cpu-size"))
    return cs


run_problem("02_softmax", [], softmax_cases(), ["cuda", "triton"], lambda: [r(8192, 32768)])

# ---------------------------------------------------------------- layernorm
def ln_cases():
    dims = [1, 3, 5, 33, 512, 1000, 1023, 4096, 4100, 16384, 32768, 33333, 40000]
    cs = [((d,), (lambda d=d: [r(3, 7, d)]), f"dim{d}") for d in dims]
    cs.append(((4100,), lambda: [misalign(r(5, 4100))], "misaligned4100"))
    cs.append(((4096,), lambda: [r(6, 4096) * 3 + 5], "offset-mean"))
    if not SMALL:
        cs.append(((4096,), lambda: [r(32, 2048, 4096)], "gpu-size"))
    return cs


run_problem("03_layernorm", [4096], ln_cases(), ["cuda"], lambda: [r(32, 2048, 4096)])

# ---------------------------------------------------------------- sum
def sum_cases():
    cs = []
    for shape, d in [((3, 5, 7), 1), ((2, 1000, 3), 1), ((4, 7, 1), 1), ((1, 0, 8), 1),
                     ((5, 33, 130), 1), ((5, 33, 132), 1), ((4, 6), 0), ((4, 6), 1),
                     ((3, 4, 9), 2), ((3, 4, 9), -1), ((2, 3, 4, 5), 2), ((2, 100000, 4), 1),
                     ((2, 30, 5000), 0)]:
        cs.append(((d,), (lambda s=shape: [r(*s)]), f"{shape}/dim{d}"))
    cs.append(((1,), lambda: [misalign(r(3, 17, 64))], "misaligned"))
    if not SMALL:
        cs.append(((1,), lambda: [r(128, 4096, 1024)], "gpu-size"))
        cs.append(((1,), lambda: [r(16, 256, 512)], "cpu-size"))
    return cs


run_problem("05_sum_reduction", [1], sum_cases(), ["cuda"], lambda: [r(128, 4096, 1024)],
            extra=lambda ref, a: a[0].double().sum(ref.dim, keepdim=True))

# ---------------------------------------------------------------- gelu
def gelu_cases():
    cs = [((), (lambda n=n: [r(n)]), f"n{n}") for n in [1, 3, 4, 5, 1027, 4096 * 9 + 3]]
    cs.append(((), lambda: [misalign(r(1000, 37))], "misaligned"))
    cs.append(((), lambda: [torch.tensor([0.0, -0.0, 1e-30, -1e-30, 3.0, -3.0, 10.0, -10.0, 50.0,
                                          -50.0, float("inf"), -float("inf"), float("nan")])], "special"))
    cs.append(((), lambda: [r(300, 301) * 6], "wide"))
    if not SMALL:
        cs.append(((), lambda: [r(16384, 16384)], "gpu-size"))
    return cs


run_problem("06_gelu", [], gelu_cases(), ["cuda", "triton"], lambda: [r(16384, 16384)],
            extra=lambda ref, a: torch.nn.functional.gelu(a[0].double()))

# ---------------------------------------------------------------- gemm
def gemm_extra(ref, a):
    W = ref.linear.weight.double()
    b = ref.linear.bias.double()
    return torch.relu(a[0].double() @ W.T + b)


def gemm_cases():
    cs = []
    for (m, k, n) in [(1, 1, 1), (5, 13, 7), (130, 17, 129), (129, 12, 132), (3, 4, 4), (257, 64, 200),
                      (128, 128, 128), (100, 1000, 300)]:
        cs.append(((k, n), (lambda m=m, k=k: [r(m, k)]), f"m{m}k{k}n{n}"))
    cs.append(((64, 96), lambda: [r(2, 3, 64)], "3d-input"))
    cs.append(((64, 96), lambda: [misalign(r(70, 64))], "misaligned"))
    if not SMALL:
        cs.append(((640, 384), lambda: [r(512, 640)], "cpu-size"))
        cs.append(((5120, 3072), lambda: [r(4096, 5120)], "gpu-size"))
    return cs


run_problem("07_gemm_bias_relu", [5120, 3072], gemm_cases(), ["cuda"], lambda: [r(4096, 5120)],
            extra=gemm_extra)

# ---------------------------------------------------------------- rmsnorm
def rms_cases():
    dims = [1, 3, 5, 33, 1000, 1023, 1024, 4096, 4100, 16384, 20000, 32768, 33333, 40000]
    cs = [((d,), (lambda d=d: [r(3, 7, d), r(3, 7, d)]), f"dim{d}") for d in dims]
    cs.append(((4100,), lambda: [misalign(r(5, 4100)), r(5, 4100)], "misaligned4100"))
    cs.append(((64, 1e-2), lambda: [r(6, 64) * 1e-2, r(6, 64) * 1e-2], "eps"))
    if not SMALL:
        cs.append(((4096,), lambda: [r(16, 3072, 4096), r(16, 3072, 4096)], "gpu-size"))
        cs.append(((1024,), lambda: [r(8, 256, 1024), r(8, 256, 1024)], "cpu-size"))
    return cs


run_problem("09_residual_rmsnorm", [4096], rms_cases(), ["cuda", "triton"],
            lambda: [r(16, 3072, 4096), r(16, 3072, 4096)])

# ---------------------------------------------------------------- softmax launch variants
if not SMALL and (not ONLY or "02_softmax" in ONLY):
    M = sys.modules["cand_cuda_02_softmax"]
    x = r(8192, 32768, device="cuda")
    ref = torch.softmax(x, -1)
    for mt, bps in [(1024, 1), (1024, 2), (512, 2), (512, 1), (256, 4), (1024, 4)]:
        y = M._ext.softmax_forward(x, mt, bps)
        ok = torch.allclose(y, ref, atol=1e-6, rtol=1e-2)
        print(f"  softmax variant threads<={mt} blocks/SM={bps}: "
              f"{timeit(M._ext.softmax_forward, (x, mt, bps)):.3f} ms ok={ok}", flush=True)
    x = r(4096, 65536, device="cuda")
    for mt, bps in [(1024, 1), (1024, 2), (512, 2)]:
        print(f"  softmax 4096x65536 threads<={mt} blocks/SM={bps}: "
              f"{timeit(M._ext.softmax_forward, (x, mt, bps)):.3f} ms "
              f"(eager {timeit(lambda t: torch.softmax(t, -1), (x,)):.3f} ms)", flush=True)

print("FAILURES:", FAIL if FAIL else "none", flush=True)
