"""The benchmark suite's own logic, where it runs without a GPU: the random sweep's problems
(a function of the seed, spread as its docstring says), its operands (the storage order and
alignment drawn), its summary, the records' report regenerated from stored JSON, and the
precision record's errors, arguments, table and plot (from a synthetic result; the run
itself on the GPU)."""
from __future__ import annotations

import collections
import json
import math

import pytest
import torch

from benchmarks import precision, records, sweep
from benchmarks.common import CUBLAS, TF32
from conftest import gpu, randn


def test_sweep_problems_are_a_function_of_the_seed():
    first, again, other = sweep.draw_problems(0, 200), sweep.draw_problems(0, 200), sweep.draw_problems(1, 200)
    assert first == again and first != other
    for p in first:
        assert all(sweep.LOW <= p[d] <= sweep.HIGH for d in "mnk"), p
        assert p["layout"] in ("rr", "rc", "cr", "cc") and p["align"] in sweep.ALIGNMENTS
    # Log-uniform: about as many problems below the geometric middle of the range as above.
    middle = math.sqrt(sweep.LOW * sweep.HIGH)
    below = sum(p["m"] < middle for p in first)
    assert 70 < below < 130, below
    assert {p["layout"] for p in first} == {"rr", "rc", "cr", "cc"}
    assert {p["align"] for p in first} == set(sweep.ALIGNMENTS)


def test_sweep_operands_have_the_drawn_order_and_alignment():
    for layout in ("rr", "rc", "cr", "cc"):
        for align in sweep.ALIGNMENTS:
            p = dict(m=6, n=5, k=7, layout=layout, align=align)
            A, B = sweep.make_problem_operands(p, "cpu", seed=3)
            assert A.shape == (6, 7) and B.shape == (7, 5)
            for name, t, order in (("A", A, layout[0]), ("B", B, layout[1])):
                assert t.stride(-1 if order == "r" else -2) == 1
                offset = 1 if align.startswith(name) else 0
                assert t.storage_offset() == offset, (layout, align, name)
            again = sweep.make_problem_operands(p, "cpu", seed=3)
            assert torch.equal(A, again[0]) and torch.equal(B, again[1])


def test_sweep_summary():
    rows = [dict(m=m, n=8, k=8, layout="rr", align="aligned", ratio_to_torch_matmul=r, family=f)
            for m, r, f in ((16, 0.5, "async"), (32, 2.0, "tiled"), (64, 1.06, "torch"), (128, 0.96, "async"))]
    s = sweep.summarize(rows)
    assert s["problems"] == 4 and s["below_0_95"] == 1 and s["below_0_97"] == 2 and s["at_least_1_05"] == 2
    assert s["handed_to_torch"] == 1
    assert math.isclose(s["geomean"], (0.5 * 2.0 * 1.06 * 0.96) ** 0.25)
    assert s["lowest"] == 0.5 and s["lowest_problem"].startswith("16x8x8")
    # The handed problem (torch's own product) is left out of what the kernels did.
    assert (s["on_kernels"], s["lowest_on_kernels"], s["below_1_0_on_kernels"]) == (3, 0.5, 2)
    rows[0]["family"] = "torch"
    s = sweep.summarize(rows)
    assert (s["on_kernels"], s["lowest_on_kernels"], s["below_1_0_on_kernels"]) == (2, 0.96, 1)
    assert s["lowest_on_kernels_problem"].startswith("128x8x8") and s["lowest"] == 0.5


def test_sweep_summary_counts_errors_against_torch():
    # A sweep in 3xTF32 is judged by its errors beside torch.matmul's as well as its times.
    rows = [dict(m=16 * (i + 1), n=8, k=8, layout="rr", align="aligned", plan="p", torch_ms=1.0, ours_ms=1.0 / r,
                 ratio_to_torch_matmul=r, precision=p, error_to_torch_matmul=e, family="async")
            for i, (r, p, e) in enumerate(((1.5, "3xtf32", 0.5), (0.98, "ieee", 1.0), (1.0, "ieee", 1.3)))]
    s = sweep.summarize(rows)
    assert (s["below_1_0"], s["on_3xtf32"], s["error_above_1_25"], s["error_highest"]) == (1, 1, 1, 1.3)
    assert math.isclose(s["error_geomean"], (0.5 * 1.0 * 1.3) ** (1 / 3))
    text = sweep.markdown(dict(summary=s, records=rows, settings=dict(seed=0, precision="3xtf32")), title=False)
    assert "| 3xtf32 | 3 | 1 | 0 | " in text and "| 1.30 | 1 |" in text


