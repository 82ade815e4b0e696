"""The second passes: the split-K reduction, the stream-K tail and its fix-up, their
programmatic dependent launch, and their capture in CUDA graphs. Shapes that need a partial
last wave are computed from the device's resident blocks (torch_vecgemm._C._testing.resident_blocks).
Skipped, with the reason shown, where there is no GPU."""
from __future__ import annotations

import math

import pytest
import torch

import torch_vecgemm
from conftest import (
    GPU,
    LAYOUTS,
    STREAM_K_TILING,
    TILINGS,
    aligned_operand,
    assert_gemm_close,
    block_tile,
    force_choice,
    ops,
    poison_allocator,
    randn,
    run_strict,
    tail_grid,
)

pytestmark = GPU


def tail_shape(waves, tail_fraction, trim):
    """(M, N) whose tiles of the stream-K tiling fill `waves` whole waves of the device's
    resident blocks and about `tail_fraction` of one more, the last tiles cut short by
    `trim` rows and columns (0: whole tiles only)."""
    bm, bn, _ = block_tile(STREAM_K_TILING)
    tiles_m, tiles_n = tail_grid(torch_vecgemm._C._testing.resident_blocks(STREAM_K_TILING), waves, tail_fraction)
    return bm * tiles_m - trim, bn * tiles_n - trim


# ---- split-K ---------------------------------------------------------------------------------------


def test_split_k_shapes(rng):
    # Few output tiles and a long K: the planner splits K.
    assert torch_vecgemm.plan(randn(rng, 32, 8192), randn(rng, 8192, 64)).split_k > 1
    for m, n, k in [(32, 64, 8192), (1, 1, 5000), (7, 333, 4099), (64, 64, 65536)]:
        A, B = randn(rng, m, k), randn(rng, k, n)
        C = randn(rng, m, n)
        assert_gemm_close(run_strict(A, B, C, 1.0, 1.0), A, B, C, 1.0, 1.0, tol=2e-5)


@pytest.mark.parametrize("variant", TILINGS)
@pytest.mark.parametrize("layout", ["rr", "cr"])
def test_split_k_every_tiling(variant, layout, rng, clean_tuning):
    # The split fixed through the tuning cache: every tiling's partial sums, reduced with
    # alpha, beta and C. K = 1000 in four slices of whole K tiles, the last one shorter.
    m, n, k = 96, 72, 1000
    A, B, C = aligned_operand(rng, m, k, layout[0]), aligned_operand(rng, k, n, layout[1]), randn(rng, m, n)
    force_choice(A, B, variant, 4)
    plan = torch_vecgemm.plan(A, B)
    assert (plan.kernel, plan.split_k, plan.stream_k) == (variant, 4, False), plan
    assert_gemm_close(run_strict(A, B, C, 0.5, 2.0), A, B, C, 0.5, 2.0, tol=2e-5)


# ---- the stream-K tail ------------------------------------------------------------------------------

# (whole waves, the partial wave's share of one, rows and columns cut off the last tiles, K):
# on the H200 these are the shapes 2050^2 x 251, 3000^2 x 520 and 2176 x 2304 x 256.
TAIL_CASES = {
    # edge tiles, K not a multiple of BK, rows of D not 16-byte aligned
    "edge tiles": (1, 0.095, 126, 251),
    # two whole waves, then each tail tile in pieces of about a fifth of its K steps
    "two waves": (2, 0.18, 72, 520),
    "whole tiles": (1, 0.16, 0, 256),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", sorted(TAIL_CASES))
def test_stream_k_tail(layout, case, rng):
    # The last, partial wave of t816's blocks as the stream-K tail (sgemm_stream_k.cuh):
    # pieces of tiles from every block, summed by the fix-up with alpha, beta and C. A small
    # partial wave leaves one block on some SMs: the cost model takes the tail there.
    waves, fraction, trim, k = TAIL_CASES[case]
    m, n = tail_shape(waves, fraction, trim)
    variant = STREAM_K_TILING
    A, B, C = aligned_operand(rng, m, k, layout[0]), aligned_operand(rng, k, n, layout[1]), randn(rng, m, n)
    plan = torch_vecgemm.plan(A, B, variant=variant)
    assert (plan.kernel, plan.split_k, plan.stream_k, plan.orders) == (variant, 1, True, layout), plan
    assert_gemm_close(run_strict(A, B, C, 1.5, -0.5, variant), A, B, C, 1.5, -0.5)
    assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)
    # Deterministic: the pieces are added in the same order every run.
    assert torch.equal(run_strict(A, B, variant=variant), run_strict(A, B, variant=variant))


# ---- dependent launch ----------------------------------------------------------------------------


