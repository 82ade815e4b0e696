"""What does a 3xTF32 call cost beyond its tensor-core work: its passes, its launches, its
host path, by size?

For a ladder of problems (squares, a K ladder at 1024 x 1024, and mid-size problems of the
random sweep where 3xTF32 lost), each 3xTF32 row that takes the problem is run by name
(the strict op) and measured three ways against torch.matmul fp32 on the same operands:
- the call's device time (`benchmarks.common.time_ms`: median, L2 cleared before each run);
- each kernel it launches, in device microseconds per call (torch.profiler): the split
  passes, the product, the special-values pass; their sum against the call's time is what
  the gaps between launches cost;
- its host time per call: calls queued back to back, wall clock per call once the queue is
  drained, beside the device time of the same loop (CUDA events): where the host's figure
  is the larger, the call is host-bound. Needs a GPU.

    python -m benchmarks.probes.tf32x3_fixed_costs [--rows REGEX] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import re
import sys

import torch

import torch_vecgemm
from benchmarks.common import kernels_of, machine_info, make_operands, queued_us, time_ms

SQUARES = [128, 256, 384, 512, 768, 1024, 1536, 2048]
K_LADDER = [32, 64, 128, 256, 512, 1024, 2048, 4096]
# Mid-size problems of the random sweeps on which 3xTF32 ran slower than torch.matmul.
SWEEP_MID = [(610, 371, 344), (1093, 4086, 55), (4880, 581, 45), (344, 3492, 1403), (1002, 3441, 681),
             (739, 5424, 926), (3679, 552, 1978), (2400, 262, 526)]


def problems():
    for s in SQUARES:
        for layout in ("rr", "rc"):
            yield s, s, s, layout
    for k in K_LADDER:
        for layout in ("rr", "rc"):
            yield 1024, 1024, k, layout
    for m, n, k in SWEEP_MID:
        yield m, n, k, "rr"


def measure(m, n, k, layout, seed, rows_re, timing):
    A, B = make_operands(m, n, k, layout, "cuda", seed)
    out = dict(m=m, n=n, k=k, layout=layout, torch=dict(us=time_ms(lambda: torch.matmul(A, B), **timing) * 1e3))
    out["torch"]["host_us"], out["torch"]["queued_us"] = queued_us(lambda: torch.matmul(A, B))
    auto = torch_vecgemm.plan(A, B, precision="3xtf32")
    out["auto_3xtf32"] = dict(plan=str(auto), predicted_us=auto.predicted_us,
                              us=time_ms(lambda: torch_vecgemm.mm(A, B, precision="3xtf32"), **timing) * 1e3)
    out["rows"] = {}
    for row in torch_vecgemm.variants():
        if not row.startswith("tf32x3_") or not re.search(rows_re, row):
            continue
        if torch_vecgemm.fallback_reason(A, B, variant=row) is not None:
            continue
        fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32")  # noqa: E731
        plan = torch_vecgemm.plan(A, B, variant=row)
        kernels = kernels_of(fn, calls=5)
        host, device = queued_us(fn)
        out["rows"][row] = dict(plan=str(plan), predicted_us=plan.predicted_us, us=time_ms(fn, **timing) * 1e3,
                                kernels=kernels, host_us=host, queued_us=device)
    return out


def report(records):
    print(f"{'M x N x K':<16} {'ord':<3} {'torch':>7} {'row':<22} {'us':>7} {'x mm':>5} {'pred':>6} {'kern':>7} "
          f"{'gaps':>6} {'host':>6} {'queue':>6}  kernels (us)")
    for r in records:
        for name, row in r["rows"].items():
            kern = sum(row["kernels"].values())
            parts = ", ".join(f"{re.sub(r'[<(].*', '', n)[-26:]} {us:.1f}" for n, us in row["kernels"].items())
            print(f"{r['m']}x{r['n']}x{r['k']:<6} {r['layout']:<3} {r['torch']['us']:7.1f} {name:<22} {row['us']:7.1f} "
                  f"{r['torch']['us'] / row['us']:5.2f} {row['predicted_us'] or float('nan'):6.1f} {kern:7.1f} "
                  f"{row['us'] - kern:6.1f} {row['host_us']:6.1f} {row['queued_us']:6.1f}  {parts}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default=".", help="only 3xTF32 rows whose name matches this regex")
    ap.add_argument("--rep-ms", type=float, default=30)
    ap.add_argument("--out", help="write every measurement to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no GPU: this probe times kernels")
    timing = dict(warmup_ms=10, rep_ms=args.rep_ms)
    records = [measure(m, n, k, layout, i, args.rows, timing) for i, (m, n, k, layout) in enumerate(problems())]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=machine_info(), records=records), f, indent=1)
    report(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
