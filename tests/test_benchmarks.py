"""The benchmark suite's own logic, where it runs without a GPU: the random sweep's problems
(a function of the seed, spread as its docstring says), its operands (the storage order and
alignment drawn), its summary, and the records' report regenerated from stored JSON."""
from __future__ import annotations

import math

import torch

from benchmarks import records, sweep


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
    rows = [dict(m=m, n=8, k=8, layout="rr", align="aligned", ratio_to_torch_matmul=r)
            for m, r in ((16, 0.5), (32, 2.0), (64, 1.06), (128, 0.96))]
    s = sweep.summarize(rows)
    assert s["problems"] == 4 and s["below_0_95"] == 1 and s["at_least_1_05"] == 2
    assert math.isclose(s["geomean"], (0.5 * 2.0 * 1.06 * 0.96) ** 0.25)
    assert s["lowest"] == 0.5 and s["lowest_problem"].startswith("16x8x8")


def test_record_sets_report_from_stored_json():
    # Every stored set renders: the benchmark of record and the kinds it holds.
    for slug in records.sets():
        text = records.sections(slug, title=True)
        if records.load(slug) is not None:
            assert "torch.matmul" in text
