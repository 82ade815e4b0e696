"""A small sample of edge shapes for every variant and storage order, for
compute-sanitizer (memcheck, racecheck): each launch is checked against a float64
reference here too, so a clean sanitizer run is also a correct one.

    compute-sanitizer --tool memcheck --error-exitcode 1 python -m benchmarks.sanitize_sample [--stream-k-only]
    compute-sanitizer --tool memcheck --error-exitcode 1 python -m benchmarks.sanitize_sample --variants '^async_'

--variants REGEX runs only the edge shapes of the variants whose names match (the GPU suite's
memcheck test: tests/test_faults.py). memcheck sees a read past a tensor only where the tensor
is its own allocation: run with PYTORCH_NO_CUDA_MEMORY_CACHING=1, as that test does (inside the
caching allocator's segments such a read passes).
"""
from __future__ import annotations

import argparse
import re
import sys

import torch

import torch_vecgemm


def operand(rows, cols, layout, storage):
    """dense, "offset" (misaligned by one float), "padded" (rows padded to 16 bytes, which
    the variants built for aligned operands take at any shape) or "cut" (rows padded, the
    storage ending at the last element: its last 16 bytes are not all there, so those
    variants must refuse it)."""
    inner, outer = (cols, rows) if layout == "r" else (rows, cols)
    ld = -(-inner // 4) * 4 if storage in ("padded", "cut") else inner
    offset = 1 if storage == "offset" else 0
    size = (outer - 1) * ld + inner if storage == "cut" else outer * ld
    t = torch.randn(size + offset, device="cuda")[offset:].as_strided((outer, inner), (ld, 1))
    return t if layout == "r" else t.t()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stream-k-only", action="store_true", help="a short racecheck of the stream-K tail alone")
    ap.add_argument("--variants", metavar="REGEX", help="only the edge shapes of the variants whose names match")
    args = ap.parse_args(argv)
    stream_k_only = args.stream_k_only
    shapes = [(1, 1, 1), (5, 7, 3), (129, 65, 9), (33, 130, 17), (200, 3, 40), (64, 64, 1000), (1, 130, 37), (70, 1, 300)]
    failures = launches = 0

    def check(label, out, ref, scale):
        # The error against the problem's scale, |A| |B| (+ |C|): float32 rounds the product
        # before C is added, so where A @ B and C cancel (a 1 x 1 x 1 problem does now and
        # then) the error relative to the result itself can pass 1e-5 with every step right.
        nonlocal failures, launches
        rel = (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(scale)).item()
        launches += 1
        if not rel < 1e-5:
            failures += 1
            print(f"WRONG {label}: rel {rel:.3g}")

    def summary():
        torch.cuda.synchronize()
        print(f"{launches} checked launches, {failures} wrong")
        return 1 if failures else 0

    # The stream-K tail (sgemm_stream_k.cuh): 289 t816 tiles on 264 slots, edge tiles in M
    # and N, K not a multiple of BK, rows of D not 16-byte aligned; then a partial wave
    # alone. One storage order in the full sample (racecheck is slow on large problems),
    # all four with --stream-k-only.
    for layout in ("rr", "rc", "cr", "cc") if stream_k_only else () if args.variants else ("cr",):
        A, B = operand(2050, 251, layout[0], "padded"), operand(251, 2050, layout[1], "padded")
        C = torch.randn(2050, 2050, device="cuda")
        described = torch_vecgemm.selected_kernel(A, B, variant="tiled_128x128x8_t816")
        assert "stream-K tail" in described, described
        A64, B64, C64 = A.double(), B.double(), C.double()
        check(f"{described} 2050x2050x251 {layout}", torch.ops.vecgemm.sgemm(A, B, C, 1.5, -0.5, "tiled_128x128x8_t816"),
              1.5 * A64 @ B64 - 0.5 * C64, 1.5 * A64.abs() @ B64.abs() + 0.5 * C64.abs())
        # A partial wave alone as the tail (64 tiles, no whole-wave grid), through the
        # tuning cache: every tile in pieces, edge tiles, a ragged K.
        A, B = operand(1000, 300, layout[0], "padded"), operand(300, 900, layout[1], "padded")
        C = torch.randn(1000, 900, device="cuda")
        torch_vecgemm._C.clear_tuning_cache()
        torch_vecgemm._C.add_tuning_entry(torch_vecgemm._C.tuning_key(A, B), "tiled_128x128x8_t816", 1, stream_k=True)
        described = torch_vecgemm.selected_kernel(A, B)
        assert "stream-K tail" in described, described
        A64, B64, C64 = A.double(), B.double(), C.double()
        check(f"{described} 1000x900x300 {layout}", torch.ops.vecgemm.sgemm(A, B, C, 1.5, -0.5),
              1.5 * A64 @ B64 - 0.5 * C64, 1.5 * A64.abs() @ B64.abs() + 0.5 * C64.abs())
        torch_vecgemm._C.clear_tuning_cache()
    if stream_k_only:
        return summary()
    variants = [v for v in torch_vecgemm.variants() if args.variants is None or re.search(args.variants, v)]
    assert variants, f"no variant matches {args.variants!r}"
    for variant in variants:
        cases = [(s, l, o) for s in shapes for l in ("rr", "rc", "cr", "cc") for o in ("dense", "offset", "padded", "cut")]
        for (m, n, k), layout, storage in cases:
            A, B = operand(m, k, layout[0], storage), operand(k, n, layout[1], storage)
            C = torch.randn(m, n, device="cuda")
            if torch_vecgemm.fallback_reason(A, B, C, variant=variant) is not None:
                continue
            out = torch.ops.vecgemm.sgemm(A, B, C, 1.0, 1.0, variant)
            A64, B64, C64 = A.double(), B.double(), C.double()
            check(f"{variant} {m}x{n}x{k} {layout} {storage}", out, A64 @ B64 + C64, A64.abs() @ B64.abs() + C64.abs())
    if args.variants:
        return summary()
    # Large enough for auto to copy both operands into padded storage (odd K): the copy
    # kernels' reads and writes, with zero columns and zero rows, and the transposing copy
    # wherever the model moves an operand into the other storage order (free here: both are
    # copied anyway).
    reordered = 0
    for layout in ("rr", "rc", "cr", "cc"):
        A, B = operand(1024, 1023, layout[0], "dense"), operand(1023, 1040, layout[1], "dense")
        described = torch_vecgemm.selected_kernel(A, B)
        assert re.search(r", copy of A( \(\w+-major\))? B( \(\w+-major\))?$", described), described
        reordered += "-major" in described
        A64, B64 = A.double(), B.double()
        check(f"auto 1024x1040x1023 {layout} copies ({described})", torch.ops.vecgemm.sgemm(A, B), A64 @ B64,
              A64.abs() @ B64.abs())
    assert reordered > 0, "no layout took the transposing copy"
    # The seed's kernel only takes full tiles.
    A, B, C = torch.randn(128, 16, device="cuda"), torch.randn(16, 256, device="cuda"), torch.randn(128, 256, device="cuda")
    torch.ops.vecgemm.sgemm_(C, A, B, 1.0, 1.0, "vectorized")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
