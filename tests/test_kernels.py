"""Every kernel against float64 references, outputs poisoned first: the seed's vectorized
kernel, every tiling of the library's list over shapes, storage orders, alignments and
batches, the matrix-vector kernel, the operand copies that auto makes, and results exact on
integers. Skipped, with the reason shown, where there is no GPU."""
from __future__ import annotations

import itertools

import pytest
import torch

import torch_vecgemm
from conftest import (
    COPIED_SHAPE,
    GPU,
    LAYOUTS,
    STREAM_K_TILING,
    TILINGS,
    aligned_operand,
    assert_gemm_close,
    block_tile,
    force_choice,
    make_operand,
    measured_profile,
    ops,
    poison_allocator,
    randn,
    reference,
    run_inplace,
    run_strict,
    tail_grid,
    takes,
    transposing_problems,
    whole_waves_grid,
)

pytestmark = GPU

# ---- the seed's kernel --------------------------------------------------------------------------


@pytest.mark.parametrize("m,n,k", [(128, 128, 8), (256, 384, 72), (512, 128, 1024), (1024, 1024, 1024)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.75, -1.5)])
def test_vectorized(m, n, k, alpha, beta, rng):
    A, B, C = randn(rng, m, k), randn(rng, k, n), randn(rng, m, n)
    assert torch_vecgemm.plan(A, B, variant="vectorized").kernel == "vectorized"
    assert_gemm_close(run_strict(A, B, C, alpha, beta, "vectorized"), A, B, C, alpha, beta)
    assert_gemm_close(run_inplace(A, B, C, alpha, beta, "vectorized"), A, B, C, alpha, beta)


def test_vectorized_batched(rng):
    A, B, C = randn(rng, 3, 128, 64), randn(rng, 3, 64, 256), randn(rng, 256)
    assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, "vectorized"), A, B, C, 1.0, 1.0)


# ---- the general kernels: every tiling ------------------------------------------------------------


@pytest.mark.parametrize("variant", ["auto"] + TILINGS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(128, 128, 64), (257, 129, 33), (1, 300, 77), (300, 1, 5), (64, 200, 1), (513, 517, 515)])
def test_tiled_shapes_layouts(variant, layout, m, n, k, rng):
    # Dense operands: rows of odd length are not 16-byte aligned, which only some tilings
    # take; the others must refuse them with their rule (takes()).
    A, B = make_operand(rng, m, k, layout[0]), make_operand(rng, k, n, layout[1])
    if not takes(A, B, variant=variant):
        return
    if variant != "auto":
        assert torch_vecgemm.plan(A, B, variant=variant).kernel == variant
    C = randn(rng, m, n)
    assert_gemm_close(run_strict(A, B, C, 1.5, -0.5, variant), A, B, C, 1.5, -0.5)
    assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)


@pytest.mark.parametrize("variant", ["auto"] + TILINGS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "m,n,k,batch",
    [(257, 129, 33, None), (1, 300, 77, None), (300, 3, 5, None), (130, 66, 19, 3), (513, 517, 515, None), (64, 68, 4099, None)],
)
def test_aligned_odd_shapes(variant, layout, m, n, k, batch, rng):
    # Edge tiles in M, N and K (K not a multiple of 4 or of BK: partial 16-byte chunks),
    # batches, and a long K that the planner splits.
    A, B = aligned_operand(rng, m, k, layout[0], batch), aligned_operand(rng, k, n, layout[1], batch)
    assert torch_vecgemm.fallback_reason(A, B, variant=variant) is None
    C = randn(rng, m, n)
    assert_gemm_close(run_strict(A, B, C, 1.5, -0.5, variant), A, B, C, 1.5, -0.5)


@pytest.mark.parametrize("variant", ["auto"] + TILINGS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset,ld_pad", [(1, 0), (2, 3), (0, 1), (3, 5)])
def test_misaligned(variant, layout, offset, ld_pad, rng):
    # The scalar-load instances; tilings built for 16-byte aligned operands refuse these.
    m, n, k = 131, 70, 45
    A = make_operand(rng, m, k, layout[0], offset=offset, ld_pad=ld_pad)
    B = make_operand(rng, k, n, layout[1], offset=offset + 1, ld_pad=ld_pad)
    C = randn(rng, m, n + 3)[:, 1:-2]  # C with a storage offset and padded rows
    if takes(A, B, C, variant):
        assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, variant), A, B, C, 1.0, 1.0)