def test_best_variant_key_takes_the_planners_vec4_rule():
    # plan.cpp's vec4_ok: aligned pointer and leading dimension, and storage holding the last
    # line's last 16-byte chunk; a one-line operand of 3 floats has no such chunk.
    from benchmarks.probes.best_variant import key_as_given

    padded = torch.zeros(8, 12)[:, :10]  # rows of 10 in 12
    one_line = torch.zeros(1, 3)
    cut = torch.zeros(7 * 12 + 10).as_strided((8, 10), (12, 1))  # ends at its last float
    assert "_rc_v4_" in key_as_given(padded, padded.t())
    assert "_v1_" in key_as_given(one_line, padded.t()[:3])
    assert "_v1_" in key_as_given(cut, padded.t())


def test_record_sets_report_from_stored_json():
    # Every stored set renders: the benchmark of record and the kinds it holds.
    for slug in records.sets():
        text = records.sections(slug, title=True)
        if records.load(slug) is not None:
            assert "torch.matmul" in text


def test_readme_results_name_their_gpu_and_records(tmp_path, monkeypatch):
    # The README's results come from a stored set, a row per question, each linked to the
    # set's summary and stamped with its record's commit; the GPU they show is read back.
    for slug in records.sets():
        text = records.headline(slug)
        kinds = [k for k in records.HEADLINE_KINDS if records.load(slug, k) is not None]
        assert all(f"[{kind}](benchmarks/records/{slug}/summary.md), {records.load(slug, kind)['machine']['git_commit']}"
                   in text for kind in kinds), text
        readme = tmp_path / f"{slug}.md"
        readme.write_text(f"# x\n{records.report.BEGIN}\n{records.report.END}\n{records.TRAIN_BEGIN}\n{records.TRAIN_END}\n")
        monkeypatch.setattr(records, "README", str(readme))
        records.write_readme(slug)
        assert records.readme_gpu() == records._machine(slug)["gpu"]


# ---- the precision record (benchmarks/precision.py) --------------------------------------------


def synthetic_precision(triton=False):
    """A precision record as run() returns it, Triton's rows not run unless `triton`."""
    machine = dict(date="2026-12-01T00:00:00", torch="2.14.1", cuda="13.0", gpu="NVIDIA H200", sms=132,
                   fp32_peak_tflops=66.9, copy_bandwidth_tbs=4.25, driver="580", git_commit="abc1234",
                   git_dirty=False, build={})
    runs = {name: triton or not name.startswith("Triton") for name in precision.PATHS}
    speed, errors = [], []
    for i, name in enumerate(precision.PATHS):
        for size in (2048, 4096, 8192):
            tflops = 50.0 + 10 * i if runs[name] else None
            speed.append(dict(path=name, size=size, kernel=f"kernel {i}" if runs[name] else None,
                              median_ms=2.0 * size ** 3 / (tflops * 1e9) if tflops else None, tflops=tflops,
                              ratio_to_torch_matmul=tflops / 50.0 if tflops else None, rel_err_vs_torch_matmul=None,
                              note=None if runs[name] else "not run: triton is not importable"))
        for d in precision.DISTRIBUTIONS:
            errors.append(dict(path=name, size=4096, distribution=d, rel_fro=2e-7 * (i + 1) if runs[name] else None,
                               max_rel_to_abs_product=1e-6 * (i + 1) if runs[name] else None,
                               note=None if runs[name] else "not run: triton is not importable"))
    model = [dict(name="llama7b qkv, 2048 tokens", m=2048, n=12288, k=4096, layout="rc", kernel="tf32x3_128x64_mma",
                  torch_ms=4.0, ours_ms=2.0, ratio_to_torch_matmul=2.0, rel_err_vs_torch_matmul=3e-7, note=None),
             dict(name="decode m=1", m=1, n=4096, k=4096, layout="rc", kernel="tf32x3_128x64_mma split-k 32",
                  torch_ms=0.02, ours_ms=0.025, ratio_to_torch_matmul=0.8, rel_err_vs_torch_matmul=2e-7, note=None)]
    summary = dict(shapes=2, geomean=math.sqrt(1.6), lowest=0.8, lowest_shape="decode m=1")
    settings = dict(sizes=[2048, 4096, 8192], error_size=4096, distributions=list(precision.DISTRIBUTIONS), seed=0,
                    warmup_ms=25, rep_ms=100, triton=None, triton_tiling=precision.TRITON_TILING)
    return dict(machine=machine, settings=settings, speed=speed, errors=errors,
                model=dict(records=model, summary=summary))


