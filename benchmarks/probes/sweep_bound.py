"""How fast could any 3xTF32 kernel run a random sweep of record, at most, against
torch.matmul's time there (issue 40's geometric mean of 1.5x)?

Each problem's time is bounded below by the longest of: its operands and output moved once
at the memory's peak, its three TF32 products at the tensor cores' dense peak, and the
fastest call torch.matmul made in the sweep (no kernel call is timed much shorter). A
problem where torch's time is below the bound counts 1.0x: the planner can hand it to
torch. The geometric mean of those ratios is what kernels at the limits would reach; the
record's own is beside it. No GPU: the sweep's JSON and the device's peaks.

    python -m benchmarks.probes.sweep_bound [benchmarks/records/h200/sweep_3xtf32.json ...]
        [--bandwidth-tbs 4.8] [--tf32-tflops 495]
"""
from __future__ import annotations

import argparse
import json
import sys

from benchmarks.report import geomean

DEFAULT_SWEEPS = ["benchmarks/records/h200/sweep_3xtf32.json", "benchmarks/records/h200/sweep_3xtf32_seed1.json"]


def bound_ratio(record, bandwidth, tf32_flops, floor_s):
    """torch.matmul's time of record over the shortest time 3xTF32 could take, at least 1."""
    m, n, k = record["m"], record["n"], record["k"]
    memory_s = 4 * (m * k + k * n + m * n) / bandwidth
    tensor_s = 3 * 2 * m * n * k / tf32_flops
    return max(1.0, record["torch_ms"] * 1e-3 / max(memory_s, tensor_s, floor_s))


def summary(records, bandwidth, tf32_flops):
    floor_s = min(r["torch_ms"] for r in records) * 1e-3
    bounds = [bound_ratio(r, bandwidth, tf32_flops, floor_s) for r in records]
    return dict(problems=len(records), floor_us=floor_s * 1e6, bound=geomean(bounds),
                record=geomean(r["ratio_to_torch_matmul"] for r in records),
                below_1_5=sum(b < 1.5 for b in bounds))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.probes.sweep_bound", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweeps", nargs="*", default=DEFAULT_SWEEPS)
    ap.add_argument("--bandwidth-tbs", type=float, default=4.8, help="memory's peak (the H200's HBM3e)")
    ap.add_argument("--tf32-tflops", type=float, default=495.0, help="dense TF32 peak (the H200's)")
    args = ap.parse_args(argv)
    for path in args.sweeps:
        with open(path) as f:
            s = summary(json.load(f)["records"], args.bandwidth_tbs * 1e12, args.tf32_tflops * 1e12)
        print(f"{path}: {s['problems']} problems, torch's fastest call {s['floor_us']:.1f} us; at the limits "
              f"{s['bound']:.2f}x torch.matmul (geometric mean; {s['below_1_5']} problems bounded below 1.5x), "
              f"the record {s['record']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