def test_misaligned_taken_by_some_tiling(rng):
    # Without a scalar-capable tiling, auto would have nothing to run test_misaligned's
    # operands on but its copies.
    A, B = make_operand(rng, 131, 45, "r", offset=1), make_operand(rng, 45, 70, "c", offset=2)
    assert [v for v in TILINGS if torch_vecgemm.fallback_reason(A, B, variant=v) is None]


@pytest.mark.parametrize("variant", ["auto"] + TILINGS)
def test_inplace_layouts(variant, rng):
    # C of either storage order (a column-major C runs as C^T = B^T A^T), beta zero (C
    # poisoned) or not; B dense (rows of 90 floats: not 16-byte aligned) and padded.
    m, n, k = 150, 90, 40
    A = randn(rng, m, k)
    for B in (randn(rng, k, n), aligned_operand(rng, k, n, "r")):
        for c_layout, (alpha, beta) in itertools.product("rc", [(1.0, 0.0), (2.0, 0.5)]):
            C = make_operand(rng, m, n, c_layout, ld_pad=2)
            if not takes(A, B, C, variant):
                continue
            expected = reference(A, B, C, alpha, beta)
            D = C if beta != 0 else C.fill_(float("nan"))
            C0 = D.clone()
            ops.sgemm_(D, A, B, alpha, beta, variant)
            assert_gemm_close(D, A, B, C0, alpha, beta)
            assert (D.double() - expected).abs().max() < 1e-3


@pytest.mark.parametrize("batch_b", ["full", "broadcast"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched(batch_b, layout, rng):
    b, m, n, k = 5, 70, 130, 37
    A = make_operand(rng, m, k, layout[0], batch=b, offset=3)
    B = make_operand(rng, k, n, layout[1], batch=b) if batch_b == "full" else make_operand(rng, k, n, layout[1]).expand(b, k, n)
    C = randn(rng, n)  # a bias broadcast over batch and rows
    assert_gemm_close(run_strict(A, B, C, 1.0, 1.0), A, B, C, 1.0, 1.0)
    torch.testing.assert_close(torch_vecgemm.bmm(A, B), torch.bmm(A, B), rtol=1e-5, atol=1e-4)


def sweep_cases(count, generator, aligned):
    pick = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=generator))
    for _ in range(count):
        yield dict(
            m=pick(1, 130), n=pick(1, 130), k=pick(1, 40), layout=LAYOUTS[pick(0, 3)],
            batch=[None, 3][pick(0, 1)], offset=4 * pick(0, 3) if aligned else pick(0, 3),
        )


@pytest.mark.parametrize("variant", ["auto"] + TILINGS)
def test_small_odd_sweep(variant, rng):
    # Random small shapes, orders, batches and offsets. A tiling built for 16-byte aligned
    # operands gets aligned ones (offsets of whole 16 bytes, leading dimensions padded).
    probe = make_operand(rng, 8, 8, "r", offset=1)
    aligned = torch_vecgemm.fallback_reason(probe, probe, variant=variant) is not None

    def pad(rows, cols, order):
        return -(cols if order == "r" else rows) % 4 if aligned else 0

    ran = 0
    for case in sweep_cases(120, rng.generator("cpu"), aligned):
        m, n, k, layout, batch = case["m"], case["n"], case["k"], case["layout"], case["batch"]
        A = make_operand(rng, m, k, layout[0], batch=batch, offset=case["offset"], ld_pad=pad(m, k, layout[0]))
        B = make_operand(rng, k, n, layout[1], batch=batch, ld_pad=pad(k, n, layout[1]))
        C = randn(rng, n)
        try:
            if not takes(A, B, C, variant):  # K or N of 1: a leading dimension of 1 element
                continue
            assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, variant), A, B, C, 1.0, 1.0)
        except AssertionError as e:
            raise AssertionError(f"{case}: {e}") from None
        ran += 1
    assert ran > 60, f"{variant} refused {120 - ran} of 120 cases"


