"""Autotune mode and its cache.

By default the kernel and split-K factor are chosen per shape by a cost model over the
tilings in csrc/cuda/tile_configs.h. In autotune mode the model's best few candidates are
timed once for each new problem (shape, storage orders, alignment) and the fastest is
remembered for the process; ``save_tuning_cache`` / ``load_tuning_cache`` keep it on disk.
``VECGEMM_AUTOTUNE=1`` turns the mode on at import, and ``VECGEMM_TUNING_CACHE=path``
loads a saved cache at import.
"""
from __future__ import annotations

import json
import os

from . import _C

_FORMAT = 2  # 2 added "stream_k"; format 1 files load with the tail off


def autotune(enabled: bool = True) -> None:
    """Measure candidate kernels for each new problem shape (once) instead of using the model."""
    _C.set_autotune(bool(enabled))


def tuning_cache() -> dict[str, tuple[str, int, bool]]:
    """Problem key -> (tiling name, split-K factor, stream-K tail) chosen so far by
    autotuning or loaded. ``_C.tuning_key(A, B)`` gives the key of a product."""
    return {key: (config, splits, stream_k) for key, config, splits, stream_k in _C.tuning_entries()}


def save_tuning_cache(path: str | os.PathLike) -> None:
    entries = {key: {"config": c, "splits": s, "stream_k": t} for key, (c, s, t) in tuning_cache().items()}
    with open(path, "w") as f:
        json.dump({"format": _FORMAT, "entries": entries}, f, indent=1, sort_keys=True)


def load_tuning_cache(path: str | os.PathLike) -> int:
    """Adds the saved choices to the cache; returns how many were loaded."""
    with open(path) as f:
        data = json.load(f)
    if data.get("format") not in (1, _FORMAT):
        raise ValueError(f"{path}: not a torch_vecgemm tuning cache (format {data.get('format')!r})")
    for key, entry in data["entries"].items():
        _C.add_tuning_entry(key, entry["config"], int(entry["splits"]), bool(entry.get("stream_k", False)))
    return len(data["entries"])


if os.environ.get("VECGEMM_TUNING_CACHE") and os.path.exists(os.environ["VECGEMM_TUNING_CACHE"]):
    load_tuning_cache(os.environ["VECGEMM_TUNING_CACHE"])
