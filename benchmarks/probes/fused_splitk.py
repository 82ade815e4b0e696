"""Does a split-K product run faster when the last slice of each output tile to finish adds
the tile's slices (epilogue.cuh, reduce_if_last_slice) than with splitk_reduce launched after
the kernel (issue 42: split-K calls of 10-30 us spend ~2-3 us in the reduction and one more
launch)?

An experiment: the build must carry the switch VECGEMM_SPLITK_EXP (the experiment commit
docs/history.md names), read at each launch: on, the tiled and cp.async kernels other than
the 8 x 16 ones add their own slices; off, splitk_reduce does. For each problem of the IEEE
sweeps of record whose plan splits K on such a kernel (and a few of the model shapes' and
decode's), with the operands the sweep made: torch.matmul's time, then the strict op's
(the plan of record, never handed to torch) with the switch off and on (do_bench median, L2
cleared), and whether the two results are the same bits. Needs a GPU.

    python -m benchmarks.probes.fused_splitk [--gpu h200] [--limit 60]
"""
from __future__ import annotations

import argparse
import math
import os

import torch

import torch_vecgemm
from benchmarks import records
from benchmarks.common import time_ms
from benchmarks.sweep import make_problem_operands

EXTRA = [dict(m=m, n=n, k=k, layout=layout, align="aligned") for m, n, k, layout in
         [(8, 4096, 4096, "rr"), (32, 4096, 4096, "rr"), (128, 11008, 4096, "rc"), (1000, 1000, 1000, "rr"),
          (64, 64, 16384, "rc"), (5, 3072, 768, "rc"), (4, 50257, 768, "rr")]]


def split_problems(gpu, limit):
    """The sweeps' problems whose plan of record (or, handed to torch, whose kernels' plan)
    splits K on a tiling other than the 8 x 16 ones."""
    out = []
    for name in ("sweep", "sweep_seed1"):
        doc = records.load(gpu, name)
        if doc is None:
            continue
        for r in doc["records"]:
            plan = r.get("kernels_plan", r["plan"])
            if "split-k" in plan and "t816" not in plan and not plan.startswith("gemv"):
                out.append(dict(m=r["m"], n=r["n"], k=r["k"], layout=r["layout"], align=r["align"]))
    return out[:limit]


def run(problem, seed):
    A, B = make_problem_operands(problem, "cuda", seed)
    fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, "auto", "ieee")  # noqa: E731
    times, outs = {}, {}
    for switch in ("0", "1"):
        os.environ["VECGEMM_SPLITK_EXP"] = switch
        outs[switch] = fn().clone()
        times[switch] = time_ms(fn) * 1e3
    os.environ.pop("VECGEMM_SPLITK_EXP", None)
    torch_us = time_ms(lambda: torch.matmul(A, B)) * 1e3
    plan = str(torch_vecgemm.plan(A, B, precision="ieee").description)
    return torch_us, times, bool(torch.equal(outs["0"], outs["1"])), plan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="h200", help="the records whose sweeps give the problems")
    ap.add_argument("--limit", type=int, default=60)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("fused_splitk times CUDA kernels; no CUDA device here")
    print(torch.cuda.get_device_name())
    logs = {"0": [], "1": []}
    for i, p in enumerate(split_problems(args.gpu, args.limit) + EXTRA):
        torch_us, us, same, plan = run(p, seed=i)
        for s in us:
            logs[s].append(math.log(torch_us / us[s]))
        print(f"{p['m']}x{p['n']}x{p['k']} {p['layout']} {p['align']:<12} torch {torch_us:7.1f} | reduce {us['0']:7.1f} "
              f"({torch_us / us['0']:.2f}x) | own {us['1']:7.1f} ({torch_us / us['1']:.2f}x) | "
              f"{'same bits' if same else 'DIFFERENT'} | {plan[:60]}")
    for s, name in (("0", "reduction kernel"), ("1", "own slices")):
        print(f"{name}: geometric mean {math.exp(sum(logs[s]) / len(logs[s])):.3f}x torch.matmul over {len(logs[s])}")


if __name__ == "__main__":
    main()
