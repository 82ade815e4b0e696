"""The planner without a GPU (csrc/device_facts.h): a GPU's facts given as data, its plans
made on any machine with the CUDA build, CI's included. The decisions the rules promise
(which 3xTF32 row, where 3xTF32 is declined, which profile prices a GPU) are tested on
facts built here; the plans of record (benchmarks/records/h200/) against the H200's facts
recorded there.
"""
from __future__ import annotations

import json
import os
import re

import pytest

import torch_vecgemm
from benchmarks import records
from benchmarks.probes.tf32x3_kernel_split import FORCING, MADE
from conftest import (
    TF32X3_KERNELS,
    TILINGS,
    m_major_a_priced_profile,
    passed_operands,
    prices_m_major_a,
    requires_kernels,
    split_priced_profile,
)

pytestmark = requires_kernels
_testing = torch_vecgemm._C._testing
RECORDS = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "records", "h200")
WGMMA = "tf32x3_128x128_wgmma"
WGMMA_64 = "tf32x3_128x64_wgmma"


def _row_blocks(row):
    """A 3xTF32 row's resident blocks as on the H200: one of a 128 x 128 tile or of the wgmma
    kernel (192 KB of stages), four of the narrow-side kernel, two of the others."""
    return 1 if "128x128" in row or row.endswith("_wgmma") else 4 if "_few_" in row else 2


def facts(capability=90, sms=132, violations=None, name="facts built by the test"):
    """Facts of a GPU on which every tiled instance keeps two blocks an SM and each 3xTF32
    row its H200 count, but the rows `violations` names (row -> reason), which cannot run."""
    violations = violations or {}
    return dict(
        name=name, sms=sms, capability=capability,
        tiled=[[c, o, v, 2] for c in TILINGS for o in ("rr", "rc", "cr", "cc") for v in (True, False)],
        tf32x3=[[r, 0 if r in violations else _row_blocks(r), violations.get(r)] for r in TF32X3_KERNELS],
    )


@pytest.fixture(scope="module")
def h200_like():
    return _testing.add_recorded_device(facts())


def plan(device, m, n, k, orders="rr", precision="ieee", aligned=True):
    return _testing.recorded_plan(device, m, n, k, orders, aligned, aligned, precision)


def test_a_named_kernel_is_planned_and_priced_as_the_strict_op_would(h200_like):
    # How the model prices a kernel it did not choose: the strict op's plan on that kernel.
    # Each row on a shape it takes, and the narrow-side rows refusing what they do not.
    few_columns = ("tf32x3_few_cols_mma", WGMMA_64)
    for row in TF32X3_KERNELS:
        m, n = (4096, 32) if row in few_columns else (32, 4096)
        p = _testing.recorded_plan(h200_like, m, n, 4096, "rc", True, True, variant=row)
        assert (p["family"], p["kernel"], p["precision"]) == ("tf32x3", row, "3xtf32"), p
        assert p["predicted_us"] > 0 and p["split_k"] >= 1, p
    with pytest.raises(RuntimeError, match="takes at most 32 rows"):
        _testing.recorded_plan(h200_like, 64, 4096, 4096, "rc", True, True, variant="tf32x3_few_rows_mma")
    if WGMMA_64 in TF32X3_KERNELS:
        with pytest.raises(RuntimeError, match="takes at most 64 columns"):
            _testing.recorded_plan(h200_like, 4096, 65, 4096, "rc", True, True, variant=WGMMA_64)
    p = _testing.recorded_plan(h200_like, 512, 512, 512, "rr", True, True, variant=TILINGS[0])
    assert p["family"] in ("tiled", "async") and p["kernel"] == TILINGS[0], p
    with pytest.raises(RuntimeError, match="unknown variant 'no_such_kernel'"):
        _testing.recorded_plan(h200_like, 64, 64, 64, "rr", True, True, variant="no_such_kernel")
    if WGMMA in TF32X3_KERNELS:
        ampere = _testing.add_recorded_device(facts(80, 108, {WGMMA: "needs sm_90a"}))
        with pytest.raises(RuntimeError, match="needs sm_90a"):
            _testing.recorded_plan(ampere, 64, 64, 64, "rr", True, True, variant=WGMMA)


def test_ieee_plans_a_tiling_and_prices_it(h200_like):
    p = plan(h200_like, 4096, 4096, 4096)
    assert p["family"] in ("tiled", "async") and p["kernel"] in TILINGS
    assert p["precision"] == "ieee" and p["predicted_us"] > 0
    assert plan(h200_like, 4096, 4096, 4096) == p  # pure: the same facts, the same plan


