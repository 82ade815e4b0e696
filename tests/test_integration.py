"""The library inside a program: CUDA graph capture, memory nearly full (the copies and
workspaces given up), and more than 2^31 elements. Skipped, with the reason shown, where
there is no GPU; `-m "not slow"` skips the large case."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import torch_vecgemm
from conftest import COPIED_SHAPE, GPU, TF32X3_KERNELS, assert_gemm_close, measured_profile, ops, poison_allocator, randn

pytestmark = GPU


@pytest.mark.parametrize("precision,m,k,n", [("auto", 256, 96, 200), ("3xtf32", 256, 96, 200), ("3xtf32", 48, 4096, 40)])
def test_cuda_graph_capture(precision, m, k, n, rng):
    # 3xTF32 too, on its kernels by name (auto gives these small problems to fp32): its
    # launcher sets the kernel's shared-memory attribute on every launch, and its split-K
    # workspace comes from the graph's pool.
    A, B = randn(rng, m, k), randn(rng, k, n)
    rows = [v for v in TF32X3_KERNELS if torch_vecgemm.fallback_reason(A, B, variant=v) is None]
    calls = [lambda: torch_vecgemm.mm(A, B, precision=precision)]
    if precision == "3xtf32":
        calls += [lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, rows[0], precision)]
    for call in calls:
        out = call()  # warm-up outside the graph
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = call()
        A.copy_(randn(rng, m, k))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_gemm_close(out, A, B)


# Run in a fresh process: there the caching allocator holds nothing but this problem, so a
# limit just above what it holds stops every new allocation (in this process, free space
# left in segments by earlier tests could serve the copy or the workspace).
MEMORY_LIMIT_CHILD = """
import sys
import torch
import torch_vecgemm
from conftest import Rng, assert_gemm_close, make_operand, poison_allocator, randn

m, n, k = map(int, sys.argv[1:4])
layout, offset, planned, seed, precision = sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7]), sys.argv[8]
rng = Rng(seed)
torch_vecgemm._C._testing.set_torch_handoff(False)  # the kernels' plan, as the suite runs it
A, B, C = make_operand(rng, m, k, layout[0], offset=offset), make_operand(rng, k, n, layout[1]), randn(rng, m, n)
plan = torch_vecgemm.plan(A, B, precision=precision)
made = {"copy of A": plan.copy_a is not None, "copies of A and B": plan.copy_a is not None and plan.copy_b is not None,
        "split-k": plan.split_k > 1, "transposed": plan.transposed}[planned]
assert made, "the plan has no " + planned + ": " + str(plan)
torch.cuda.synchronize()
torch.cuda.empty_cache()
poison_allocator((m, n))  # the output's block, cached: the limit leaves room for it alone
total = torch.cuda.get_device_properties(A.device).total_memory
ooms = torch.cuda.memory_stats()["num_ooms"]
torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + (1 << 20)) / total)
out = torch.ops.vecgemm.sgemm(A, B, C, 1.5, -0.5, "auto", precision)
torch.cuda.synchronize()
torch.cuda.set_per_process_memory_fraction(1.0)
assert torch.cuda.memory_stats()["num_ooms"] > ooms, "the limit did not stop the planned allocation: " + str(plan)
assert_gemm_close(out, A, B, C, 1.5, -0.5)
"""


@pytest.mark.parametrize(
    "m,n,k,layout,offset,planned",
    [
        (4096, 4096, 2048, "rr", 0, "copy of A"),  # a copy for the order alone (measured profiles only)
        (*COPIED_SHAPE, "rc", 0, "copies of A and B"),  # copies that pad K (both operands)
        (4096, 4096, 2048, "cr", 1, "copy of A"),  # a copy of a misaligned A
        (64, 4096, 4096, "rr", 0, "split-k"),  # a split-K workspace
        # 3xTF32 on the transpose: its split's workspace (16 MB, past what is left of the
        # output's segment: the caching allocator rounds a 1-10 MB block up to 20 MB)
        (64, 32768, 4100, "rc", 0, "transposed"),
    ],
)
def test_memory_limit(m, n, k, layout, offset, planned, seed):
    # Copies and split-K workspaces are for speed only: where the caching allocator cannot
    # give them, auto runs on the operands as they are, unsplit (a product planned on its
    # transpose: as given), with the same result.
    if offset == 0 and k % 16 == 0 and planned != "split-k" and not measured_profile():
        pytest.skip("the neutral profile makes no copy for the storage order alone")
    precision = "3xtf32" if planned == "transposed" else "ieee"
    if planned == "transposed" and (not measured_profile() or "tf32x3_128x64_wgmma" not in TF32X3_KERNELS):
        pytest.skip("the transpose is planned on the wgmma rows, priced by the H200's profile")
    tests = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([os.path.dirname(tests), tests, os.environ.get("PYTHONPATH", "")])
    args = [str(x) for x in (m, n, k, layout, offset, planned, seed, precision)]
    child = subprocess.run(
        [sys.executable, "-c", MEMORY_LIMIT_CHILD, *args],
        env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stdout + child.stderr


@pytest.mark.slow
def test_more_than_2_31_elements(rng):
    # A has 69632 * 32768 = 2.28e9 elements: offsets past 2^31 must be 64-bit.
    m, k, n = 69632, 32768, 256
    A = rng.uniform(m, k)
    B = rng.uniform(k, n)
    poison_allocator((m, n))
    out = ops.sgemm(A, B)
    rows = torch.cat([torch.arange(0, 64), torch.arange(m - 64, m), rng.randint(0, m, (128,), device="cpu")]).cuda()
    assert torch.isfinite(out).all()
    assert_gemm_close(out[rows], A[rows], B)
    Bt = B.t().contiguous().t()  # column-major B as well
    out2 = ops.sgemm(A, Bt)
    assert_gemm_close(out2[rows], A[rows], Bt)


def test_a_product_handed_to_torch_is_torchs_own(torch_handoff_on, rng):
    """Where the cost model predicts torch.matmul faster (the H200's rule: the sweep's
    mid-size problems; x @ W with W stored (in, out), a matrix-vector product gemv does not
    serve), the lenient op runs torch's own product, bit for bit, and says so in its plan;
    the strict op still runs the kernels, and with the hand-off off so does the lenient op.
    Under CUDA graph capture the handed call is torch's kernel, captured."""
    from benchmarks.common import torch_handoff

    if torch_vecgemm._C._testing.profile_name(torch.cuda.current_device()) != "NVIDIA H200":
        pytest.skip("the hand-off rule is the H200 profile's; other GPUs have none")
    handed = 0
    for m, n, k in ((1523, 1290, 24), (2400, 262, 26), (1000, 1000, 256), (1, 4096, 4096)):
        A, B = randn(rng, m, k), randn(rng, k, n)
        plan = torch_vecgemm.plan(A, B)
        if plan.family != "torch":
            assert m != 1, plan  # the matrix-vector product is always handed
            continue
        handed += 1
        assert "torch.matmul is predicted faster" in str(plan) and plan.precision == "ieee"
        assert torch.equal(torch_vecgemm.mm(A, B), torch.mm(A, B))
        assert_gemm_close(torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, "auto", "ieee"), A, B)
        with torch_handoff(False):
            assert torch_vecgemm.plan(A, B).family in ("tiled", "async")
            assert_gemm_close(torch_vecgemm.mm(A, B), A, B)
        out = torch_vecgemm.mm(A, B)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch_vecgemm.mm(A, B)
        A.copy_(randn(rng, m, k))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, torch.mm(A, B))
    assert handed > 1, "the H200's rule hands none of the sweep's problems it was fitted to hand"
