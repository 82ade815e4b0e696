"""The CUDA kernels against float64 references, every variant, with outputs poisoned
first. Skipped, with the reason shown, where there is no GPU."""
from __future__ import annotations

import re

import pytest
import torch

import torch_vecgemm
from conftest import (
    assert_gemm_close,
    reference,
    requires_cuda,
    requires_kernels,
    run_inplace,
    run_strict,
)

pytestmark = [requires_cuda, requires_kernels]
ops = torch.ops.vecgemm

# The general kernels' tilings: register-staged (tiled_*) and cp.async pipelined (async_*).
TILED = [v for v in torch_vecgemm.variants() if v.startswith(("tiled_", "async_"))]
ALL_VARIANTS = ["auto", "vectorized"] + TILED
LAYOUTS = ["rr", "rc", "cr", "cc"]


def randn(*shape, device="cuda", dtype=torch.float32):
    """Unseeded inputs, until these tests move to files of their own drawing from `rng`."""
    return torch.randn(*shape, device=device, dtype=dtype)


def make_operand(rows, cols, layout, *, batch=None, device="cuda", offset=0, ld_pad=0):
    """conftest.make_operand on unseeded inputs (see randn)."""
    lead = () if batch is None else (batch,)
    if layout == "r":
        ld = cols + ld_pad
        base = randn(*lead, rows * ld + offset, device=device)
        t = base[..., offset:].reshape(*lead, rows, ld)[..., :cols]
    else:
        ld = rows + ld_pad
        base = randn(*lead, cols * ld + offset, device=device)
        t = base[..., offset:].reshape(*lead, cols, ld)[..., :rows].transpose(-1, -2)
    assert t.shape == (*lead, rows, cols)
    return t


# ---- the seed's kernel ----------------------------------------------------------------------


@pytest.mark.parametrize("m,n,k", [(128, 128, 8), (256, 384, 72), (512, 128, 1024), (1024, 1024, 1024)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.75, -1.5)])
def test_vectorized(m, n, k, alpha, beta):
    A, B, C = randn(m, k), randn(k, n), randn(m, n)
    assert_gemm_close(run_strict(A, B, C, alpha, beta, "vectorized"), A, B, C, alpha, beta)
    assert_gemm_close(run_inplace(A, B, C, alpha, beta, "vectorized"), A, B, C, alpha, beta)


def test_vectorized_batched():
    A, B, C = randn(3, 128, 64), randn(3, 64, 256), randn(256)
    assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, "vectorized"), A, B, C, 1.0, 1.0)


# ---- the general kernels ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["auto"] + TILED)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(128, 128, 64), (257, 129, 33), (1, 300, 77), (300, 1, 5), (64, 200, 1), (513, 517, 515)])
def test_tiled_shapes_layouts(variant, layout, m, n, k):
    A, B = make_operand(m, k, layout[0]), make_operand(k, n, layout[1])
    if variant != "auto" and torch_vecgemm.fallback_reason(A, B, variant=variant) is not None:
        pytest.skip(torch_vecgemm.fallback_reason(A, B, variant=variant))
    C = randn(m, n)
    assert_gemm_close(run_strict(A, B, C, 1.5, -0.5, variant), A, B, C, 1.5, -0.5)
    assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)


def aligned_operand(rows, cols, layout, batch=None):
    """make_operand with the leading dimension padded to a multiple of 4 floats: every
    variant, the ones built for 16-byte aligned operands included, takes it at any shape."""
    return make_operand(rows, cols, layout, batch=batch, ld_pad=-(cols if layout == "r" else rows) % 4)


@pytest.mark.parametrize("variant", ["auto"] + TILED)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "m,n,k,batch",
    [(257, 129, 33, None), (1, 300, 77, None), (300, 3, 5, None), (130, 66, 19, 3), (513, 517, 515, None), (64, 68, 4099, None)],
)
def test_aligned_odd_shapes(variant, layout, m, n, k, batch):
    # Edge tiles in M, N and K (K not a multiple of 4 or of BK: partial 16-byte chunks),
    # batches, and a long K that the selection splits.
    A, B = aligned_operand(m, k, layout[0], batch), aligned_operand(k, n, layout[1], batch)
    assert torch_vecgemm.fallback_reason(A, B, variant=variant) is None
    C = randn(m, n)
    assert_gemm_close(run_strict(A, B, C, 1.5, -0.5, variant), A, B, C, 1.5, -0.5)