def test_precision_errors_match_the_float64_product_in_any_blocks(rng):
    A, B = randn(rng, 37, 19, device="cpu"), randn(rng, 19, 23, device="cpu")
    out = A @ B
    want_ref = A.double() @ B.double()
    err = (out.double() - want_ref).abs()
    want = ((torch.linalg.norm(err) / torch.linalg.norm(want_ref)).item(),
            (err / (A.double().abs() @ B.double().abs())).max().item())
    for rows in (1, 5, 37, 1024):
        got = precision.errors({"fp32": out, "exact": want_ref.float()}, A, B, rows=rows)
        assert got["fp32"] == pytest.approx(want, rel=1e-9)
        assert 0 < got["fp32"][0] < 1e-5 and got["exact"][0] < got["fp32"][0]
    # A NaN anywhere shows in both errors, in whichever block it falls.
    bad = out.clone()
    bad[30, 4] = float("nan")
    assert all(math.isnan(e) for e in precision.errors({"bad": bad}, A, B, rows=8)["bad"])


def test_precision_operands_are_seeded_and_of_their_distribution():
    for d in precision.DISTRIBUTIONS:
        A, B = precision.operands(64, d, "cpu", seed=3)
        again = precision.operands(64, d, "cpu", seed=3)
        assert torch.equal(A, again[0]) and torch.equal(B, again[1]) and not torch.equal(A, B)
        assert not torch.equal(A, precision.operands(64, d, "cpu", seed=4)[0])
        assert (A != 0).float().mean() > 0.99
    uniform, _ = precision.operands(64, "uniform", "cpu")
    randn, _ = precision.operands(64, "randn", "cpu")
    assert 0 <= uniform.min() and uniform.max() < 1 and randn.min() < 0


def test_precision_arguments():
    args = precision.parse_args([])
    assert args.sizes == list(precision.SIZES) and args.error_size == precision.ERROR_SIZE in args.sizes
    assert not args.no_model and args.out is None
    args = precision.parse_args(["--sizes", "256,512", "--error-size", "256", "--no-model", "--rep-ms", "10"])
    assert (args.sizes, args.error_size, args.no_model, args.rep_ms) == ([256, 512], 256, True, 10)
    for bad in (["--sizes", "256,x"], ["--sizes", "0,4096"], ["--sizes", "2048"], ["--error-size", "1000"]):
        with pytest.raises(SystemExit):
            precision.parse_args(bad)


def test_precision_table_from_a_synthetic_record():
    text = precision.markdown(synthetic_precision())
    assert text.startswith("# Accuracy and speed, NVIDIA H200")
    lines = text.splitlines()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    for name in precision.PATHS:
        assert name in rows
    assert "| 60.0 (1.20) | 60.0 (1.20) | 60.0 (1.20) | 4.00e-07 | 2.00e-06 | 4.00e-07 | 2.00e-06 |" in rows[precision.IEEE]
    assert rows[precision.TRITON_IEEE].count("not run") == 3
    assert "- Triton tl.dot ieee: not run: triton is not importable" in lines
    assert sum(line.startswith("- ") for line in lines) == 2  # one note a path, not one a size
    summary = next(line for line in lines if line.startswith("3xTF32 on the model shapes"))
    assert all(x in summary for x in ("1.26x", "2 shapes", "0.80x", "decode m=1")), summary
    assert "| decode m=1 | 1 x 4096 x 4096 | rc | tf32x3_128x64_mma split-k 32 | 20.0 | 25.0 | 0.80 |" in lines
    untitled = precision.markdown(synthetic_precision(triton=True), title=False)
    assert "NVIDIA H200" not in untitled and "not run" not in untitled
    no_model = dict(synthetic_precision(), model=None)
    assert "model shapes" not in precision.markdown(no_model)
    assert precision.wrong_results(synthetic_precision()) == []
    wrong = synthetic_precision()
    wrong["model"]["records"][0]["note"] = "WRONG: relative error 0.1 vs torch.matmul"
    assert [r["name"] for r in precision.wrong_results(wrong)] == ["llama7b qkv, 2048 tokens"]


def test_precision_plot_from_a_synthetic_record(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib draws the plot (requirements.txt)")
    for triton in (False, True):
        out = tmp_path / f"precision_{triton}.png"
        precision.plot(synthetic_precision(triton), str(out))
        assert out.stat().st_size > 10_000


def test_records_report_the_precision_kind(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="matplotlib draws the plot (requirements.txt)")
    assert "precision" in records.KINDS and "precision" in records.MEASURE
    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "precision.json").write_text(json.dumps(synthetic_precision()))
    monkeypatch.setattr(records, "ROOT", str(tmp_path))
    assert records.sets() == ["h200"]
    text = records.sections("h200", title=True)
    assert "### Accuracy and speed" in text and precision.TF32X3 in text
    assert "(benchmarks/records/h200/precision.png)" in text
    records.write_derived("h200")
    assert precision.TF32X3 in (tmp_path / "h200" / "summary.md").read_text()
    assert (tmp_path / "h200" / "precision.png").stat().st_size > 10_000