# ---- the matrix-vector kernel ----------------------------------------------------------------------


@pytest.mark.parametrize("case", ["m1", "n1"])
@pytest.mark.parametrize("vector", ["r", "c"])
@pytest.mark.parametrize("k", [3, 77, 4096, 5003])
@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("offset", [0, 1])
def test_gemv(case, vector, k, batch, offset, rng):
    # M = 1 with B column-major (one token through nn.Linear) or N = 1 with A row-major: the
    # matrix-vector kernel, on either storage of the vector and misaligned operands too.
    rows = 300
    if case == "m1":
        A = make_operand(rng, 1, k, vector, batch=batch, offset=offset)
        B = make_operand(rng, k, rows, "c", batch=batch, offset=offset)
        C = randn(rng, rows)
    else:
        A = make_operand(rng, rows, k, "r", batch=batch, offset=offset)
        B = make_operand(rng, k, 1, vector, batch=batch, offset=offset)
        C = randn(rng, rows, 1)
    plan = torch_vecgemm.plan(A, B)
    # 300 rows over a deep K may split it (test_gemv_split_k): either way, gemv reads A and B.
    assert (plan.family, plan.kernel, plan.copy_a, plan.copy_b) == ("gemv", "gemv", None, None), plan
    assert plan.split_k == 1 or k >= 4096, plan
    for variant in ["auto", "gemv"]:
        assert_gemm_close(run_strict(A, B, C, 0.5, -1.0, variant), A, B, C, 0.5, -1.0)
        assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)
    with pytest.raises(RuntimeError, match="gemv kernel takes M <= 4"):
        ops.sgemm(randn(rng, 2, k), randn(rng, k, rows), None, 1.0, 0.0, "gemv")


@pytest.mark.parametrize("case", ["m", "n"])
@pytest.mark.parametrize("vectors", [2, 3, 4])
@pytest.mark.parametrize("k", [3, 77, 4096])
@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("offset,ld_pad", [(0, 0), (1, 0), (0, 1)])
def test_gemv_few_vectors(case, vectors, k, batch, offset, ld_pad, rng):
    # M of 2 to 4 with B column-major (a few tokens through nn.Linear), A's rows contiguous,
    # or N of 2 to 4 with A row-major and B's columns contiguous: one read of the matrix for
    # every vector, on aligned and misaligned operands (a padded leading dimension moves
    # every vector but the first off 16 bytes).
    rows = 300
    if case == "m":
        A = make_operand(rng, vectors, k, "r", batch=batch, offset=offset, ld_pad=ld_pad)
        B = make_operand(rng, k, rows, "c", batch=batch, offset=offset)
        C = randn(rng, rows)
    else:
        A = make_operand(rng, rows, k, "r", batch=batch, offset=offset)
        B = make_operand(rng, k, vectors, "c", batch=batch, offset=offset, ld_pad=ld_pad)
        C = randn(rng, rows, 1)
    plan = torch_vecgemm.plan(A, B)
    assert (plan.family, plan.kernel, plan.copy_a, plan.copy_b) == ("gemv", "gemv", None, None), plan
    assert plan.split_k == 1 or k == 4096, plan
    for variant in ["auto", "gemv"]:
        assert_gemm_close(run_strict(A, B, C, 0.5, -1.0, variant), A, B, C, 0.5, -1.0)
        assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)