@pytest.mark.parametrize("variant", ["auto"] + [v for v in TILED if v in ("tiled_128x128x8", "tiled_64x64x8")])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset,ld_pad", [(1, 0), (2, 3), (0, 1), (3, 5)])
def test_misaligned(variant, layout, offset, ld_pad):
    m, n, k = 131, 70, 45
    A = make_operand(m, k, layout[0], offset=offset, ld_pad=ld_pad)
    B = make_operand(k, n, layout[1], offset=offset + 1, ld_pad=ld_pad)
    C = randn(m, n + 3)[:, 1:-2]  # C with a storage offset and padded rows
    assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, variant), A, B, C, 1.0, 1.0)


def copies(A, B, variant="auto"):
    """The operands auto copies, as selected_kernel reports them: {"A": "column"} for a copy
    of A into column-major storage, "" where the copy keeps the operand's order."""
    described = torch_vecgemm.selected_kernel(A, B, variant=variant)
    found = re.search(r", copy of((?: [AB](?: \((?:row|column)-major\))?)+)$", described)
    if found is None:
        return {}
    return dict(re.findall(r"([AB])(?: \((\w+)-major\))?", found.group(1)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 3, "broadcast"])
@pytest.mark.parametrize("k,must_copy", [(1023, "AB"), (1040, "A")])
def test_padded_copies(layout, batch, k, must_copy):
    # Large enough that auto copies operands rather than take the slow paths: both with K
    # zero-padded to a multiple of 16 when K is odd, else the misaligned A (and whichever
    # the cost model copies into a faster storage order). The copies must not change the
    # result.
    m, n = 1100, 1029
    nb = None if batch is None else 3
    A = make_operand(m, k, layout[0], batch=nb, offset=1, ld_pad=2)
    B = aligned_operand(k, n, layout[1], None if batch == "broadcast" else nb)
    if batch == "broadcast":
        B = B.expand(3, k, n)
    assert set(must_copy) <= set(copies(A, B))
    C = randn(n)
    # The copies are allocated with torch.empty: leave NaN in the allocator's free blocks so
    # that any element the copy fails to write (values or zero padding) shows in the result.
    poison = C.new_full((1 << 24,), float("nan"))
    del poison
    assert_gemm_close(run_strict(A, B, C, 0.5, 1.0), A, B, C, 0.5, 1.0)
    # Asked for by name, a scalar-capable tiling takes the operands as they are.
    assert copies(A, B, variant="tiled_64x64x8") == {}


@pytest.mark.parametrize(
    "layout,expected", [("rr", {"A": "column"}), ("rc", {"A": "column", "B": "row"}), ("cr", {}), ("cc", {"B": "row"})]
)
def test_reordered_copies(layout, expected):
    # Column-major A with row-major B runs fastest (tile_configs.h, kOrderPercent): at 4096
    # the model copies the other orders' operands into it, one transposing pass each.
    n = 4096
    A, B = make_operand(n, n, layout[0]), make_operand(n, n, layout[1])
    assert copies(A, B) == expected
    poison = A.new_full((3 << 24,), float("nan"))
    del poison
    assert_gemm_close(run_strict(A, B), A, B)


@pytest.mark.parametrize("batch", [None, 3, "broadcast"])
def test_transposing_padded_copies(batch):
    # K odd: both operands are copied whatever their order, so the model puts them in the
    # order it rates fastest, and the transposing copy pads too: zero rows past K, rows of
    # the copy padded to 16 bytes, a misaligned source (scalar loads), batches, a broadcast
    # B copied once. At least one of the four orders must change.
    m, n, k = 1024, 1040, 1023
    nb = None if batch is None else 3
    reordered = []
    for layout in LAYOUTS:
        A = make_operand(m, k, layout[0], batch=nb, offset=1)
        B = make_operand(k, n, layout[1], batch=None if batch == "broadcast" else nb)
        if batch == "broadcast":
            B = B.expand(3, k, n)
        copied = copies(A, B)
        assert set(copied) == {"A", "B"}
        if any(copied.values()):
            reordered.append(layout)
        poison = A.new_full((1 << 24,), float("nan"))
        del poison
        assert_gemm_close(run_strict(A, B), A, B)
    assert reordered, "no storage order took the transposing copy"


@pytest.mark.parametrize("case", ["m1", "n1"])
@pytest.mark.parametrize("vector", ["r", "c"])
@pytest.mark.parametrize("k", [3, 77, 4096, 5003])
@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("offset", [0, 1])
def test_gemv(case, vector, k, batch, offset):
    # M = 1 with B column-major (one token through nn.Linear) or N = 1 with A row-major: the
    # matrix-vector kernel, on either storage of the vector and misaligned operands too.
    rows = 300
    if case == "m1":
        A = make_operand(1, k, vector, batch=batch, offset=offset)
        B = make_operand(k, rows, "c", batch=batch, offset=offset)
        C = randn(rows)
    else:
        A = make_operand(rows, k, "r", batch=batch, offset=offset)
        B = make_operand(k, 1, vector, batch=batch, offset=offset)
        C = randn(rows, 1)
    assert torch_vecgemm.selected_kernel(A, B) == "gemv"
    for variant in ["auto", "gemv"]:
        assert_gemm_close(run_strict(A, B, C, 0.5, -1.0, variant), A, B, C, 0.5, -1.0)
        assert_gemm_close(run_strict(A, B, None, 1.0, 0.0, variant), A, B)
    with pytest.raises(RuntimeError, match="gemv kernel takes M = 1"):
        ops.sgemm(randn(2, k), randn(k, rows), None, 1.0, 0.0, "gemv")


