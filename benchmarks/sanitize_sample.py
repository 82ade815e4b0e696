"""A small sample of edge shapes for every variant and storage order, for
compute-sanitizer (memcheck, racecheck): each launch is checked against a float64
reference here too, so a clean sanitizer run is also a correct one.

    compute-sanitizer --tool memcheck --error-exitcode 1 python -m benchmarks.sanitize_sample
"""
from __future__ import annotations

import sys

import torch

import torch_vecgemm


def operand(rows, cols, layout, offset):
    if layout == "r":
        return torch.randn(rows * cols + offset, device="cuda")[offset:].view(rows, cols)
    return torch.randn(rows * cols + offset, device="cuda")[offset:].view(cols, rows).t()


def main():
    shapes = [(1, 1, 1), (5, 7, 3), (129, 65, 9), (33, 130, 17), (200, 3, 40), (64, 64, 1000)]
    failures = launches = 0
    for variant in torch_vecgemm.variants():
        for (m, n, k), layout, offset in [(s, l, o) for s in shapes for l in ("rr", "rc", "cr", "cc") for o in (0, 1)]:
            A, B = operand(m, k, layout[0], offset), operand(k, n, layout[1], offset)
            C = torch.randn(m, n, device="cuda")
            if torch_vecgemm.fallback_reason(A, B, C, variant=variant) is not None:
                continue
            out = torch.ops.vecgemm.sgemm(A, B, C, 1.0, 1.0, variant)
            ref = A.double() @ B.double() + C.double()
            rel = (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)).item()
            launches += 1
            if not rel < 1e-5:
                failures += 1
                print(f"WRONG {variant} {m}x{n}x{k} {layout} offset {offset}: rel {rel:.3g}")
    # The seed's kernel only takes full tiles.
    A, B, C = torch.randn(128, 16, device="cuda"), torch.randn(16, 256, device="cuda"), torch.randn(128, 256, device="cuda")
    torch.ops.vecgemm.sgemm_(C, A, B, 1.0, 1.0, "vectorized")
    torch.cuda.synchronize()
    print(f"{launches} checked launches, {failures} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