@pytest.mark.parametrize("case", ["m", "n"])
@pytest.mark.parametrize("vectors", [1, 3])
@pytest.mark.parametrize("k", [20000, 9001])
@pytest.mark.parametrize("batch", [None, 2])
@pytest.mark.parametrize("offset", [0, 1])
def test_gemv_split_k(case, vectors, k, batch, offset, rng):
    # A matrix of few rows over a deep K: gemv splits K so that enough warps read it, each
    # slice's sums summed by the split-K reduction, whose workspace is poisoned. Aligned and
    # misaligned operands, a K the slices do not divide (9001), a batch; the same bits twice.
    rows = 24
    if case == "m":
        A = make_operand(rng, vectors, k, "r", batch=batch, offset=offset)
        B = make_operand(rng, k, rows, "c", batch=batch, offset=offset)
        C = randn(rng, rows)
    else:
        A = make_operand(rng, rows, k, "r", batch=batch, offset=offset)
        B = make_operand(rng, k, vectors, "c", batch=batch, offset=offset)
        C = randn(rng, rows, 1)
    plan = torch_vecgemm.plan(A, B)
    assert (plan.family, plan.kernel, plan.copy_a, plan.copy_b) == ("gemv", "gemv", None, None), plan
    assert plan.split_k > 1 and str(plan).startswith(f"gemv split-k {plan.split_k}"), plan
    out_elems = (batch or 1) * rows * vectors
    for variant in ["auto", "gemv"]:
        poison_allocator((plan.split_k * out_elems,))
        first = run_strict(A, B, C, 0.5, -1.0, variant)
        assert_gemm_close(first, A, B, C, 0.5, -1.0)
        poison_allocator((plan.split_k * out_elems,))
        assert torch.equal(run_strict(A, B, C, 0.5, -1.0, variant), first)
        assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)


@pytest.mark.parametrize("k", [5, 4096])
def test_gemv_dot_product_of_strided_vectors(k, rng):
    # M = N = 1: a dot product, which gemv serves with A's row as the matrix where B is a
    # column of a wider row-major matrix, whose elements are not contiguous.
    A = make_operand(rng, 1, k, "r")
    B = make_operand(rng, k, 5, "r")[:, 2:3]
    assert B.stride() == (5, 1)
    plan = torch_vecgemm.plan(A, B)
    assert plan.family == "gemv", plan
    assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, "gemv"), A, B)
    # A a row of a column-major matrix too: neither orientation's row is contiguous, a tiling.
    A_strided = make_operand(rng, k, 3, "r")[:, 1:2].t()
    assert torch_vecgemm.plan(A_strided, B).family in ("tiled", "async")
    assert_gemm_close(run_strict(A_strided, B, None, 1.0, 0.0, "auto"), A_strided, B)


# ---- operand copies (pad_copy.cu, transpose_copy.cu) -----------------------------------------------


# The copies are allocated with torch.empty: each test leaves NaN in the allocator's free
# blocks (poison_allocator) so that any element a copy fails to write (values or zero
# padding) shows in the result.


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 3, "broadcast"])
@pytest.mark.parametrize("k,must_copy", [(COPIED_SHAPE[2], "AB"), (COPIED_SHAPE[2] + 1, "A")])
def test_padded_copies(layout, batch, k, must_copy, rng):
    # Large enough that auto copies operands rather than take the slow paths (COPIED_SHAPE):
    # both with K zero-padded to a multiple of 16 when K is odd, else the misaligned A (and
    # whichever the cost model copies into a faster storage order). The copies must not
    # change the result. (test_planning checks the plans themselves.)
    m, n, _ = COPIED_SHAPE
    nb = None if batch is None else 3
    A = make_operand(rng, m, k, layout[0], batch=nb, offset=1, ld_pad=2)
    B = aligned_operand(rng, k, n, layout[1], None if batch == "broadcast" else nb)
    if batch == "broadcast":
        B = B.expand(3, k, n)
    plan = torch_vecgemm.plan(A, B)
    copied = {"A": plan.copy_a, "B": plan.copy_b}
    assert all(copied[x] is not None for x in must_copy), plan
    C = randn(rng, n)
    poison_allocator((1 << 24,))
    assert_gemm_close(run_strict(A, B, C, 0.5, 1.0), A, B, C, 0.5, 1.0)
    # Asked for by name, a tiling takes the operands as they are: the copies are auto's.
    for variant in TILINGS:
        if torch_vecgemm.fallback_reason(A, B, variant=variant) is None:
            plan = torch_vecgemm.plan(A, B, variant=variant)
            assert (plan.copy_a, plan.copy_b, plan.kernel) == (None, None, variant), plan


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reordered_copies(layout, rng):
    # A copy into the other storage order for the order alone, where the device's profile
    # rates it worth its pass: on the H200 at 4096, into cr from every other order
    # (test_planning checks the plans; here the transposing copies run).
    n = 4096
    A, B = make_operand(rng, n, n, layout[0]), make_operand(rng, n, n, layout[1])
    plan = torch_vecgemm.plan(A, B)
    assert plan.orders == ("cr" if measured_profile() else layout), plan
    poison_allocator((3 << 24,))
    assert_gemm_close(run_strict(A, B), A, B)


