"""Autotune mode and the tuning cache: what it holds, how a cached choice decides the
kernel, split and stream-K tail, and saving and loading it."""
from __future__ import annotations

import json
import math

import pytest
import torch

import torch_vecgemm
from benchmarks.common import torch_handoff
from conftest import (
    STREAM_K_TILING,
    TILINGS,
    aligned_operand,
    assert_gemm_close,
    block_tile,
    copied_problem,
    force_choice,
    gpu,
    randn,
    requires_kernels,
    run_strict,
    tail_grid,
)


def test_tuning_cache_roundtrip(tmp_path, clean_tuning):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"format": 99, "entries": {}}))
    with pytest.raises(ValueError, match="not a torch_vecgemm tuning cache"):
        torch_vecgemm.load_tuning_cache(path)
    # The formats before the first release are refused whole, saying what to do.
    for old in (1, 2):
        path.write_text(json.dumps({"format": old, "entries": {"b1_m8_n8_k8_rr_v4_d4": {"config": "x", "splits": 3}}}))
        with pytest.raises(ValueError, match=f"format {old}\\).*tune again"):
            torch_vecgemm.load_tuning_cache(path)
    assert torch_vecgemm.tuning_cache() == {}
    if not torch_vecgemm._C.cuda_kernels_built():
        torch_vecgemm.save_tuning_cache(path)
        assert json.loads(path.read_text())["entries"] == {}
        assert torch_vecgemm.load_tuning_cache(path) == 0
        return
    config = TILINGS[0]
    torch_vecgemm._C.add_tuning_entry("b1_m8_n8_k8_rr_v4_d4", config, 2)
    torch_vecgemm._C.add_tuning_entry("b1_m9_n8_k8_rr_v4_d4", config, 1, stream_k=True)
    torch_vecgemm._C.add_tuning_entry("b1_m10_n8_k8_rr_v4_d4", config, 3, torch_faster=True)
    torch_vecgemm.save_tuning_cache(path)
    torch_vecgemm._C.clear_tuning_cache()
    assert torch_vecgemm.tuning_cache() == {}
    assert torch_vecgemm.load_tuning_cache(path) == 3
    assert torch_vecgemm.tuning_cache() == {"b1_m8_n8_k8_rr_v4_d4": (config, 2, False, False),
                                            "b1_m9_n8_k8_rr_v4_d4": (config, 1, True, False),
                                            "b1_m10_n8_k8_rr_v4_d4": (config, 3, False, True)}
    torch_vecgemm._C.clear_tuning_cache()
    # An entry without one of its fields is skipped, the rest loaded.
    path.write_text(json.dumps({"format": 4, "entries": {
        "b1_m8_n8_k8_rr_v4_d4": {"config": config, "splits": 3, "stream_k": False},
        "b1_m9_n8_k8_rr_v4_d4": {"config": config, "splits": 2, "stream_k": False, "torch_faster": True}}}))
    with pytest.warns(torch_vecgemm._tuning.TuningCacheWarning, match="b1_m8_n8_k8_rr_v4_d4"):
        assert torch_vecgemm.load_tuning_cache(path) == 1
    assert torch_vecgemm.tuning_cache() == {"b1_m9_n8_k8_rr_v4_d4": (config, 2, False, True)}
    torch_vecgemm._C.clear_tuning_cache()
    # Format 3 came before torch.matmul was timed: its entries keep the problem on the kernels.
    path.write_text(json.dumps({"format": 3, "entries": {
        "b1_m8_n8_k8_rr_v4_d4": {"config": config, "splits": 3},
        "b1_m9_n8_k8_rr_v4_d4": {"config": config, "splits": 2, "stream_k": False}}}))
    with pytest.warns(torch_vecgemm._tuning.TuningCacheWarning, match="b1_m8_n8_k8_rr_v4_d4"):
        assert torch_vecgemm.load_tuning_cache(path) == 1
    assert torch_vecgemm.tuning_cache() == {"b1_m9_n8_k8_rr_v4_d4": (config, 2, False, False)}
    torch_vecgemm._C.clear_tuning_cache()
    with pytest.raises(RuntimeError, match="unknown .*'no_such_config'"):
        torch_vecgemm._C.add_tuning_entry("b1_m8_n8_k8_rr_v4_d4", "no_such_config", 1)


