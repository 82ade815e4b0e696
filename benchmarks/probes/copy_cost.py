"""What does auto's copy of an operand into the fastest storage order cost?

At square sizes, auto runs on each storage order of A and B: rr, cc and rc copy an operand
into column-major A / row-major B, cr runs as given, so rr - cr is the time of one
transposing copy (docs/history.md, step 17). torch's own transposed copy and a plain
clone of the same operand are timed for scale. Needs a GPU.

    python -m benchmarks.probes.copy_cost [--sizes 2048,4096,8192]
"""
from __future__ import annotations

import argparse

import torch

import torch_vecgemm
from benchmarks.common import make_operands, time_ms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2048,4096,8192")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("copy_cost times CUDA kernels; no CUDA device here")
    for n in map(int, args.sizes.split(",")):
        ms = {}
        for layout in ("rr", "cr", "cc", "rc"):
            A, B = make_operands(n, n, n, layout, "cuda")
            ms[layout] = time_ms(lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, "auto"), rep_ms=300)
            ref = time_ms(lambda: torch.matmul(A, B), rep_ms=300)
            print(f"{n} {layout} auto {ms[layout]:.4f} ms  x{ref / ms[layout]:.3f} torch.matmul  "
                  f"{torch_vecgemm.selected_kernel(A, B)}", flush=True)
        moved = 8 * n * n  # one operand read and written
        copy = ms["rr"] - ms["cr"]
        print(f"{n} one transposing copy (rr - cr): {copy * 1e3:.1f} us, {moved / (copy * 1e-3) / 1e9:.0f} GB/s")
        A = torch.randn(n, n, device="cuda")
        for name, fn in [("torch A.t().contiguous()", lambda: A.t().contiguous()), ("torch A.clone()", A.clone)]:
            t = time_ms(fn, rep_ms=200)
            print(f"{n} {name}: {t * 1e3:.1f} us, {moved / (t * 1e-3) / 1e9:.0f} GB/s")


if __name__ == "__main__":
    main()
