"""What the build of this installation did, as setup.py recorded it in _build_info.json
next to the extension.

``build_info()`` returns a dict with at least these keys:

* ``known``: whether the record was found (False: a build that wrote none, e.g. by another
  route, or a record that does not parse; ``reason`` says which, every other key is None);
* ``version``: the package version; ``torch``: the torch version it was built against;
* ``cuda_toolkit``: the version of the CUDA toolkit's nvcc (e.g. "13.0.88") or None;
* ``cuda_kernels``: whether the CUDA kernels were built (False: every call falls back);
* ``architectures``: ``{"arch_list": TORCH_CUDA_ARCH_LIST, "nvcc_flags": [-gencode ...]}``,
  None without CUDA kernels;
* ``sass_rewrite``: whether the t816 main loops were rewritten below ptxas
  (tools/sass_rewrite): ``enabled`` (whether the rewrite ran), ``reason`` (why not),
  ``cuobjdump``, ``validated_for`` (``{"toolkit", "architecture"}``), ``rewritten`` (how
  many validated loops the library has rewritten), ``loops`` (per validated loop:
  ``kernel``, ``state`` "rewritten" / "rewritten already" / "left alone", ``reason`` and
  ``detail`` when left alone, the ``function`` and loop ``address`` where found, the
  ``input_fingerprint`` and ``output_fingerprint`` validated, the ``function_pattern``);
* ``git_commit``: the source's commit if it was a git checkout, else None.
"""
from __future__ import annotations

import json
import os

BUILD_INFO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_info.json")
KEYS = ("version", "torch", "cuda_toolkit", "cuda_kernels", "architectures", "sass_rewrite", "git_commit")
SASS_REWRITE_DEFAULTS = {"enabled": False, "reason": None, "cuobjdump": None, "validated_for": None,
                         "rewritten": 0, "loops": []}


def build_info() -> dict:
    """What the build did (see the module's doc); never raises."""
    try:
        with open(BUILD_INFO) as f:
            info = json.load(f)
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return _unknown(f"no build record ({BUILD_INFO}): built by a route that writes none")
    except Exception as e:  # noqa: BLE001 - unreadable is unknown, not an error of the caller's
        return _unknown(f"build record unreadable ({type(e).__name__}: {e})")
    info["known"] = True
    for key in KEYS:
        info.setdefault(key, None)
    if isinstance(info["sass_rewrite"], dict):
        info["sass_rewrite"] = {**SASS_REWRITE_DEFAULTS, **info["sass_rewrite"]}
    return info


def _unknown(reason):
    return {"known": False, "reason": reason, **{key: None for key in KEYS}}
