"""What do edge tiles, operand rows that start off 128-byte lines and an unaligned output
cost one tiling, each apart?

The same tile count and K with M, N or both just short of whole tiles, the operands'
leading dimensions multiples of 4 or of 32 floats, and D's rows 16-byte aligned or not (an
in-place product into a view of a wider tensor). The auto variant runs on column-major A
and row-major B with K a multiple of 16, so nothing is copied, with the tiling (one with a
stream-K tail) and the tail fixed through the tuning cache, on and off; torch.matmul
alongside. Needs a GPU.

    python -m benchmarks.probes.edge_shapes [--config tiled_128x128x8_t816] [--k 1536] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics

import torch

import torch_vecgemm
from benchmarks.common import time_ms


def operand(rows, cols, order, ld):
    """N(0, 1) with the given leading dimension."""
    if order == "r":
        return torch.randn(rows, ld, device="cuda")[:, :cols]
    return torch.randn(cols, ld, device="cuda")[:, :rows].t()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="tiled_128x128x8_t816", help="a tiling with a stream-K tail")
    ap.add_argument("--size", type=int, default=3072, help="M and N of the whole-tile problem")
    ap.add_argument("--k", type=int, default=1536)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    s, k = args.size, args.k
    # (label, M, N, leading dimensions of A, B and D)
    cases = [("whole tiles", s, s, s, s, s), ("A, B rows off 128 B", s, s, s + 4, s + 4, s),
             ("D rows unaligned", s, s, s, s, s + 1),
             ("M edge", s - 71, s, s - 68, s, s), ("M edge, A ld 32k", s - 71, s, s - 64, s, s),
             ("N edge", s, s - 72, s, s - 72, s - 72), ("N edge, B and D ld 32k", s, s - 72, s, s - 64, s - 64),
             ("M, N edges, D unaligned", s - 71, s - 73, s - 68, s - 72, s - 73),
             ("M, N edges, A, B ld 32k", s - 71, s - 73, s - 64, s - 64, s - 73)]
    print(f"{args.config} on cr, K = {k}; median ms of {args.rounds} rounds; x mm = torch.matmul / ours")
    for label, m, n, lda, ldb, ld in cases:
        A, B = operand(m, k, "c", lda), operand(k, n, "r", ldb)
        D = torch.empty(m, ld, device="cuda")[:, :n]
        key = torch_vecgemm._C.tuning_key(A, B).rsplit("_", 1)[0] + ("_d4" if ld % 4 == 0 else "_d1")
        row = []
        for tail in (False, True):
            torch_vecgemm._C.add_tuning_entry(key, args.config, 1, stream_k=tail)
            times, mm = [], []
            for _ in range(args.rounds):
                times.append(time_ms(lambda: torch.ops.vecgemm.sgemm_(D, A, B, 1.0, 0.0, "auto")))
                mm.append(time_ms(lambda: torch.matmul(A, B)))
            t, t_mm = statistics.median(times), statistics.median(mm)
            row.append(f"{'tail' if tail else 'no tail'} {t:.4f} ms ({t_mm / t:.3f}x mm)")
        torch.testing.assert_close(D, A @ B, rtol=1e-4, atol=1e-3)
        print(f"  {label:<26} {m}x{n} ld {lda}/{ldb}/{ld}: " + ", ".join(row))
    torch_vecgemm._C.clear_tuning_cache()


if __name__ == "__main__":
    main()
