"""DTensor sharding strategies for the vecgemm ops, so that they compose with
``torch.distributed.tensor`` (tensor parallelism, FSDP2, any DTensor program).

A vecgemm op called on DTensors is served as DTensor serves ``aten.addmm``: the sharding
propagator picks, from the strategies below, the one whose input placements cost the least
to reach from the placements the arguments have, redistributes the arguments that differ,
runs the op on each rank's local shards (the CUDA kernel or the ATen fallback, as for any
tensor) and wraps the local results with the strategy's output placement. A strategy is
listed for one mesh dimension; DTensor combines them over the dimensions of the mesh.

For ``out = alpha * A @ B + beta * C`` with A ``(M, K)`` or ``(batch, M, K)``:

==========================  =================  ==================  ==================
output                      A                  B                   C (full shape)
==========================  =================  ==================  ==================
Replicate                   Replicate          Replicate           Replicate
Shard(batch) (3-D only)     Shard(batch)       Shard(batch)        Shard(batch)
Shard(M)                    Shard(M)           Replicate           Shard(M)
Shard(N)                    Replicate          Shard(N)            Shard(N)
Partial(sum)                Shard(K)           Shard(K)            Partial(sum)
Partial(r)                  Partial(r)         Replicate           Partial(r)
Partial(r)                  Replicate          Partial(r)          Partial(r)
==========================  =================  ==================  ==================

with r "sum" or "avg" (the product is linear in each operand). C follows the output, and a
C that broadcasts along the output's sharded dimension (a bias ``[N]`` under Shard(M)) is
Replicate. With a Partial output C must be Partial too: every rank adds ``beta * C_local``
and the partial results are later summed, so a C replicated on every rank would be added
once per rank. DTensor turns a Replicate C into Partial(sum) locally, as ``C / ranks`` on
each, with no communication; this is what it does for ``aten.addmm``'s bias.

The strategies depend only on the placements and shapes of A, B and C, never on alpha, beta,
the variant or the precision (each rank computes its local product in the precision asked
for; the placements are the same): ``register_sharding`` keys its cache on the tensor arguments alone (the ops
have no int argument, the first of which would start the hashed scalars), so a strategy that
read beta would be reused for a later call with another beta.

The in-place ``sgemm_(C, A, B, ...)`` writes its result into C, whose placement is then the
output's: only the strategies with C in that placement apply, and DTensor never
redistributes C itself (a Replicate C with K-sharded operands makes A and B replicated).

When the strategies are registered: importing ``torch.distributed.tensor`` costs about a
third of importing torch, which users without DTensors should not pay. No DTensor can exist
before that module is imported, so importing ``torch_vecgemm`` registers the strategies
at once if it already is, and otherwise installs an import hook that registers them as
soon as it is (the hook removes itself then). Where ``torch.distributed`` is unavailable
(some builds), nothing is installed and importing ``torch_vecgemm`` works as before.
"""
from __future__ import annotations

import importlib.abc
import sys
import threading

import torch

__all__ = ["register_sharding_strategies", "sharding_strategies", "sharded_lead_dim"]

_TENSOR_MODULE = "torch.distributed.tensor"
# Reductions over which a product is linear in one operand: sum_r(A_r) B = sum_r(A_r B),
# and the same for the mean.
_LINEAR_REDUCTIONS = ("sum", "avg")

_lock = threading.Lock()
_registered = False


def sharding_strategies(A, B, C=None):
    """The acceptable shardings of ``alpha * A @ B + beta * C`` on one mesh dimension, as
    ``register_sharding`` wants them: a list of ``([output], [A, B, C])`` placements, C's
    None when there is no C. A, B and C are anything with ``ndim`` and ``shape``
    (DTensor's specs, or tensors)."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    products = [(Replicate(), Replicate(), Replicate())]
    if A.ndim in (2, 3) and A.ndim == B.ndim:
        m = A.ndim - 2  # M's dimension in A and in the output; the batch, if any, is 0
        n, k_of_a, k_of_b = m + 1, m + 1, m
        if m == 1:
            products.append((Shard(0), Shard(0), Shard(0)))
        products += [
            (Shard(m), Shard(m), Replicate()),
            (Shard(n), Replicate(), Shard(n)),
            (Partial("sum"), Shard(k_of_a), Shard(k_of_b)),
        ]
        for reduction in _LINEAR_REDUCTIONS:
            products += [(Partial(reduction), Partial(reduction), Replicate()),
                         (Partial(reduction), Replicate(), Partial(reduction))]
    # Anything else (the op's own error for the shapes) runs replicated, where it raises.
    return [([out], [a, b, _placement_of_c(out, C, A.ndim)]) for out, a, b in products]


def _placement_of_c(out, C, out_ndim):
    """C's placement for an output placement: the output's, moved to C's dimensions where C
    has fewer, Replicate along a dimension C broadcasts (absent or of size 1)."""
    from torch.distributed.tensor import Replicate, Shard

    if C is None:
        return None
    if not isinstance(out, Shard):
        return out
    dim = out.dim - (out_ndim - C.ndim)
    return Shard(dim) if dim >= 0 and C.shape[dim] != 1 else Replicate()


# DTensor calls these with the op's arguments as given, positional or by keyword: the
# scalars (alpha, beta, the strict ops' variant, precision) are taken whichever way they
# come, and get no placement.
_SCALARS = 4  # alpha, beta, variant, precision: the most an op has


def _out_of_place(A, B, C=None, *scalars, **keywords):
    # alpha, beta, variant and precision are not part of DTensor's cache key (see the module's doc).
    return [(out, [*inputs] + [None] * _SCALARS) for out, inputs in sharding_strategies(A, B, C)]


def _in_place(C, A, B, *scalars, **keywords):
    # No output: C, first of the inputs, carries the result's placement.
    return [([], [out, a, b] + [None] * _SCALARS)
            for (out,), (a, b, c) in sharding_strategies(A, B, C)
            if c == out]


def sharded_lead_dim(x) -> int:
    """The first dimension past the first and before the last along which the DTensor
    ``x`` is sharded; 0 for a plain tensor, or when there is none."""
    if _TENSOR_MODULE not in sys.modules:  # no DTensor can exist yet
        return 0
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(x, DTensor):
        return 0
    dims = [p.dim % x.ndim for p in x.placements if isinstance(p, Shard)]
    return min((d for d in dims if 0 < d < x.ndim - 1), default=0)


def register_sharding_strategies() -> None:
    """Register the strategies with DTensor (once; later calls do nothing)."""
    global _registered
    with _lock:
        if _registered:
            return
        from torch.distributed.tensor.experimental import register_sharding

        ops = torch.ops.vecgemm
        register_sharding([ops.gemm.default, ops.sgemm.default])(_out_of_place)
        register_sharding(ops.sgemm_.default)(_in_place)
        _registered = True


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it wraps the loader of ``torch.distributed.tensor`` so that the
    strategies are registered right after that module has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _TENSOR_MODULE:
            return None
        # The finder that would have found it, whichever (torch need not be on a plain path).
        others = (f for f in sys.meta_path if f is not self and hasattr(f, "find_spec"))
        spec = next((s for s in (f.find_spec(fullname, path, target) for f in others) if s is not None), None)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            _remove_hook()
            register_sharding_strategies()

        spec.loader.exec_module = exec_module
        return spec


_hook = _RegisterAfterImport()


def _remove_hook():
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)


def install() -> None:
    """Called on import of torch_vecgemm: register now if DTensor is loaded, else when it is."""
    if not torch.distributed.is_available():
        return
    if _TENSOR_MODULE in sys.modules:
        register_sharding_strategies()
    elif _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)
