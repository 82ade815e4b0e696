"""What does programmatic dependent launch gain (csrc/kernels/dependent_launch.cuh)?

The auto variant with its second passes (split-K reduction, stream-K fix-up) allowed to
overlap the end of the kernel before them, and without, rounds alternated in one process,
each against torch.matmul on the same operands. The problems are those with more than one
kernel, and single-kernel ones (or copies and one kernel) as a control. With --variant and
--precision another plan is timed the same way, e.g. the 3xTF32 wgmma kernel between its
split pass and its fix-up (--variant tf32x3_128x128_wgmma --precision 3xtf32). Needs a GPU.

    python -m benchmarks.probes.dependent_launch [--shapes 2048x2048x2048:rr,...] [--rounds 5]
        [--variant auto] [--precision ieee]
"""
from __future__ import annotations

import argparse
import statistics

import torch

import torch_vecgemm
from benchmarks.common import make_operands, time_ms

DEFAULT_SHAPES = (
    "128x128x128:rr,256x256x256:rr,512x512x512:rr,1024x1024x1024:rr,2048x2048x2048:rr,2048x2048x2048:cr,"
    "3072x3072x3072:rr,4096x4096x4096:rr,4096x4096x4096:cr,8192x8192x8192:rr,"
    "8x4096x4096:rc,32x4096x4096:rc,64x4096x4096:rr,1000x2304x768:rc,1000x1000x1000:rr,"
    "2048x12288x4096:rc,512x11008x4096:rc,3001x2999x1531:rr,777x4097x1023:rc"
)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma list of MxNxK:layout")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variant", default="auto", help="the plan's variant (torch_vecgemm.variants())")
    ap.add_argument("--precision", default="ieee", choices=["ieee", "3xtf32"])
    args = ap.parse_args(argv)
    print("shape layout | the plan | overlap ms, serial ms (overlap/serial) | x mm overlap, serial")
    ratios = []
    for spec in args.shapes.split(","):
        dims, layout = spec.split(":")
        m, n, k = map(int, dims.split("x"))
        A, B = make_operands(m, n, k, layout, "cuda")
        ours = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, args.variant, args.precision)  # noqa: E731
        ref = torch.matmul(A.double(), B.double())
        times = {True: [], False: [], "mm": []}
        try:
            for _ in range(args.rounds):
                for overlap in (True, False):
                    torch_vecgemm._C._testing.set_dependent_launch(overlap)
                    D = ours()
                    err = ((D.double() - ref).abs().max() / ref.abs().max()).item()
                    assert err < 1e-5, f"{spec}: relative error {err:.2e} with overlap={overlap}"
                    times[overlap].append(time_ms(ours))
                times["mm"].append(time_ms(lambda: torch.matmul(A, B)))
        finally:
            torch_vecgemm._C._testing.set_dependent_launch(True)
        med = {t: statistics.median(v) for t, v in times.items()}
        ratios.append(med[True] / med[False])
        plan = torch_vecgemm.selected_kernel(A, B, variant=args.variant, precision=args.precision)
        print(f"{m}x{n}x{k} {layout} | {plan} | {med[True]:.4f}, {med[False]:.4f} "
              f"({med[True] / med[False]:.3f}) | {med['mm'] / med[True]:.3f}, {med['mm'] / med[False]:.3f}")
    print(f"geometric mean of overlap/serial: {statistics.geometric_mean(ratios):.4f}")


if __name__ == "__main__":
    main()