def test_unaligned_cost_keeps_k_whole():
    # The probe compares alignments alone: a K with a remainder would add the checked loop.
    from benchmarks.probes.unaligned_cost import parse_shapes

    assert parse_shapes("1024x3072x1024,64x48x32") == [(1024, 3072, 1024), (64, 48, 32)]
    with pytest.raises(SystemExit, match="K = 1000"):
        parse_shapes("64x64x1000")


@pytest.mark.parametrize("slots,waves", [(264, 1), (264, 3), (132, 3), (1056, 1), (131, 2)])
def test_block_overhead_grids_hold_whole_waves(slots, waves):
    from benchmarks.common import whole_waves_grid

    tm, tn = whole_waves_grid(slots, waves)
    assert tm * tn == slots * waves and 1 <= tm <= tn


def test_block_overhead_fit_recovers_the_costs(rng):
    import numpy as np

    from benchmarks.probes.block_overhead import K_TILES, WAVES, fit

    launch, fixed, tile = 4.0, 3.0, 0.5
    # 1% of noise on every point, as timing leaves it: 1% of the longest call is more than
    # the fixed costs, so an unweighted fit would miss them by more than the tolerance.
    noise = rng.uniform(len(WAVES) * len(K_TILES), device="cpu").tolist()
    points = [(w, kt, (launch + w * (fixed + kt * tile)) * (1 + 0.02 * (noise.pop() - 0.5)))
              for w in WAVES for kt in K_TILES]
    assert np.allclose(fit(points), [launch, fixed, tile], rtol=0.15, atol=0.1)


def _handoff_rows(rng, weights, count=80):
    """Sweep rows whose log(ours / torch) is exactly the hand-off fit's terms times `weights`
    on the configs the rule speaks for, and rows of a config it does not (slower than torch)."""
    from benchmarks.probes.torch_handoff_fit import CONFIG_TERMS, features

    draws = rng.uniform(count, 5, low=0.0, high=1.0, device="cpu").tolist()
    configs = CONFIG_TERMS + ("tiled_128x64x8b",)
    rows = []
    for a, b, c, d, e in draws:
        m, n, k = int(16 * 512 ** a), int(16 * 512 ** b), int(16 * 512 ** c)
        config = configs[int(len(configs) * d)]
        plan = config + (" split-k 3" if e > 0.5 else "") + (", copy of A (column-major)" if e > 0.8 else "")
        row = dict(m=m, n=n, k=k, plan=plan, family=config.split("_")[0], model_ms=1e-9 * m * n * k + 0.003,
                   torch_ms=1.0, ours_ms=2.0)
        if config in CONFIG_TERMS:
            row["ours_ms"] = math.exp(sum(w * x for w, x in zip(weights, features(row))))
        rows.append(row)
    return rows


def test_torch_handoff_fit_recovers_the_rule_and_prices_the_handed(rng):
    import numpy as np

    from benchmarks.probes.torch_handoff_fit import CONFIG_TERMS, TERMS, fit, outcome, predictions, priced

    weights = [-0.07, 0.05, 0.01, 0.04, -1.2, -1.1, -1.0, -0.9]
    assert len(weights) == len(TERMS)
    rows = _handoff_rows(rng, weights)
    rows.append(dict(m=1, n=4096, k=4096, plan="gemv", family="gemv", model_ms=None, torch_ms=1.0, ours_ms=2.0))
    # The gemv row and the config without a term are left out of the fit and never handed.
    assert np.allclose(fit(rows), weights, atol=1e-6)
    held_out = predictions(rows)
    spoken = [priced(r) for r in rows]
    assert sum(spoken) < len(rows) - 1 and {r["plan"].split(" ")[0].rstrip(",") for r in rows if priced(r)} == set(
        CONFIG_TERMS)
    for row, p, speaks in zip(rows, held_out, spoken):
        assert (p is None) == (not speaks)
        if speaks:
            assert p == pytest.approx(math.log(row["ours_ms"]), abs=1e-6)
    # Handed exactly where the rule speaks and ours was slower, each at torch's time times the cost.
    o = outcome(rows, held_out, margin=0.0, handoff_cost=1.25)
    handed = [r for r, speaks in zip(rows, spoken) if speaks and r["ours_ms"] > r["torch_ms"]]
    assert 0 < o["handed"] == len(handed) < sum(spoken)
    kept = [r["torch_ms"] / r["ours_ms"] for r in rows if r not in handed]
    expected = np.exp((np.log(kept).sum() + len(handed) * math.log(1 / 1.25)) / len(rows))
    assert o["geomean"] == pytest.approx(expected) and o["lowest"] == pytest.approx(min(kept + [0.8]))


