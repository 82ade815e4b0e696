"""Where does 3xTF32 beat IEEE fp32, in time and in error, and does the planner's rule take
the better one?

With precision "3xtf32" and the auto variant, the planner runs the IEEE plan wherever
3xTF32 would be less accurate or is predicted slower (plan.cpp, tf32x3_declined). This
measures what that rule is fitted on: for each problem of the random sweep's generator
(benchmarks/sweep.py, the same problems and operands for a seed), torch.matmul in fp32,
the IEEE plan, the auto plan in precision 3xTF32, and every 3xTF32 row that takes the
problem by name (the strict op, the split the planner picks for it): each one's time
(median, L2 cleared) and relative Frobenius error against float64, with the models'
predicted times (`plan().predicted_us`). Needs a GPU.

    python -m benchmarks.probes.precision_choice [--seeds 0,100] [--count 128] [--out FILE.json]

It prints, per seed, how often the rule's choice is the faster and the more accurate of
the two precisions, and the problems where it is not. --out keeps every measurement for
fitting (not a record: the 3xTF32 sweep of record is `benchmarks.records --only sweep_3xtf32`).
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, time_ms
from benchmarks.report import geomean
from benchmarks.sweep import draw_problems, make_problem_operands, relative_error

AGREE = 1e-4  # every path against float64: far below this unless a result is wrong


def rows_taking(A, B):
    """The 3xTF32 rows this GPU runs that take A @ B, by name."""
    return [v for v in torch_vecgemm.variants()
            if v.startswith("tf32x3_") and torch_vecgemm.fallback_reason(A, B, variant=v) is None]


def measure(p, index, seed, timing):
    A, B = make_problem_operands(p, "cuda", seed * 100003 + index)
    ref = A.double() @ B.double()
    out = dict(**p, seed=seed)

    def path(name, fn, plan=None):
        result = fn()
        out[name] = dict(ms=time_ms(fn, **timing), err=relative_error(result, ref))
        if plan is not None:
            out[name].update(plan=str(plan), predicted_us=plan.predicted_us, precision=plan.precision)

    path("torch", lambda: torch.matmul(A, B))
    path("ieee", lambda: torch_vecgemm.mm(A, B, precision="ieee"), torch_vecgemm.plan(A, B, precision="ieee"))
    path("auto_3xtf32", lambda: torch_vecgemm.mm(A, B, precision="3xtf32"),
         torch_vecgemm.plan(A, B, precision="3xtf32"))
    out["rows"] = {}
    for row in rows_taking(A, B):
        fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32")  # noqa: E731
        result = fn()
        plan = torch_vecgemm.plan(A, B, variant=row)
        out["rows"][row] = dict(ms=time_ms(fn, **timing), err=relative_error(result, ref), plan=str(plan),
                                predicted_us=plan.predicted_us)
    wrong = [name for name, r in [("torch", out["torch"]), ("ieee", out["ieee"]), ("auto", out["auto_3xtf32"]),
                                  *out["rows"].items()] if not r["err"] < AGREE]
    out["note"] = f"WRONG: {', '.join(wrong)}" if wrong else None
    return out


def best_row(r):
    """The fastest 3xTF32 row measured on the problem: (name, its measurement)."""
    return min(r["rows"].items(), key=lambda item: item[1]["ms"])


def report(records):
    """Per seed: the rule's choice against the better precision in time and in error."""
    for seed in sorted({r["seed"] for r in records}):
        rs = [r for r in records if r["seed"] == seed]
        chosen = [r["auto_3xtf32"] for r in rs]
        print(f"seed {seed}: {len(rs)} problems, {sum(c['precision'] == '3xtf32' for c in chosen)} on 3xTF32")
        print(f"  auto 3xTF32 x torch.matmul: geometric mean {geomean([r['torch']['ms'] / r['auto_3xtf32']['ms'] for r in rs]):.3f}, "
              f"lowest {min(r['torch']['ms'] / r['auto_3xtf32']['ms'] for r in rs):.3f}, "
              f"below 1.0: {sum(r['torch']['ms'] < r['auto_3xtf32']['ms'] for r in rs)}")
        print(f"  error above 1.25x torch.matmul's: {sum(r['auto_3xtf32']['err'] > 1.25 * r['torch']['err'] for r in rs)}")
        print(f"  {'M x N x K':<18} {'orders':<6} {'chosen':<7} {'torch us':>9} {'ieee us':>8} {'3x us':>8} "
              f"{'pred ieee':>9} {'pred 3x':>8} {'err 3x/torch':>12} {'err ieee/torch':>14}  best row")
        for r in sorted(rs, key=lambda r: r["torch"]["ms"] / r["auto_3xtf32"]["ms"]):
            name, row = best_row(r) if r["rows"] else ("-", dict(ms=float("nan"), err=float("nan"), predicted_us=None))
            print(f"  {r['m']}x{r['n']}x{r['k']:<8} {r['layout']:<6} {r['auto_3xtf32']['precision']:<7} "
                  f"{r['torch']['ms'] * 1e3:9.1f} {r['ieee']['ms'] * 1e3:8.1f} {row['ms'] * 1e3:8.1f} "
                  f"{r['ieee']['predicted_us'] or float('nan'):9.1f} {row['predicted_us'] or float('nan'):8.1f} "
                  f"{row['err'] / r['torch']['err']:12.2f} {r['ieee']['err'] / r['torch']['err']:14.2f}  {name}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,100", help="comma list of sweep seeds")
    ap.add_argument("--count", type=int, default=128)
    ap.add_argument("--rep-ms", type=float, default=40)
    ap.add_argument("--out", help="write every measurement to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no GPU: this probe times kernels")
    timing = dict(warmup_ms=10, rep_ms=args.rep_ms)
    records = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for i, p in enumerate(draw_problems(seed, args.count)):
            records.append(measure(p, i, seed, timing))
            if records[-1]["note"]:
                print(f"!!! {p}: {records[-1]['note']}", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=machine_info(), records=records), f, indent=1)
    report(records)
    return 1 if any(r["note"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
