"""The ops' contract: opcheck on all four ops, BLAS semantics, the error paths of the
strict ops, the fallback and its reasons, the wrappers behaving like torch, gradients
(gradcheck in float64, float32 against float64), torch.compile, and the names of the
variants. Runs on CPU everywhere and also on CUDA where present."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import torch_vecgemm
from conftest import (
    ALIGNED_ONLY,
    DEVICES,
    TILINGS,
    assert_gemm_close,
    gpu,
    make_operand,
    ops,
    randn,
    requires_kernels,
    run_strict,
)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_sgemm(device, rng):
    A, B, C = randn(rng, 33, 17, device=device), randn(rng, 17, 9, device=device), randn(rng, 33, 9, device=device)
    for args in [(A, B), (A, B, C, 0.5, 2.0), (A, B, None, -1.5, 0.0)]:
        torch.library.opcheck(ops.sgemm.default, args)
    Ab, Bb = randn(rng, 3, 5, 7, device=device), randn(rng, 3, 7, 4, device=device)
    torch.library.opcheck(ops.sgemm.default, (Ab, Bb, randn(rng, 4, device=device), 1.0, 1.0))
    torch.library.opcheck(ops.sgemm.default, (A.requires_grad_(), B.requires_grad_(), C.requires_grad_(), 0.5, 2.0))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_sgemm_inplace(device, rng):
    A, B = randn(rng, 33, 17, device=device), randn(rng, 17, 9, device=device)
    torch.library.opcheck(ops.sgemm_.default, (randn(rng, 33, 9, device=device), A, B, 0.5, 2.0))
    torch.library.opcheck(ops.sgemm_.default, (randn(rng, 33, 9, device=device), A, B))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_gemm(device, rng):
    A, B, C = randn(rng, 20, 12, device=device), randn(rng, 12, 6, device=device), randn(rng, 20, 6, device=device)
    torch.library.opcheck(ops.gemm.default, (A.requires_grad_(), B, C, 2.0, 0.5))
    torch.library.opcheck(ops.gemm.default, (A.double(), B.double()))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_linear(device, rng):
    x, w, b = randn(rng, 2, 5, 12, device=device), randn(rng, 7, 12, device=device), randn(rng, 7, device=device)
    torch.library.opcheck(ops.linear.default, (x.requires_grad_(), w.requires_grad_(), b))
    torch.library.opcheck(ops.linear.default, (x[0], w, None))
    torch.library.opcheck(ops.linear.default, (x[0, 0], w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_wrappers_call_through_the_dispatcher_or_the_op(device, rng):
    # In eager code the wrappers call the ops through typed dispatcher handles (no boxing);
    # under a __torch_function__ mode they call torch.ops.vecgemm.*, so the mode sees the op,
    # with the same result either way.
    A, B, C = randn(rng, 9, 6, device=device), randn(rng, 6, 5, device=device), randn(rng, 5, device=device)
    x, w = randn(rng, 3, 4, 6, device=device), randn(rng, 5, 6, device=device)
    calls = [
        (lambda: torch_vecgemm.mm(A, B), ops.gemm.default),
        (lambda: torch_vecgemm.sgemm(A, B, C, alpha=0.5), ops.gemm.default),
        (lambda: torch_vecgemm.linear(x, w, C), ops.linear.default),
    ]

    class Seen(torch.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(func)
            return func(*args, **(kwargs or {}))

    for call, op in calls:
        eager = call()
        with Seen() as seen:
            seen_out = call()
        assert op in seen.funcs, seen.funcs
        assert torch.equal(eager, seen_out)


# ---- BLAS semantics ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25), (1.0, 1.0)])
def test_sgemm_values(device, alpha, beta, rng):
    A, B, C = randn(rng, 37, 23, device=device), randn(rng, 23, 41, device=device), randn(rng, 37, 41, device=device)
    assert_gemm_close(ops.sgemm(A, B, C, alpha, beta), A, B, C, alpha, beta)
    D = C.clone()
    ops.sgemm_(D, A, B, alpha, beta)
    assert_gemm_close(D, A, B, C, alpha, beta)


@pytest.mark.parametrize("device", DEVICES)
def test_beta_zero_ignores_nan_in_c(device, rng):
    A, B = randn(rng, 16, 8, device=device), randn(rng, 8, 16, device=device)
    C = torch.full((16, 16), float("nan"), device=device)
    assert_gemm_close(ops.sgemm(A, B, C, 1.0, 0.0), A, B)
    ops.sgemm_(C, A, B, 2.0, 0.0)
    assert_gemm_close(C, A, B, None, 2.0)


@pytest.mark.parametrize("variant", ["auto", "vectorized"] + TILINGS)
@gpu
def test_beta_zero_ignores_nan_in_c_every_variant(variant, rng):
    A, B = randn(rng, 256, 64), randn(rng, 64, 256)
    C = torch.full((256, 256), float("nan"), device="cuda")
    assert_gemm_close(run_strict(A, B, C, 1.0, 0.0, variant), A, B)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_k_zero(device, rng):
    C = randn(rng, 5, 3, device=device)
    out = ops.sgemm(randn(rng, 5, 0, device=device), randn(rng, 0, 3, device=device), C, 2.0, 0.5)
    torch.testing.assert_close(out, 0.5 * C)
    out = ops.sgemm(randn(rng, 5, 0, device=device), randn(rng, 0, 3, device=device))
    torch.testing.assert_close(out, torch.zeros(5, 3, device=device))
    assert ops.sgemm(randn(rng, 0, 4, device=device), randn(rng, 4, 3, device=device)).shape == (0, 3)
    assert ops.sgemm(randn(rng, 5, 4, device=device), randn(rng, 4, 0, device=device)).shape == (5, 0)


@gpu
def test_c_broadcasts_and_strides(rng):
    A, B = randn(rng, 96, 48), randn(rng, 48, 80)
    for C in [randn(rng, 80), randn(rng, 96, 1), randn(rng, 1, 80), randn(rng, 80, 96).t(), randn(rng, 96, 160)[:, ::2]]:
        assert_gemm_close(run_strict(A, B, C, 0.5, 2.0), A, B, C, 0.5, 2.0)


# ---- errors of the strict ops, and the fallback ---------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "A,B,C,message",
    [
        (lambda r, d: randn(r, 4, 4, device=d, dtype=torch.float64), lambda r, d: randn(r, 4, 4, device=d), None, "A must be float32"),
        (lambda r, d: randn(r, 4, 4, device=d), lambda r, d: randn(r, 4, 4, device=d).half(), None, "B must be float32"),
        (lambda r, d: randn(r, 4, device=d), lambda r, d: randn(r, 4, 4, device=d), None, "matrices"),
        (lambda r, d: randn(r, 2, 4, 4, device=d), lambda r, d: randn(r, 4, 4, device=d), None, "matrices"),
        (lambda r, d: randn(r, 4, 5, device=d), lambda r, d: randn(r, 4, 4, device=d), None, "inner dimensions differ"),
        (lambda r, d: randn(r, 2, 4, 5, device=d), lambda r, d: randn(r, 3, 5, 4, device=d), None, "batch sizes differ"),
        (
            lambda r, d: randn(r, 4, 5, device=d),
            lambda r, d: randn(r, 5, 4, device=d),
            lambda r, d: randn(r, 3, 4, device=d),
            "does not broadcast",
        ),
    ],
    ids=["A float64", "B float16", "A 1-D", "A 3-D, B 2-D", "inner dimensions", "batch sizes", "C broadcast"],
)
def test_contract_errors(device, A, B, C, message, rng):
    A, B, C = A(rng, device), B(rng, device), None if C is None else C(rng, device)
    with pytest.raises(RuntimeError, match=message):
        ops.sgemm(A, B, C, 1.0, 1.0)
    assert message in (torch_vecgemm.fallback_reason(A, B, C) or "")
    # The lenient path gives whatever torch gives: a result or torch's own error.
    try:
        expected = torch.addmm(C, A, B) if C is not None else torch.mm(A, B)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            torch_vecgemm.sgemm(A, B, C, beta=1.0)
    else:
        torch.testing.assert_close(torch_vecgemm.sgemm(A, B, C, beta=1.0), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_errors(device, rng):
    A, B = randn(rng, 4, 5, device=device), randn(rng, 5, 6, device=device)
    with pytest.raises(RuntimeError, match="exactly the result's shape"):
        ops.sgemm_(randn(rng, 6, device=device), A, B)
    with pytest.raises(RuntimeError, match="share memory"):
        ops.sgemm_(randn(rng, 1, 6, device=device).expand(4, 6), A, B)
    X = randn(rng, 4, 6, device=device)
    with pytest.raises(RuntimeError, match="overlaps A"):
        ops.sgemm_(X, X[:, :5], B[:, :6])


def test_cpu_fallback_reason(rng):
    A, B = randn(rng, 8, 8, device="cpu"), randn(rng, 8, 8, device="cpu")
    assert torch_vecgemm.fallback_reason(A, B) == "not on a CUDA device (cpu)"


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda r: (randn(r, 8, 8, device="cpu"), randn(r, 8, 8, device="cpu")), "not on a CUDA device (cpu)"),
        (lambda r: (randn(r, 8, 8, device="cpu").double(), randn(r, 8, 8, device="cpu").double()), "A must be float32"),
    ],
    ids=["cpu", "float64"],
)
def test_plan_of_a_fallback(make, reason, rng):
    A, B = make(rng)
    plan = torch_vecgemm.plan(A, B)
    assert plan.family == "fallback" and plan.kernel is None and reason in plan.fallback_reason
    assert (plan.split_k, plan.stream_k, plan.copy_a, plan.copy_b, plan.orders) == (1, False, None, None, "")
    assert plan.fallback_reason == torch_vecgemm.fallback_reason(A, B)
    assert str(plan) == torch_vecgemm.selected_kernel(A, B) == "fallback: " + plan.fallback_reason
    C = randn(rng, 3, 8, device="cpu")  # C that does not broadcast: a reason of its own
    assert "does not broadcast" in torch_vecgemm.plan(A.float(), B.float(), C).fallback_reason


def cpu(rng, *shape):
    return randn(rng, *shape, device="cpu")


@requires_kernels
@pytest.mark.parametrize(
    "A,B,variant,message",
    [
        (lambda r: cpu(r, 64, 64)[::2, ::2], lambda r: cpu(r, 32, 16), "auto", "A is neither row- nor column-major (strides [128, 2])"),
        (lambda r: cpu(r, 8, 8), lambda r: cpu(r, 8, 24)[:, ::3], "auto", "B is neither row- nor column-major"),
        (lambda r: cpu(r, 8, 8), lambda r: cpu(r, 8, 8), "nope", "unknown variant 'nope'"),
        (lambda r: cpu(r, 130, 64), lambda r: cpu(r, 64, 128), "vectorized", "M = 130 is not a multiple of 128"),
        (lambda r: cpu(r, 128, 64), lambda r: cpu(r, 64, 100), "vectorized", "N = 100 is not a multiple of 128"),
        (lambda r: cpu(r, 128, 12), lambda r: cpu(r, 12, 128), "vectorized", "K = 12 is not a multiple of 8"),
        (lambda r: cpu(r, 64, 128).t(), lambda r: cpu(r, 64, 128), "vectorized", "A is not row-major contiguous"),
        (lambda r: cpu(r, 128 * 64 + 1)[1:].view(128, 64), lambda r: cpu(r, 64, 128), "vectorized", "not 16-byte aligned"),
        (lambda r: cpu(r, 128, 65)[:, 1:], lambda r: cpu(r, 64, 128), "tiled_256x128x8_t816", ALIGNED_ONLY),
        (lambda r: cpu(r, 8, 8), lambda r: cpu(r, 8, 8), "tiled_256x128x8", "unknown variant 'tiled_256x128x8'"),
        (lambda r: cpu(r, 2, 64), lambda r: cpu(r, 64, 128), "gemv", "gemv kernel takes M <= 4"),
    ],
    ids=[
        "A strided", "B strided", "unknown variant", "vectorized M", "vectorized N", "vectorized K",
        "vectorized A order", "vectorized alignment", "aligned only", "a name never released", "gemv",
    ],
)
def test_cuda_rules_checked_without_a_gpu(A, B, variant, message, rng):
    # The CUDA-side rules depend only on shapes, strides and pointers, so CI checks them on CPU tensors.
    reason = torch_vecgemm._C._testing.kernel_violation(A(rng), B(rng), None, variant)
    assert reason is not None and message in reason, reason


@requires_kernels
def test_aligned_operands_hold_their_last_chunk(rng):
    # The cp.async kernels copy the 16-byte chunk that a tile's edge cuts whole, so the
    # storage must hold a row's last chunk or the copy reads past the allocation (memcheck
    # found it, issue 23). A single line's leading dimension says nothing of it.
    # async_128x64x16_s3 has no 4-byte-copy instance.
    variant, violation = "async_128x64x16_s3", torch_vecgemm._C._testing.kernel_violation
    A = cpu(rng, 8, 4)
    padded = cpu(rng, 4, 8)[:, :6]  # rows of 6 at ld 8: the last chunk, floats 28-31, held
    cut = cpu(rng, 30).as_strided((4, 6), (8, 1))  # the same view of storage ending at float 30
    assert violation(A, padded, None, variant) is None
    assert ALIGNED_ONLY in violation(A, cut, None, variant)
    alone, in_a_chunk = cpu(rng, 1, 1), cpu(rng, 4)[:1].view(1, 1)
    assert ALIGNED_ONLY in violation(alone, in_a_chunk, None, variant)
    assert ALIGNED_ONLY in violation(in_a_chunk, alone, None, variant)
    assert violation(in_a_chunk, in_a_chunk, None, variant) is None
    # auto takes them all, on the 4-byte copies.
    assert violation(A, cut, None, "auto") is None and violation(alone, alone, None, "auto") is None


@requires_kernels
@pytest.mark.parametrize(
    "A,B",
    [
        (lambda r: cpu(r, 100, 37)[:, 1:], lambda r: cpu(r, 36, 77)),
        (lambda r: cpu(r, 37, 100).t(), lambda r: cpu(r, 77, 37).t()),
        (lambda r: cpu(r, 5, 9, 13), lambda r: cpu(r, 13, 3).expand(5, 13, 3)),
        (lambda r: cpu(r, 1, 1), lambda r: cpu(r, 1, 1)),
        (lambda r: cpu(r, 7, 1), lambda r: cpu(r, 1, 9)),
    ],
    ids=["offset, odd ld", "transposed", "batched, broadcast B", "1 x 1", "K = 1"],
)
def test_auto_takes_any_layout_and_alignment(A, B, rng):
    assert torch_vecgemm._C._testing.kernel_violation(A(rng), B(rng), None, "auto") is None


@gpu
@pytest.mark.parametrize(
    "make,rule",
    [
        (lambda r: (randn(r, 130, 64), randn(r, 64, 128)), "M = 130 is not a multiple of 128"),
        (lambda r: (randn(r, 128, 64), randn(r, 64, 100)), "N = 100 is not a multiple of 128"),
        (lambda r: (randn(r, 128, 12), randn(r, 12, 128)), "K = 12 is not a multiple of 8"),
        (lambda r: (randn(r, 64, 128).t(), randn(r, 64, 128)), "A is not row-major contiguous"),
        (lambda r: (randn(r, 128, 64), randn(r, 128, 64).t()), "B is not row-major contiguous"),
        (lambda r: (randn(r, 128 * 64 + 1)[1:].view(128, 64), randn(r, 64, 128)), "not 16-byte aligned"),
    ],
    ids=["M", "N", "K", "A order", "B order", "alignment"],
)
def test_vectorized_rules(make, rule, rng):
    A, B = make(rng)
    assert rule in torch_vecgemm.fallback_reason(A, B, variant="vectorized")
    with pytest.raises(RuntimeError, match=rule):
        ops.sgemm(A, B, None, 1.0, 0.0, "vectorized")
    # The general kernels take all of these; the next valid call still works.
    assert_gemm_close(run_strict(A, B), A, B)
    A, B = randn(rng, 128, 64), randn(rng, 64, 128)
    assert_gemm_close(run_strict(A, B, variant="vectorized"), A, B)


@gpu
def test_cuda_error_rules(rng):
    A = randn(rng, 64, 32)
    with pytest.raises(RuntimeError, match="unknown variant 'nope'"):
        ops.sgemm(A, randn(rng, 32, 16), None, 1.0, 0.0, "nope")
    weird = randn(rng, 64, 64)[::2, ::2]  # neither row- nor column-major
    with pytest.raises(RuntimeError, match="neither row- nor column-major"):
        ops.sgemm(weird, randn(rng, 32, 16))
    assert "neither row- nor column-major" in torch_vecgemm.fallback_reason(weird, randn(rng, 32, 16))
    with pytest.raises(RuntimeError, match="different devices"):
        ops.sgemm(A, randn(rng, 32, 16, device="cpu"))
    with pytest.raises(RuntimeError, match="must be float32"):
        ops.sgemm(A.double(), randn(rng, 32, 16).double())
    # The lenient wrapper takes them all, as torch does.
    torch.testing.assert_close(torch_vecgemm.mm(weird, randn(rng, 32, 16)).shape, torch.Size([32, 16]))
    # The next valid call still works.
    B = randn(rng, 32, 16)
    assert_gemm_close(run_strict(A, B), A, B)


@gpu
def test_fallback_reasons_shrink_to_dtype_device_strides(rng):
    cases = [
        (randn(rng, 100, 37)[:, 1:], randn(rng, 36, 77)),  # storage offset, odd ld
        (randn(rng, 37, 100).t(), randn(rng, 77, 37).t()),  # both transposed
        (randn(rng, 5, 9, 13), randn(rng, 5, 13, 3)),  # batched
        (randn(rng, 1, 1), randn(rng, 1, 1)),
    ]
    for A, B in cases:
        assert torch_vecgemm.fallback_reason(A, B) is None
    assert torch_vecgemm.fallback_reason(randn(rng, 4, 4).double(), randn(rng, 4, 4).double()) == "A must be float32, got Double"


# ---- the wrappers behave like torch ----------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_wrapper_matches_torch(device, dtype, rng):
    A, B, C = (randn(rng, *s, device=device).to(dtype) for s in [(19, 7), (7, 11), (11,)])
    torch.testing.assert_close(torch_vecgemm.mm(A, B), torch.mm(A, B))
    torch.testing.assert_close(
        torch_vecgemm.sgemm(A, B, C, alpha=0.5, beta=2.0), torch.addmm(C, A, B, alpha=0.5, beta=2.0)
    )
    Ab, Bb = randn(rng, 3, 19, 7, device=device).to(dtype), randn(rng, 3, 7, 11, device=device).to(dtype)
    torch.testing.assert_close(torch_vecgemm.bmm(Ab, Bb), torch.bmm(Ab, Bb))


@pytest.mark.parametrize("device", DEVICES)
def test_the_ops_compute_in_float32_under_autocast(device, rng):
    # The ops are in autocast's fp32 list (csrc/autocast.cpp): in an autocast region their
    # results are float32 on every path (the kernels, torch's product handed over, a
    # fallback), half inputs cast up, nothing beneath them cast down; the in-place op
    # computes in its operands' dtypes, as outside autocast.
    low = torch.bfloat16 if device == "cpu" else torch.float16
    A, B, C = randn(rng, 48, 40, device=device), randn(rng, 40, 24, device=device), randn(rng, 24, device=device)
    x, w = randn(rng, 2, 48, 40, device=device), randn(rng, 24, 40, device=device)
    A_low = A.to(low)
    D = randn(rng, 48, 24, device=device)
    D_before = D.clone()
    with torch.autocast(device_type=device, dtype=low):
        assert torch.mm(A, B).dtype == low  # autocast is on around them
        outs = {
            "mm": (torch_vecgemm.mm(A, B), (A, B, None, 1.0, 0.0)),
            # K = 40: fp32's sums are shorter than 3xTF32's floor, so it is handed to torch.
            "mm 3xtf32": (torch_vecgemm.mm(A, B, precision="3xtf32"), (A, B, None, 1.0, 0.0)),
            "sgemm": (torch_vecgemm.sgemm(A, B, C, alpha=0.5, beta=2.0), (A, B, C, 0.5, 2.0)),
            "strict": (ops.sgemm(A, B, C, 0.5, 2.0), (A, B, C, 0.5, 2.0)),
            "half input": (torch_vecgemm.mm(A_low, B), (A_low.float(), B, None, 1.0, 0.0)),
            "linear": (torch_vecgemm.linear(x, w, C), (x.reshape(-1, 40), w.t(), C, 1.0, 1.0)),
        }
        ops.sgemm_(D, A, B, 0.5, 2.0)
    for name, (out, (a, b, c, alpha, beta)) in outs.items():
        assert out.dtype == torch.float32, (name, out.dtype)
        assert_gemm_close(out.reshape(-1, out.shape[-1]), a, b, c, alpha, beta)
    assert D.dtype == torch.float32
    assert_gemm_close(D, A, B, D_before, 0.5, 2.0)


@pytest.mark.parametrize("device", DEVICES)
def test_wrapper_integer_and_errors_like_torch(device, rng):
    if device == "cpu":
        A, B = rng.randint(-5, 5, (4, 3), device="cpu"), rng.randint(-5, 5, (3, 2), device="cpu")
        assert torch.equal(torch_vecgemm.mm(A, B), torch.mm(A, B))
    with pytest.raises(RuntimeError):
        torch_vecgemm.mm(randn(rng, 3, device=device), randn(rng, 3, 2, device=device))
    with pytest.raises(RuntimeError):
        torch_vecgemm.bmm(randn(rng, 3, 2, device=device), randn(rng, 2, 2, device=device))


# ---- gradients ----------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device, rng):
    def leaf(*shape):
        return randn(rng, *shape, device=device, dtype=torch.float64).requires_grad_()

    A, B = leaf(6, 5), leaf(5, 4)
    C = leaf(4)  # broadcast bias
    assert torch.autograd.gradcheck(lambda a, b, c: torch_vecgemm.sgemm(a, b, c, alpha=0.7, beta=1.3), (A, B, C))
    assert torch.autograd.gradgradcheck(lambda a, b: torch_vecgemm.mm(a, b), (A, B))
    Ab, Bb = leaf(2, 6, 5), leaf(5, 4)
    assert torch.autograd.gradcheck(lambda a, b: torch_vecgemm.bmm(a, b.expand(2, 5, 4)), (Ab, Bb))


@pytest.mark.parametrize("device", DEVICES)
def test_linear_gradients_float64(device, rng):
    x, W, b = (randn(rng, *s, device=device, dtype=torch.float64).requires_grad_() for s in [(3, 7, 10), (6, 10), (6,)])
    assert torch.autograd.gradcheck(torch_vecgemm.linear, (x, W, b))
    out, ref = torch_vecgemm.linear(x, W, b), F.linear(x, W, b)
    torch.testing.assert_close(out, ref)
    g = randn(rng, *ref.shape, device=device, dtype=torch.float64)
    torch.testing.assert_close(
        torch.autograd.grad(out, (x, W, b), g), torch.autograd.grad(ref, (x, W, b), g)
    )


@gpu
@pytest.mark.parametrize("precision", ["auto", "3xtf32"])
def test_float32_gradients_against_float64(precision, rng):
    # Large enough that 3xTF32 serves the forward and both backward products (its rule gives
    # smaller ones to fp32: test_precision.py).
    x = randn(rng, 4096, 4096).requires_grad_()
    W = randn(rng, 2048, 4096).requires_grad_()
    b = randn(rng, 2048).requires_grad_()
    out = torch_vecgemm.linear(x, W, b, precision=precision)
    g = randn(rng, *out.shape)
    grads = torch.autograd.grad(out, (x, W, b), g)
    x64, W64, b64 = (t.detach().double().requires_grad_() for t in (x, W, b))
    ref = F.linear(x64, W64, b64)
    ref_grads = torch.autograd.grad(ref, (x64, W64, b64), g.double())
    assert_gemm_close(out, x, W.t(), b, 1.0, 1.0)
    for got, want in zip(grads, ref_grads):
        rel = (torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)).item()
        assert rel < 1e-5, rel
    # The backward products ran on the kernels (transposed operands), not the fallback.
    assert torch_vecgemm.fallback_reason(g, W) is None
    assert torch_vecgemm.fallback_reason(g.t(), x) is None
    if precision == "3xtf32":  # forward and backward on the 3xTF32 kernels
        for a, b_ in ((x, W.t()), (g, W), (x.t(), g)):
            assert torch_vecgemm.plan(a, b_, precision=precision).family == "tf32x3"


# ---- torch.compile -------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["auto", "3xtf32"])
def test_torch_compile_fullgraph(device, precision, rng):
    def block(x, w1, w2, bias):
        h = torch.relu(torch.ops.vecgemm.sgemm(x, w1, bias, 1.0, 1.0, precision=precision))
        return torch_vecgemm.linear(h, w2, precision=precision).sum(dim=-1)

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")
    x, w1, w2, bias = (randn(rng, *s, device=device) for s in [(64, 32), (32, 48), (16, 48), (48,)])
    for t in (x, w1, w2):
        t.requires_grad_()
    out = compiled(x, w1, w2, bias)
    ref = block(x, w1, w2, bias)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    grads = torch.autograd.grad(out.sum(), (x, w1, w2))
    ref_grads = torch.autograd.grad(ref.sum(), (x, w1, w2))
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-4)


# ---- the variants' names ----------------------------------------------------------------

# {tiled|async}_{BM}x{BN}x{BK}, _t{TM}{TN} unless the thread tile is 8x8, b where the register
# banks are steered, _s{stages} for the cp.async family.
VARIANT_NAME = re.compile(r"(tiled_\d+x\d+x\d+(_t\d+)?b?|async_\d+x\d+x\d+(_t\d+)?_s\d+)")


def test_variants_listed():
    names = torch_vecgemm.variants()
    assert names[0] == "auto"
    assert len(set(names)) == len(names), names
    if torch_vecgemm._C.cuda_kernels_built():
        assert {"vectorized", "gemv", "tiled_128x128x8", "tiled_128x128x8_t816"} <= set(names), names
        for name in TILINGS:
            assert VARIANT_NAME.fullmatch(name), f"{name} does not follow the naming rule"
    else:
        assert names == ["auto"]


