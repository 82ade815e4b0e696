"""What the planner chooses (torch_vecgemm.plan()): the kernel family and kernel, operand
copies and the orders the kernel then reads, split-K, the stream-K tail where the last wave
is partial, gemv; the describe string (selected_kernel); and that planning allocates,
launches and times nothing. Expectations come from the device (resident blocks, its
profile), never from one GPU's numbers. Skipped, with the reason shown, where there is no
GPU."""
from __future__ import annotations

import re

import pytest
import torch

import torch_vecgemm
from conftest import (
    COPIED_SHAPE,
    GPU,
    LAYOUTS,
    STREAM_K_TILING,
    TILINGS,
    aligned_operand,
    block_tile,
    copied_problem,
    force_choice,
    make_operand,
    measured_profile,
    ops,
    randn,
    tail_grid,
    transposing_problems,
    whole_waves_grid,
)

pytestmark = GPU

ORDER = {"r": "row-major", "c": "column-major"}


def given_orders(A, B):
    """The storage orders of A and B as the planner sees them: "r" or "c" each."""

    def order(t):
        return "r" if t.size(-1) == 1 or t.stride(-1) == 1 else "c"

    return order(A) + order(B)


def check_bookkeeping(plan, A, B):
    """The fields agree with each other: the orders the kernel reads are the copies' where
    there are copies, else the operands' own."""
    given = given_orders(A, B)
    read = "".join(
        "r" if copy == "row-major" else "c" if copy == "column-major" else own
        for copy, own in ((plan.copy_a, given[0]), (plan.copy_b, given[1]))
    )
    assert plan.orders == read, (plan, given)
    assert plan.fallback_reason is None and plan.kernel is not None, plan
    assert str(plan) == torch_vecgemm.selected_kernel(A, B), plan


# ---- resident blocks ------------------------------------------------------------------------------


def test_resident_blocks():
    # SMs x blocks per SM, for every tiling.
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    for variant in TILINGS:
        slots = torch_vecgemm._C._testing.resident_blocks(variant)
        assert slots >= sms and slots % sms == 0, (variant, slots, sms)
    with pytest.raises(RuntimeError, match="no_such_config"):
        torch_vecgemm._C._testing.resident_blocks("no_such_config")


# ---- families and kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["auto", "vectorized"] + TILINGS)
@pytest.mark.parametrize("layout", ["rr", "cr"])
def test_plan_of_each_variant(variant, layout, rng):
    # A named variant runs its own kernel on the operands as they are; auto picks a tiling.
    A, B = aligned_operand(rng, 256, 64, layout[0]), aligned_operand(rng, 64, 256, layout[1])
    if variant == "vectorized" and layout != "rr":
        pytest.skip("the vectorized kernel reads row-major operands only (test_vectorized_rules)")
    plan = torch_vecgemm.plan(A, B, variant=variant)
    assert plan == torch_vecgemm.plan(A, B, randn(rng, 256), variant=variant)  # C does not change the plan
    assert str(plan) == torch_vecgemm.selected_kernel(A, B, variant=variant)
    assert plan.fallback_reason is None and plan.copy_a is None and plan.copy_b is None, plan
    assert plan.orders == given_orders(A, B), plan
    if variant == "vectorized":
        assert (plan.family, plan.kernel, plan.split_k, plan.stream_k) == ("vectorized", "vectorized", 1, False)
    elif variant == "auto":
        assert plan.kernel in TILINGS and plan.family == plan.kernel.split("_")[0], plan
    else:
        # The family is the name's first word: tiled_* register-staged, async_* cp.async.
        assert plan.kernel == variant and plan.family == variant.split("_")[0], plan
        assert plan.family in ("tiled", "async")


@pytest.mark.parametrize(
    "m,n,a_order,b_order,gemv",
    [
        (1, 300, "r", "c", True), (1, 300, "c", "c", True),  # M = 1, B column-major
        (300, 1, "r", "r", True), (300, 1, "r", "c", True),  # N = 1, A row-major
        (1, 300, "r", "r", False), (300, 1, "c", "r", False),  # the other orders: a tiling
        (2, 300, "r", "c", True), (4, 300, "r", "c", True), (300, 3, "r", "c", True),  # a few vectors
        (5, 300, "r", "c", False), (300, 5, "r", "c", False),  # more: a tiling
        (2, 300, "c", "c", False), (300, 2, "r", "r", False),  # vectors not contiguous
    ],
)
def test_gemv_planned(m, n, a_order, b_order, gemv, rng):
    k = 77
    A, B = make_operand(rng, m, k, a_order), make_operand(rng, k, n, b_order)
    plan = torch_vecgemm.plan(A, B)
    if gemv:
        assert (plan.family, plan.kernel, plan.split_k, plan.stream_k, plan.copy_a, plan.copy_b) == (
            "gemv", "gemv", 1, False, None, None), plan
        assert str(plan) == "gemv" and torch_vecgemm.plan(A, B, variant="gemv") == plan
    else:
        assert plan.family in ("tiled", "async") and plan.kernel in TILINGS, plan
        refused = torch_vecgemm.plan(A, B, variant="gemv")
        assert refused.family == "fallback" and refused.kernel is None, refused
        assert "gemv kernel takes M <= 4" in refused.fallback_reason


