"""Python side of the vecgemm ops: fake (meta) implementations for torch.compile and the
public functions. The derivative formulas are C++ (csrc/autograd.cpp), so that a call runs
no Python below its wrapper."""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch
from torch import Tensor

from . import _C, _precision
from .distributed import sharded_lead_dim

_gemm = torch.ops.vecgemm.gemm.default
_linear = torch.ops.vecgemm.linear.default
_is_compiling = torch.compiler.is_compiling
_has_torch_function = torch._C._has_torch_function


def _lenient(A: Tensor, B: Tensor, C: Optional[Tensor], alpha: float, beta: float, precision: str) -> Tensor:
    """The lenient op, called straight through the dispatcher (``_C.gemm``) where nothing
    needs to see the call from Python: under torch.compile the op is traced, and a
    __torch_function__ override or mode gets the op as torch would hand it over.

    Under torch.compile "auto" is resolved here, from the switch's Python mirror: dynamo
    guards on what it read, so the compiled graph, which holds the precision as a constant,
    is recompiled when the switch changes (_precision.py)."""
    if _is_compiling():
        return _gemm(A, B, C, alpha, beta, _precision.resolve(precision))
    if _has_torch_function((A, B) if C is None else (A, B, C)):
        return _gemm(A, B, C, alpha, beta, precision)
    return _C.gemm(A, B, C, alpha, beta, precision)


def fallback_reason(
    A: Tensor, B: Tensor, C: Optional[Tensor] = None, *, variant: str = "auto", precision: str = "auto"
) -> Optional[str]:
    """None if the strict op ``torch.ops.vecgemm.sgemm(A, B, C, variant=variant,
    precision=precision)`` will run on a CUDA kernel, else a short reason why not.

    The same rules (implemented once, in C++) make the strict ops raise. With
    ``precision="3xtf32"`` on a GPU that cannot run it, this gives the reason; the lenient
    functions (``sgemm``, ``mm``, ...) then run IEEE fp32 on the kernels, as ``plan()`` shows.
    """
    return _C.fallback_reason(A, B, C, variant, precision)


@dataclasses.dataclass(frozen=True)
class Plan:
    """How ``alpha * A @ B + beta * C`` would run, as the library plans it (docs/design.md).

    ``str(plan)`` is what ``selected_kernel`` returns.
    """

    # "tiled", "async", "gemv", "vectorized", "tf32x3", "empty" (no kernel: D = beta * C or nothing),
    # "fallback" (a rule sends the call to torch) or "torch" (torch's fp32 product runs: the
    # device profile predicts it faster than the kernels, or precision 3xTF32 was asked for
    # and torch's fp32 is faster or more accurate here; the description says why)
    family: str
    kernel: Optional[str]  # the variant name of the kernel that runs; None for "empty" and "fallback"
    split_k: int  # K slices (1: unsplit)
    stream_k: bool  # the last partial wave of tiles runs as the stream-K tail
    copy_a: Optional[str]  # None, or the storage order A is copied into ("row-major", "column-major")
    copy_b: Optional[str]
    orders: str  # storage orders of A and B as the kernel reads them ("rr", "rc", "cr", "cc"); "" on fallback
    fallback_reason: Optional[str]
    precision: Optional[str]  # what the kernel computes in, "ieee" or "3xtf32"; None on "fallback" (torch decides)
    # 3xTF32 was asked for and IEEE runs instead: why (the GPU cannot run it, or, with variant
    # "auto", 3xTF32 would be less accurate or predicted slower on this problem)
    precision_fallback: Optional[str]
    autotune_pending: bool  # autotune mode, shape not tuned yet: the first call times candidates
    description: str
    predicted_us: Optional[float] = None  # the cost model's time for the plan; None where it has none
    # the kernel computes C^T = B^T A^T (a 3xTF32 product of few rows run as one of many; its
    # A is B^T and its B is A^T, and `orders` are theirs)
    transposed: bool = False

    def __str__(self) -> str:
        return self.description


def plan(A: Tensor, B: Tensor, C: Optional[Tensor] = None, *, variant: str = "auto", precision: str = "auto") -> Plan:
    """The plan for ``sgemm(A, B, C, precision=precision)`` (variant ``"auto"``), or for the
    strict op on the given variant. ``"auto"`` precision reads the switch now. Pure: nothing
    is allocated, launched or timed, so it is cheap and safe to call anywhere."""
    return Plan(**_C.plan(A, B, C, variant, precision))


def selected_kernel(A: Tensor, B: Tensor, *, variant: str = "auto", precision: str = "auto") -> str:
    """The kernel (and split-K factor) ``A @ B`` would run on, or ``"fallback: <reason>"``;
    where 3xTF32 was asked for and cannot run, the IEEE kernel with the reason."""
    return _C.selected_kernel(A, B, variant, precision)


def variants() -> list[str]:
    """Names accepted by the ``variant`` argument of the strict ops in this build."""
    return list(_C.variants())