def test_torch_handoff_fit_reads_the_kernels_times_of_handed_problems(tmp_path, monkeypatch):
    from benchmarks.probes.torch_handoff_fit import load, profile_section

    monkeypatch.setattr(records, "ROOT", str(tmp_path))
    (tmp_path / "gpu").mkdir()
    handed = dict(m=8, n=8, k=8, plan="torch fp32 (torch.matmul is predicted faster)", family="torch",
                  model_ms=None, torch_ms=1.0, ours_ms=1.01)
    timed = dict(handed, kernels_plan="async_32x32x16_t44_s4 split-k 2", kernels_family="async",
                 kernels_model_ms=0.5, kernels_ms=1.5)
    for name, row in (("untimed", handed), ("timed", timed)):
        (tmp_path / "gpu" / f"{name}.json").write_text(
            json.dumps({"settings": {"precision": "ieee"}, "records": [row]}))
    (tmp_path / "gpu" / "tf32x3.json").write_text(json.dumps({"settings": {"precision": "3xtf32"}, "records": []}))
    [row] = load("timed", "gpu")
    assert (row["plan"], row["family"], row["model_ms"], row["ours_ms"]) == (
        "async_32x32x16_t44_s4 split-k 2", "async", 0.5, 1.5)
    with pytest.raises(SystemExit, match="every problem on the kernels"):
        load("untimed", "gpu")
    with pytest.raises(SystemExit, match="an IEEE sweep is needed"):
        load("tf32x3", "gpu")
    # The weights as the device profile's section: the shared ones, then one term a config.
    section = profile_section([0.1, 0.2, 0.3, 0.4, -1.0, -2.0, -3.0, -4.0])
    assert (section["log_predicted_ms"], section["copies"]) == (0.1, 0.4)
    assert list(section["configs"].values()) == [-1.0, -2.0, -3.0, -4.0]


def test_torch_handoff_fit_checks_the_rule_on_a_models_products():
    """model_products' IEEE rows read as sweep rows on the kernels (a handed product by its
    kernels' plan, model time and time), each with its calls a step; the step's products
    against torch's with the products the rule predicts slower handed at torch's time times
    the cost. Rows written before model_products kept the model's time are refused."""
    from benchmarks.probes.torch_handoff_fit import product_rows, step_outcome

    kept = {"product": "mm 4096x768x3072 rr", "calls": 12, "torch_us": 400.0,
            "ieee": {"plan": "async_64x64x8_t84_s4 split-k 2", "model_us": 350.0, "us": 500.0}}
    handed = {"product": "bmm 4x64x64x64 rc", "calls": 2, "torch_us": 10.0,
              "ieee": {"plan": "torch fp32 (predicted faster)", "model_us": None, "us": 10.1,
                       "kernels_plan": "async_32x32x16_t44_s4", "kernels_model_us": 6.0, "kernels_us": 12.0}}
    rows = product_rows({"model": "m", "products": [kept, handed]})
    assert [(r["batch"], r["m"], r["n"], r["k"], r["family"], r["calls"]) for r in rows] == [
        (1, 4096, 768, 3072, "async", 12), (4, 64, 64, 64, "async", 2)]
    assert (rows[0]["model_ms"], rows[0]["ours_ms"], rows[1]["model_ms"], rows[1]["ours_ms"]) == (0.35, 0.5, 0.006, 0.012)
    assert rows[1]["plan"] == "async_32x32x16_t44_s4" and rows[0]["torch_ms"] == 0.4
    none = step_outcome(rows, [None, None], 0.0, 1.0)
    assert none["handed"] == 0 and none["x_torch"] == pytest.approx((12 * 0.4 + 2 * 0.01) / (12 * 0.5 + 2 * 0.012))
    first = step_outcome(rows, [0.2, -0.1], 0.0, 1.1)
    assert first["handed"] == 1 and first["x_torch"] == pytest.approx((12 * 0.4 + 2 * 0.01) / (12 * 0.44 + 2 * 0.012))
    assert step_outcome(rows, [0.2, -0.1], 0.5, 1.1)["handed"] == 0  # log(1.5) > 0.2
    old = {"product": "mm 8x8x8 rr", "calls": 1, "torch_us": 1.0, "ieee": {"plan": "gemv", "us": 1.0}}
    with pytest.raises(SystemExit, match="no model times"):
        product_rows({"model": "m", "products": [old]})


