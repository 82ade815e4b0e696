"""Does the narrow-side 3xTF32 kernel read an operand stored across K, or one whose rows are
not 16-byte aligned, as fast as an aligned one stored along K, and where does that put it
against torch.matmul fp32?

The narrow-side rows (`tf32x3_few_rows_mma`, `tf32x3_few_cols_mma`) read a K-contiguous
operand two 16-byte loads a row, and one stored across K one 16-byte load a K slot across
a lane's rows (sgemm_3xtf32_skinny.cuh, "How"): the same bytes and sectors, in another
order of DRAM pages; unaligned operands four 4-byte loads for each. For each problem
(decode shapes, and the random sweeps' products with a side of at most 32 that 3xTF32
gave to fp32 while only aligned row-major A and column-major B were read), each of the
four storage orders, aligned and one float in, it times the row by name (the strict op)
and torch.matmul fp32 (TF32 off) on the same operands (`benchmarks.common.time_ms`: median,
L2 cleared before each run), and prints each storage's time against aligned rc's and
against the time the planner prices the row at (what the speed rule's slack for the row
rests on), the wide operand's bytes per second, the ratio to torch, the error against
float64 beside cuBLAS's, and the plan auto makes in precision 3xTF32. Then, for the
problems whose narrow side is past 8, aligned rc with each of the kernel's block heights
forced (8, 16 and 32 rows of the narrow operand a block; `_C._testing.set_narrow_block_rows`):
fewer rows keep more warps resident, each block reading its tile of the wide operand, the
second and later from L2. Last, the storage figures a device profile prices the rows with
(`rr_percent` .. `cc_percent`, `unaligned_percent`, torch_vecgemm/profiles/h200.json),
fitted on these times, and aligned rc's time over its price. With --sweeps, instead: the
random sweeps' problems with a side of at most 32 (seeds 0 and 1, `benchmarks.sweep`), each
in its own storage, timed at every block height and beside torch.matmul, with both errors;
with --splits, those and PROBLEMS at every K split the row takes, each with its price.
Needs a GPU of sm_80 or newer.

    python -m benchmarks.probes.narrow_orders [--sweeps | --splits] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, tf32_allowed, time_ms
from benchmarks.report import geomean
from benchmarks.sweep import relative_error

ORDERS = ("rc", "rr", "cr", "cc")
# (M, N, K): decode (a few tokens through a 4096 x 4096 weight, and its transpose), and the
# sweeps' problems with M or N <= 32 (benchmarks/records/h200/sweep_3xtf32*.json: 15-72 us
# on cuBLAS, all handed to fp32 while only aligned rc was read; the last three declined
# for speed against IEEE plans priced 12-17 us, where the row is priced 12.3-12.5 us).
PROBLEMS = [(1, 4096, 4096), (8, 4096, 4096), (32, 4096, 4096), (4096, 8, 4096), (17, 6980, 2649),
            (32, 137, 6350), (21, 44, 7318), (1158, 19, 4951), (213, 30, 4634), (19, 469, 5604), (7067, 18, 1197),
            (29, 357, 6420), (30, 725, 2466), (578, 21, 2582)]


def stored(rows, cols, layout, generator, aligned=True):
    """A (rows, cols) N(0, 1) operand stored row- ("r") or column-major ("c"), its leading
    dimension a multiple of 4 floats, starting 16-byte aligned or one float in."""
    lines, line = (rows, cols) if layout == "r" else (cols, rows)
    ld, offset = line + -line % 4, 0 if aligned else 1
    values = torch.randn(lines * ld + offset, device="cuda", generator=generator)
    matrix = values[offset:].view(lines, ld)[:, :line]
    return matrix if layout == "r" else matrix.t()


def narrow_row(m, n):
    """The narrow-side row for the problem's narrow side, or None where neither is <= 32."""
    if m <= 32 and m <= n:
        return "tf32x3_few_rows_mma"
    return "tf32x3_few_cols_mma" if n <= 32 else None


def measure(m, n, k, orders=ORDERS, seed=0):
    """One record per storage (order, alignment): the row's and torch's times, errors, auto's
    plan."""
    row = narrow_row(m, n)
    g = torch.Generator(device="cuda").manual_seed(seed)
    wide_bytes = 4 * k * (n if row == "tf32x3_few_rows_mma" else m)
    records = []
    for orders_, aligned in ((o, a) for o in orders for a in (True, False)):
        A, B = stored(m, k, orders_[0], g, aligned), stored(k, n, orders_[1], g, aligned)
        ref = A.double() @ B.double()
        reason = torch_vecgemm.fallback_reason(A, B, variant=row, precision="3xtf32")
        with tf32_allowed(False):
            torch_ms = time_ms(lambda: torch.matmul(A, B))
            torch_err = relative_error(torch.matmul(A, B), ref)
        record = {"m": m, "n": n, "k": k, "orders": orders_, "aligned": aligned, "row": row, "refused": reason,
                  "torch_ms": torch_ms,
                  "torch_err": torch_err, "auto_plan": str(torch_vecgemm.plan(A, B, precision="3xtf32"))}
        if reason is None:
            run = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32")  # noqa: E731
            record["ms"] = time_ms(run)
            record["err"] = relative_error(run(), ref)
            planned = torch_vecgemm.plan(A, B, variant=row, precision="3xtf32")
            record["split_k"], record["predicted_ms"] = planned.split_k, planned.predicted_us / 1e3
            record["wide_gb_per_s"] = wide_bytes / record["ms"] / 1e6
        records.append(record)
    return records


