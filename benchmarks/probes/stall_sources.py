"""Which SASS instructions do the warp-stall samples of an ncu source-counter run fall on?

Collect (on the GPU) and export to CSV:

    ncu --kernel-name regex:sgemm --launch-skip 2 --launch-count 1 \\
        --section SourceCounters --section WarpStateStats -o rep python3 script.py
    ncu --import rep.ncu-rep --page source --print-source sass --csv | gzip > rep.csv.gz

then summarise here (no GPU needed): the share of samples per stall reason, for the main
reasons the opcodes they fall on, and the instructions with the most long-scoreboard
samples. docs/history.md (step 10) reads these for our kernels.

    python -m benchmarks.probes.stall_sources rep.csv.gz [more.csv.gz ...] [--top 5]
"""
import argparse
import csv
import gzip
import io
import re
from collections import Counter, defaultdict

REASONS = ["long_sb", "dispatch", "short_sb", "barrier", "wait", "math", "mio", "lg", "no_inst",
           "branch_resolving", "selected", "not_selected"]
DETAIL = ["long_sb", "dispatch", "short_sb", "wait", "barrier"]


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    lines = text.splitlines()
    # The first line names the kernel; the table starts at the header line.
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    kernel = next(csv.reader([lines[0]]))[1]
    return kernel, list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def opcode(source):
    return re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split(" ")[0]


def summarise(rows):
    total, by_op = Counter(), defaultdict(Counter)
    for r in rows:
        op = opcode(r["Source"])
        for k in REASONS:
            n = int(r.get("stall_" + k) or 0)
            total[k] += n
            by_op[op][k] += n
    return total, by_op


def report(path, top=5):
    kernel, rows = read_rows(path)
    total, by_op = summarise(rows)
    samples = sum(total.values())
    print(path)
    print("  " + kernel[:150])
    print(f"  {samples} samples: " + ", ".join(f"{k} {total[k] / samples:.1%}" for k in REASONS if total[k]))
    for k in DETAIL:
        if not total[k]:
            continue
        ops = sorted(((c[k], op) for op, c in by_op.items() if c[k]), reverse=True)[:top]
        print(f"  {k}: " + ", ".join(f"{op} {n / total[k]:.0%}" for n, op in ops))
    worst = sorted(rows, key=lambda r: -int(r.get("stall_long_sb") or 0))[:top]
    for r in worst:
        if int(r.get("stall_long_sb") or 0):
            print(f"    long_sb {int(r['stall_long_sb']):>7}  {r['Source'].strip()[:90]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="CSV (or .csv.gz) of ncu --page source --print-source sass")
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args(argv)
    for path in args.paths:
        report(path, args.top)


if __name__ == "__main__":
    main()
