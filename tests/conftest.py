"""Shared helpers: float64 references, error bounds, poisoning, device parametrization."""
from __future__ import annotations

import math

import pytest
import torch

import torch_vecgemm

HAS_CUDA = torch.cuda.is_available()
NO_CUDA_REASON = (
    "no CUDA device: torch.cuda.is_available() is False"
    + ("" if torch.version.cuda else " (CPU-only torch build)")
    + "; GPU tests run on the H200"
)
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
requires_kernels = pytest.mark.skipif(
    not torch_vecgemm._C.cuda_kernels_built(), reason="torch_vecgemm was built without CUDA kernels"
)

DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])

# Unit roundoff of float32.
U32 = 2.0**-24


def randn(*shape, device="cuda", dtype=torch.float32, generator=None):
    """Fresh random data, never zeros: N(0, 1) shifted away from exact zero."""
    return torch.randn(*shape, device=device, dtype=dtype, generator=generator)


def reference(A, B, C=None, alpha=1.0, beta=0.0):
    """alpha * A @ B + beta * C in float64, on the inputs' device."""
    ref = alpha * torch.matmul(A.double(), B.double())
    if C is not None and beta != 0.0:
        ref = ref + beta * C.double()
    return ref


def assert_gemm_close(out, A, B, C=None, alpha=1.0, beta=0.0, *, tol=1e-5):
    """out must be float32 alpha * A @ B + beta * C to float32 accuracy.

    Two checks against a float64 reference: the relative Frobenius error (a systematic
    fault such as a missing K step shows up at 1e-2 or worse), and each element against
    the standard dot-product error bound sqrt(K) * u * (|alpha| |A| |B| + |beta| |C|)
    with a 32x margin (a single wrong or unwritten element shows up here).
    """
    assert out.dtype == torch.float32
    ref = reference(A, B, C, alpha, beta)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if out.numel() == 0:
        return
    out64 = out.double()
    bad = ~torch.isfinite(out64)
    assert not bad.any(), f"{int(bad.sum())} non-finite outputs (unwritten or NaN leaked), first at {bad.nonzero()[0].tolist()}"
    k = A.shape[-1]
    scale = abs(alpha) * torch.matmul(A.double().abs(), B.double().abs())
    if C is not None and beta != 0.0:
        scale = scale + abs(beta) * C.double().abs().expand_as(scale)
    bound = 32.0 * math.sqrt(max(k, 1)) * U32 * scale + 1e-30
    err = (out64 - ref).abs()
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"element error {worst:.3g}x over the bound at {(err / bound).argmax().item()}"
    rel = (torch.linalg.norm(out64 - ref) / torch.linalg.norm(ref)).item()
    assert rel < tol, f"relative error {rel:.3g} >= {tol}"


def poison_allocator(shape, device="cuda"):
    """Fill the caching allocator's next block of this size with NaN, so an output the
    kernel fails to write shows as NaN instead of stale correct data."""
    t = torch.full(shape, float("nan"), device=device)
    del t


def make_operand(rows, cols, layout, *, batch=None, device="cuda", offset=0, ld_pad=0):
    """A (batch?, rows, cols) float32 operand stored row- ("r") or column-major ("c"), as a
    view with storage offset `offset` elements and leading dimension padded by `ld_pad`."""
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
