"""Drop-in modules: ``torch_vecgemm.nn.Linear`` and the functions that swap a model's
``torch.nn.Linear`` layers for it and back.

``Linear`` *is* a ``torch.nn.Linear`` (a subclass with the same constructor, parameters,
initialisation and ``state_dict``), so checkpoints load into either and code that checks
``isinstance(m, nn.Linear)`` keeps working; only ``forward`` differs: ``x @ W.T + b`` runs
through ``torch_vecgemm.linear``, with the bias added in the kernel's epilogue, and falls back
to torch wherever the kernels cannot take the input. Its ``precision`` (a keyword of the
constructor and of ``swap_linear``; ``"auto"``, ``"ieee"`` or ``"3xtf32"``) is a plain
attribute, not state: checkpoints do not carry it.
"""
from __future__ import annotations

import fnmatch
from typing import Callable, Iterable, Union

import torch
from torch import Tensor

from . import _precision
from ._ops import linear

__all__ = ["Linear", "swap_linear", "unswap_linear"]

# Which layers to swap: qualified names (as named_modules gives them) matched by fnmatch
# patterns, or a predicate on (name, module).
Selector = Union[str, Iterable[str], Callable[[str, torch.nn.Module], bool], None]


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` computed by torch_vecgemm's kernels, in ``precision`` (forward and
    backward): ``"auto"`` (the switch, ``torch_vecgemm.set_precision``), ``"ieee"`` or
    ``"3xtf32"``."""

    precision: str = "auto"  # a layer swapped in by an older release has no attribute of its own

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 precision: str = "auto") -> None:
        super().__init__(in_features, out_features, bias, device, dtype)
        self.precision = _precision.check(precision)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias, precision=self.precision)

    def extra_repr(self) -> str:
        text = super().extra_repr()
        return text if self.precision == "auto" else f"{text}, precision={self.precision!r}"


def _matches(selector: Selector, name: str, module: torch.nn.Module) -> bool:
    if callable(selector):
        return bool(selector(name, module))
    patterns = [selector] if isinstance(selector, str) else list(selector)
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _retype(model: torch.nn.Module, old: type, new: type, include: Selector, exclude: Selector,
            precision: str | None) -> list[str]:
    swapped = []
    for name, module in model.named_modules():
        if type(module) is not old:  # subclasses of nn.Linear with their own forward stay
            continue
        if include is not None and not _matches(include, name, module):
            continue
        if exclude is not None and _matches(exclude, name, module):
            continue
        # Same object, same parameters, buffers and hooks: only the class (its forward) changes.
        module.__class__ = new
        # "auto" is Linear's class default: only another precision is the layer's own, and a
        # layer turned back into a torch.nn.Linear keeps nothing of ours.
        if precision not in (None, "auto"):
            module.precision = precision
        else:
            module.__dict__.pop("precision", None)
        swapped.append(name)
    return swapped


def swap_linear(model: torch.nn.Module, *, include: Selector = None, exclude: Selector = None,
                precision: str = "auto") -> list[str]:
    """Make every ``torch.nn.Linear`` of ``model`` (itself included) a ``Linear`` computing in
    ``precision``, in place, keeping its weights; returns the qualified names of the layers
    swapped.

    ``include`` / ``exclude``: fnmatch patterns over the names ``model.named_modules()`` gives
    (``"blocks.*.mlp.*"``), or a predicate ``(name, module) -> bool``. Subclasses of
    ``torch.nn.Linear`` with a forward of their own are left alone.
    """
    return _retype(model, torch.nn.Linear, Linear, include, exclude, _precision.check(precision))


def unswap_linear(model: torch.nn.Module, *, include: Selector = None, exclude: Selector = None) -> list[str]:
    """The inverse of ``swap_linear``: every ``Linear`` becomes a ``torch.nn.Linear`` again."""
    return _retype(model, Linear, torch.nn.Linear, include, exclude, None)
