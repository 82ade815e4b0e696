"""Autotune mode and its cache.

By default the kernel config and split-K factor are chosen per shape by a cost model over
the configs in csrc/kernels/simt/kernel_configs.h. In autotune mode the model's best few candidates
are timed once for each new problem (shape, storage orders, alignment), with torch.matmul's
own product beside them, and the fastest is remembered for the process: where torch's was
faster, the lenient functions (``mm``, ``sgemm``, ``nn.Linear``, the switch) hand the
problem to it, and the strict ops run the fastest kernel. ``save_tuning_cache`` /
``load_tuning_cache`` keep the choices on disk.
``VECGEMM_AUTOTUNE=1`` turns the mode on at import, and ``VECGEMM_TUNING_CACHE=path``
loads a saved cache at import. Under ``torch.use_deterministic_algorithms(True)`` neither
timing nor the cache is used: the model chooses, the same in every process.

A cache file can come from another build or be damaged: every entry is checked against this
build (a known key, a config with a kernel for the key's storage orders and alignment, a
split the model would consider) and one that fails is skipped with a warning, never used.
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings

from . import _C
from ._build import build_info

# The file's format: its "build" (what the entries depend on) and each entry's config,
# splits, stream_k and torch_faster. Format 3 (no torch_faster: torch.matmul was not timed)
# is read as torch slower; formats 1 and 2 came before any release and are not read.
_FORMAT = 4
_READ_FORMATS = (3, 4)


class TuningCacheWarning(UserWarning):
    """A tuning cache file or entry was not used."""


def autotune(enabled: bool = True) -> None:
    """Measure candidate kernels for each new problem shape (once) instead of using the model."""
    _C.set_autotune(bool(enabled))


def tuning_cache() -> dict[str, tuple[str, int, bool, bool]]:
    """Problem key -> (kernel config name, split-K factor, stream-K tail, torch.matmul timed
    faster) chosen so far by autotuning or loaded. ``_C.tuning_key(A, B)`` gives the key of
    a product."""
    return {key: (config, splits, stream_k, torch_faster)
            for key, config, splits, stream_k, torch_faster in _C.tuning_entries()}


def _build_identity() -> dict:
    """What a saved cache's entries depend on: the release and the kernel configs built (the
    tiled and cp.async ones: the only ones tuned; the 3xTF32 rows are planned by rule)."""
    return {"torch_vecgemm": build_info().get("version"),
            "kernel_configs": [v for v in _C.variants() if v.startswith(("tiled_", "async_"))]}


def save_tuning_cache(path: str | os.PathLike) -> None:
    """Write the cache to ``path`` atomically (a temporary file beside it, then a rename), so
    that a crash mid-save leaves the old file, not a damaged one."""
    path = os.fspath(path)
    entries = {key: {"config": c, "splits": s, "stream_k": t, "torch_faster": f}
               for key, (c, s, t, f) in tuning_cache().items()}
    text = json.dumps({"format": _FORMAT, "build": _build_identity(), "entries": entries}, indent=1, sort_keys=True)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tuning-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_tuning_cache(path: str | os.PathLike) -> int:
    """Adds the saved choices to the cache; returns how many were loaded.

    Raises ``ValueError`` if the file is not a tuning cache (unreadable JSON, another
    format); entries this build cannot use are skipped with a ``TuningCacheWarning``.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a torch_vecgemm tuning cache ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or data.get("format") not in _READ_FORMATS or not isinstance(data.get("entries"), dict):
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: not a torch_vecgemm tuning cache of format {_FORMAT} (format {found!r}); "
                         "tune again (torch_vecgemm.autotune(True)) and save it with this build")
    build = data.get("build")
    if build is not None and build != _build_identity():
        warnings.warn(f"{path} was saved by another build of torch_vecgemm ({build.get('torch_vecgemm')}); "
                      "its entries are checked one by one", TuningCacheWarning, stacklevel=2)
    loaded = 0
    for key, entry in data["entries"].items():
        try:
            config, splits, stream_k = entry["config"], entry["splits"], entry["stream_k"]
            torch_faster = entry["torch_faster"] if data["format"] >= 4 else False
            if not (isinstance(config, str) and type(splits) is int and isinstance(stream_k, bool)
                    and isinstance(torch_faster, bool)):
                raise TypeError("config must be a string, splits an integer, stream_k and torch_faster true or "
                                f"false: {entry!r}")
            _C.add_tuning_entry(key, config, splits, stream_k, torch_faster)
            loaded += 1
        except (RuntimeError, KeyError, TypeError) as e:
            warnings.warn(f"{path}: entry {key!r} skipped: {e}", TuningCacheWarning, stacklevel=2)
    return loaded


def _load_from_environment() -> None:
    """VECGEMM_TUNING_CACHE at import: a problem with it warns; it never breaks the import."""
    path = os.environ.get("VECGEMM_TUNING_CACHE")
    if not path:
        return
    if not os.path.exists(path):
        warnings.warn(f"VECGEMM_TUNING_CACHE={path}: no such file; nothing loaded", TuningCacheWarning, stacklevel=3)
        return
    try:
        load_tuning_cache(path)
    except (OSError, ValueError) as e:
        warnings.warn(f"VECGEMM_TUNING_CACHE: {e}; nothing loaded", TuningCacheWarning, stacklevel=3)


_load_from_environment()