BLOCK_ROWS = (8, 16, 32)


def block_rows_times(m, n, k, seed=0):
    """Aligned rc's time with each block height forced, by rows (none where the narrow side
    fits 8 rows: every height is then one block along it)."""
    row = narrow_row(m, n)
    if min(m, n) <= 8:
        return {}
    g = torch.Generator(device="cuda").manual_seed(seed)
    A, B = stored(m, k, "r", g), stored(k, n, "c", g)
    knob = torch_vecgemm._C._testing.set_narrow_block_rows
    times = {}
    try:
        for rows in BLOCK_ROWS:
            knob(rows)
            times[rows] = time_ms(lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32"))
    finally:
        knob(0)
    return times


def _problem(p, seed):
    """A sweep problem's operands in its storage (a dict as benchmarks.sweep draws them),
    its narrow row, and a call of that row by name (the strict op)."""
    from benchmarks.sweep import make_problem_operands

    row = narrow_row(p["m"], p["n"])
    A, B = make_problem_operands(p, "cuda", seed)
    return row, A, B, lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32")


def sweep_problem_record(p, seed):
    """One of a sweep's narrow problems in its storage: the row's time at each block height,
    torch.matmul's, both errors against float64, the split the row runs and its price."""
    row, A, B, run = _problem(p, seed)
    ref = A.double() @ B.double()
    with tf32_allowed(False):
        torch_ms = time_ms(lambda: torch.matmul(A, B))
        torch_err = relative_error(torch.matmul(A, B), ref)
    planned = torch_vecgemm.plan(A, B, variant=row, precision="3xtf32")
    knob = torch_vecgemm._C._testing.set_narrow_block_rows
    times = {}
    try:
        for rows in BLOCK_ROWS:
            knob(rows)
            times[rows] = time_ms(run)
    finally:
        knob(0)
    return dict(p, seed=seed, row=row, split_k=planned.split_k, predicted_ms=planned.predicted_us / 1e3,
                ms_by_block_rows=times, torch_ms=torch_ms, err=relative_error(run(), ref), torch_err=torch_err,
                auto_plan=str(torch_vecgemm.plan(A, B, precision="3xtf32")))


SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def split_records(p, seed):
    """A narrow problem in its storage (a sweep problem's dict, or aligned rc) timed at each
    K split the row takes (`_C._testing.set_tf32x3_splits`), each with its price: the waves
    model's price off its own choice of split, checked. One record a split."""
    row, A, B, run = _problem(p, seed)
    knob, records, seen = torch_vecgemm._C._testing.set_tf32x3_splits, [], set()
    try:
        for splits in SPLITS:
            knob(splits)
            planned = torch_vecgemm.plan(A, B, variant=row, precision="3xtf32")
            if planned.split_k in seen:
                continue  # past the row's most, or the same whole-K-tile slices
            seen.add(planned.split_k)
            records.append(dict(p, seed=seed, row=row, split_k=planned.split_k,
                                predicted_ms=planned.predicted_us / 1e3, ms=time_ms(run)))
    finally:
        knob(0)
    return records


def sweep_problems():
    """(problem, seed) of the sweeps' problems with a side of at most 32."""
    from benchmarks.sweep import draw_problems

    return [(p, seed) for seed in (0, 1) for p in draw_problems(seed, 128) if narrow_row(p["m"], p["n"])]


def with_ratios(records):
    """Each timed record with its time over aligned rc's on the same problem (`vs_rc`, None
    where rc was not timed), over the planner's price (`vs_price`) and torch's time over
    its (`speedup`)."""
    base = {(r["m"], r["n"], r["k"]): r.get("ms") for r in records if r["orders"] == "rc" and r["aligned"]}
    out = []
    for r in records:
        if r["refused"] is None:
            rc = base.get((r["m"], r["n"], r["k"]))
            r = dict(r, vs_rc=r["ms"] / rc if rc else None, vs_price=r["ms"] / r["predicted_ms"],
                     speedup=r["torch_ms"] / r["ms"])
        out.append(r)
    return out


def storage_figures(records):
    """The device profile's storage figures for each narrow row, fitted on the records: for
    each storage order, 100 over the geometric mean of its aligned times against aligned
    rc's (`rr_percent` .. `cc_percent`), and 100 over that of each unaligned time against the
    aligned one of the same order and problem (`unaligned_percent`), rounded; and aligned
    rc's time against its price (`rc_vs_price`, what k_tile_ns would be scaled by to price
    rc right). A storage without a timed record is left out (not priced)."""
    ratios = with_ratios(records)
    aligned = {(r["row"], r["m"], r["n"], r["k"], r["orders"]): r["ms"]
               for r in ratios if r["refused"] is None and r["aligned"]}
    figures = {}
    for row in sorted({r["row"] for r in ratios}):
        timed = [r for r in ratios if r["row"] == row and r["refused"] is None]
        fit = {}
        for orders in ORDERS:
            vs_rc = geomean(r["vs_rc"] for r in timed if r["orders"] == orders and r["aligned"])
            if vs_rc:
                fit[f"{orders}_percent"] = round(100 / vs_rc)
        unaligned = [r["ms"] / aligned[key] for r in timed if not r["aligned"]
                     for key in [(row, r["m"], r["n"], r["k"], r["orders"])] if key in aligned]
        if unaligned:
            fit["unaligned_percent"] = round(100 / geomean(unaligned))
        rc_price = geomean(r["vs_price"] for r in timed if r["orders"] == "rc" and r["aligned"])
        if rc_price:
            fit["rc_vs_price"] = round(rc_price, 2)
        figures[row] = fit
    return figures


def report(records):
    """Lines of text: each storage's time against aligned rc's, its price and torch's, and the
    errors."""
    lines = []
    for r in with_ratios(records):
        head = f"{r['m']}x{r['n']}x{r['k']} {r['orders']}{'' if r['aligned'] else ' one float in'}"
        if r["refused"] is not None:
            lines.append(f"{head}: refused ({r['refused']}); auto: {r['auto_plan']}")
            continue
        vs_rc = "-" if r["vs_rc"] is None else f"{r['vs_rc']:.2f}x"
        lines.append(f"{head}: {r['ms'] * 1e3:7.1f} us (split-k {r['split_k']}), {vs_rc} aligned rc's, "
                     f"{r['vs_price']:.2f}x its price, {r['wide_gb_per_s']:6.0f} GB/s, {r['speedup']:.2f}x torch.matmul, "
                     f"error {r['err']:.2e} (cuBLAS {r['torch_err']:.2e}); auto: {r['auto_plan']}")
    return lines


def _write(path, **measured):
    """The measurements as JSON beside the machine and the planner's facts of this GPU."""
    with open(path, "w") as f:
        json.dump({"machine": machine_info(), "facts": torch_vecgemm._C._testing.device_facts(), **measured}, f,
                  indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write every measurement to this JSON file")
    ap.add_argument("--sweeps", action="store_true", help="the sweeps' narrow problems at every block height")
    ap.add_argument("--splits", action="store_true",
                    help="PROBLEMS in aligned rc and the sweeps' narrow problems at every K split")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("narrow_orders needs a GPU")
    if args.splits:
        problems = [(dict(m=m, n=n, k=k, layout="rc", align="aligned"), 0) for m, n, k in PROBLEMS] + sweep_problems()
        records = []
        for p, seed in problems:
            timed = split_records(p, seed)
            records += timed
            print(f"{p['m']}x{p['n']}x{p['k']} {p['layout']} {p['align']}: " + ", ".join(
                f"split {r['split_k']} {r['ms'] * 1e3:.1f} us "
                f"(priced {r['predicted_ms'] * 1e3:.1f})" for r in timed))
        if args.out:
            _write(args.out, split_records=records)
        return
    if args.sweeps:
        records = []
        for p, seed in sweep_problems():
            r = sweep_problem_record(p, seed)
            records.append(r)
            heights = ", ".join(f"{rows} {ms * 1e3:.1f}" for rows, ms in r["ms_by_block_rows"].items())
            print(f"seed {seed} {r['m']}x{r['n']}x{r['k']} {r['layout']} {r['align']}: split-k {r['split_k']}, "
                  f"priced {r['predicted_ms'] * 1e3:.1f} us, by rows a block {heights} us, torch.matmul "
                  f"{r['torch_ms'] * 1e3:.1f} us, error {r['err'] / 2**-24:.2f} u (cuBLAS {r['torch_err'] / 2**-24:.2f} u)")
        if args.out:
            _write(args.out, sweep_problems=records)
        return
    records = [r for m, n, k in PROBLEMS for r in measure(m, n, k)]
    print("\n".join(report(records)))
    print("storage figures for the device profile (rc_vs_price: aligned rc's time over its price):")
    print(json.dumps(storage_figures(records)))
    heights = []
    for m, n, k in PROBLEMS:
        times = block_rows_times(m, n, k)
        if times:
            heights.append({"m": m, "n": n, "k": k, "ms": times})
            print(f"{m}x{n}x{k} rc, rows a block: " + ", ".join(f"{rows} {ms * 1e3:.1f} us" for rows, ms in times.items()))
    if args.out:
        _write(args.out, records=records, block_rows=heights)


if __name__ == "__main__":
    main()
