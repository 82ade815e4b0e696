"""Accuracy and speed of the fp32 paths: cuBLAS SGEMM, torch_vecgemm in IEEE fp32 and in
3xTF32, Triton's tl.dot in "ieee" and "tf32x3", and cuBLAS TF32 for context.

    python -m benchmarks.precision                     # ~30 s on an H200
    python -m benchmarks.precision --sizes 4096 --no-model --out /tmp/precision

Every path runs in one process on the same seeded inputs (row-major N(0, 1) squares for the
speed): TFLOP/s the median of triton.testing.do_bench with the L2 cleared before every run,
and the ratio to torch.matmul in fp32 (TF32 off, the reference every ratio is against). The
errors are measured at one size (--error-size, default 4096) against a float64 product
computed on the GPU in blocks of rows, on N(0, 1) and on uniform [0, 1) inputs: the relative
Frobenius error ||C - C64|| / ||C64|| and the largest |C - C64| / (|A| |B|), element by
element (the normalisation tests/test_precision.py uses). The model shapes of shapes.json
are timed for 3xTF32 (as the planner serves each: on 3xTF32 or handed to fp32) against
torch.matmul.

The Triton rows are a plain tl.dot kernel written here, at one fixed tiling (that of
Triton's matmul tutorial), not autotuned: what a user gets from Triton without tuning, not
Triton's best; without triton, or where its kernel fails to compile or run, they are left
out and say why. Every fp32 path's result is checked against torch.matmul's at every size;
a mismatch makes the exit status 1.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys

import torch

import torch_vecgemm
from benchmarks import report
from benchmarks.common import (CUBLAS, TF32, figure, machine_info, make_operands, save_figure, tf32_allowed, time_ms,
                               write_record)

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

SIZES = (2048, 4096, 8192)
ERROR_SIZE = 4096
DISTRIBUTIONS = ("randn", "uniform")  # N(0, 1); uniform [0, 1)
REL_ERR_LIMIT = 1e-4  # against torch.matmul: fp32 against fp32 lands near 1e-6, TF32 near 1e-3

IEEE = "torch_vecgemm auto (ieee)"
TF32X3 = "torch_vecgemm 3xtf32"
TRITON_IEEE = "Triton tl.dot ieee"
TRITON_TF32X3 = "Triton tl.dot tf32x3"
# The rows, in the table's order; TF32 alone is not held to fp32 accuracy.
PATHS = (CUBLAS, IEEE, TF32X3, TRITON_IEEE, TRITON_TF32X3, TF32)
# Triton's tilings: the 128 x 128 block of its matmul tutorial, 32-deep K steps.
TRITON_TILING = dict(BM=128, BN=128, BK=32, GROUP_M=8, num_warps=8, num_stages=3)
TRITON_PRECISION = {TRITON_IEEE: "ieee", TRITON_TF32X3: "tf32x3"}

if triton is not None:
    @triton.jit
    def _triton_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       GROUP_M: tl.constexpr, INPUT_PRECISION: tl.constexpr):
        # Blocks in groups of GROUP_M block rows, for the L2's reuse of B's panels.
        pid = tl.program_id(0)
        blocks_m, blocks_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = GROUP_M * blocks_n
        first_m = (pid // group) * GROUP_M
        rows = min(blocks_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % rows
        pid_n = (pid % group) // rows
        # Edge rows and columns wrap around (loads in bounds, stores masked); K is masked.
        offs_m = (pid_m * BM + tl.arange(0, BM)) % M
        offs_n = (pid_n * BN + tl.arange(0, BN)) % N
        offs_k = tl.arange(0, BK)
        a = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            left = K - k * BK
            x = tl.load(a, mask=offs_k[None, :] < left, other=0.0)
            y = tl.load(b, mask=offs_k[:, None] < left, other=0.0)
            acc = tl.dot(x, y, acc, input_precision=INPUT_PRECISION)
            a += BK * stride_ak
            b += BK * stride_bk
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, acc,
                 mask=(cm[:, None] < M) & (cn[None, :] < N))


def triton_mm(A, B, input_precision):
    """A @ B on the Triton kernel above, tl.dot in the given input precision."""
    t = TRITON_TILING
    (M, K), N = A.shape, B.shape[1]
    C = torch.empty(M, N, device=A.device, dtype=torch.float32)
    grid = (triton.cdiv(M, t["BM"]) * triton.cdiv(N, t["BN"]),)
    _triton_matmul[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                         C.stride(0), C.stride(1), BM=t["BM"], BN=t["BN"], BK=t["BK"], GROUP_M=t["GROUP_M"],
                         INPUT_PRECISION=input_precision, num_warps=t["num_warps"], num_stages=t["num_stages"])
    return C


@functools.lru_cache(maxsize=None)
def triton_failure(input_precision):
    """None where the Triton kernel compiles and runs in this precision (one small product,
    ragged on purpose), else why not: a comparison row that fails is left out, saying so,
    rather than costing the record its other rows."""
    try:
        A, B = operands(200, "randn", "cuda")
        A = A[:, :190]
        rel = _rel_to(triton_mm(A, B[:190], input_precision), torch.matmul(A, B[:190]))
    except Exception as e:  # noqa: BLE001 - any failure of Triton's compiler or launch
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
    return None if rel < REL_ERR_LIMIT else f"relative error {rel:.3g} vs torch.matmul on 200x200x190"


def path(name, A, B):
    """(the product as a callable, what runs) for one path, or (None, why it cannot run)."""
    if name in (CUBLAS, TF32):
        return (lambda: torch.matmul(A, B)), "cuBLAS tf32" if name == TF32 else "cuBLAS fp32"
    if name in (IEEE, TF32X3):
        precision = "ieee" if name == IEEE else "3xtf32"
        # Where the planner declines 3xTF32 (slower or less accurate there), what the user gets
        # runs: torch's fp32 or, for a matrix-vector product, gemv. Where the strict op refuses
        # the precision (a GPU that cannot run 3xTF32, operands no kernel takes), the path is
        # not run: its rules include every rule of the lenient plan's fallback.
        refused = torch_vecgemm.fallback_reason(A, B, precision=precision)
        if refused is not None:
            return None, f"not run: {refused}"
        plan = torch_vecgemm.plan(A, B, precision=precision)
        return (lambda: torch_vecgemm.mm(A, B, precision=precision)), str(plan)
    if triton is None:
        return None, "not run: triton is not importable"
    failure = triton_failure(TRITON_PRECISION[name])
    if failure:
        return None, f"not run: the Triton kernel failed ({failure})"
    t = TRITON_TILING
    tiling = f"tl.dot {t['BM']}x{t['BN']}x{t['BK']}, {t['num_warps']} warps, {t['num_stages']} stages"
    return (lambda: triton_mm(A, B, TRITON_PRECISION[name])), tiling


def operands(n, distribution, device, seed=0):
    """Two seeded n x n operands, N(0, 1) ('randn') or uniform [0, 1) ('uniform')."""
    g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + n * 2 + DISTRIBUTIONS.index(distribution))
    draw = torch.randn if distribution == "randn" else torch.rand
    return draw(n, n, device=device, generator=g), draw(n, n, device=device, generator=g)


def errors(outputs, A, B, rows=1024):
    """{name: (relative Frobenius error, largest |error| / (|A| |B|))} of each output of A @ B
    against the float64 product, built rows rows at a time (the float64 copies of a block
    stay small; B's two are whole)."""
    B64 = B.double()
    B64_abs = B64.abs()
    tiny = torch.finfo(torch.float64).tiny
    ref_sq = 0.0
    err_sq = dict.fromkeys(outputs, 0.0)
    worst = dict.fromkeys(outputs, 0.0)
    for r in range(0, A.shape[0], rows):
        a = A[r:r + rows].double()
        ref = a @ B64
        scale = (a.abs() @ B64_abs).clamp_min(tiny)
        ref_sq += ref.square().sum().item()
        for name, out in outputs.items():
            err = (out[r:r + rows].double() - ref).abs()
            err_sq[name] += err.square().sum().item()
            w = (err / scale).max().item()
            if math.isnan(w) or w > worst[name]:  # a NaN stays
                worst[name] = w
    return {name: (math.sqrt(err_sq[name] / ref_sq), worst[name]) for name in outputs}


def _rel_to(out, ref):
    return (torch.linalg.norm(out - ref) / torch.linalg.norm(ref)).item()


def measure_speed(n, timing, seed):
    """One record a path at n^3: TFLOP/s and the ratio to torch.matmul, each fp32 result
    checked against torch.matmul's."""
    A, B = operands(n, "randn", "cuda", seed)
    ref = torch.matmul(A, B)
    flops = 2.0 * n ** 3
    records, ref_ms = [], None
    for name in PATHS:
        fn, kernel = path(name, A, B)
        rec = dict(path=name, size=n, kernel=None if fn is None else kernel, median_ms=None, tflops=None,
                   ratio_to_torch_matmul=None, rel_err_vs_torch_matmul=None, note=None if fn else kernel)
        records.append(rec)
        if fn is None:
            continue
        with tf32_allowed(name == TF32):
            rel = _rel_to(fn(), ref)
            ms = time_ms(fn, **timing)
        ref_ms = ms if name == CUBLAS else ref_ms
        rec.update(median_ms=ms, tflops=flops / (ms * 1e-3) / 1e12, ratio_to_torch_matmul=ref_ms / ms,
                   rel_err_vs_torch_matmul=rel)
        if name != TF32 and not rel < REL_ERR_LIMIT:
            rec["note"] = f"WRONG: relative error {rel:.3g} vs torch.matmul"
    return records


def measure_errors(n, distribution, seed):
    """One record a path: its errors at n^3 on the distribution's inputs, against float64."""
    A, B = operands(n, distribution, "cuda", seed)
    outputs, notes = {}, {}
    for name in PATHS:
        fn, kernel = path(name, A, B)
        if fn is None:
            notes[name] = kernel
            continue
        with tf32_allowed(name == TF32):
            outputs[name] = fn()
    measured = errors(outputs, A, B)
    records = []
    for name in PATHS:
        fro, worst = measured.get(name, (None, None))
        records.append(dict(path=name, size=n, distribution=distribution, rel_fro=fro, max_rel_to_abs_product=worst,
                            note=notes.get(name)))
    return records


def measure_model(timing):
    """3xTF32 against torch.matmul on the model shapes of shapes.json, the bench's operands."""
    from benchmarks.bench import load_problems

    records = []
    for p in load_problems(["model"], None):
        m, n, k = p["m"], p["n"], p["k"]
        A, B = make_operands(m, n, k, p["layout"], "cuda", seed=m * 7 + n * 13 + k)
        fn, kernel = path(TF32X3, A, B)
        rec = dict(name=p["name"], m=m, n=n, k=k, layout=p["layout"], kernel=None if fn is None else kernel,
                   torch_ms=time_ms(lambda: torch.matmul(A, B), **timing), ours_ms=None, ratio_to_torch_matmul=None,
                   rel_err_vs_torch_matmul=None, note=None if fn else kernel)
        records.append(rec)
        if fn is None:
            continue
        rel = _rel_to(fn(), torch.matmul(A, B))
        rec.update(ours_ms=time_ms(fn, **timing), rel_err_vs_torch_matmul=rel)
        rec["ratio_to_torch_matmul"] = rec["torch_ms"] / rec["ours_ms"]
        if not rel < REL_ERR_LIMIT:
            rec["note"] = f"WRONG: relative error {rel:.3g} vs torch.matmul"
    ratios = [r["ratio_to_torch_matmul"] for r in records if r["ratio_to_torch_matmul"]]
    lowest = min((r for r in records if r["ratio_to_torch_matmul"]), key=lambda r: r["ratio_to_torch_matmul"], default=None)
    summary = dict(shapes=len(ratios), geomean=report.geomean(ratios),
                   lowest=lowest and lowest["ratio_to_torch_matmul"], lowest_shape=lowest and lowest["name"])
    return dict(records=records, summary=summary)


def run(sizes=SIZES, error_size=ERROR_SIZE, model=True, seed=0, warmup_ms=25, rep_ms=100):
    """Measures the paths; returns the data (machine, settings, speed, errors, model)."""
    if not torch.cuda.is_available():
        raise SystemExit("the precision record times the CUDA kernels and there is no GPU here")
    if error_size not in sizes:
        raise ValueError(f"the error size {error_size} is not one of the sizes {sizes}: the plot pairs its errors with its speed")
    timing = dict(warmup_ms=warmup_ms, rep_ms=rep_ms)
    with tf32_allowed(False):
        speed = [rec for n in sizes for rec in measure_speed(n, timing, seed)]
        errs = [rec for d in DISTRIBUTIONS for rec in measure_errors(error_size, d, seed)]
        shapes = measure_model(timing) if model else None
    settings = dict(sizes=list(sizes), error_size=error_size, distributions=list(DISTRIBUTIONS), seed=seed,
                    warmup_ms=warmup_ms, rep_ms=rep_ms, triton=None if triton is None else triton.__version__,
                    triton_tiling=TRITON_TILING)
    return dict(machine=machine_info(), settings=settings, speed=speed, errors=errs, model=shapes)


def wrong_results(data):
    """The records whose result disagrees with torch.matmul's."""
    rows = data["speed"] + (data["model"] or {}).get("records", [])
    return [r for r in rows if (r["note"] or "").startswith("WRONG")]


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def _row(rows, **match):
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), {})


