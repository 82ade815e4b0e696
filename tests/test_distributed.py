"""The ops on DTensors (torch_vecgemm.distributed): the sharding strategies as listed, and
when they are registered."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_vecgemm

if not dist.is_available():
    pytest.skip("torch.distributed is not available in this torch build", allow_module_level=True)

from torch.distributed.tensor import Partial, Replicate, Shard  # noqa: E402

from torch_vecgemm.distributed import sharding_strategies  # noqa: E402

requires_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="torch.distributed was built without gloo")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the strategies as listed (no processes) ---------------------------------------------


def strategies_by_inputs(A, B, C=None):
    """{(A's, B's placement): (output's, C's)} from the listing."""
    return {(a, b): (out, c) for [out], [a, b, c] in sharding_strategies(A, B, C)}


def test_matrix_strategies_and_the_placement_of_a_bias():
    A, B, bias = torch.empty(8, 6), torch.empty(6, 4), torch.empty(4)
    listed = strategies_by_inputs(A, B, bias)
    assert listed[(Replicate(), Replicate())] == (Replicate(), Replicate())
    assert listed[(Shard(0), Replicate())] == (Shard(0), Replicate())  # a bias [N] is whole on every row block
    assert listed[(Replicate(), Shard(1))] == (Shard(1), Shard(0))
    # K sharded: each rank's product is partial, and so must its share of beta * C be.
    assert listed[(Shard(1), Shard(0))] == (Partial("sum"), Partial("sum"))
    for reduction in ("sum", "avg"):
        assert listed[(Partial(reduction), Replicate())] == (Partial(reduction), Partial(reduction))
        assert listed[(Replicate(), Partial(reduction))] == (Partial(reduction), Partial(reduction))
    assert len(listed) == 8
    full_c = strategies_by_inputs(A, B, torch.empty(8, 4))
    assert full_c[(Shard(0), Replicate())] == (Shard(0), Shard(0))
    assert full_c[(Replicate(), Shard(1))] == (Shard(1), Shard(1))
    assert strategies_by_inputs(A, B, torch.empty(1, 4))[(Shard(0), Replicate())] == (Shard(0), Replicate())
    assert all(c is None for _, c in strategies_by_inputs(A, B).values())


def test_batched_strategies():
    A, B, C = torch.empty(3, 8, 6), torch.empty(3, 6, 4), torch.empty(3, 1, 4)
    listed = strategies_by_inputs(A, B, C)
    assert listed[(Shard(0), Shard(0))] == (Shard(0), Shard(0))
    assert listed[(Shard(1), Replicate())] == (Shard(1), Replicate())  # C broadcasts along M
    assert listed[(Replicate(), Shard(2))] == (Shard(2), Shard(2))
    assert listed[(Shard(2), Shard(1))] == (Partial("sum"), Partial("sum"))
    assert len(listed) == 9


def test_other_shapes_run_replicated_and_in_place_keeps_c_placed():
    assert list(strategies_by_inputs(torch.empty(8, 6), torch.empty(3, 6, 4))) == [(Replicate(), Replicate())]
    C, A, B = torch.empty(8, 4), torch.empty(8, 6), torch.empty(6, 4)
    in_place = torch_vecgemm.distributed._in_place(C, A, B)
    assert [out for out, _ in in_place] == [[]] * len(in_place)  # no output: C carries it
    assert {(c, a, b) for _, [c, a, b, *_] in in_place} == {
        (Replicate(), Replicate(), Replicate()), (Shard(0), Shard(0), Replicate()), (Shard(1), Replicate(), Shard(1)),
        (Partial("sum"), Shard(1), Shard(0)), (Partial("sum"), Partial("sum"), Replicate()),
        (Partial("sum"), Replicate(), Partial("sum")), (Partial("avg"), Partial("avg"), Replicate()),
        (Partial("avg"), Replicate(), Partial("avg"))}


# ---- when the strategies are registered -----------------------------------------------------

CALL_ON_ONE_RANK = """
import sys, tempfile, torch, torch.distributed as dist
import {first}
assert ("torch.distributed.tensor" in sys.modules) == {tensor_first}, "import {first} loaded DTensor"
import {second}
from torch.distributed.tensor import distribute_tensor, Shard
from torch.distributed.device_mesh import init_device_mesh
dist.init_process_group("gloo", store=dist.FileStore(tempfile.mktemp(), 1), rank=0, world_size=1)
A = distribute_tensor(torch.ones(4, 3), init_device_mesh("cpu", (1,)), [Shard(0)])
out = torch.ops.vecgemm.gemm(A, A.t())
assert out.placements == (Shard(0),) and out.full_tensor().eq(3).all(), out
dist.destroy_process_group()
"""


@requires_gloo
@pytest.mark.parametrize("tensor_first", [False, True])
def test_strategies_registered_whichever_is_imported_first(tensor_first):
    """Importing torch_vecgemm does not load torch.distributed.tensor (a third of torch's
    import time), yet the ops take DTensors as soon as it is loaded, before or after."""
    first, second = ("torch.distributed.tensor", "torch_vecgemm")[::-1 if not tensor_first else 1]
    code = CALL_ON_ONE_RANK.format(first=first, second=second, tensor_first=tensor_first)
    child = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
