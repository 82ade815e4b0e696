"""Benchmark torch_vecgemm against torch.matmul (cuBLAS, float32) in the same process.

    python -m benchmarks.bench                     # default suites, ~1 min on an H200
    python -m benchmarks.bench --quick             # a few problems
    python -m benchmarks.bench --suite square --sizes 1024,4096 --variants all
    python -m benchmarks.bench --suite square --sizes 4096 --layouts rr,rc,cr,cc
    python -m benchmarks.bench --out /tmp/h200      # /tmp/h200.json, .csv, .png

The records of record (benchmarks/records/<gpu>/) are this benchmark with fixed settings,
run by `python -m benchmarks.records`. Every problem is timed for torch.matmul in fp32 (the reference every ratio is against),
cuBLAS with TF32 allowed (another precision, shown for context only) and each requested
variant, on the same inputs, median of do_bench runs with the L2 cleared: "auto" as a user
calls it (`torch_vecgemm.mm`, which may hand a product to torch where the device profile
predicts torch faster), a named variant through the strict op.
Each variant's output is compared with cuBLAS's; a mismatch is reported loudly and makes
the exit status 1. Without a GPU the fallback path is timed on the CPU and says so.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys

import torch

import torch_vecgemm
from benchmarks.common import CUBLAS, TF32, machine_info, make_operands, time_ms

HERE = os.path.dirname(os.path.abspath(__file__))
REL_ERR_LIMIT = 1e-4  # fp32 vs fp32 lands near 1e-6; tf32 would be ~1e-3


def load_problems(suites, sizes, layouts=("rr",)):
    with open(os.path.join(HERE, "shapes.json")) as f:
        data = json.load(f)
    problems = []
    if "square" in suites:
        for s in sizes or data["square"]:
            for layout in layouts:
                problems.append(dict(suite="square", name=f"square {s}", m=s, n=s, k=s, layout=layout))
    if "model" in suites:
        for p in data["model"]:
            problems.append(dict(suite="model", **p))
    return problems


def tile_traffic_bytes(variant_kernel, m, n, k):
    """Global bytes a BM x BN tiling reads and writes, counted as the seed does: each block
    reads its A panel and B panel once; D written once."""
    match = re.search(r"(\d+)x(\d+)x\d+", variant_kernel or "")
    if variant_kernel == "vectorized":
        bm = bn = 128
    elif match:
        bm, bn = int(match.group(1)), int(match.group(2))
    else:
        return None
    return 4 * (m * k * math.ceil(n / bn) + k * n * math.ceil(m / bm) + m * n)


def bench_problem(p, variants, info, args):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    m, n, k, layout = p["m"], p["n"], p["k"], p["layout"]
    A, B = make_operands(m, n, k, layout, device, seed=m * 7 + n * 13 + k)
    flops = 2.0 * m * n * k
    peak = info.get("fp32_peak_tflops")
    bw = info.get("copy_bandwidth_tbs")
    floor_compute = flops / (peak * 1e12) * 1e3 if peak else None
    floor_memory = 4.0 * (m * k + k * n + m * n) / (bw * 1e12) * 1e3 if bw else None
    timing = dict(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)

    torch.backends.cuda.matmul.allow_tf32 = False
    ref_out = torch.matmul(A, B)
    ref_ms = time_ms(lambda: torch.matmul(A, B), **timing)
    records = []

    def record(variant, kernel, ms, rel_err=None, note=None):
        rec = dict(
            suite=p["suite"], name=p["name"], m=m, n=n, k=k, layout=layout, variant=variant, kernel=kernel,
            median_ms=ms, tflops=flops / (ms * 1e-3) / 1e12 if ms else None,
            ratio_to_torch_matmul=ref_ms / ms if ms else None,
            peak_fraction=(flops / (ms * 1e-3) / 1e12) / peak if ms and peak else None,
            floor_compute_ms=floor_compute, floor_memory_ms=floor_memory,
            tile_traffic_gb=(lambda b: b / 1e9 if b else None)(tile_traffic_bytes(kernel, m, n, k)),
            rel_err_vs_cublas=rel_err, note=note,
        )
        records.append(rec)
        return rec

    record(CUBLAS, "cuBLAS fp32" if device == "cuda" else "ATen CPU", ref_ms, 0.0)
    if device == "cuda" and not args.no_tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            record(TF32, "cuBLAS tf32", time_ms(lambda: torch.matmul(A, B), **timing))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    for v in variants:
        reason = torch_vecgemm.fallback_reason(A, B, variant=v)
        if reason is not None:
            if device == "cuda":
                record(v, None, None, note=f"not run: {reason}")
                continue
            # No GPU: time what the wrapper does here, the ATen fallback, and say so.
            fn = lambda: torch_vecgemm.mm(A, B)
            kernel = "fallback (ATen)"
        elif v == "auto":
            fn = lambda: torch_vecgemm.mm(A, B)
            kernel = torch_vecgemm.selected_kernel(A, B)
        else:
            fn = lambda v=v: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, v)
            kernel = torch_vecgemm.selected_kernel(A, B, variant=v)
        out = fn()
        rel = (torch.linalg.norm(out - ref_out) / torch.linalg.norm(ref_out)).item()
        rec = record(v, kernel, time_ms(fn, **timing), rel)
        if not rel < REL_ERR_LIMIT:
            rec["note"] = f"WRONG: relative error {rel:.3g} vs cuBLAS"
    return records


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(records, file=sys.stdout):
    head = f"{'problem':<40} {'layout':>6} {'variant':<22} {'kernel':<30} {'ms':>9} {'TFLOP/s':>8} {'x mm':>6} {'peak':>5} {'rel err':>8}"
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in records:
        print(
            f"{r['name'][:40]:<40} {r['layout']:>6} {r['variant'][:22]:<22} {(r['kernel'] or r['note'] or '')[:30]:<30} "
            f"{fmt(r['median_ms'], '.3f'):>9} {fmt(r['tflops'], '.1f'):>8} {fmt(r['ratio_to_torch_matmul'], '.2f'):>6} "
            f"{fmt(r['peak_fraction'], '.0%'):>5} {fmt(r['rel_err_vs_cublas'], '.1e'):>8}",
            file=file,
        )


def write_outputs(out, info, records, settings=None):
    """OUT.json (the machine's stamp, the settings, every record), OUT.csv (the records) and
    OUT.png (the plot, where matplotlib is installed); returns the paths written."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"machine": info, "settings": settings, "records": records}, f, indent=1)
    with open(out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0].keys()))
        w.writeheader()
        w.writerows(records)
    written = [out + ".json", out + ".csv"]
    try:
        from benchmarks.report import plot

        plot(info, records, out + ".png")
        written.append(out + ".png")
    except ImportError as e:  # matplotlib is optional
        print(f"no plot ({e})", file=sys.stderr)
    return written


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="square,model", help="comma list of: square, model")
    ap.add_argument("--sizes", default=None, help="square sizes, comma list (default: shapes.json)")
    ap.add_argument("--layouts", default="rr", help="storage orders of the square problems, comma list of rr, rc, cr, cc")
    ap.add_argument("--variants", default="auto,vectorized", help="comma list, or 'all' (see torch_vecgemm.variants())")
    ap.add_argument("--quick", action="store_true", help="a few problems, short timing")
    ap.add_argument("--warmup-ms", type=float, default=25)
    ap.add_argument("--rep-ms", type=float, default=100)
    ap.add_argument("--no-tf32", action="store_true", help="skip the TF32 reference line")
    ap.add_argument("--out", default=None, help="write OUT.json, OUT.csv and OUT.png")
    return ap.parse_args(argv)