def markdown(data, title=True):
    """The accuracy-and-speed table, the model shapes' geometric mean and their table."""
    s = data["settings"]
    sizes, n = s["sizes"], s["error_size"]
    lines = []
    if title:
        m = data["machine"]
        lines += [f"# Accuracy and speed, {m.get('gpu')}", "", report.stamp(m), ""]
    lines += [
        f"Square row-major problems; TFLOP/s the median of `triton.testing.do_bench` (L2 cleared before each run), "
        f"x mm = torch.matmul's time / the path's, in the same process on the same inputs. Errors at {n}^3 against "
        f"a float64 product: relative Frobenius (fro) and the largest |error| / (|A| |B|) (max), on N(0, 1) (randn) "
        f"and uniform [0, 1) inputs.",
        "",
    ]
    cols = ["path", f"kernel at {n}"] + [f"{size} TFLOP/s (x mm)" for size in sizes] + \
        [f"{d} {e}" for d in s["distributions"] for e in ("fro", "max")]
    lines += ["| " + " | ".join(cols) + " |", "|---|---|" + "---:|" * (len(cols) - 2)]
    notes = []
    for name in PATHS:
        at = _row(data["speed"], path=name, size=n)
        row = [name, at.get("kernel") or "-"]
        for size in sizes:
            r = _row(data["speed"], path=name, size=size)
            row.append(f"{_f(r.get('tflops'), '.1f')} ({_f(r.get('ratio_to_torch_matmul'), '.2f')})" if r.get("tflops")
                       else "not run")
            if r.get("note"):
                notes.append(f"{name}: {r['note']}")
        for d in s["distributions"]:
            e = _row(data["errors"], path=name, distribution=d)
            row += [_f(e.get("rel_fro"), ".2e"), _f(e.get("max_rel_to_abs_product"), ".2e")]
        lines.append("| " + " | ".join(row) + " |")
    lines += [""] + [f"- {note}" for note in dict.fromkeys(notes)] + ([""] if notes else [])
    shapes = data.get("model")
    if shapes:
        sm = shapes["summary"]
        lines += [f"3xTF32 on the model shapes (benchmarks/shapes.json): geometric mean {_f(sm['geomean'], '.2f')}x "
                  f"torch.matmul over {sm['shapes']} shapes, lowest "
                  f"{_f(sm['lowest'], '.2f')}x ({sm['lowest_shape']}).", "",
                  "| model shape | M x N x K | layout | kernel | torch.matmul us | 3xtf32 us | x mm |",
                  "|---|---|---|---|---:|---:|---:|"]
        for r in shapes["records"]:
            lines.append(f"| {r['name']} | {r['m']} x {r['n']} x {r['k']} | {r['layout']} | {r['kernel'] or r['note']} | "
                         f"{r['torch_ms'] * 1e3:.1f} | {_f(r['ours_ms'] and r['ours_ms'] * 1e3, '.1f')} | "
                         f"{_f(r['ratio_to_torch_matmul'], '.2f')} |")
        lines.append("")
    return "\n".join(lines)