@gpu
def test_autotune_mode(tmp_path, rng, clean_tuning):
    torch_vecgemm.autotune(True)
    A, B = randn(rng, 384, 200), randn(rng, 200, 320)
    assert_gemm_close(run_strict(A, B), A, B)
    B_odd = randn(rng, 200, 321)  # rows of the output not 16-byte aligned: a choice of its own
    assert_gemm_close(run_strict(A, B_odd), A, B_odd)
    cache = torch_vecgemm.tuning_cache()
    assert any(k.startswith("b1_m384_n320_k200") and k.endswith("_d4") for k in cache), cache
    assert any(k.startswith("b1_m384_n321_k200") and k.endswith("_d1") for k in cache), cache
    # The plan is the tuned choice now.
    kernel, splits, tail, _ = cache[torch_vecgemm._C.tuning_key(A, B)]
    plan = torch_vecgemm.plan(A, B)
    assert (plan.kernel, plan.split_k, plan.stream_k) == (kernel, splits, tail), plan
    assert_gemm_close(run_strict(A, B), A, B)  # cached choice
    torch_vecgemm.save_tuning_cache(tmp_path / "t.json")
    torch_vecgemm.autotune(False)
    torch_vecgemm._C.clear_tuning_cache()
    assert torch_vecgemm.load_tuning_cache(tmp_path / "t.json") >= 1
    assert torch_vecgemm.tuning_cache() == cache
    assert_gemm_close(run_strict(A, B), A, B)


@gpu
def test_autotune_times_torch_and_hands_where_it_won(rng, clean_tuning, torch_handoff_on):
    # Autotune times torch.matmul's product beside the kernels. Where torch's won, the lenient
    # functions hand the problem to it, bit for bit torch's, and the plan says why; the strict
    # op runs the fastest kernel either way. A loaded or added entry decides as a timed one.
    torch_vecgemm.autotune(True)
    A, B = randn(rng, 384, 200), randn(rng, 200, 320)
    assert_gemm_close(torch_vecgemm.mm(A, B), A, B)  # its first call tunes it
    key = torch_vecgemm._C.tuning_key(A, B)
    kernel, splits, tail, torch_faster = torch_vecgemm.tuning_cache()[key]
    assert type(torch_faster) is bool
    assert (torch_vecgemm.plan(A, B).family == "torch") == torch_faster
    for faster in (True, False):
        torch_vecgemm._C.add_tuning_entry(key, kernel, splits, tail, torch_faster=faster)
        plan = torch_vecgemm.plan(A, B)
        assert (plan.family == "torch") == faster, plan
        if faster:
            assert "timed faster (autotune)" in str(plan) and plan.precision == "ieee"
            assert torch.equal(torch_vecgemm.mm(A, B), torch.mm(A, B))
        else:
            assert (plan.kernel, plan.split_k, plan.stream_k) == (kernel, splits, tail), plan
            assert_gemm_close(torch_vecgemm.mm(A, B), A, B)
        assert_gemm_close(run_strict(A, B), A, B)


@gpu
def test_autotune_weighs_torch_against_the_copies_too(rng, clean_tuning, torch_handoff_on):
    # A plan that copies its operands is timed, copies and all, against torch.matmul on the
    # operands as given; the entry is recorded under the key after the copies, and the
    # lenient op follows it, with the right product either way.
    A, B = copied_problem(rng)
    with torch_handoff(False):
        copying = torch_vecgemm.plan(A, B)
    assert copying.copy_a is not None and copying.copy_b is not None, copying
    torch_vecgemm.autotune(True)
    assert_gemm_close(torch_vecgemm.mm(A, B), A, B)
    entry = torch_vecgemm.tuning_cache()[torch_vecgemm._C.tuning_key(A, B)]
    assert (torch_vecgemm.plan(A, B).family == "torch") == entry[3], (entry, torch_vecgemm.plan(A, B))
    assert_gemm_close(torch_vecgemm.mm(A, B), A, B)


