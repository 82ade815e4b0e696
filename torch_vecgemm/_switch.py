"""The whole-program switch: ``torch_vecgemm.enable(precision="3xtf32")`` routes every
float32 CUDA matrix product of the program to the library, with no change to the model.

While it is on, aten's ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` (and their ``out=`` forms)
have the library's kernels at the CUDA dispatch key (csrc/aten_override.h): whatever lowers
to them runs there, ``torch.matmul`` and ``@`` of any rank, ``F.linear`` and ``nn.Linear``,
``einsum``, ``tensordot``, the products of a backward pass, and the extern products of a
``torch.compile`` graph. Each product follows the lenient functions' rules and planner: the
kernels where they take it, in the precision asked for where it serves (3xTF32 only where it
is as accurate as fp32 and predicted faster), and torch's own CUDA kernel otherwise, so
nothing the kernels cannot take changes. Off, torch's kernels are the ones dispatched, as if
the switch had never been on.

Semantics, as ``set_precision``'s: process-wide (every thread's products, including those
already running their Python, see the change at their next product), set under a lock, and
nested ``with`` blocks restore what was on before them, last in, first out.
"""
from __future__ import annotations

from typing import Optional

from . import _C, _precision


class enable:
    """Turn the switch on: ``torch_vecgemm.enable(precision="3xtf32")``, or as a context
    manager, ``with torch_vecgemm.enable("3xtf32"): ...``, after which the switch is back
    to what it was before the block (on with another precision, or off).

    ``precision``: ``"3xtf32"`` (the default; fp32 accuracy on the tensor cores, sm_80 and
    newer), ``"ieee"`` (the SIMT kernels, IEEE fp32) or ``"auto"`` (the precision switch,
    ``set_precision``, read at each product)."""

    def __init__(self, precision: str = "3xtf32") -> None:
        _precision.check(precision)
        self._previous = _C._aten_override()
        _C._set_aten_override(precision)

    def __enter__(self) -> "enable":
        return self

    def __exit__(self, *exc) -> None:
        _C._set_aten_override(self._previous)


def disable() -> None:
    """Turn the switch off: aten's products run on torch's kernels again."""
    _C._set_aten_override(None)


def enabled() -> Optional[str]:
    """The precision the switch is on with, or None when it is off."""
    return _C._aten_override()