@pytest.mark.skipif(WGMMA not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_3xtf32_takes_wgmma_where_it_runs_and_mma_sync_elsewhere(h200_like):
    assert plan(h200_like, 4096, 4096, 4096, precision="3xtf32")["kernel"] == WGMMA
    ampere = _testing.add_recorded_device(facts(80, 108, {WGMMA: "needs sm_90a"}))
    p = plan(ampere, 4096, 4096, 4096, precision="3xtf32")
    assert p["family"] == "tf32x3" and p["kernel"] != WGMMA and p["kernel"].endswith("_mma")
    # On the H200's profile mma.sync runs 3xTF32 at ~1.1x cuBLAS fp32 (step 31): a build
    # without the wgmma row gives such products to fp32 rather than run them slower.
    no_wgmma = _testing.add_recorded_device(facts(90, 132, {WGMMA: "not built"}))
    assert "not predicted faster" in plan(no_wgmma, 4096, 4096, 4096, precision="3xtf32")["precision_fallback"]


@pytest.mark.skipif(WGMMA_64 not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_tall_skinny_products_take_the_64_wide_wgmma_tiles(h200_like):
    """N <= 64: the 128-wide tiles would compute half padding, so the 64-wide ones run the
    model's tall-skinny shape (16384 x 64 x 4096, which the 128-wide tiles left to fp32) and
    the ones a little narrower; wider, the 128-wide tiles, as before."""
    for n in (64, 48):
        p = plan(h200_like, 16384, n, 4096, precision="3xtf32")
        assert (p["family"], p["kernel"]) == ("tf32x3", WGMMA_64), p
    assert plan(h200_like, 16384, 128, 4096, precision="3xtf32")["kernel"] == WGMMA


@pytest.mark.skipif(WGMMA_64 not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_few_rows_run_on_the_transpose(h200_like):
    """M <= 64 < N: C^T = B^T A^T fills the wgmma row's 128-row tiles that the problem as
    given would fill half of at most, in two or more K slices (the transposing reduction
    writes D). The weight is the kernel's A, its parts made in registers: K-contiguous (x @
    W.T: rc, cc) from K-major tiles; stored (in, out) (x @ W: rr, cr) from M-major ones,
    where the profile prices those (a_split_m_major_ns), and without that figure it would
    go through the split pass, which costs more than the transpose gains. The narrow-side
    kernel keeps 32 rows and fewer; a named row plans the problem as given."""
    priced, unpriced = _m_major_a_device(True), _m_major_a_device(False)
    kernel_orders = {"rc": "rc", "cc": "rr", "rr": "cc", "cr": "cr"}  # B^T's and A^T's
    for m in (64, 48, 33):
        for device, orders in [(d, o) for d in (h200_like, priced, unpriced) for o in ("rc", "cc")] + [
                (priced, "rr"), (priced, "cr")]:
            p = plan(device, m, 4096, 4096, orders, precision="3xtf32")
            assert (p["family"], p["kernel"], p["transposed"]) == ("tf32x3", WGMMA_64, True), p
            assert p["split_k"] >= 2 and "on the transpose" in p["description"], p
            assert "A" not in passed_operands(p["description"]), p
            assert p["orders"] == kernel_orders[orders], p
        for orders in ("rr", "cr"):
            assert not plan(unpriced, m, 4096, 4096, orders, precision="3xtf32")["transposed"]
            shipped = plan(h200_like, m, 4096, 4096, orders, precision="3xtf32")
            assert shipped["transposed"] == prices_m_major_a(_h200_profile()), shipped
    assert plan(h200_like, 64, 11008, 4096, "rc", precision="3xtf32")["transposed"]
    assert plan(h200_like, 32, 4096, 4096, "rc", precision="3xtf32")["kernel"] == "tf32x3_few_rows_mma"
    assert not plan(h200_like, 4096, 4096, 4096, "rc", precision="3xtf32")["transposed"]
    assert not plan(h200_like, 64, 4096, 4096, "rc")["transposed"]  # IEEE
    named = _testing.recorded_plan(h200_like, 64, 4096, 4096, "rc", True, True, variant=WGMMA)
    assert not named["transposed"] and named["kernel"] == WGMMA, named


@pytest.mark.skipif(WGMMA_64 not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_facts_that_predate_a_row_plan_without_it():
    """Facts recorded before a row existed leave it out: on that device the row does not
    run, as where it was not built, so the plans of record stay the plans made then."""
    older = facts(name="facts from before the 64-wide tiles")
    older["tf32x3"] = [entry for entry in older["tf32x3"] if entry[0] != WGMMA_64]
    device = _testing.add_recorded_device(older)
    assert plan(device, 16384, 64, 4096, precision="3xtf32")["kernel"] != WGMMA_64
    with pytest.raises(RuntimeError, match="predate it"):
        _testing.recorded_plan(device, 16384, 64, 4096, "rc", True, True, variant=WGMMA_64)
    unknown = facts()
    unknown["tf32x3"].append(["tf32x3_no_such_row", 1, None])
    with pytest.raises(RuntimeError, match="no 3xTF32 row 'tf32x3_no_such_row' in this build"):
        _testing.add_recorded_device(unknown)


def test_3xtf32_declined_below_its_accuracy_floor(h200_like):
    # 64 products a sum: fp32's error is below 3xTF32's floor (plan.cpp, tf32x3_declined).
    p = plan(h200_like, 2048, 2048, 64, precision="3xtf32")
    assert p["precision"] == "ieee" and "less accurate" in p["precision_fallback"]
    assert p["family"] == "torch"  # the lenient op hands a declined product to torch


@pytest.mark.skipif(WGMMA not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_each_row_serves_from_its_own_floor(h200_like):
    """fp32 sums of 256 products: within the wgmma kernel's floor (128), under the mma.sync
    kernels' (512, tf32x3_rows.h), so a GPU without wgmma keeps such a product in fp32."""
    assert plan(h200_like, 4096, 4096, 256, "rc", precision="3xtf32")["kernel"] == WGMMA
    ampere = _testing.add_recorded_device(facts(80, 108, {WGMMA: "needs sm_90a"}))
    p = plan(ampere, 4096, 4096, 256, "rc", precision="3xtf32")
    assert p["precision"] == "ieee" and "below 512" in p["precision_fallback"], p
    assert "below 128" in plan(h200_like, 2048, 2048, 64, precision="3xtf32")["precision_fallback"]


@pytest.mark.skipif("tf32x3_few_rows_mma" not in TF32X3_KERNELS, reason="no narrow-side rows in this build")
def test_the_narrow_side_rows_serve_from_the_wgmma_kernels_floor(h200_like):
    """The narrow-side kernel keeps a chunk's small and big terms in accumulators of their
    own, so it serves from the wgmma kernel's floor (128 products, tf32x3_rows.h): decode
    at 4096 x 4096, whose IEEE plan sums 256 products a chain, runs on it."""
    for m, n, row in ((8, 4096, "tf32x3_few_rows_mma"), (32, 4096, "tf32x3_few_rows_mma"),
                      (4096, 8, "tf32x3_few_cols_mma")):
        p = plan(h200_like, m, n, 4096, "rc", precision="3xtf32")
        assert p["kernel"] == row and p["precision"] == "3xtf32", p
    assert "below 128" in plan(h200_like, 8, 4096, 100, "rc", precision="3xtf32")["precision_fallback"]


def _h200_profile():
    from torch_vecgemm import _profiles

    return json.loads((_profiles.FOLDER / "h200.json").read_text())


def _priced_device(doc, capability, sms):
    """A recorded GPU of this capability and SM count, priced with the profile `doc` (which
    must serve it); the profile takes the place of the last one of its name or GPUs."""
    from torch_vecgemm import _C, _profiles

    _C._add_device_profile(_profiles.as_planner_data(doc))
    return _testing.add_recorded_device(facts(capability, sms))


def _m_major_a_device(priced):
    """A recorded sm_90 GPU (130 or 131 SMs) priced with the H200's figures, its wgmma rows'
    a_split_m_major_ns as conftest.m_major_a_priced_profile sets it, or left out (a
    column-major A then goes through the split pass)."""
    sms = 130 if priced else 131
    changes = dict(name=f"M-major A priced: {priced}", serves={"capability": 90, "sms": sms})
    doc = _h200_profile()
    if priced:
        doc = m_major_a_priced_profile(doc, **changes)
    else:
        for row in doc["tf32x3"].values():
            if isinstance(row, dict):
                row.pop("a_split_m_major_ns", None)
        doc.update(changes)
    return _priced_device(doc, 90, sms)


def _split_priced_device(a_tiles, b_tiles, sms):
    """A recorded sm_90 GPU of its own SM count, priced with the H200's figures but the wgmma
    row's own-split figures (conftest.split_priced_profile)."""
    doc = split_priced_profile(_h200_profile(), a_tiles, b_tiles, name=f"wgmma splits priced {a_tiles}, {b_tiles}",
                               serves={"capability": 90, "sms": sms})
    return _priced_device(doc, 90, sms)


@pytest.mark.skipif(WGMMA not in TF32X3_KERNELS, reason="no wgmma row in this build")
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (512, 11008, 4096), (8192, 3072, 768)])
def test_the_wgmma_kernel_splits_what_it_can_read_where_priced_below_the_pass(m, n, k):
    """The kernel makes an operand's parts itself only where it can read the operand (A in
    either order, its parts made in registers; B K-contiguous, since its parts stay in shared
    memory for wgmma, whose tf32 operands are K-major there), its lines 16-byte aligned (TMA's
    rule), and the profile prices that below the split pass; the rest goes through the pass."""
    for sms, (choice, (a_tiles, b_tiles)) in enumerate(FORCING.items(), start=120):
        made = MADE[choice]
        device = _split_priced_device(a_tiles, b_tiles, sms)
        for orders in ("rr", "rc", "cr", "cc"):
            readable = {"A"} | ({"B"} if orders[1] == "c" else set())
            p = plan(device, m, n, k, orders, precision="3xtf32")
            assert p["kernel"] == WGMMA and passed_operands(p["description"]) == {"A", "B"} - (made & readable), p
        unaligned = plan(device, m, n, k, "rc", precision="3xtf32", aligned=False)
        assert passed_operands(unaligned["description"]) == {"A", "B"}, unaligned


@pytest.mark.skipif(WGMMA not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_on_the_h200_profile_the_kernel_splits_a_where_its_pass_weighs_most(h200_like):
    """On the H200 (docs/history.md, step 58) A's parts made in registers cost a K tile 54 ns
    more than reading the pass's: they pay where the pass over A is a large share of the call
    (8192x768x3072 rc measured 1.27x the plan with both passes), not at 8192^3 (the
    registers, forced on rc operands, measured 0.94x the pass there)."""
    assert "A" not in passed_operands(plan(h200_like, 8192, 768, 3072, "rc", precision="3xtf32")["description"])
    assert "A" in passed_operands(plan(h200_like, 8192, 8192, 8192, "rc", precision="3xtf32")["description"])


def test_3xtf32_on_a_gpu_without_a_row_runs_ieee_and_says_why():
    none_run = _testing.add_recorded_device(facts(75, 40, {r: f"{r} cannot run here" for r in TF32X3_KERNELS}))
    p = plan(none_run, 4096, 4096, 4096, precision="3xtf32")
    assert p["precision"] == "ieee" and p["precision_fallback"].endswith("cannot run here")


def test_the_profile_follows_capability_and_sm_count(h200_like):
    """The H200's measured figures serve every GH100 of 132 SMs, whatever its name (the H100
    SXM's and GH200's too); any other GPU gets the neutral profile, with rates of its own."""
    assert _testing.profile_name(h200_like) == "NVIDIA H200"
    renamed = _testing.add_recorded_device(facts(name="NVIDIA H100 80GB HBM3"))
    assert _testing.profile_name(renamed) == "NVIDIA H200"
    for capability, sms in ((90, 114), (80, 108), (89, 142)):
        other = _testing.add_recorded_device(facts(capability, sms))
        assert _testing.profile_name(other) == "neutral"
    # The neutral rates are an A100's, not the H200's: a compute-bound product is priced
    # slower there than on the H200, beyond the SM counts' 132 / 108.
    a100 = _testing.add_recorded_device(facts(80, 108))
    assert plan(a100, 4096, 4096, 4096)["predicted_us"] > 2 * plan(h200_like, 4096, 4096, 4096)["predicted_us"]
    # Its 3xTF32 figures are its own too: mma.sync priced for an A100-class SM's clock and
    # TF32 rate, about 1.8x the SIMT kernels there (what benchmarks/probes/mma_tf32_share.py
    # predicts from the H200's share of its mma.sync peak), not the 3x that the H200's figures
    # would give against the A100's FMA rate.
    ampere = _testing.add_recorded_device(facts(80, 108, {WGMMA: "needs sm_90a"}))
    ieee, tf32x3 = plan(ampere, 4096, 4096, 4096), plan(ampere, 4096, 4096, 4096, precision="3xtf32")
    assert tf32x3["kernel"].endswith("_mma")
    assert 1.6 < ieee["predicted_us"] / tf32x3["predicted_us"] < 2.1


def _handoff_device(name, configs):
    """A recorded GPU of its own (capability 87, 20 SMs) priced with the H200's figures and a
    hand-off rule that predicts each named config's plans at e^term torch.matmul's time; the
    profile takes the place of the last one made here (devices made before are priced with
    it from then on, their plans made so far kept)."""
    doc = _h200_profile()
    doc.update(name=name, serves={"capability": 87, "sms": 20})
    doc["torch_handoff"] = dict(log_predicted_ms=0.0, log_macs=0.0, log_splits=0.0, copies=0.0, configs=configs)
    return _priced_device(doc, 87, 20)


def test_the_handoff_rule_hands_only_the_plans_it_speaks_for(torch_handoff_on):
    import torch

    from benchmarks.common import torch_handoff

    every = _handoff_device("every config handed", {c: 1.0 for c in TILINGS})
    p = plan(every, 1024, 1024, 1024)
    assert p["family"] == "torch" and p["precision"] == "ieee" and p["precision_fallback"] is None
    assert p["description"] == "torch fp32 (torch.matmul is predicted faster: this plan at 2.72x its time)"
    with torch_handoff(False):
        kernel = plan(every, 1024, 1024, 1024)
    assert kernel["family"] in ("tiled", "async") and kernel["kernel"] in TILINGS
    # torch's product would be TF32's, or raise without a cuBLAS workspace setting: the
    # kernels run.
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert plan(every, 1024, 1024, 1024) == kernel
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    torch.use_deterministic_algorithms(True)
    try:
        assert plan(every, 1024, 1024, 1024)["family"] == kernel["family"]
    finally:
        torch.use_deterministic_algorithms(False)
    # The rule prices tiling plans in IEEE fp32: gemv plans stay. 3xTF32 has torch's
    # predicted time to beat where that is the faster fp32 (plan.cpp, fp32_rival_ns): here
    # 1/2.72 of the IEEE plan's, which it does not.
    assert plan(every, 1, 4096, 4096, orders="rc")["family"] == "gemv"
    p = plan(every, 4096, 4096, 4096, precision="3xtf32")
    assert p["family"] == "torch" and "not predicted faster" in p["precision_fallback"], p
    # A config the rule has no term for is never handed; nor one it predicts faster than torch.
    others = _handoff_device("other configs handed", {c: 1.0 for c in TILINGS if c != kernel["kernel"]})
    assert plan(others, 1024, 1024, 1024) == kernel
    slower = _handoff_device("torch predicted slower", {c: -0.01 for c in TILINGS})
    assert plan(slower, 1024, 1024, 1024) == kernel
    assert plan(slower, 4096, 4096, 4096, precision="3xtf32")["family"] == "tf32x3"


def test_the_h200_rule_keeps_large_problems_on_the_kernels(torch_handoff_on):
    """The H200's rule speaks for the configs of the sweep's small and mid-size problems, not
    for the large problems' tilings, where our kernels run at torch.matmul's speed or faster."""
    device = _recorded_h200()
    for n in (2048, 3072, 4096, 8192):
        assert plan(device, n, n, n)["family"] != "torch", n
    assert plan(device, 2048, 11008, 4096, orders="rc")["family"] != "torch"  # llama mlp up


def test_a_matrix_vector_product_gemv_does_not_serve_goes_to_torch(h200_like, torch_handoff_on):
    """M = 1 with a row-major B (x @ W with W stored (in, out)) or N = 1 with a column-major A
    is the orientation gemv.cu does not serve: a tiling runs it, spending all but one row (or
    column) of each tile on nothing, at 0.60-0.79x torch.matmul on an H100 (1 x 4096 x 4096 rr
    42.5 against 31.7 us). cuBLAS runs a matrix-vector kernel on it, priced as one read of
    the matrix at the profile's rate after a launch (cost_model.h, torch_matrix_vector_ns);
    the tiling's price is above that, so the lenient op hands it to torch, on every profile.
    gemv's own orientation stays on gemv; a batch of such products, which cuBLAS runs as a
    batched GEMM, is priced by the profile's rule as any other product."""
    from benchmarks.common import torch_handoff

    profile = _h200_profile()["rates"]
    ampere = _testing.add_recorded_device(facts(80, 108, name="a neutral-profile GPU"))
    for device in (h200_like, ampere):
        for m, n, k, orders in ((1, 4096, 4096, "rr"), (1, 2304, 768, "rr"), (1, 50257, 768, "rr"),
                                (1, 4095, 4096, "rr"), (4096, 1, 4096, "cc"), (3072, 1, 768, "cr")):
            handed = plan(device, m, n, k, orders)
            assert handed["family"] == "torch" and handed["precision"] == "ieee", handed
            assert handed["description"].endswith("its time (its matrix-vector kernel reads the matrix once))"), handed
            with torch_handoff(False):
                kernel = plan(device, m, n, k, orders)
            assert kernel["family"] in ("tiled", "async"), kernel
            if device == h200_like:  # the ratio quoted: the tiling's price over the matrix's read
                torch_us = (4.0 * m * n * k / profile["bytes_per_ns"] + profile["launch_ns"]) / 1e3
                quoted = float(re.search(r"at (\d+\.\d+)x", handed["description"]).group(1))
                assert quoted == pytest.approx(kernel["predicted_us"] / torch_us, abs=0.006), (quoted, kernel)
            # In 3xTF32 the fp32 time to beat is torch's matrix-vector kernel's.
            tf32x3 = plan(device, m, n, k, orders, precision="3xtf32")
            assert tf32x3["family"] == "torch", tf32x3
        assert plan(device, 1, 4096, 4096, "rc")["family"] == "gemv"
        assert plan(device, 4096, 1, 4096, "rr")["family"] == "gemv"
        batched = _testing.recorded_plan(device, 1, 4096, 4096, "rr", True, True, "ieee", 4)
        assert "matrix-vector" not in batched["description"], batched


def test_a_few_vectors_run_on_gemv(h200_like):
    """M of 2 to 4 with a column-major B (x @ W.T for a few tokens) and A's rows contiguous,
    or N of 2 to 4 with a row-major A and B's columns contiguous, runs on gemv, which reads
    the matrix once for every vector: on split-K M = 2 ran 0.85x torch.matmul on an H100
    (1 x 4096 x 4096's tiles spend 30 of 32 rows on nothing). More vectors, or vectors that
    are not contiguous, take a tiling. In 3xTF32, gemv's short chains keep the product in
    IEEE fp32 as for one vector."""
    for m in (2, 3, 4):
        assert plan(h200_like, m, 4096, 4096, "rc")["family"] == "gemv", m
        assert plan(h200_like, 4096, m, 4096, "rc")["family"] == "gemv", m
        batched = _testing.recorded_plan(h200_like, m, 4096, 4096, "rc", True, True, "ieee", 8)
        assert batched["family"] == "gemv", batched
    for m, n, orders in ((5, 4096, "rc"), (4096, 5, "rc"), (2, 4096, "cc"), (2, 4096, "rr"), (4096, 2, "rr")):
        assert plan(h200_like, m, n, 4096, orders)["family"] in ("tiled", "async", "torch"), (m, n, orders)
    few = plan(h200_like, 4, 4096, 4096, "rc", precision="3xtf32")
    assert few["family"] == "gemv" and "would be less accurate" in few["precision_fallback"], few


def test_gemv_splits_k_where_few_rows_leave_the_gpu_idle(h200_like):
    """gemv runs a warp a matrix row, a few loads in flight each: a matrix of few rows over a
    deep K splits K until the GPU has enough warps reading (one more launch, the split-K
    reduction), in slices of at least four rounds of 512 floats; a matrix of thousands of
    rows, a short K or a large batch does not split."""
    def splits(m, n, k, batch=1):
        p = _testing.recorded_plan(h200_like, m, n, k, "rc", True, True, "ieee", batch)
        assert p["family"] == "gemv" and p["kernel"] == "gemv", p
        assert (p["split_k"] > 1) == ("split-k" in p["description"]), p
        return p["split_k"]

    head = splits(1, 16, 65536)  # 16 rows: 16 warps unsplit
    assert 16 <= head <= 32 and 65536 / head >= 2048, head
    assert splits(4, 16, 65536) == head == splits(16, 1, 65536)  # the vectors on either side
    assert splits(1, 16, 65536, batch=64) < head  # a batch's rows are warps too
    assert 1 < splits(1, 1024, 16384) < head
    assert splits(1, 1024, 16384) <= splits(1, 1024, 32768)  # deeper: no fewer slices
    for m, n, k in ((1, 4096, 4096), (1, 11008, 4096), (1, 50257, 768), (1, 16, 1024), (4, 4096, 11008)):
        assert splits(m, n, k) == 1, (m, n, k)
    assert splits(1, 4096, 4096, batch=8) == 1


def test_a_probe_may_force_the_3xtf32_split(h200_like):
    """set_tf32x3_splits prices and runs every 3xTF32 row at that split (at most the row's
    most for the problem), as plans of their own, until it is set back to 0."""
    row = "tf32x3_few_rows_mma"
    if row not in TF32X3_KERNELS:
        pytest.skip("no narrow-side kernel in this build")

    def decode(**kw):
        return _testing.recorded_plan(h200_like, 8, 4096, 4096, "rc", True, True, "3xtf32", variant=row, **kw)

    chosen = decode()
    try:
        for splits, expected in ((1, 1), (3, 3), (64, 16)):  # K 4096: at most 16 slices of 256
            _testing.set_tf32x3_splits(splits)
            forced = decode()
            assert forced["split_k"] == expected, forced
        _testing.set_tf32x3_splits(1)
        assert decode()["predicted_us"] != chosen["predicted_us"] or chosen["split_k"] == 1
        _testing.set_tf32x3_splits(-1)  # below 1: the model's
        assert decode() == chosen
    finally:
        _testing.set_tf32x3_splits(0)
    assert decode() == chosen


def test_incomplete_or_unknown_facts_are_refused():
    missing = facts()
    missing["tiled"] = [t for t in missing["tiled"] if not (t[0] == TILINGS[0] and t[1] == "rr" and t[2])]
    with pytest.raises(RuntimeError, match="has no occupancy for " + TILINGS[0]):
        _testing.add_recorded_device(missing)
    unknown = facts()
    unknown["tiled"].append(["tiled_1x1x1", "rr", True, 1])
    with pytest.raises(RuntimeError, match="no kernel config 'tiled_1x1x1'"):
        _testing.add_recorded_device(unknown)
    with pytest.raises(RuntimeError, match="not a recorded device"):
        _testing.recorded_plan(0, 64, 64, 64, "rr", True, True)


def _records(kind):
    path = os.path.join(RECORDS, f"{kind}.json")
    with open(path) as f:
        return json.load(f)


def _recorded_h200():
    path = os.path.join(RECORDS, "device.json")
    if not os.path.exists(path):
        pytest.skip("no recorded H200 facts: python -m benchmarks.records --only device on the H200")
    return _testing.add_recorded_device(_records("device")["facts"])


def _the_decision(description):
    """A plan's description without the predicted figures its reasons quote ("8.8 us",
    "1.08x"): what was chosen and why, which a change of how a figure is priced or quoted
    does not move."""
    return re.sub(r"\d+\.\d+(?= us|x)", "#", description)


def test_a_decision_is_compared_without_its_figures():
    assert (_the_decision("torch fp32 (3xTF32 is not predicted faster: 20.9 us on tf32x3_128x128_wgmma against 8.8 us in fp32)")
            == "torch fp32 (3xTF32 is not predicted faster: # us on tf32x3_128x128_wgmma against # us in fp32)")
    assert (_the_decision("torch fp32 (torch.matmul is predicted faster: this plan at 1.08x its time)")
            == "torch fp32 (torch.matmul is predicted faster: this plan at #x its time)")
    # Tilings, splits and sums are the decision itself, and stay.
    kept = ["async_32x32x16_t44_s4 split-k 29", "tf32x3_128x128_wgmma, split pass of A B",
            "torch fp32 (3xTF32 would be less accurate: fp32 sums 95 products here, and below 128 its error is under 3xTF32's floor)"]
    assert [_the_decision(d) for d in kept] == kept


@pytest.mark.parametrize("kind", sorted(records.SWEEPS))
def test_the_plans_of_record(kind, torch_handoff_on):
    """Each problem of the records' sweeps planned here, on the H200's recorded facts, as the
    H200 planned it: a change of the planner that moves a plan of record shows here, in CI,
    until the records are made again. The predicted figures a reason quotes may differ."""
    device = _recorded_h200()
    record = _records(kind)
    precision = record["settings"].get("precision", "ieee")
    moved = []
    for r in record["records"]:
        p = _testing.recorded_plan(device, r["m"], r["n"], r["k"], r["layout"], _aligned(r, "A"), _aligned(r, "B"),
                                   precision)
        if _the_decision(p["description"]) != _the_decision(r["plan"]):
            moved.append(f"{r['m']}x{r['n']}x{r['k']} {r['layout']} {r['align']}: {p['description']!r}, "
                         f"recorded {r['plan']!r}")
    assert not moved, f"{len(moved)} of {len(record['records'])} plans differ from the record:\n" + "\n".join(moved[:10])


@pytest.mark.skipif(WGMMA not in TF32X3_KERNELS, reason="no wgmma row in this build")
def test_3xtf32_has_to_beat_torch_where_torch_is_predicted_faster(torch_handoff_on):
    """On 2890x329x295 (A row-major, B column-major) the hand-off rule predicts torch.matmul
    faster than the IEEE plan, and 3xTF32 is predicted faster than that plan but not than
    torch's: the lenient op would run torch's product, so 3xTF32 is declined (plan.cpp,
    fp32_rival_ns; the H200 ran it at 0.92x torch.matmul). Under deterministic algorithms
    nothing is handed to torch, and 3xTF32 has only the IEEE plan to beat."""
    import torch

    from benchmarks.common import torch_handoff

    device = _recorded_h200()
    # A's rows of 295 floats do not start 16-byte aligned; B's columns do.
    problem = (device, 2890, 329, 295, "rc", False, True)
    assert _testing.recorded_plan(*problem)["family"] == "torch"  # the rule hands the IEEE plan
    with torch_handoff(False):
        ieee_us = _testing.recorded_plan(*problem)["predicted_us"]
    costs = _h200_profile()["costs"]
    row_us = _testing.recorded_plan(*problem, variant=WGMMA)["predicted_us"]
    weighed_us = row_us * costs["tf32x3_model_slack"] + costs["tf32x3_fixed_ns"] / 1000.0
    assert weighed_us < ieee_us, (weighed_us, ieee_us)  # against our IEEE plan alone, 3xTF32 wins

    p = _testing.recorded_plan(*problem, "3xtf32")
    assert (p["family"], p["precision"]) == ("torch", "ieee"), p
    assert "not predicted faster" in p["precision_fallback"], p
    saved = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        p = _testing.recorded_plan(*problem, "3xtf32")
    finally:
        torch.use_deterministic_algorithms(saved)
    assert (p["kernel"], p["precision"]) == (WGMMA, "3xtf32"), p


def _aligned(record, operand):
    """Whether every row of the sweep's operand starts 16-byte aligned (sweep.py: a dense
    operand, starting one float in where its alignment says so)."""
    if record["align"].startswith(operand):
        return False
    rows_of = {"A": ("m", "k"), "B": ("k", "n")}[operand]
    order = record["layout"][0 if operand == "A" else 1]
    line = record[rows_of[1]] if order == "r" else record[rows_of[0]]
    return line % 4 == 0


def test_a_lone_partial_wave_runs_as_the_stream_k_tail_where_priced_faster(h200_like):
    """Fewer tiles than resident blocks can all be the stream-K tail, every block an equal
    share of their K steps (GPT-2's weight gradients, K 4096 over 36 to 144 t816 tiles of
    264 slots: 1.06x torch.matmul on an H100, where their split plans ran 0.82-0.93x;
    docs/history.md, step 64). A tail block's latency floor is its share of K, not all of
    it. Where the tiles have edges, which the register-staged kernel runs on its checked
    loop, the blocks holding their pieces set the tail's end, and a split plan stays."""
    t816 = "tiled_128x128x8_t816"
    for m, n in ((768, 768), (2304, 768), (768, 3072)):
        p = plan(h200_like, m, n, 4096, "cr")
        assert (p["kernel"], p["split_k"], p["stream_k"]) == (t816, 1, True), (m, n, p)
    edged = plan(h200_like, 1075, 2976, 5376, "cr")
    assert not edged["stream_k"], edged
    ranking = _testing.model_ranking("b1_m768_n768_k4096_cr_v4_d4", h200_like)
    assert ranking[0][1:] == (t816, 1, True), ranking[:3]
    assert [r[0] for r in ranking] == sorted(r[0] for r in ranking)
    # 36 tiles of 512 K steps over 264 blocks: 70 steps a block at 520 ns, under the work.
    assert ranking[0][0] < 512 * 520.0, ranking[0]
    edged_ranking = _testing.model_ranking("b1_m1075_n2976_k5376_cr_v4_d4", h200_like)
    assert not edged_ranking[0][3], edged_ranking[:3]
    assert any(r[1:] == (t816, 1, True) for r in edged_ranking)  # ranked, not first


def test_the_model_ranks_a_key_on_a_recorded_device_only(h200_like):
    """model_ranking's device is a recorded one (a CUDA device is the default's, the
    current one): an index of neither is refused with a message."""
    assert _testing.model_ranking("b1_m64_n64_k64_rr_v4_d4", h200_like)
    for device in (0, h200_like + 1000):
        with pytest.raises(RuntimeError, match="recorded device"):
            _testing.model_ranking("b1_m64_n64_k64_rr_v4_d4", device)