@pytest.mark.parametrize("variant", ["auto", "tiled_128x128x8", "tiled_64x64x8"])
def test_inplace_layouts(variant):
    m, n, k = 150, 90, 40
    A, B = randn(m, k), randn(k, n)
    for c_layout in "rc":
        for alpha, beta in [(1.0, 0.0), (2.0, 0.5)]:
            C = make_operand(m, n, c_layout, ld_pad=2)
            expected = reference(A, B, C, alpha, beta)
            D = C if beta != 0 else C.fill_(float("nan"))
            C0 = D.clone()
            ops.sgemm_(D, A, B, alpha, beta, variant)
            assert_gemm_close(D, A, B, C0, alpha, beta)
            assert (D.double() - expected).abs().max() < 1e-3


@pytest.mark.parametrize("batch_b", ["full", "broadcast"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched(batch_b, layout):
    b, m, n, k = 5, 70, 130, 37
    A = make_operand(m, k, layout[0], batch=b, offset=3)
    B = make_operand(k, n, layout[1], batch=b) if batch_b == "full" else make_operand(k, n, layout[1]).expand(b, k, n)
    C = randn(n)  # a bias broadcast over batch and rows
    assert_gemm_close(run_strict(A, B, C, 1.0, 1.0), A, B, C, 1.0, 1.0)
    torch.testing.assert_close(torch_vecgemm.bmm(A, B), torch.bmm(A, B), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "m,n,k,hi",
    [
        (128, 128, 8, 2048), (128, 128, 16, 2048), (128, 128, 24, 2048), (128, 128, 64, 2048),  # one block
        (2176, 2304, 256, 4),  # the stream-K launch: whole waves, and tail pieces of 5 K tiles
        (2176, 2304, 2048, 8),  # tail pieces of 40 K tiles, starting inside tiles
        (4096, 4096, 4096, 8),  # three whole waves, a tail of 450 K tiles a block over two tiles
    ],
)
def test_t816_cr_exact_on_integers(m, n, k, hi):
    # setup.py rewrites t816's cr main loops below ptxas (docs/performance.md, steps 24-26),
    # the plain launch's, the stream-K whole waves' and the stream-K tail's.
    # On integers whose products and sums fp32 holds exactly the result must be the float64
    # one bit for bit: the rewrite's one-tile-too-many loop of step 25 counted K steps twice.
    variant = "tiled_128x128x8_t816"
    A = torch.randint(1, hi, (k, m), device="cuda").float().t()  # column-major
    B = torch.randint(1, 8, (k, n), device="cuda").float()
    assert A.abs().max() * B.abs().max() * k < 2**24
    if m > 128:
        assert "stream-K tail" in torch_vecgemm.selected_kernel(A, B, variant=variant)
    out = run_strict(A, B, variant=variant)
    assert torch.equal(out.double(), A.double() @ B.double())


# ---- randomized sweep ------------------------------------------------------------------------


def sweep_cases(count, g):
    pick = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))
    for _ in range(count):
        yield dict(
            m=pick(1, 130), n=pick(1, 130), k=pick(1, 40),
            layout=LAYOUTS[pick(0, 3)], batch=[None, 3][pick(0, 1)], offset=pick(0, 3),
        )


@pytest.mark.parametrize("variant", ["auto", "tiled_128x128x8", "tiled_64x64x8"])
def test_small_odd_sweep(variant, rng):
    for case in sweep_cases(120, rng.generator("cpu")):
        A = make_operand(case["m"], case["k"], case["layout"][0], batch=case["batch"], offset=case["offset"])
        B = make_operand(case["k"], case["n"], case["layout"][1], batch=case["batch"])
        C = randn(case["n"])
        if torch_vecgemm.fallback_reason(A, B, variant=variant) is not None:
            continue
        try:
            assert_gemm_close(run_strict(A, B, C, 1.0, 1.0, variant), A, B, C, 1.0, 1.0)
        except AssertionError as e:
            raise AssertionError(f"{case}: {e}") from None


# ---- autograd, compile, graphs, autotune on the GPU ------------------------------------------