def test_precision_run_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("there is a GPU here: test_precision_run_on_the_gpu runs instead")
    with pytest.raises(SystemExit, match="no GPU"):
        precision.run(sizes=[256], error_size=256, model=False)


@gpu
def test_precision_run_on_the_gpu(tmp_path):
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    out = tmp_path / "precision"
    assert precision.main(["--sizes", "256,384", "--error-size", "256", "--no-model", "--rep-ms", "5",
                           "--warmup-ms", "2", "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert {r["path"] for r in data["speed"]} == set(precision.PATHS) and len(data["speed"]) == 2 * len(precision.PATHS)
    for r in data["errors"]:
        if r["path"] in (precision.IEEE, precision.TF32X3, CUBLAS):
            assert r["rel_fro"] < 1e-5 and r["max_rel_to_abs_product"] < 1e-5, r
    tf32 = [r for r in data["errors"] if r["path"] == TF32]
    assert all(r["rel_fro"] > 1e-5 for r in tf32)  # the other precision shows as one
    assert torch.backends.cuda.matmul.allow_tf32 == tf32_before  # restored


def test_mma_tf32_share_carries_a_share_to_another_gpu():
    from benchmarks.probes.mma_tf32_share import predicted_ratio

    # A GPU whose TF32 peak is three times its fp32 peak: a 3xTF32 row at the whole TF32
    # peak matches SGEMM at the whole fp32 peak, and the ratio follows share and efficiency.
    assert predicted_ratio(1.0, 60.0, 20.0, 1.0) == pytest.approx(1.0)
    assert predicted_ratio(0.5, 60.0, 20.0, 1.0) == pytest.approx(0.5)
    assert predicted_ratio(0.5, 60.0, 20.0, 0.5) == pytest.approx(1.0)


def test_narrow_orders_picks_the_row_and_compares_each_storage_with_aligned_rc():
    from benchmarks.probes.narrow_orders import PROBLEMS, narrow_row, report, with_ratios

    assert narrow_row(1, 4096) == narrow_row(32, 33) == "tf32x3_few_rows_mma"
    assert narrow_row(4096, 8) == narrow_row(33, 32) == "tf32x3_few_cols_mma"
    assert narrow_row(33, 33) is None
    assert all(narrow_row(m, n) is not None for m, n, _ in PROBLEMS)
    common = {"m": 8, "n": 4096, "k": 4096, "row": "tf32x3_few_rows_mma", "torch_ms": 0.03, "torch_err": 2e-7,
              "auto_plan": "tf32x3_few_rows_mma"}
    rc = {**common, "orders": "rc", "aligned": True, "refused": None, "ms": 0.02, "err": 1e-7, "split_k": 1,
          "predicted_ms": 0.016, "wide_gb_per_s": 3355.4}
    unaligned = {**rc, "aligned": False, "ms": 0.03}
    rr = {**rc, "orders": "rr", "ms": 0.025}
    refused = {**common, "orders": "cc", "aligned": True, "refused": "a narrow side past 32"}
    other = {**rc, "n": 2048, "aligned": False}  # another problem, whose aligned rc was not timed
    out = with_ratios([unaligned, rc, rr, refused, other])
    assert [r.get("vs_rc") for r in out] == [pytest.approx(1.5), pytest.approx(1.0), pytest.approx(1.25), None, None]
    assert [r.get("speedup") for r in out] == [pytest.approx(1.0), pytest.approx(1.5), pytest.approx(1.2), None,
                                               pytest.approx(1.5)]
    assert out[1]["vs_price"] == pytest.approx(1.25)
    assert "vs_rc" not in out[3]  # refused: nothing timed
    assert len(report([unaligned, rc, rr, refused, other])) == 5


def test_narrow_orders_fits_the_profiles_storage_figures():
    from benchmarks.probes.narrow_orders import storage_figures

    def record(m, orders, aligned, ms, predicted_ms=0.01):
        return {"m": m, "n": 4096, "k": 4096, "row": "tf32x3_few_rows_mma", "orders": orders, "aligned": aligned,
                "refused": None, "ms": ms, "predicted_ms": predicted_ms, "torch_ms": 0.03}

    # rr at 1.25x and 1.6x rc on two problems (geometric mean sqrt(2) = 1.414x: 71%); unaligned
    # at 1.1x its aligned order on both; rc at 2x and 1x its price (1.41x); cr and cc untimed.
    records = [record(8, "rc", True, 0.02, 0.01), record(8, "rr", True, 0.025), record(8, "rc", False, 0.022),
               record(32, "rc", True, 0.04, 0.04), record(32, "rr", True, 0.064), record(32, "rr", False, 0.0704)]
    fit = storage_figures(records)["tf32x3_few_rows_mma"]
    assert fit == {"rc_percent": 100, "rr_percent": 71, "unaligned_percent": 91, "rc_vs_price": 1.41}, fit


def test_tf32x3_error_floor_finds_where_a_row_stays_within_cublas():
    from benchmarks.probes.tf32x3_error_floor import CUBLAS, crossover

    # A floor of 2 u against fp32's error growing with K: within from K = 64 on, not a
    # dip below cuBLAS at 16 followed by a rise above it at 32.
    by_k = {16: {CUBLAS: 2.5, "row": 2.0}, 32: {CUBLAS: 1.5, "row": 2.0}, 64: {CUBLAS: 2.1, "row": 2.0},
            128: {CUBLAS: 3.0, "row": 2.1}, 256: {CUBLAS: 4.0, "row": 2.2}}
    assert crossover(by_k, "row") == 64
    # Above cuBLAS at the deepest K measured: no crossover; a row that does not take a K
    # is judged on the others.
    assert crossover({16: {CUBLAS: 1.0, "row": 2.0}, 32: {CUBLAS: 1.0, "row": 2.5}}, "row") is None
    assert crossover({16: {CUBLAS: 3.0, "row": 2.0}, 32: {CUBLAS: 3.0}}, "row") == 16


def test_model_level_recovers_the_scale_and_call_it_was_given():
    """model_level's fit of time = scale x model + per-call term gives back the figures the
    times were made with, at no error; each config's line states its medians."""
    from benchmarks.probes.model_level import affine_fit, report

    models = [3.0, 5.5, 8.0, 12.0, 20.0, 45.0, 90.0, 250.0, 700.0]
    points = [(m, 1.07 * m + 2.65) for m in models]
    scale, call, rms = affine_fit(points)
    assert (scale, call) == (1.07, 2.65) and rms < 1e-9
    lines = report([("async_32x32x16_t44_s4", m, t) for m, t in points[:4]] +
                   [("tiled_128x128x16", m, t) for m, t in points[4:]])
    assert lines[0].startswith("tiled_128x128x16") and "5 plans" in lines[0]
    assert "time = 1.07 x model + 2.65 us" in lines[-1] and "RMS log error 0.000" in lines[-1]


def test_tf32x3_kernel_split_recovers_the_figures_it_was_given():
    from benchmarks.probes.tf32x3_kernel_split import pass_ns, split_figures, wave_tiles

    profile = {"rates": {"launch_ns": 2500.0, "bytes_per_ns": 3500.0},
               "tf32x3": {"tf32x3_128x128_wgmma": {"k_tile_ns": 1000.0, "block_overhead_tiles": 2.0}}}
    a_ns, b_ns = -60.0, 140.0  # what each split costs the kernel a K tile
    records = []
    for m, n, k in ((4096, 4096, 4096), (512, 11008, 4096), (8192, 3072, 768)):
        tiles = wave_tiles(m, n, k, 132, 2.0)
        kernel = tiles * 1000.0
        ns = {"pass": kernel + pass_ns(m + n, k, 2500.0, 3500.0),
              "A": kernel + tiles * a_ns + pass_ns(n, k, 2500.0, 3500.0),
              "B": kernel + tiles * b_ns + pass_ns(m, k, 2500.0, 3500.0),
              "both": kernel + tiles * (a_ns + b_ns)}
        records.append(dict(m=m, n=n, k=k, us={c: v / 1e3 for c, v in ns.items()}))
    fit = split_figures(records, profile, 132)
    assert fit["A"] == pytest.approx(a_ns) and fit["B"] == pytest.approx(b_ns)
    assert fit["both"] == pytest.approx(a_ns + b_ns)
    # The pass that no longer runs is counted: a choice that only saves the pass is free.
    assert pass_ns(0, 4096, 2500.0, 3500.0) == 0.0


def test_model_products_records_a_training_steps_products_and_rebuilds_their_layouts():
    """The tiny GPT's step issues its Linear layers' products in the three layouts a Linear
    makes (forward x @ W.T: rc; input gradient: rr; weight gradient: cr), each counted once
    per layer; a replayed operand has the recorded shape, strides and alignment."""
    from benchmarks.probes.model_products import describe, operand, record_step, replay

    counts = record_step("tiny-gpt", device="cpu")
    described = collections.Counter()
    for (op, records, _), calls in counts.items():
        described[describe(op, records)] += calls
    # tiny-gpt: 2 layers of d 32, d_mlp 64, batch 8 x 32 tokens; the MLP's up projection.
    assert described["addmm 256x64x32 rc"] == 2
    assert described["mm 256x32x64 rr"] == 2  # its input's gradient
    assert described["mm 64x32x256 cr"] == 2  # its weight's gradient
    generator = torch.Generator().manual_seed(0)
    for record in (("tensor", (5, 7), (1, 5), True), ("tensor", (3, 4, 6), (24, 6, 1), False)):
        t = operand(record, generator, device="cpu")
        assert (tuple(t.shape), tuple(t.stride())) == record[1:3]
        assert (t.data_ptr() % 16 == 0) == record[3]
        assert t.abs().sum() > 0
    # A replay times the product both ways (on the CPU the switch leaves it to torch).
    key = next(k for k in counts if describe(k[0], k[1]) == "addmm 256x64x32 rc")
    row = replay(key, ["ieee"], generator, device="cpu")
    assert row["product"] == "addmm 256x64x32 rc" and row["torch_us"] > 0 and row["ieee"]["us"] > 0
    assert row["ieee"]["plan"].startswith("fallback") and row["ieee"]["model_us"] is None  # no price for torch's


def test_model_products_candidates_read_the_operands_as_the_plans_copies_leave_them():
    """--candidates times a product's tilings on the operands as the plan's kernel reads
    them: copied beforehand into the orders the plan copies them into (same values), with
    the copies' own time beside; a plan whose copies pad K leaves the product out."""
    from types import SimpleNamespace

    from benchmarks.probes.model_products import kernel_operands

    generator = torch.Generator().manual_seed(0)
    A, B = torch.randn(48, 32, generator=generator), torch.randn(32, 40, generator=generator).t().contiguous().t()
    none = SimpleNamespace(copy_a=None, copy_b=None)
    assert kernel_operands(A, B, none) == (A, B, 0.0)
    both = SimpleNamespace(copy_a="column-major", copy_b="row-major")
    A2, B2, copies_us = kernel_operands(A, B, both)
    assert A2.stride() == (1, 48) and B2.stride() == (40, 1) and copies_us > 0
    assert torch.equal(A2, A) and torch.equal(B2, B)
    padded_k = torch.randn(48, 30, generator=generator), torch.randn(30, 40, generator=generator)
    assert kernel_operands(*padded_k, both) is None


def test_host_breakdown_tallies_runtime_calls_per_call():
    from benchmarks.probes.host_breakdown import tally

    events = [("cudaLaunchKernel", 9.0)] + [("cudaLaunchKernel", 4.0), ("cudaLaunchKernelExC", 3.0),
                                            ("aten::empty", 1.0)] * 2 + [("cudaDeviceSynchronize", 50.0)]
    # The sleep's launch is not the function's; nor is the synchronisation, nor an aten op.
    assert tally(events, calls=2) == {"cudaLaunchKernel": (1.0, 4.0), "cudaLaunchKernelExC": (1.0, 3.0)}


def test_sweep_bound_takes_the_longest_limit_and_never_below_torch():
    from benchmarks.probes.sweep_bound import bound_ratio, summary

    # 4096^3: the tensor cores bound it (3 x 137.4 GFLOP at 495 TFLOP/s = 833 us).
    big = dict(m=4096, n=4096, k=4096, torch_ms=2.7, ratio_to_torch_matmul=2.2)
    assert bound_ratio(big, 4.8e12, 495e12, 5e-6) == pytest.approx(2.7e-3 / (6 * 4096**3 / 495e12))
    # A tiny one: the floor binds, and torch below the floor counts 1.0x.
    tiny = dict(m=16, n=16, k=16, torch_ms=0.004, ratio_to_torch_matmul=0.9)
    assert bound_ratio(tiny, 4.8e12, 495e12, 5e-6) == 1.0
    s = summary([big, tiny], 4.8e12, 495e12)
    assert s["floor_us"] == pytest.approx(4.0) and s["below_1_5"] == 1
    assert s["record"] == pytest.approx((2.2 * 0.9) ** 0.5)


def test_few_vectors_lists_each_count_in_both_roles():
    from benchmarks.probes.few_vectors import problems

    listed = problems([1, 2], matrices=[(4096, 4096), (768, 3072)], narrow=[(16, 65536)])
    assert (2, 4096, 4096, "rc") in listed and (2, 768, 3072, "rr") in listed  # vectors as A's rows
    assert (4096, 2, 4096, "rc") in listed and (768, 1, 3072, "cc") in listed  # vectors as B's columns
    assert (1, 16, 65536, "rc") in listed and (2, 16, 65536, "rc") in listed  # a narrow matrix
    assert len(listed) == len(set(listed)) == 2 * 2 * 2 + 2 * 2 * 2 + 2
    for m, n, k, orders in listed:
        assert min(m, n) in (1, 2) and orders in ("rc", "rr", "cc"), (m, n, k, orders)