@gpu
def test_planning_tunes_nothing(rng, clean_tuning):
    # In autotune mode the plan of a new shape is the model's, and planning times nothing:
    # the first run tunes it.
    torch_vecgemm.autotune(True)
    A, B = randn(rng, 384, 200), randn(rng, 200, 328)
    torch_vecgemm.plan(A, B)
    torch_vecgemm.selected_kernel(A, B)
    assert torch_vecgemm.tuning_cache() == {}
    assert_gemm_close(run_strict(A, B), A, B)
    assert list(torch_vecgemm.tuning_cache()) == [torch_vecgemm._C.tuning_key(A, B)]


@gpu
@pytest.mark.parametrize("stream_k", [True, False])
def test_stream_k_from_the_cache(stream_k, rng, clean_tuning):
    # A cached choice decides the tail, either way, under the auto variant, also where the
    # problem has no whole wave. The shapes come from the device's resident blocks: two
    # whole waves and a partial one (on the H200: 3000^2 x 520, its K padded by a copy), one
    # whole wave and a partial one (2050^2 x 251), less than one wave (1024^2 x 200).
    config = STREAM_K_TILING
    bm, bn, _ = block_tile(config)
    slots = torch_vecgemm._C._testing.resident_blocks(config)
    (tm2, tn2), (tm1, tn1) = tail_grid(slots, 2, 0.18), tail_grid(slots, 1, 0.095)
    few = max(1, math.isqrt(slots // 4))
    cases = [
        (bm * tm2 - 72, bn * tn2 - 72, 520, stream_k),
        (bm * tm1 - 126, bn * tn1 - 126, 251, stream_k),
        (bm * few, bn * few, 200, stream_k),
    ]
    for m, n, k, tail in cases:
        A, B, C = aligned_operand(rng, m, k, "c"), aligned_operand(rng, k, n, "r"), randn(rng, m, n)
        force_choice(A, B, config, 1, stream_k=stream_k)
        plan = torch_vecgemm.plan(A, B)
        assert (plan.kernel, plan.split_k, plan.stream_k) == (config, 1, tail), plan
        assert_gemm_close(run_strict(A, B, C, 0.5, 2.0), A, B, C, 0.5, 2.0)


@gpu
def test_no_tuning_during_graph_capture(rng, clean_tuning):
    # Nothing is timed while a CUDA graph is captured: the capture runs the model's choice,
    # and the shape is tuned by its first run outside.
    A, B = randn(rng, 384, 200), randn(rng, 200, 344)
    out = torch_vecgemm.mm(A, B)  # warm-up outside the graph (autotune off: nothing tuned)
    torch_vecgemm.autotune(True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch_vecgemm.mm(A, B)
    assert torch_vecgemm.tuning_cache() == {}
    A.copy_(randn(rng, *A.shape))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_gemm_close(out, A, B)
    assert_gemm_close(run_strict(A, B), A, B)
    assert list(torch_vecgemm.tuning_cache()) == [torch_vecgemm._C.tuning_key(A, B)]


@gpu
def test_cached_plans_follow_the_tuning_cache(rng, clean_tuning):
    # A repeated shape is planned once; an entry added, the cache cleared and autotune mode
    # each make the next plan of the same shape anew.
    A, B = randn(rng, 96, 300), randn(rng, 300, 200)
    first = torch_vecgemm.plan(A, B)
    assert torch_vecgemm.plan(A, B) == first
    other = next(v for v in TILINGS if v != first.kernel and torch_vecgemm.fallback_reason(A, B, variant=v) is None)
    torch_vecgemm._C.add_tuning_entry(torch_vecgemm._C.tuning_key(A, B), other, 3)
    assert (torch_vecgemm.plan(A, B).kernel, torch_vecgemm.plan(A, B).split_k) == (other, 3)
    assert_gemm_close(torch_vecgemm.mm(A, B), A, B)
    torch_vecgemm._C.clear_tuning_cache()
    assert torch_vecgemm.plan(A, B) == first
    torch_vecgemm.autotune(True)
    assert torch_vecgemm.plan(A, B).autotune_pending
    torch_vecgemm.autotune(False)
    assert torch_vecgemm.plan(A, B) == first

