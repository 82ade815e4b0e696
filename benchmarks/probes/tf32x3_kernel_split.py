"""What does the wgmma kernel's own split of an operand cost or save against reading the
split pass's parts: A's parts made in its consumers' registers, B's in shared memory by its
producer warpgroup's idle warps, each alone and both at once?

Each problem runs with B K-contiguous (column-major) and both operands 16-byte aligned, so
that every choice is open: A row-major (x @ W.T), whose K-major tiles give `a_split_ns`,
and A column-major, whose M-major tiles give `a_split_m_major_ns`. It runs on
`tf32x3_128x128_wgmma` four ways, the choice forced by giving the planner a copy of the
device's profile whose split figures pick it (the shipped profile is put back at the end);
each call's device time is `benchmarks.common.time_ms`'s (median, L2 cleared before each
run), beside torch.matmul's on the same operands. The difference from the pass's parts
becomes the profile's figures (a K tile's ns more, below 0 fewer), with the pass priced as
the waves model prices it (its launch and 12 bytes an element at the profile's bandwidth,
cost_model.cpp); each figure is the median over the problems, and "both" says whether the
two add up. Needs a GPU that runs the wgmma row.

    python -m benchmarks.probes.tf32x3_kernel_split [--out FILE.json]
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, make_operands, time_ms

ROW = "tf32x3_128x128_wgmma"
# Squares, the deep and the shallow K of the model shapes, a one-wave grid.
PROBLEMS = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (2048, 12288, 4096), (512, 11008, 4096),
            (8192, 3072, 768), (1024, 50257, 768), (1000, 2304, 768)]
PASS_BYTES = 12.0  # the split pass reads 4 and writes 8 bytes an element (cost_model.cpp)
BLOCKS_PER_SM = 1  # the wgmma kernel's 197 KB of shared memory
# The choice -> split figures that force it, in K tiles: the kernel's own split priced far
# below or far above the pass, within what the profile's check accepts (a K tile's time
# above 0); and the operands each choice has the kernel make itself where it can read them.
FORCING = {"pass": (1e3, 1e3), "A": (-0.9, 1e3), "B": (1e3, -0.9), "both": (-0.45, -0.45)}
MADE = {"pass": frozenset(), "A": frozenset("A"), "B": frozenset("B"), "both": frozenset("AB")}
# The storage orders measured, each with the figure its A choice fits: A's tiles K-major, M-major.
ORDERS = {"rc": "a_split_ns", "cc": "a_split_m_major_ns"}


def wave_tiles(m, n, k, sms, overhead_tiles, bm=128, bn=128, bk=32):
    """The waves model's K tiles on the critical path of an unsplit call."""
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return math.ceil(tiles / (sms * BLOCKS_PER_SM)) * (math.ceil(k / bk) + overhead_tiles)


def pass_ns(rows, k, launch_ns, bytes_per_ns):
    return launch_ns + PASS_BYTES * rows * k / bytes_per_ns if rows else 0.0


def split_figures(records, profile, sms):
    """The profile's split figures fitted on the records: for each choice, the kernel's ns a
    K tile over the pass's parts (its time over the pass choice's, plus the pass it no
    longer pays), the median over the problems."""
    rates = profile["rates"]
    row = profile["tf32x3"][ROW]
    per_choice = {"A": [], "B": [], "both": []}
    for r in records:
        m, n, k = r["m"], r["n"], r["k"]
        tiles = wave_tiles(m, n, k, sms, row["block_overhead_tiles"])
        both_passed = pass_ns(m + n, k, rates["launch_ns"], rates["bytes_per_ns"])
        passed = {"A": n, "B": m, "both": 0}
        for choice, rows in passed.items():
            saved = both_passed - pass_ns(rows, k, rates["launch_ns"], rates["bytes_per_ns"])
            per_choice[choice].append((r["us"][choice] - r["us"]["pass"]) * 1e3 / tiles + saved / tiles)
    return {choice: statistics.median(v) for choice, v in per_choice.items() if v}


def profile_of_device():
    name = torch_vecgemm._C._testing.profile_name(torch.cuda.current_device())
    for path in sorted(torch_vecgemm._profiles.FOLDER.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc["name"] == name:
            return doc
    raise SystemExit(f"no profile file named {name!r}")


def forced(profile, a_tiles, b_tiles):
    """The profile with the row's split figures set to these multiples of its K tile."""
    doc = copy.deepcopy(profile)
    row = doc["tf32x3"][ROW]
    row.update(a_split_ns=a_tiles * row["k_tile_ns"], a_split_m_major_ns=a_tiles * row["k_tile_ns"],
               b_split_ns=b_tiles * row["k_tile_ns"])
    return doc


def use(profile):
    torch_vecgemm._C._add_device_profile(torch_vecgemm._profiles.as_planner_data(profile))
    torch_vecgemm._C.clear_tuning_cache()  # a new generation: the plans made so far are not reused


def measure(m, n, k, orders, profile, timing):
    A, B = make_operands(m, n, k, orders, "cuda", seed=m + n + k)
    out = dict(m=m, n=n, k=k, orders=orders, torch_us=time_ms(lambda: torch.matmul(A, B), **timing) * 1e3, us={}, plans={})
    for choice, (a, b) in FORCING.items():
        use(forced(profile, a, b))
        fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, ROW, "3xtf32")  # noqa: E731
        out["plans"][choice] = str(torch_vecgemm.plan(A, B, variant=ROW))
        out["us"][choice] = time_ms(fn, **timing) * 1e3
    use(profile)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rep-ms", type=float, default=60)
    ap.add_argument("--out", help="write every measurement to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or ROW not in torch_vecgemm.variants():
        raise SystemExit(f"needs a GPU and a build with {ROW}")
    probe = torch.ones(128, 128, device="cuda")
    if torch_vecgemm.fallback_reason(probe, probe, variant=ROW) is not None:
        raise SystemExit(f"{ROW} does not run here: {torch_vecgemm.fallback_reason(probe, probe, variant=ROW)}")
    profile = profile_of_device()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    timing = dict(warmup_ms=10, rep_ms=args.rep_ms)
    records = [measure(m, n, k, orders, profile, timing) for orders in ORDERS for m, n, k in PROBLEMS]
    print(f"{'M x N x K':<22} {'torch':>8} " + " ".join(f"{c:>15}" for c in FORCING))
    for r in records:
        cells = " ".join(f"{r['us'][c]:8.1f} {r['torch_us'] / r['us'][c]:5.2f}x" for c in FORCING)
        print(f"{r['m']}x{r['n']}x{r['k']:<8} {r['orders']} {r['torch_us']:8.1f} {cells}")
    row = profile["tf32x3"][ROW]
    fit = {}
    for orders, a_field in ORDERS.items():
        fit[orders] = split_figures([r for r in records if r["orders"] == orders], profile, sms)
        f = fit[orders]
        print(f"{orders}: fitted a K tile's ns over the pass's parts (the profile's now: {a_field} "
              f"{row.get(a_field)}, b_split_ns {row['b_split_ns']}): A {f['A']:+.0f}, B {f['B']:+.0f}, "
              f"both {f['both']:+.0f} (A + B {f['A'] + f['B']:+.0f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=machine_info(), records=records, fit=fit), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
