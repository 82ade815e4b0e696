"""torch_vecgemm: hand-written float32 GEMM kernels for PyTorch.

Importing the package loads ``torch_vecgemm._C``, which registers

* ``torch.ops.vecgemm.sgemm(A, B, C=None, alpha=1.0, beta=0.0, variant="auto",
  precision="auto")`` and the in-place ``torch.ops.vecgemm.sgemm_(C, A, B, alpha, beta,
  variant, precision)``: strict, raising a RuntimeError that names the broken rule when a
  CUDA kernel cannot take the input;
* ``torch.ops.vecgemm.gemm(A, B, C=None, alpha=1.0, beta=0.0, precision="auto")``: the
  lenient op behind the functions below, which runs the kernel when the rules allow and
  otherwise returns exactly what ``torch.addmm`` / ``torch.baddbmm`` compute.

``torch_vecgemm.enable(precision="3xtf32")`` (``disable()``, ``with enable(...)``) routes
every float32 CUDA matrix product of the program through the library, models unchanged.

``precision`` is ``"auto"`` (the switch: ``set_precision``, ``get_precision``, the
``precision`` context manager, ``VECGEMM_PRECISION``; IEEE unless set), ``"ieee"`` or
``"3xtf32"`` (fp32 accuracy on the tensor cores, sm_80 and newer).

The ops take DTensors too (``torch_vecgemm.distributed``): each rank runs them on its shards.

The functions here accept whatever their torch counterparts accept.
"""
import torch  # noqa: F401  (loads libtorch and libc10, which _C links against)

from . import _C  # noqa: F401  (registers torch.ops.vecgemm)
from . import _profiles
from ._build import build_info
from ._ops import Plan, bmm, fallback_reason, linear, mm, plan, selected_kernel, sgemm, variants
from ._precision import get_precision, precision, set_precision
from ._switch import disable, enable, enabled
from ._tuning import autotune, load_tuning_cache, save_tuning_cache, tuning_cache
from . import nn  # noqa: E402  (torch_vecgemm.nn.Linear and the swap functions)
from . import distributed  # noqa: E402  (DTensor sharding strategies, registered when DTensor loads)

_profiles.load()  # the planner's device profiles (profiles/*.json)
distributed.install()

__all__ = [
    "enable",
    "disable",
    "enabled",
    "sgemm",
    "mm",
    "bmm",
    "linear",
    "fallback_reason",
    "plan",
    "Plan",
    "selected_kernel",
    "variants",
    "set_precision",
    "get_precision",
    "precision",
    "autotune",
    "tuning_cache",
    "save_tuning_cache",
    "load_tuning_cache",
    "build_info",
    "nn",
]
__version__ = "0.1.0"