def sgemm(
    A: Tensor,
    B: Tensor,
    C: Optional[Tensor] = None,
    *,
    alpha: float = 1.0,
    beta: Optional[float] = None,
    precision: str = "auto",
) -> Tensor:
    """``alpha * A @ B + beta * C`` for matrices (2-D) or batches of matrices (3-D), like
    ``torch.addmm`` / ``torch.baddbmm``: ``beta`` defaults to 1 when C is given (0 without).

    With ``beta == 0`` C is not read (NaN in it does not propagate), but it must still
    broadcast to the result, as torch requires. Inputs the kernel cannot take (another dtype
    or device, unusual strides) give the result torch would; ``fallback_reason`` says when
    and why.

    ``precision``: ``"auto"`` (the switch, ``torch_vecgemm.set_precision``; IEEE unless set),
    ``"ieee"`` or ``"3xtf32"`` (fp32 accuracy on the tensor cores, sm_80 and newer; IEEE
    fp32 where the GPU cannot, ``plan()`` says why). Gradients use the forward's precision.
    """
    if beta is None:
        beta = 0.0 if C is None else 1.0
    return _lenient(A, B, C, float(alpha), float(beta), precision)


def mm(A: Tensor, B: Tensor, *, precision: str = "auto") -> Tensor:
    """Drop-in for ``torch.mm``; ``precision`` as for ``sgemm``."""
    if A.dim() != 2 or B.dim() != 2:
        _precision.check(precision)
        return torch.mm(A, B)  # torch's own error for non-matrices
    return _lenient(A, B, None, 1.0, 0.0, precision)


def bmm(A: Tensor, B: Tensor, *, precision: str = "auto") -> Tensor:
    """Drop-in for ``torch.bmm``; B may be a batch-broadcast view (``W.expand(b, K, N)``);
    ``precision`` as for ``sgemm``."""
    if A.dim() != 3 or B.dim() != 3:
        _precision.check(precision)
        return torch.bmm(A, B)
    return _lenient(A, B, None, 1.0, 0.0, precision)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, precision: str = "auto") -> Tensor:
    """Drop-in for ``torch.nn.functional.linear``: ``x @ weight.T + bias``.

    ``weight.T`` is a column-major view, read by the kernel as it is, with no copy; the bias
    is added in the kernel's epilogue. Inputs ``F.linear`` would reject get its error.
    ``precision`` as for ``sgemm``.
    """
    if type(x) is not Tensor:  # a subclass: a Parameter, or a DTensor sharded along its rows
        split = sharded_lead_dim(x)
        if split:
            return _linear_sharded_rows(x, weight, bias, split, precision)
    if _is_compiling():
        return _linear(x, weight, bias, _precision.resolve(precision))  # see _lenient
    if _has_torch_function((x, weight) if bias is None else (x, weight, bias)):
        return _linear(x, weight, bias, precision)
    return _C.linear(x, weight, bias, precision)


def _linear_sharded_rows(x: Tensor, weight: Tensor, bias: Optional[Tensor], split: int, precision: str) -> Tensor:
    """linear of a DTensor sharded along a leading dimension past the first (the sequence,
    say): its rows cannot be flattened into one sharded dimension, so DTensor would gather
    them; as a batch of (lead[split:], K) matrices each rank keeps its rows."""
    if weight.dim() != 2 or x.shape[-1] != weight.shape[-1]:
        _precision.check(precision)
        return torch.nn.functional.linear(x, weight, bias)  # torch's error
    lead = x.shape[:-1]
    groups = (math.prod(lead[:split]), math.prod(lead[split:]), x.shape[-1])
    w = weight.t().expand(groups[0], *weight.t().shape)  # batch-broadcast: no copy
    if _is_compiling():
        precision = _precision.resolve(precision)  # see _lenient
    out = _gemm(x.reshape(groups), w, bias, 1.0, 0.0 if bias is None else 1.0, precision)
    return out.reshape(*lead, weight.shape[0])


# ---- torch.compile: shapes without running anything ------------------------------------


def _result_shape(A: Tensor, B: Tensor) -> list:
    torch._check(A.dim() in (2, 3) and A.dim() == B.dim(), lambda: "A and B must both be 2-D or both 3-D")
    torch._check(A.shape[-1] == B.shape[-2], lambda: f"inner dimensions differ: {tuple(A.shape)}, {tuple(B.shape)}")
    if A.dim() == 3:
        torch._check(A.shape[0] == B.shape[0], lambda: "batch sizes differ")
    return [*A.shape[:-1], B.shape[-1]]


# The precision is checked here as the ops check it, so that a misspelt one fails while
# tracing as it would in eager code; the value itself changes no shape.


@torch.library.register_fake("vecgemm::sgemm")
def _sgemm_fake(A, B, C=None, alpha=1.0, beta=0.0, variant="auto", precision="auto"):
    _precision.check(precision)
    return A.new_empty(_result_shape(A, B))


@torch.library.register_fake("vecgemm::sgemm_")
def _sgemm_inplace_fake(C, A, B, alpha=1.0, beta=0.0, variant="auto", precision="auto"):
    _precision.check(precision)
    torch._check(list(C.shape) == _result_shape(A, B), lambda: "C must have the result's shape")


@torch.library.register_fake("vecgemm::gemm")
def _gemm_fake(A, B, C=None, alpha=1.0, beta=0.0, precision="auto"):
    _precision.check(precision)
    return A.new_empty(_result_shape(A, B))