@pytest.mark.parametrize("batch", [None, 3, "broadcast"])
def test_transposing_padded_copies(batch, rng):
    # K odd: both operands are copied whatever their order, so the planner puts them in the
    # order it rates fastest, and the transposing copy pads too: zero rows past K, rows of
    # the copy padded to 16 bytes, a misaligned source (scalar loads), batches, a broadcast
    # B copied once. With a measured profile at least one of the four orders must change.
    reordered = []
    for layout, A, B in transposing_problems(rng, batch):
        plan = torch_vecgemm.plan(A, B)
        assert plan.copy_a is not None and plan.copy_b is not None, plan
        if plan.orders != layout:
            reordered.append(layout)
        poison_allocator((1 << 24,))
        assert_gemm_close(run_strict(A, B), A, B)
    # The neutral profile rates every order alike: the copies keep the operands' orders.
    assert bool(reordered) == measured_profile(), f"orders changed for {reordered}"


# ---- exact on integers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grid,k,hi",
    [
        ((1, 1), 8, 2048), ((1, 1), 16, 2048), ((1, 1), 24, 2048), ((1, 1), 64, 2048),  # one block
        ((1, 0.16), 256, 4),  # the stream-K launch: whole waves, and tail pieces of a few K tiles
        ((1, 0.16), 2048, 8),  # tail pieces of tens of K tiles, starting inside tiles
        ((3, 0.88), 4096, 8),  # three whole waves, a tail of hundreds of K tiles a block, over two tiles
        (("whole", 1), 256, 4),  # one whole wave, no tail
        ((0, 0.7), 1024, 8),  # a partial wave alone: every tile in pieces of the tail
    ],
    ids=["1 block, K 8", "1 block, K 16", "1 block, K 24", "1 block, K 64", "tail, K 256", "tail, K 2048",
         "3 waves and tail, K 4096", "1 whole wave, K 256", "a partial wave alone, K 1024"],
)
def test_t816_cr_exact_on_integers(grid, k, hi, rng, clean_tuning):
    # setup.py rewrites t816's cr main loops below ptxas (docs/history.md, steps 24-26),
    # the plain launch's, the stream-K whole waves' and the stream-K tail's.
    # On integers whose products and sums fp32 holds exactly the result must be the float64
    # one bit for bit: the rewrite's one-tile-too-many loop of step 25 counted K steps twice.
    # The tail's shapes come from the resident blocks; the tuning cache fixes the choice (cr,
    # aligned, K a multiple of 16: auto copies nothing).
    variant = STREAM_K_TILING
    slots = torch_vecgemm._C._testing.resident_blocks(variant)
    if grid == (1, 1):
        tiles_m, tiles_n, tail = 1, 1, False
    elif grid[0] == "whole":
        (tiles_m, tiles_n), tail = whole_waves_grid(slots, grid[1]), False
    else:
        (tiles_m, tiles_n), tail = tail_grid(slots, *grid), True
    bm, bn, _ = block_tile(variant)
    m, n = bm * tiles_m, bn * tiles_n
    A = rng.randint(1, hi, (k, m)).float().t()  # column-major
    B = rng.randint(1, 8, (k, n)).float()
    assert A.abs().max() * B.abs().max() * k < 2**24
    force_choice(A, B, variant, 1, stream_k=tail)
    plan = torch_vecgemm.plan(A, B)
    assert (plan.kernel, plan.split_k, plan.stream_k, plan.orders) == (variant, 1, tail, "cr"), plan
    assert plan.copy_a is None and plan.copy_b is None, plan
    out = run_strict(A, B)
    assert torch.equal(out.double(), A.double() @ B.double())
    if not tail:  # the same kernel asked for by name
        assert torch.equal(run_strict(A, B, variant=variant), out)
    elif measured_profile() and grid[0] > 0:  # the H200's cost model takes the tail after whole waves
        assert torch_vecgemm.plan(A, B, variant=variant).stream_k