@pytest.mark.parametrize("overlap", [True, False])
def test_dependent_launch_chain(overlap, rng, clean_tuning):
    # The second passes (the stream-K fix-up, the split-K reduction) may start before the
    # kernel before them has ended (dependent_launch.cuh). Products fed straight into each
    # other, and into a torch kernel, must still see every kernel of the one before complete:
    # a copy of A, the whole waves, the tail and its fix-up; a split-K product and its
    # reduction; a plain product.
    torch_vecgemm._C._testing.set_dependent_launch(overlap)
    m, n = tail_shape(2, 0.18, 72)
    A1, B1, B2, B3 = randn(rng, m, 520), randn(rng, 520, n), randn(rng, n, 48), randn(rng, 48, 40)
    force_choice(A1, B1, STREAM_K_TILING, 1, stream_k=True)
    plan1 = torch_vecgemm.plan(A1, B1)
    # K = 520 is padded to a multiple of 16: A and B are copied.
    assert plan1.stream_k and plan1.copy_a is not None and plan1.copy_b is not None, plan1
    poison_allocator((m, n))
    D1 = ops.sgemm(A1, B1, None, 1.0, 0.0, "auto")
    # D1 (rows 16-byte aligned) times a skinny B: split-K, right behind it. Eight slices of
    # whole K tiles, as many as are not empty (8 on the H200, K = 3000).
    force_choice(D1, B2, "tiled_64x128x8", 8)
    bk = block_tile("tiled_64x128x8")[2]
    slice_k = math.ceil(math.ceil(n / 8) / bk) * bk
    plan2 = torch_vecgemm.plan(D1, B2)
    assert (plan2.kernel, plan2.split_k) == ("tiled_64x128x8", math.ceil(n / slice_k)), plan2
    D2 = ops.sgemm(D1, B2, None, 1.0, 0.0, "auto")
    D3 = ops.sgemm(D2, B3, None, 1.0, 0.0, "auto")
    D4 = D3 * 2.0  # a plain torch launch behind the last product
    torch.cuda.synchronize()
    assert_gemm_close(D1, A1, B1)
    assert_gemm_close(D2, D1, B2)
    assert_gemm_close(D3, D2, B3)
    assert torch.equal(D4, D3 * 2.0)


WGMMA = "tf32x3_128x128_wgmma"


def wgmma(A, B):
    """A @ B on the 3xTF32 wgmma form (split pass, kernel, fix-up), skipping where it does not run."""
    why = torch_vecgemm.fallback_reason(A, B, variant=WGMMA)
    if why is not None:
        pytest.skip(f"{WGMMA} does not run here: {why}")
    return ops.sgemm(A, B, None, 1.0, 0.0, WGMMA, "3xtf32")


@pytest.mark.parametrize("overlap", [True, False])
def test_wgmma_passes_chain(overlap, rng, clean_tuning):
    # The wgmma form's kernel may start before its split pass has ended, its fix-up before
    # the kernel has, and a split-K reduction before the fix-up has (dependent_launch.cuh).
    # Products fed straight into each other, and into a torch kernel, must see every pass of
    # the one before complete: a split-K product, then one whose split pass reads it and
    # whose fix-up recomputes the tiles an Inf reaches, then one that reads those.
    torch_vecgemm._C._testing.set_dependent_launch(overlap)
    P, Q = randn(rng, 64, 6000), randn(rng, 6000, 520)
    B1, B2 = randn(rng, 64, 260), randn(rng, 132, 48)
    B1[3, 7] = float("inf")  # column 7 of D1: Inf or NaN, so its column of tiles is flagged
    assert torch_vecgemm.plan(P, Q, variant=WGMMA).split_k > 1
    poison_allocator((64, 520))
    D0 = wgmma(P, Q)
    A1 = D0.t()  # column-major: through the split pass, as row-major B1 is
    assert torch_vecgemm.selected_kernel(A1, B1, variant=WGMMA) == WGMMA + ", split pass of A B"
    D1 = wgmma(A1, B1)
    D2 = wgmma(D1[:, 128:], B2)  # the columns past the flagged tiles: finite
    D3 = D2 * 2.0  # a plain torch launch behind the last product
    torch.cuda.synchronize()
    assert_gemm_close(D0, P, Q)
    want = A1 @ B1
    for is_class in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(is_class(D1), is_class(want)), is_class.__name__
    assert torch.isfinite(D1[:, 128:]).all()
    assert_gemm_close(D1[:, 128:], A1, B1[:, 128:])
    assert_gemm_close(D2, D1[:, 128:], B2)
    assert torch.equal(D3, D2 * 2.0)


# ---- CUDA graphs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("second_pass", ["split-k", "stream-K tail", "3xTF32 wgmma passes"])
def test_cuda_graph_capture_second_pass(second_pass, rng, clean_tuning):
    # The second passes are launched dependent (dependent_launch.cuh); captured in a graph,
    # that becomes a programmatic edge, and replays must still see the first pass complete.
    product = torch_vecgemm.mm
    if second_pass == "split-k":
        A, B = randn(rng, 32, 8192), randn(rng, 8192, 64)
        assert torch_vecgemm.plan(A, B).split_k > 1
    elif second_pass == "stream-K tail":
        m, n = tail_shape(2, 0.18, 72)
        A, B = randn(rng, m, 520), randn(rng, 520, n)
        force_choice(A, B, STREAM_K_TILING, 1, stream_k=True)
        assert torch_vecgemm.plan(A, B).stream_k
    else:
        A, B, product = randn(rng, 520, 300).t(), randn(rng, 520, 260), wgmma
    out = product(A, B)  # warm-up outside the graph
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = product(A, B)
    for _ in range(2):
        A.copy_(randn(rng, *A.shape))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_gemm_close(out, A, B)
