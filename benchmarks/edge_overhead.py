"""What the edge handling costs a problem made of full tiles: the tiled kernel at
M = N = K = 4096 with interior blocks on their unchecked loads (the default) against every
block on the bounds-checked loads, alternated in one process, several rounds, so the
difference can be read against the run-to-run spread.

    python -m benchmarks.edge_overhead [--size 4096] [--variant tiled_128x128x16] [--rounds 5]
"""
from __future__ import annotations

import argparse
import statistics

import torch

import torch_vecgemm
from benchmarks.common import make_operands, time_ms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--variant", default="auto")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    A, B = make_operands(args.size, args.size, args.size, "rr", "cuda")
    fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, args.variant)
    times = {"unchecked interior": [], "all checked": []}
    for _ in range(args.rounds):
        for mode, checked in (("unchecked interior", False), ("all checked", True)):
            torch_vecgemm._C._set_checked_loads_only(checked)
            times[mode].append(time_ms(fn))
    torch_vecgemm._C._set_checked_loads_only(False)
    print(f"{torch_vecgemm.selected_kernel(A, B, variant=args.variant)} at {args.size}^3, {args.rounds} rounds, median ms:")
    for mode, ts in times.items():
        print(f"  {mode:<20} median {statistics.median(ts):.4f}  min {min(ts):.4f}  max {max(ts):.4f}  spread {(max(ts) - min(ts)) / statistics.median(ts):.1%}")
    fast, slow = statistics.median(times["unchecked interior"]), statistics.median(times["all checked"])
    print(f"  checked / unchecked = {slow / fast:.3f}")


if __name__ == "__main__":
    main()