# ---- operand copies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m,n,k,offset,must_copy",
    [
        # COPIED_SHAPE. (An odd K alone is the model's call: the cp.async rows take it as
        # given at little cost.)
        (*COPIED_SHAPE, 1, "AB"),  # K odd: both copied, K zero-padded to a multiple of 16
        (*COPIED_SHAPE[:2], COPIED_SHAPE[2] + 1, 1, "A"),  # A misaligned: copied, aligned
        (100, 100, 1023, 1, ""),  # too small for a copy to pay
    ],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_copies_planned(m, n, k, offset, must_copy, layout, rng):
    A = make_operand(rng, m, k, layout[0], offset=offset)
    B = aligned_operand(rng, k, n, layout[1])
    plan = torch_vecgemm.plan(A, B)
    check_bookkeeping(plan, A, B)
    copied = "".join(x for x, copy in (("A", plan.copy_a), ("B", plan.copy_b)) if copy is not None)
    if must_copy:
        assert set(must_copy) <= set(copied), plan
    else:
        assert copied == "", plan
    # Asked for by name, a tiling reads the operands as they are: the copies are auto's.
    for variant in TILINGS:
        if torch_vecgemm.fallback_reason(A, B, variant=variant) is None:
            named = torch_vecgemm.plan(A, B, variant=variant)
            assert (named.copy_a, named.copy_b, named.orders) == (None, None, layout), named