def plot(data, path):
    """Error (log) against TFLOP/s at the error size, one point a path, a panel a distribution."""
    s, n = data["settings"], data["settings"]["error_size"]
    fig, axes = figure(nrows=1, ncols=len(s["distributions"]), figsize=(7 * len(s["distributions"]), 5.5), squeeze=False)
    u = 2.0 ** -24
    for ax, d in zip(axes[0], s["distributions"]):
        for i, name in enumerate(PATHS):
            speed = _row(data["speed"], path=name, size=n).get("tflops")
            err = _row(data["errors"], path=name, distribution=d).get("rel_fro")
            if speed and err:
                ax.scatter([err], [speed], s=60, marker="os^vDP"[i], label=name, zorder=3)
        ax.axvline(u, color="gray", linestyle=":", linewidth=1, label="fp32 unit roundoff (2^-24)")
        ax.set_xscale("log")
        ax.set_xlabel(f"relative Frobenius error against float64, {d} inputs, {n}^3")
        ax.set_ylabel(f"TFLOP/s at {n}^3")
        ax.set_title(f"{d} inputs: up is faster, left is more accurate", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    save_figure(fig, path, data["machine"])


def write(data, out):
    return write_record(data, out, plot)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.precision", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="square sizes, comma list")
    ap.add_argument("--error-size", type=int, default=ERROR_SIZE, help="the size the errors are measured at (one of --sizes)")
    ap.add_argument("--no-model", action="store_true", help="leave out the model shapes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-ms", type=float, default=25)
    ap.add_argument("--rep-ms", type=float, default=100)
    ap.add_argument("--out", help="write OUT.json and OUT.png")
    args = ap.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes takes a comma list of integers, not {args.sizes!r}")
    if any(x < 1 for x in args.sizes):
        ap.error("--sizes must be positive")
    if args.error_size not in args.sizes:
        ap.error(f"--error-size {args.error_size} must be one of --sizes ({args.sizes}): the plot pairs its errors with its speed")
    return args


def main(argv=None):
    args = parse_args(argv)
    data = run(args.sizes, args.error_size, model=not args.no_model, seed=args.seed,
               warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
    print(markdown(data))
    if args.out:
        print("wrote " + ", ".join(write(data, args.out)))
    wrong = wrong_results(data)
    for r in wrong:
        print(f"!!! {r.get('path') or r.get('name')}: {r['note']}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
