"""How do products with a few vectors run against torch.matmul: one to eight tokens through
a linear layer (M of 1 to 8), a matrix times one to eight columns (N of 1 to 8), in each
storage order of the vectors and the matrix, on the model shapes' weights?

For each problem: the plan auto picks (gemv, a tiling with its K split, or torch's product
where the planner hands it over), its time and torch.matmul's on the same operands
(`benchmarks.common.time_ms`: median, L2 cleared before each run), the matrix's read rate
(its bytes over our time: gemv's bound is one read), and the relative error of each against
float64. gemv serves M or N of at most 4 with the vectors contiguous and the matrix's rows
along K (docs/design.md); the rest show what a tiling or torch makes of them (docs/history.md,
steps 76-77). The narrow matrices (few rows over a deep K) ask where gemv, one warp a row,
stops filling the GPU: the planner gives it every product it fits, unpriced. Needs a GPU.

    python -m benchmarks.probes.few_vectors [--vectors 1,2,3,4,5,8] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, make_operands, time_ms
from benchmarks.sweep import relative_error

# The matrices: (rows, K) of LLaMA's and GPT-2's weights and the LM head.
MATRICES = [(4096, 4096), (11008, 4096), (4096, 11008), (3072, 768), (768, 3072), (768, 768), (50257, 768)]
# Few rows over a deep K: a classifier's head on wide features, a projection of a long sequence.
NARROW = [(16, 65536), (128, 65536), (512, 16384), (1024, 16384), (2048, 8192)]


def problems(vectors, matrices=MATRICES, narrow=NARROW):
    """(m, n, k, orders) for each count of vectors and matrix: the vectors as A's rows with the
    matrix as B stored either way (x @ W.T where B is column-major, x @ W where row-major),
    then as B's columns with the matrix as A stored either way, the vectors contiguous; then
    the fewest vectors and the most up to gemv's four against each narrow matrix, as x @ W.T."""
    out = []
    for rows, k in matrices:
        for v in vectors:
            out += [(v, rows, k, "rc"), (v, rows, k, "rr")]
    for rows, k in matrices[:2]:
        for v in vectors:
            out += [(rows, v, k, "rc"), (rows, v, k, "cc")]
    for rows, k in narrow:
        for v in sorted({min(vectors), min(max(vectors), 4)}):
            out.append((v, rows, k, "rc"))
    return out


def measure(m, n, k, orders, seed):
    A, B = make_operands(m, n, k, orders, "cuda", seed=seed)
    exact = A.double() @ B.double()
    ours_ms = time_ms(lambda: torch_vecgemm.mm(A, B))
    torch_ms = time_ms(lambda: torch.matmul(A, B))
    return {"m": m, "n": n, "k": k, "orders": orders, "plan": torch_vecgemm.selected_kernel(A, B),
            "ms": ours_ms, "torch_ms": torch_ms, "speedup": torch_ms / ours_ms,
            "matrix_gb_per_s": 4.0 * max(m, n) * k / (ours_ms * 1e6),
            "err": relative_error(torch_vecgemm.mm(A, B), exact), "torch_err": relative_error(torch.matmul(A, B), exact)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", default="1,2,3,4,5,8")
    ap.add_argument("--out", help="write the machine's stamp and every row as JSON")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("few_vectors times CUDA kernels; no CUDA device here")
    rows = []
    print(f"{'M':>6} {'N':>6} {'K':>6} ord {'plan':<40} {'us':>7} {'torch us':>8} {'x mm':>5} {'GB/s':>6} {'err/torch':>9}")
    for seed, (m, n, k, orders) in enumerate(problems([int(v) for v in args.vectors.split(",")])):
        r = measure(m, n, k, orders, seed)
        rows.append(r)
        print(f"{m:>6} {n:>6} {k:>6} {orders}  {r['plan'][:40]:<40} {r['ms'] * 1e3:7.1f} {r['torch_ms'] * 1e3:8.1f} "
              f"{r['speedup']:5.2f} {r['matrix_gb_per_s']:6.0f} {r['err'] / r['torch_err']:9.2f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": machine_info(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
