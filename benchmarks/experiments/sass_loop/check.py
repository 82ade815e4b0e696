"""Large-problem check of a build whose t816 main loops `tools/sass_rewrite` rewrote:
the problems where that loop runs (whole waves through the stream-K launch, interior tiles
of the plain launch, one K tile, K not a multiple of the tile) against float64, outputs
poisoned, with the bound of tests/conftest.py. Prints the selected kernel and the error."""
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
from conftest import assert_gemm_close, make_operand, poison_allocator, randn  # noqa: E402

import torch_vecgemm  # noqa: E402

ops = torch.ops.vecgemm
CASES = [  # (m, n, k, layout, variant)
    (4096, 4096, 4096, "cr", "auto"), (4096, 4096, 4096, "rr", "auto"), (2048, 2048, 2048, "rr", "auto"),
    (1000, 1100, 1200, "cr", "tiled_128x128x8_t816"), (256, 256, 8, "cr", "tiled_128x128x8_t816"),
    (256, 384, 16, "cr", "tiled_128x128x8_t816"), (640, 384, 4104, "cc", "tiled_128x128x8_t816"),
    (3072, 3072, 1000, "cr", "auto"), (8192, 1024, 512, "cr", "auto"),
]


def main():
    failed = 0
    for m, n, k, layout, variant in CASES:
        A, B, C = make_operand(m, k, layout[0]), make_operand(k, n, layout[1]), randn(m, n)
        for c, alpha, beta in ((C, 1.5, -0.5), (None, 1.0, 0.0)):
            poison_allocator((m, n))
            out = ops.sgemm(A, B, c, alpha, beta, variant)
            try:
                assert_gemm_close(out, A, B, c, alpha, beta)
                verdict = "ok"
            except AssertionError as e:
                verdict, failed = f"FAIL {e}", failed + 1
            print(f"{m}x{n}x{k} {layout} {variant} beta={beta}: "
                  f"{torch_vecgemm.selected_kernel(A, B, variant=variant)}: {verdict}", flush=True)
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
