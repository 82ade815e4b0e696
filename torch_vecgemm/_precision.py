"""The precision switch: what ``precision="auto"`` (every op's and function's default)
computes in.

``"ieee"`` (the default): IEEE fp32 on the SIMT kernels. ``"3xtf32"``: fp32 operands split
into pairs of TF32 values and multiplied on the tensor cores in three products, to fp32
accuracy (docs/design.md, "Precision"), on GPUs of sm_80 and newer; elsewhere the lenient
functions run IEEE fp32 and ``plan().precision_fallback`` says why.

The switch is process-wide, as ``torch.backends.cuda.matmul.allow_tf32`` is, and held in two
places kept in step under a lock: the C++ library's atomic, which an op called with
``"auto"`` reads when it runs (so a graph holding ``"auto"`` follows it), and ``_current``
here, which torch_vecgemm's functions read under ``torch.compile`` to pass the precision to
the op explicitly: dynamo guards on the value it read, so a compiled function recompiles
when the switch changes instead of running the precision it was traced with.

``VECGEMM_PRECISION`` (``ieee`` or ``3xtf32``, any case) sets it at import; any other value
warns and keeps ``"ieee"``.
"""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Iterator

from . import _C

ACCEPTED = ("auto", "ieee", "3xtf32")
_SWITCH_VALUES = ("ieee", "3xtf32")
ENV = "VECGEMM_PRECISION"

_lock = threading.Lock()
_current = "ieee"


def check(precision: str) -> str:
    """``precision`` if the ops accept it, else a ValueError naming what they accept."""
    if not isinstance(precision, str):
        raise TypeError(f"precision must be a string, one of {ACCEPTED}; got {type(precision).__name__}")
    if precision not in ACCEPTED:
        _C._check_precision(precision)  # the library's own ValueError, with its wording
    return precision


def resolve(precision: str) -> str:
    """``precision`` with ``"auto"`` replaced by the switch's value."""
    return _current if precision == "auto" else precision


def set_precision(precision: str) -> None:
    """Set what ``precision="auto"`` computes in, for the whole process: ``"ieee"`` or
    ``"3xtf32"``. Calls already running keep the precision they read."""
    global _current
    if precision not in _SWITCH_VALUES:
        raise ValueError(f"set_precision takes 'ieee' or '3xtf32' (the switch is what 'auto' means); got {precision!r}")
    with _lock:
        _C._set_precision(precision)
        _current = precision


def get_precision() -> str:
    """What ``precision="auto"`` computes in now: ``"ieee"`` or ``"3xtf32"``."""
    return _current


@contextlib.contextmanager
def precision(value: str) -> Iterator[None]:
    """``with torch_vecgemm.precision("3xtf32"): ...``: the switch set inside the block and
    restored after it, even on an exception. Process-wide like ``set_precision``: other
    threads see the change while the block runs."""
    previous = get_precision()
    set_precision(value)
    try:
        yield
    finally:
        set_precision(previous)


def _load_from_environment() -> None:
    raw = os.environ.get(ENV)
    if raw is None:
        return
    value = raw.strip().lower()
    if value not in _SWITCH_VALUES:
        warnings.warn(f"{ENV}={raw!r} is not a precision ('ieee' or '3xtf32'); keeping 'ieee'", stacklevel=3)
        return
    set_precision(value)


_load_from_environment()