# On a measured profile (the H200's) column-major A with row-major B runs fastest, and at 4096
# a copy of each operand in the other order pays for its pass.
REORDERED_AT_4096 = {
    "rr": ("column-major", None),
    "rc": ("column-major", "row-major"),
    "cr": (None, None),
    "cc": (None, "row-major"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reordered_copies_planned(layout, rng):
    n = 4096
    A, B = make_operand(rng, n, n, layout[0]), make_operand(rng, n, n, layout[1])
    plan = torch_vecgemm.plan(A, B)
    check_bookkeeping(plan, A, B)
    # The neutral profile rates every order alike: a copy for the order alone never pays.
    expected = REORDERED_AT_4096[layout] if measured_profile() else (None, None)
    assert (plan.copy_a, plan.copy_b) == expected, plan


@pytest.mark.parametrize("batch", [None, 3, "broadcast"])
def test_transposing_copies_planned(batch, rng):
    # K odd: both operands are copied whatever their order, into the orders the profile
    # rates fastest: on a measured profile at least one of the four orders changes.
    reordered = []
    for layout, A, B in transposing_problems(rng, batch):
        plan = torch_vecgemm.plan(A, B)
        check_bookkeeping(plan, A, B)
        assert plan.copy_a is not None and plan.copy_b is not None, plan
        if plan.orders != layout:
            reordered.append(layout)
    assert bool(reordered) == measured_profile(), reordered


# ---- split-K ---------------------------------------------------------------------------------------


def test_split_k_planned(rng):
    # Few output tiles and a long K: split. Many waves of tiles: never.
    A, B = randn(rng, 32, 8192), randn(rng, 8192, 64)
    plan = torch_vecgemm.plan(A, B)
    assert plan.split_k > 1 and not plan.stream_k, plan
    assert f" split-k {plan.split_k}" in str(plan)
    A, B = randn(rng, 4096, 4096), randn(rng, 4096, 4096)
    assert torch_vecgemm.plan(A, B).split_k == 1


@pytest.mark.parametrize("m,n,k", [(32, 64, 8192), (1000, 1000, 1000), (4096, 4096, 4096)])
def test_model_ranking_is_the_plan(m, n, k, rng, clean_tuning):
    # The probes' view of the model is the planner's: its first candidate is what auto runs,
    # times ascend, and every tiling named can take the problem.
    A, B = randn(rng, m, k), randn(rng, k, n)
    ranking = torch_vecgemm._C._testing.model_ranking(torch_vecgemm._C.tuning_key(A, B))
    times = [ns for ns, *_ in ranking]
    assert times == sorted(times) and times[0] > 0, ranking[:3]
    plan = torch_vecgemm.plan(A, B)
    assert ranking[0][1:] == (plan.kernel, plan.split_k, plan.stream_k), (ranking[0], plan)
    assert {config for _, config, _, _ in ranking} <= set(TILINGS)
    with pytest.raises(RuntimeError, match="not a tuning key"):
        torch_vecgemm._C._testing.model_ranking("m32_n64")


# ---- the stream-K tail ------------------------------------------------------------------------------


def tail_problem(rng, variant, grid, k=64, batch=None):
    """Aligned cr operands (nothing to copy) of grid = (tiles in M, tiles in N) tiles."""
    bm, bn, _ = block_tile(variant)
    m, n = bm * grid[0], bn * grid[1]
    return aligned_operand(rng, m, k, "c", batch), aligned_operand(rng, k, n, "r", batch)


def test_stream_k_wherever_the_last_wave_is_partial(rng, clean_tuning):
    # The tail asked for through the cache runs wherever the tiles leave the last wave of
    # the device's resident blocks partial, after whole waves or alone, unbatched and
    # unsplit.
    variant = STREAM_K_TILING
    slots = torch_vecgemm._C._testing.resident_blocks(variant)
    few = whole_waves_grid(slots // 2, 1) if slots > 1 else (1, 1)
    cases = [  # grid, batch, splits, tail
        (tail_grid(slots, 1, 0.1), None, 1, True),
        (tail_grid(slots, 2, 0.5), None, 1, True),
        (tail_grid(slots, 0, 0.7), None, 1, True),  # one partial wave alone
        (few, None, 1, slots > 1),  # half a wave
        (whole_waves_grid(slots, 1), None, 1, False),  # whole waves only
        (whole_waves_grid(slots, 2), None, 1, False),
        (tail_grid(slots, 1, 0.1), 2, 1, False),  # batched
        (tail_grid(slots, 1, 0.1), None, 2, False),  # split
    ]
    for grid, batch, splits, tail in cases:
        A, B = tail_problem(rng, variant, grid, batch=batch)
        force_choice(A, B, variant, splits, stream_k=True)
        plan = torch_vecgemm.plan(A, B)
        assert (plan.kernel, plan.split_k, plan.stream_k) == (variant, splits, tail), (grid, batch, plan)
        assert (plan.copy_a, plan.copy_b, plan.orders) == (None, None, "cr"), plan
        assert ("stream-K tail" in str(plan)) == tail


def test_stream_k_tilings(rng, clean_tuning):
    # Which tilings run a tail is the library's (kernel_configs.h): asked for through the
    # cache on a partial wave of each tiling's own resident blocks, the stream-K tiling
    # takes it, and every tiling stays the cached kernel either way.
    with_tail = []
    for variant in TILINGS:
        slots = torch_vecgemm._C._testing.resident_blocks(variant)
        A, B = tail_problem(rng, variant, tail_grid(slots, 1, 0.1), k=32)
        force_choice(A, B, variant, 1, stream_k=True)
        plan = torch_vecgemm.plan(A, B)
        assert (plan.kernel, plan.split_k) == (variant, 1), plan
        if plan.stream_k:
            with_tail.append(variant)
    assert STREAM_K_TILING in with_tail, with_tail


# ---- the describe string ------------------------------------------------------------------------------

DESCRIBED = re.compile(
    r"(gemv|vectorized|fallback: .+|(tiled|async)_\w+( split-k \d+)?( stream-K tail)?"
    r"(, copy of( A( \((row|column)-major\))?)?( B( \((row|column)-major\))?)?)?)"
)


def described(plan, given):
    """selected_kernel's text of a plan, from its fields: the kernel, " split-k N", " stream-K
    tail", then ", copy of" and the operands copied, each with its new order where it changed."""
    if plan.family == "fallback":
        return "fallback: " + plan.fallback_reason
    if plan.family in ("gemv", "vectorized"):
        return plan.kernel
    text = plan.kernel + (f" split-k {plan.split_k}" if plan.split_k > 1 else "")
    text += " stream-K tail" if plan.stream_k else ""
    copied = ""
    for name, copy, own in (("A", plan.copy_a, given[0]), ("B", plan.copy_b, given[1])):
        if copy is not None:
            copied += f" {name}" + ("" if copy == ORDER[own] else f" ({copy})")
    return text + (", copy of" + copied if copied else "")


def test_describe_string(rng, clean_tuning):
    slots = torch_vecgemm._C._testing.resident_blocks(STREAM_K_TILING)
    tail_a, tail_b = tail_problem(rng, STREAM_K_TILING, tail_grid(slots, 1, 0.1))
    force_choice(tail_a, tail_b, STREAM_K_TILING, 1, stream_k=True)
    problems = [
        (make_operand(rng, 1, 300, "r"), make_operand(rng, 300, 200, "c"), "auto"),  # gemv
        (randn(rng, 256, 64), randn(rng, 64, 128), "vectorized"),
        (randn(rng, 130, 64), randn(rng, 64, 128), "vectorized"),  # fallback: M not a multiple of 128
        (randn(rng, 200, 72), randn(rng, 72, 136), "auto"),
        (randn(rng, 32, 8192), randn(rng, 8192, 64), "auto"),  # split-K
        (tail_a, tail_b, "auto"),  # the stream-K tail
        (*copied_problem(rng), "auto"),  # copies
        (make_operand(rng, 4096, 4096, "r"), make_operand(rng, 4096, 4096, "c"), "auto"),  # copies for the order
    ]
    seen = set()
    for A, B, variant in problems:
        plan = torch_vecgemm.plan(A, B, variant=variant)
        text = torch_vecgemm.selected_kernel(A, B, variant=variant)
        assert str(plan) == text and DESCRIBED.fullmatch(text), text
        assert text == described(plan, given_orders(A, B)), (text, plan)
        seen |= {plan.family, "split" if plan.split_k > 1 else "", "tail" if plan.stream_k else "",
                 "copies" if plan.copy_a or plan.copy_b else ""}
    assert {"gemv", "vectorized", "fallback", "split", "tail", "copies"} <= seen, seen


# ---- planning is pure ------------------------------------------------------------------------------------


def cuda_kernels_launched(fn):
    """The CUDA kernels (and copies) fn launched, as the profiler saw them."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [
        e.name
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and getattr(e, "activity_type", None) not in ("overhead", "gpu_user_annotation")
    ]


def test_planning_allocates_and_launches_nothing(rng, clean_tuning):
    # Plans with copies, a split, the stream-K tail, and a new shape in autotune mode.
    slots = torch_vecgemm._C._testing.resident_blocks(STREAM_K_TILING)
    tail_a, tail_b = tail_problem(rng, STREAM_K_TILING, tail_grid(slots, 1, 0.1))
    force_choice(tail_a, tail_b, STREAM_K_TILING, 1, stream_k=True)
    problems = [
        copied_problem(rng),
        (randn(rng, 32, 8192), randn(rng, 8192, 64)),
        (tail_a, tail_b),
        (randn(rng, 384, 200), randn(rng, 200, 336)),
    ]
    torch_vecgemm.autotune(True)

    def plan_all():
        for A, B in problems:
            torch_vecgemm.selected_kernel(A, B)
            torch_vecgemm.fallback_reason(A, B)
        return [torch_vecgemm.plan(A, B) for A, B in problems]

    torch.cuda.synchronize()
    allocations = torch.cuda.memory_stats()["allocation.all.allocated"]
    plans = plan_all()  # the first plans of these shapes: the model ranks the candidates
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == allocations
    assert any(p.copy_a for p in plans) and any(p.split_k > 1 for p in plans) and any(p.stream_k for p in plans), plans
    assert cuda_kernels_launched(plan_all) == []
    assert torch_vecgemm.tuning_cache() == {torch_vecgemm._C.tuning_key(tail_a, tail_b): (STREAM_K_TILING, 1, True, False)}
    # The checks see what there is to see: running a product allocates and launches.
    assert cuda_kernels_launched(lambda: ops.sgemm(*problems[1]))
    assert torch.cuda.memory_stats()["allocation.all.allocated"] > allocations


@pytest.mark.parametrize("m,n,k", [(5, 3, 0), (0, 3, 4), (5, 0, 4), (0, 0, 0)])
def test_empty_products_plan_no_kernel(m, n, k, rng):
    A, B = randn(rng, m, k), randn(rng, k, n)
    plan = torch_vecgemm.plan(A, B)
    assert (plan.family, plan.kernel, str(plan)) == ("empty", None, "empty product"), plan
    C = randn(rng, m, n)
    torch.testing.assert_close(ops.sgemm(A, B, C, 2.0, 0.5), 0.5 * C if k == 0 else C)  # C is empty otherwise
