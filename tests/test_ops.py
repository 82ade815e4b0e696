"""The ops' contract on every device present: opcheck, semantics, errors, fallback,
autograd and torch.compile. Runs on CPU everywhere and also on CUDA where present."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

import torch_vecgemm
from conftest import DEVICES, assert_gemm_close

ops = torch.ops.vecgemm


def randn(*shape, device="cuda", dtype=torch.float32):
    """Unseeded inputs, until these tests move to files of their own drawing from `rng`."""
    return torch.randn(*shape, device=device, dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_sgemm(device):
    A, B, C = randn(33, 17, device=device), randn(17, 9, device=device), randn(33, 9, device=device)
    for args in [(A, B), (A, B, C, 0.5, 2.0), (A, B, None, -1.5, 0.0)]:
        torch.library.opcheck(ops.sgemm.default, args)
    Ab, Bb = randn(3, 5, 7, device=device), randn(3, 7, 4, device=device)
    torch.library.opcheck(ops.sgemm.default, (Ab, Bb, randn(4, device=device), 1.0, 1.0))
    torch.library.opcheck(ops.sgemm.default, (A.requires_grad_(), B.requires_grad_(), C.requires_grad_(), 0.5, 2.0))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_sgemm_inplace(device):
    A, B = randn(33, 17, device=device), randn(17, 9, device=device)
    torch.library.opcheck(ops.sgemm_.default, (randn(33, 9, device=device), A, B, 0.5, 2.0))
    torch.library.opcheck(ops.sgemm_.default, (randn(33, 9, device=device), A, B))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_gemm(device):
    A, B, C = randn(20, 12, device=device), randn(12, 6, device=device), randn(20, 6, device=device)
    torch.library.opcheck(ops.gemm.default, (A.requires_grad_(), B, C, 2.0, 0.5))
    torch.library.opcheck(ops.gemm.default, (A.double(), B.double()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25), (1.0, 1.0)])
def test_sgemm_values(device, alpha, beta):
    A, B, C = randn(37, 23, device=device), randn(23, 41, device=device), randn(37, 41, device=device)
    assert_gemm_close(ops.sgemm(A, B, C, alpha, beta), A, B, C, alpha, beta)
    D = C.clone()
    ops.sgemm_(D, A, B, alpha, beta)
    assert_gemm_close(D, A, B, C, alpha, beta)


@pytest.mark.parametrize("device", DEVICES)
def test_beta_zero_ignores_nan_in_c(device):
    A, B = randn(16, 8, device=device), randn(8, 16, device=device)
    C = torch.full((16, 16), float("nan"), device=device)
    assert_gemm_close(ops.sgemm(A, B, C, 1.0, 0.0), A, B)
    ops.sgemm_(C, A, B, 2.0, 0.0)
    assert_gemm_close(C, A, B, None, 2.0)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_k_zero(device):
    C = randn(5, 3, device=device)
    out = ops.sgemm(randn(5, 0, device=device), randn(0, 3, device=device), C, 2.0, 0.5)
    torch.testing.assert_close(out, 0.5 * C)
    out = ops.sgemm(randn(5, 0, device=device), randn(0, 3, device=device))
    torch.testing.assert_close(out, torch.zeros(5, 3, device=device))
    assert ops.sgemm(randn(0, 4, device=device), randn(4, 3, device=device)).shape == (0, 3)
    assert ops.sgemm(randn(5, 4, device=device), randn(4, 0, device=device)).shape == (5, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "A,B,C,message",
    [
        (lambda d: randn(4, 4, device=d, dtype=torch.float64), lambda d: randn(4, 4, device=d), None, "A must be float32"),
        (lambda d: randn(4, 4, device=d), lambda d: randn(4, 4, device=d).half(), None, "B must be float32"),
        (lambda d: randn(4, device=d), lambda d: randn(4, 4, device=d), None, "matrices"),
        (lambda d: randn(2, 4, 4, device=d), lambda d: randn(4, 4, device=d), None, "matrices"),
        (lambda d: randn(4, 5, device=d), lambda d: randn(4, 4, device=d), None, "inner dimensions differ"),
        (lambda d: randn(2, 4, 5, device=d), lambda d: randn(3, 5, 4, device=d), None, "batch sizes differ"),
        (lambda d: randn(4, 5, device=d), lambda d: randn(5, 4, device=d), lambda d: randn(3, 4, device=d), "does not broadcast"),
    ],
)
def test_contract_errors(device, A, B, C, message):
    A, B, C = A(device), B(device), None if C is None else C(device)
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
def test_inplace_errors(device):
    A, B = randn(4, 5, device=device), randn(5, 6, device=device)
    with pytest.raises(RuntimeError, match="exactly the result's shape"):
        ops.sgemm_(randn(6, device=device), A, B)
    with pytest.raises(RuntimeError, match="share memory"):
        ops.sgemm_(randn(1, 6, device=device).expand(4, 6), A, B)
    X = randn(4, 6, device=device)
    with pytest.raises(RuntimeError, match="overlaps A"):
        ops.sgemm_(X, X[:, :5], B[:, :6])


def test_cpu_fallback_reason():
    A, B = randn(8, 8, device="cpu"), randn(8, 8, device="cpu")
    assert torch_vecgemm.fallback_reason(A, B) == "not on a CUDA device (cpu)"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_wrapper_matches_torch(device, dtype):
    A, B, C = (randn(*s, device=device).to(dtype) for s in [(19, 7), (7, 11), (11,)])
    torch.testing.assert_close(torch_vecgemm.mm(A, B), torch.mm(A, B))
    torch.testing.assert_close(
        torch_vecgemm.sgemm(A, B, C, alpha=0.5, beta=2.0), torch.addmm(C, A, B, alpha=0.5, beta=2.0)
    )
    Ab, Bb = randn(3, 19, 7, device=device).to(dtype), randn(3, 7, 11, device=device).to(dtype)
    torch.testing.assert_close(torch_vecgemm.bmm(Ab, Bb), torch.bmm(Ab, Bb))


@pytest.mark.parametrize("device", DEVICES)
def test_wrapper_integer_and_errors_like_torch(device):
    if device == "cpu":
        A, B = torch.randint(-5, 5, (4, 3)), torch.randint(-5, 5, (3, 2))
        assert torch.equal(torch_vecgemm.mm(A, B), torch.mm(A, B))
    with pytest.raises(RuntimeError):
        torch_vecgemm.mm(randn(3, device=device), randn(3, 2, device=device))
    with pytest.raises(RuntimeError):
        torch_vecgemm.bmm(randn(3, 2, device=device), randn(2, 2, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device):
    opts = dict(device=device, dtype=torch.float64)
    A = torch.randn(6, 5, **opts, requires_grad=True)
    B = torch.randn(5, 4, **opts, requires_grad=True)
    C = torch.randn(4, **opts, requires_grad=True)  # broadcast bias
    assert torch.autograd.gradcheck(lambda a, b, c: torch_vecgemm.sgemm(a, b, c, alpha=0.7, beta=1.3), (A, B, C))
    assert torch.autograd.gradgradcheck(lambda a, b: torch_vecgemm.mm(a, b), (A, B))
    Ab = torch.randn(2, 6, 5, **opts, requires_grad=True)
    Bb = torch.randn(5, 4, **opts, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: torch_vecgemm.bmm(a, b.expand(2, 5, 4)), (Ab, Bb))


@pytest.mark.parametrize("device", DEVICES)
def test_linear_gradients_float64(device):
    opts = dict(device=device, dtype=torch.float64)
    x = torch.randn(3, 7, 10, **opts, requires_grad=True)
    W = torch.randn(6, 10, **opts, requires_grad=True)
    b = torch.randn(6, **opts, requires_grad=True)
    assert torch.autograd.gradcheck(torch_vecgemm.linear, (x, W, b))
    out, ref = torch_vecgemm.linear(x, W, b), F.linear(x, W, b)
    torch.testing.assert_close(out, ref)
    g = torch.randn_like(ref)
    torch.testing.assert_close(
        torch.autograd.grad(out, (x, W, b), g), torch.autograd.grad(ref, (x, W, b), g)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    def block(x, w1, w2, bias):
        h = torch.relu(torch.ops.vecgemm.sgemm(x, w1, bias, 1.0, 1.0))
        return torch_vecgemm.mm(h, w2.t()).sum(dim=-1)

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")
    x, w1, w2, bias = randn(64, 32, device=device), randn(32, 48, device=device), randn(16, 48, device=device), randn(48, device=device)
    for t in (x, w1, w2):
        t.requires_grad_()
    out = compiled(x, w1, w2, bias)
    ref = block(x, w1, w2, bias)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    grads = torch.autograd.grad(out.sum(), (x, w1, w2))
    ref_grads = torch.autograd.grad(ref.sum(), (x, w1, w2))
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-4)


def test_variants_listed():
    names = torch_vecgemm.variants()
    assert names[0] == "auto"
    if torch_vecgemm._C.cuda_kernels_built():
        assert "vectorized" in names and any(n.startswith("tiled_") for n in names)


def test_tuning_cache_roundtrip(tmp_path):
    path = tmp_path / "tuning.json"
    if not torch_vecgemm._C.cuda_kernels_built():
        torch_vecgemm.save_tuning_cache(path)
        assert torch_vecgemm.load_tuning_cache(path) == 0
        return
    config = next(n for n in torch_vecgemm.variants() if n.startswith("tiled_"))
    torch_vecgemm._C.add_tuning_entry("b1_m8_n8_k8_rr_v4", config, 2)
    torch_vecgemm._C.add_tuning_entry("b1_m9_n8_k8_rr_v4", config, 1, stream_k=True)
    torch_vecgemm.save_tuning_cache(path)
    torch_vecgemm._C.clear_tuning_cache()
    assert torch_vecgemm.tuning_cache() == {}
    assert torch_vecgemm.load_tuning_cache(path) == 2
    assert torch_vecgemm.tuning_cache() == {"b1_m8_n8_k8_rr_v4": (config, 2, False), "b1_m9_n8_k8_rr_v4": (config, 1, True)}
    torch_vecgemm._C.clear_tuning_cache()
    # A cache saved before the stream-K tail existed (format 1) loads with the tail off.
    path.write_text(json.dumps({"format": 1, "entries": {"b1_m8_n8_k8_rr_v4": {"config": config, "splits": 3}}}))
    assert torch_vecgemm.load_tuning_cache(path) == 1
    assert torch_vecgemm.tuning_cache() == {"b1_m8_n8_k8_rr_v4": (config, 3, False)}
    torch_vecgemm._C.clear_tuning_cache()
    with pytest.raises(RuntimeError, match="unknown tiled configuration"):
        torch_vecgemm._C.add_tuning_entry("k", "no_such_config", 1)


def cpu(*shape):
    return randn(*shape, device="cpu")


needs_kernels = pytest.mark.skipif(
    not torch_vecgemm._C.cuda_kernels_built(), reason="torch_vecgemm was built without CUDA kernels"
)


@needs_kernels
@pytest.mark.parametrize(
    "A,B,variant,message",
    [
        (lambda: cpu(64, 64)[::2, ::2], lambda: cpu(32, 16), "auto", "A is neither row- nor column-major (strides [128, 2])"),
        (lambda: cpu(8, 8), lambda: cpu(8, 24)[:, ::3], "auto", "B is neither row- nor column-major"),
        (lambda: cpu(8, 8), lambda: cpu(8, 8), "nope", "unknown variant 'nope'"),
        (lambda: cpu(130, 64), lambda: cpu(64, 128), "vectorized", "M = 130 is not a multiple of 128"),
        (lambda: cpu(128, 64), lambda: cpu(64, 100), "vectorized", "N = 100 is not a multiple of 128"),
        (lambda: cpu(128, 12), lambda: cpu(12, 128), "vectorized", "K = 12 is not a multiple of 8"),
        (lambda: cpu(64, 128).t(), lambda: cpu(64, 128), "vectorized", "A is not row-major contiguous"),
        (lambda: cpu(128 * 64 + 1)[1:].view(128, 64), lambda: cpu(64, 128), "vectorized", "not 16-byte aligned"),
        (lambda: cpu(128, 65)[:, 1:], lambda: cpu(64, 128), "tiled_256x128x8", "16-byte aligned operands only"),
    ],
)
def test_cuda_rules_checked_without_a_gpu(A, B, variant, message):
    # The CUDA-side rules depend only on shapes, strides and pointers, so CI checks them on CPU tensors.
    reason = torch_vecgemm._C._kernel_violation(A(), B(), None, variant)
    assert reason is not None and message in reason, reason


@needs_kernels
@pytest.mark.parametrize(
    "A,B",
    [
        (lambda: cpu(100, 37)[:, 1:], lambda: cpu(36, 77)),
        (lambda: cpu(37, 100).t(), lambda: cpu(77, 37).t()),
        (lambda: cpu(5, 9, 13), lambda: cpu(13, 3).expand(5, 13, 3)),
        (lambda: cpu(1, 1), lambda: cpu(1, 1)),
        (lambda: cpu(7, 1), lambda: cpu(1, 9)),
    ],
)
def test_auto_takes_any_layout_and_alignment(A, B):
    assert torch_vecgemm._C._kernel_violation(A(), B(), None, "auto") is None
