"""Regenerate the records of record: one set per GPU, benchmarks/records/<gpu>/.

    python -m benchmarks.records                  # on the GPU: measure, write its set and the README's results
    python -m benchmarks.records --report-only    # anywhere: summaries, plots and README from the stored JSON

A record is the benchmark of record, bench.py with the settings below (RECORD_ARGS: the
square sweep and the model shapes of shapes.json, row-major square operands, torch.matmul,
cuBLAS TF32, auto and vectorized, the default timing), run from a committed checkout and
kept as

    bench.json   the stamp (GPU and SMs, driver, torch, CUDA, commit, the library's build)
                 and every record
    bench.csv    the records, one a row
    bench.png    the plot
    summary.md   the tables, headed by the stamp

in records/<gpu>/, the GPU's name made a slug ("NVIDIA H200" -> h200). The README's results
section is rewritten from the set of the GPU it shows (or from this one where it shows
none; --readme yes / no overrides), and records/README.md's table of sets is rewritten.
A run with any result that disagrees with cuBLAS writes nothing, and a checkout with
uncommitted changes is refused unless --allow-dirty (the stamp then says so).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from benchmarks import report
from benchmarks.common import REPO

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "records")
README = os.path.join(REPO, "README.md")
INDEX = os.path.join(ROOT, "README.md")
INDEX_BEGIN, INDEX_END = "<!-- records:begin -->", "<!-- records:end -->"
# The benchmark of record: bench.py's arguments (timing at bench.py's defaults).
RECORD_ARGS = ["--suite", "square,model", "--layouts", "rr", "--variants", "auto,vectorized"]


def gpu_slug(name):
    """The set's directory for a GPU: 'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' ->
    'h100-80gb-hbm3', 'NVIDIA GeForce RTX 4090' -> 'rtx-4090'."""
    name = re.sub(r"\b(nvidia|geforce)\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


def sets():
    """The slugs of the sets under records/, sorted."""
    return sorted(d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "bench.json")))


def load(slug):
    with open(os.path.join(ROOT, slug, "bench.json")) as f:
        return json.load(f)


def write_derived(slug, data, plot=True):
    """summary.md (and bench.png) of one set, from its JSON."""
    info, records = data["machine"], data["records"]
    with open(os.path.join(ROOT, slug, "summary.md"), "w") as f:
        f.write(report.markdown(info, records))
    if plot:
        report.plot(info, records, os.path.join(ROOT, slug, "bench.png"))


def readme_gpu():
    """The GPU whose results the README shows (the first words of its results section)."""
    text = report.section(README)
    return text.split(" (")[0] if text else None


def write_readme(data):
    report.update_readme(README, report.markdown(data["machine"], data["records"], title=False))


def write_index():
    """records/README.md's table: which GPU, software, commit and build each set is from."""
    rows = ["| set | GPU | SMs | driver | torch | CUDA | date | commit | build |", "|---|---|---:|---|---|---|---|---|---|"]
    for slug in sets():
        m = load(slug)["machine"]
        commit = f"{m.get('git_commit')}{' (uncommitted changes)' if m.get('git_dirty') else ''}"
        rows.append(f"| [{slug}]({slug}/summary.md) | {m.get('gpu')} | {m.get('sms')} | {m.get('driver')} | {m['torch']} | "
                    f"{m['cuda']} | {m['date'][:10]} | {commit} | {report.sass_rewrite(m.get('build'))} |")
    report.update_readme(INDEX, "\n".join(rows), INDEX_BEGIN, INDEX_END)


def measure(args):
    """Run the benchmark of record on this GPU and write its set; returns the set's slug."""
    import torch

    import torch_vecgemm
    from benchmarks import bench
    from benchmarks.common import uncommitted_changes

    if not torch.cuda.is_available():
        raise SystemExit("records are measured on a GPU and there is none here "
                         "(--report-only regenerates the summaries, plots and README from the stored JSON)")
    if not torch_vecgemm._C.cuda_kernels_built():
        raise SystemExit("this torch_vecgemm was built without its CUDA kernels")
    changes = uncommitted_changes() or []
    if changes and not args.allow_dirty:
        raise SystemExit("uncommitted changes; a record is of a commit (or pass --allow-dirty):\n  " + "\n  ".join(changes))
    info, settings, records = bench.run(bench.parse_args(RECORD_ARGS))
    bench.print_table(records)
    wrong = bench.wrong_results(records)
    if wrong:
        for r in wrong:
            print(f"!!! {r['name']} {r['variant']}: {r['note']}", file=sys.stderr)
        raise SystemExit(f"{len(wrong)} results disagree with cuBLAS; no record written")
    slug = args.gpu or gpu_slug(info["gpu"])
    os.makedirs(os.path.join(ROOT, slug), exist_ok=True)
    written = bench.write_outputs(os.path.join(ROOT, slug, "bench"), info, records, settings)
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))
    return slug


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.records", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite summary.md, bench.png, the index and the README from the stored JSON")
    ap.add_argument("--gpu", help="the set's directory under records/ (default: the slug of this GPU's name; "
                    "with --report-only, every set)")
    ap.add_argument("--readme", choices=("auto", "yes", "no"), default="auto",
                    help="rewrite the README's results section: auto = from the set of the GPU it shows")
    ap.add_argument("--no-plot", action="store_true", help="with --report-only, leave bench.png as it is")
    ap.add_argument("--allow-dirty", action="store_true", help="measure a checkout with uncommitted changes")
    args = ap.parse_args(argv)

    if args.report_only:
        slugs = [args.gpu] if args.gpu else sets()
    else:
        slugs = [measure(args)]
    shown = readme_gpu()
    for slug in slugs:
        data = load(slug)
        write_derived(slug, data, plot=args.report_only and not args.no_plot)  # a measurement has plotted
        gpu = data["machine"].get("gpu")
        if args.readme == "yes" or (args.readme == "auto" and (shown in (None, gpu))):
            write_readme(data)
            shown = gpu
            print(f"README.md: results of {slug}")
        elif args.readme == "auto":
            print(f"README.md shows {shown}, left as it is (--readme yes puts {slug} there)")
    write_index()
    print(f"{os.path.relpath(INDEX, REPO)}: the table of sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
