"""What does the stream-K tail gain or cost, problem by problem?

The auto variant with the model's tiling forced unsplit with the tail and without it
(through the tuning cache), each timed against torch.matmul in the same process, rounds
alternated, and the kernels of one call of each plan with their device times
(torch.profiler), so that the tail kernel and the fix-up can be told apart from the whole
waves and the copies. Needs a GPU.

    python -m benchmarks.probes.stream_k_cost [--shapes 3001x2999x1531:rr,4096x4096x4096:cr] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics

import torch

import torch_vecgemm
from benchmarks.common import kernels_of, make_operands, planned_tiling, time_ms

# Where the tail runs or might: square sizes, the model shapes that take it, the 3001 x 2999
# regression and its neighbours (K, edge tiles), the tests' shapes.
DEFAULT_SHAPES = (
    "3001x2999x1531:rr,3001x2999x1531:cr,3072x3072x1531:cr,3001x2999x4096:cr,3001x2999x512:cr,"
    "3072x3072x3072:rr,4096x4096x4096:rr,6144x6144x6144:rr,8192x8192x8192:rr,"
    "2048x12288x4096:rc,2048x11008x4096:rc,8192x4096x11008:rc,11008x4096x2048:cr,"
    "3000x3000x520:cr,2050x2050x251:cr"
)


def short(name):
    name = name.split("(")[0].replace("void ", "")
    return name.split("<")[0].split("::")[-1] + ("<...>" if "<" in name else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma list of MxNxK:layout")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    torch_vecgemm._C.clear_tuning_cache()
    print("shape layout | model's plan | tail ms, no tail ms (tail/no tail) | x mm tail, no tail")
    for spec in args.shapes.split(","):
        dims, layout = spec.split(":")
        m, n, k = map(int, dims.split("x"))
        A, B = make_operands(m, n, k, layout, "cuda")
        plan, config = torch_vecgemm.selected_kernel(A, B), planned_tiling(A, B)
        if config is None:  # gemv or a fallback: no tiling to force
            print(f"{m}x{n}x{k} {layout} | {plan} | not a tiling")
            continue
        key = torch_vecgemm._C.tuning_key(A, B)
        ours = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, "auto")
        times = {True: [], False: [], "mm": []}
        for _ in range(args.rounds):
            for tail in (True, False):
                torch_vecgemm._C.add_tuning_entry(key, config, 1, stream_k=tail)
                times[tail].append(time_ms(ours))
            times["mm"].append(time_ms(lambda: torch.matmul(A, B)))
        med = {t: statistics.median(v) for t, v in times.items()}
        print(f"{m}x{n}x{k} {layout} | {plan} | {med[True]:.4f}, {med[False]:.4f} ({med[True] / med[False]:.3f}) "
              f"| {med['mm'] / med[True]:.3f}, {med['mm'] / med[False]:.3f}")
        for tail in (True, False):
            torch_vecgemm._C.add_tuning_entry(key, config, 1, stream_k=tail)
            label = torch_vecgemm.selected_kernel(A, B)
            parts = ", ".join(f"{short(name)} {us:.1f}" for name, us in kernels_of(ours).items())
            print(f"    {label}: {parts} (us)")
        torch_vecgemm._C.clear_tuning_cache()


if __name__ == "__main__":
    main()