def run(args):
    """Times the problems and variants args asks for; returns (the machine's stamp, the
    settings as run, the records)."""
    cuda = torch.cuda.is_available()
    if not cuda:
        print(
            "No CUDA GPU here: timing torch_vecgemm's CPU fallback (ATen) against torch.matmul on small problems.\n"
            "These numbers say nothing about the kernels; run this on a GPU for those.",
            file=sys.stderr,
        )
    suites = args.suite.split(",")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    if args.quick or not cuda:
        sizes = sizes or ([1024, 4096] if cuda else [128, 256, 512])
        if not cuda:
            suites = ["square"]
        args.rep_ms = min(args.rep_ms, 50)
    problems = load_problems(suites, sizes, args.layouts.split(","))
    if args.quick and "model" in suites:
        problems = [p for p in problems if p["suite"] == "square"] + [p for p in problems if p["suite"] == "model"][:4]
    variants = torch_vecgemm.variants() if args.variants == "all" else args.variants.split(",")
    if not cuda:
        variants = ["auto"]

    info = machine_info()
    try:
        from tqdm import tqdm

        progress = tqdm(problems, desc="benchmark", file=sys.stderr)
    except ImportError:
        progress = problems
    records = []
    for i, p in enumerate(progress):
        if progress is problems:
            print(f"[{i + 1}/{len(problems)}] {p['name']}", file=sys.stderr, flush=True)
        records.extend(bench_problem(p, variants, info, args))
    settings = dict(suites=suites, sizes=sorted({p["m"] for p in problems if p["suite"] == "square"}),
                    layouts=args.layouts.split(","), variants=variants, warmup_ms=args.warmup_ms,
                    rep_ms=args.rep_ms, tf32_line=not args.no_tf32, quick=args.quick)
    return info, settings, records


def wrong_results(records):
    return [r for r in records if (r["note"] or "").startswith("WRONG")]


def main(argv=None):
    args = parse_args(argv)
    info, settings, records = run(args)
    cuda = info.get("gpu") is not None
    print(f"# {info.get('gpu') or info.get('cpu')}  torch {info['torch']}  CUDA {info['cuda']}  driver {info.get('driver')}")
    if cuda:
        print(f"# fp32 peak {info['fp32_peak_tflops']:.1f} TFLOP/s, copy bandwidth {info['copy_bandwidth_tbs']:.2f} TB/s")
    print_table(records)
    if args.out:
        print("wrote " + ", ".join(write_outputs(args.out, info, records, settings)))
    wrong = wrong_results(records)
    for r in wrong:
        print(f"!!! {r['name']} {r['variant']}: {r['note']}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
