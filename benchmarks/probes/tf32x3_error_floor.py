"""What is each 3xTF32 kernel's error floor, K by K, beside cuBLAS SGEMM's, and from which
K on is each kernel at least as accurate (issue 40, items 1 and 5)?

3xTF32's error has a floor whatever K is (the split's representation error and the tensor
core's truncation of each MMA's sum, sgemm_3xtf32.cuh "Accumulation"), where fp32's grows
with the length of its FFMA chains; each row's `min_fp32_sum` (planner/tf32x3_rows.h) is
the shortest fp32 sum it serves. This runs, for each distribution and M = N, every 3xTF32
row that takes the problem forced by name through the strict op, and torch.matmul in fp32
(TF32 off), on the same operands over a few seeds, and prints each one's mean relative
Frobenius error against float64 in units of u = 2^-24, then per row the shortest K from
which it stays within cuBLAS's error at every K measured. cuBLAS splits K on small grids,
so its chains are shorter than K there: the crossover is in K, the planner's rule in fp32
sums (precision_choice measures that on the random sweep's problems). With --narrow, also
the products with a narrow side (M or N of a few), B column-major as the narrow-side rows
take them (x @ W.T). No timing.

    python -m benchmarks.probes.tf32x3_error_floor [--sizes 512,2048] [--ks 16,32,...]
        [--narrow 8,32] [--seeds 3] [--out FILE.json]

Needs a GPU of sm_80 or newer.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, tf32_allowed
from benchmarks.sweep import relative_error

U = 2.0 ** -24
DISTRIBUTIONS = ("randn", "uniform")  # uniform on [0, 1): sums of one sign, truncation's worst case
DEFAULT_KS = (16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096)
CUBLAS = "cuBLAS fp32"


def operand(distribution, rows, cols, generator):
    if distribution == "randn":
        return torch.randn(rows, cols, device="cuda", generator=generator)
    return torch.rand(rows, cols, device="cuda", generator=generator)


def measure(distribution, m, n, k, seeds, rows, b_column_major=False):
    """Mean relative error (in u) of cuBLAS and of each row that takes the problem."""
    errors: dict[str, list[float]] = {}
    for seed in range(seeds):
        g = torch.Generator(device="cuda").manual_seed(1_000_003 * seed + k)
        A = operand(distribution, m, k, g)
        B = operand(distribution, n, k, g).t() if b_column_major else operand(distribution, k, n, g)
        ref = A.double() @ B.double()
        with tf32_allowed(False):
            errors.setdefault(CUBLAS, []).append(relative_error(torch.matmul(A, B), ref) / U)
        for row in rows:
            if torch_vecgemm.fallback_reason(A, B, variant=row) is None:
                out = torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32")
                errors.setdefault(row, []).append(relative_error(out, ref) / U)
    return {name: sum(v) / len(v) for name, v in errors.items()}


def crossover(by_k, row):
    """The shortest K of `by_k` ({K: {name: error}}) from which `row`'s error is at most
    cuBLAS's at every K measured, or None where it is above cuBLAS's at the deepest K."""
    shortest = None
    for k in sorted(by_k, reverse=True):
        errors = by_k[k]
        if row not in errors:
            continue
        if errors[row] > errors[CUBLAS]:
            break
        shortest = k
    return shortest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="512,2048", help="comma list of M = N")
    ap.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)), help="comma list of K")
    ap.add_argument("--narrow", default="", help="comma list of narrow sides: M (and N) of this many beside each size")
    ap.add_argument("--seeds", type=int, default=3, help="operands drawn per case, errors averaged")
    ap.add_argument("--out", help="write every mean error to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no GPU: this probe runs the kernels")
    rows = [v for v in torch_vecgemm.variants() if v.startswith("tf32x3_")]
    if not rows:
        raise SystemExit("no 3xTF32 kernel in this build")
    sizes = [int(s) for s in args.sizes.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    print(machine_info()["gpu"], f"relative Frobenius error against float64, in u = 2^-24, mean of {args.seeds}")
    narrow = [int(q) for q in args.narrow.split(",") if q]
    # (M, N, B column-major): the squares, then each narrow side as few rows and few columns.
    shapes = [(size, size, False) for size in sizes] + [
        shape for q in narrow for size in sizes for shape in ((q, size, True), (size, q, True))]
    results = []
    for distribution in DISTRIBUTIONS:
        for m, n, b_column_major in shapes:
            by_k = {}
            for k in ks:
                by_k[k] = measure(distribution, m, n, k, args.seeds, rows, b_column_major)
                results.append(dict(distribution=distribution, m=m, n=n, k=k, b_column_major=b_column_major,
                                    errors_u=by_k[k]))
                cells = "  ".join(f"{name.removeprefix('tf32x3_')} {e:5.2f}" for name, e in by_k[k].items())
                print(f"{distribution:7} {m}x{n}x{k:<6} {'rc' if b_column_major else 'rr'}  {cells}", flush=True)
            for row in rows:
                if any(row in e for e in by_k.values()):
                    k = crossover(by_k, row)
                    print(f"  {row}: within cuBLAS's error from K = {k}" if k else
                          f"  {row}: above cuBLAS's error at K = {max(ks)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=machine_info(), results=results), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
