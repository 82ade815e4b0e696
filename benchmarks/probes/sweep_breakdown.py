"""Where does the time of the random sweep's weakest problems go: which kernels run, for how
long each, on our side and on cuBLAS's?

Reads a sweep's JSON (python -m benchmarks.sweep --out X), takes its weakest problems,
rebuilds their operands exactly (same seed, same drawing) and runs each side a few times
under torch.profiler, printing every GPU kernel's mean duration per call: the copies, the
main kernel and the second passes on ours; cuBLAS's kernel (its tile shape is in the name)
on torch's. The gap between the kernels' sum and the sweep's time is launch cost. Needs a GPU.

    python -m benchmarks.probes.sweep_breakdown /tmp/sweep.json [--weakest 12] [--plan REGEX]

With --plan, only the problems whose recorded plan matches the regex (e.g. 'copy'). Ours
runs in the sweep's precision (a 3xTF32 sweep's records name it).
"""
from __future__ import annotations

import argparse
import json
import re

import torch

import torch_vecgemm
from benchmarks.common import kernels_of, queued_us
from benchmarks.sweep import make_problem_operands


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="a sweep's JSON")
    ap.add_argument("--weakest", type=int, default=12)
    ap.add_argument("--plan", help="only problems whose recorded plan matches this regex")
    args = ap.parse_args(argv)
    with open(args.sweep) as f:
        data = json.load(f)
    seed, precision = data["settings"]["seed"], data["settings"].get("precision", "ieee")
    indexed = [(i, r) for i, r in enumerate(data["records"]) if args.plan is None or re.search(args.plan, r["plan"])]
    for index, r in sorted(indexed, key=lambda ir: ir[1]["ratio_to_torch_matmul"])[: args.weakest]:
        A, B = make_problem_operands(r, "cuda", seed * 100003 + index)
        print(f"\n{r['m']}x{r['n']}x{r['k']} {r['layout']} {r['align']}: x{r['ratio_to_torch_matmul']:.3f} "
              f"(torch {r['torch_ms'] * 1e3:.1f} us, ours {r['ours_ms'] * 1e3:.1f} us)  plan: {torch_vecgemm.plan(A, B)}")
        print(f"  host us per call, queued: torch {queued_us(lambda: torch.matmul(A, B))[0]:.1f}, "
              f"ours {queued_us(lambda: torch_vecgemm.mm(A, B, precision=precision))[0]:.1f}")
        for side, fn in (("torch", lambda: torch.matmul(A, B)),
                         ("ours", lambda: torch_vecgemm.mm(A, B, precision=precision))):
            ks = kernels_of(fn, calls=5)
            print(f"  {side:<5} kernels sum {sum(ks.values()):8.1f} us")
            for name, us in ks.items():
                print(f"        {us:8.1f} us  {name[:110]}")


if __name__ == "__main__":
    main()
