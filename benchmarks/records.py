"""Regenerate the records of record: one set per GPU, benchmarks/records/<gpu>/.

    python -m benchmarks.records                  # on the GPU: measure, write its set and the README's results
    python -m benchmarks.records --what train     # only the training benchmark (or --what bench)
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

and the training benchmark, benchmarks/train.py at its defaults (TRAIN_ARGS: gpt2-small and
the MLP, each trained with torch.nn.Linear and with torch_vecgemm's, timed eager and
compiled), kept as

    train.json   the stamp, the settings, the loss curves, the agreement check, tokens/s
                 and what inductor generated
    train.png    the loss curves and the throughput
    train.md     the tables

in records/<gpu>/, the GPU's name made a slug ("NVIDIA H200" -> h200). The README's results
section (and its training section) is rewritten from the set of the GPU it shows (or from
this one where it shows none; --readme yes / no overrides), and records/README.md's table of
sets is rewritten. A run with any result that disagrees with cuBLAS, or a model whose loss
departs from the reference's, writes nothing of that benchmark, and a checkout with
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
TRAIN_BEGIN, TRAIN_END = "<!-- train:begin -->", "<!-- train:end -->"
# The benchmark of record: bench.py's arguments (timing at bench.py's defaults).
RECORD_ARGS = ["--suite", "square,model", "--layouts", "rr", "--variants", "auto,vectorized"]
# The training benchmark of record: train.py's defaults (models.json's default preset).
TRAIN_ARGS = []
WHAT = ("bench", "train")


def gpu_slug(name):
    """The set's directory for a GPU: 'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' ->
    'h100-80gb-hbm3', 'NVIDIA GeForce RTX 4090' -> 'rtx-4090'."""
    name = re.sub(r"\b(nvidia|geforce)\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


def sets():
    """The slugs of the sets under records/ (a benchmark's or a training record), sorted."""
    return sorted(d for d in os.listdir(ROOT)
                  if any(os.path.isfile(os.path.join(ROOT, d, f"{what}.json")) for what in WHAT))


def load(slug, what="bench"):
    """A set's JSON of one benchmark ("bench" or "train"), or None where it has none."""
    path = os.path.join(ROOT, slug, f"{what}.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_derived(slug, plot=True):
    """summary.md and train.md (and the plots) of one set, from its JSON."""
    from benchmarks import train

    data = load(slug)
    if data is not None:
        info, records = data["machine"], data["records"]
        with open(os.path.join(ROOT, slug, "summary.md"), "w") as f:
            f.write(report.markdown(info, records))
        if plot:
            report.plot(info, records, os.path.join(ROOT, slug, "bench.png"))
    trained = load(slug, "train")
    if trained is not None:
        with open(os.path.join(ROOT, slug, "train.md"), "w") as f:
            f.write(train.markdown(trained))
        if plot:
            train.plot(trained, os.path.join(ROOT, slug, "train.png"))


def readme_gpu():
    """The GPU whose results the README shows (the first words of its results section)."""
    text = report.section(README)
    return text.split(" (")[0] if text else None


def write_readme(slug):
    """The README's results from a set: the benchmark's tables, and the training one's."""
    from benchmarks import train

    data, trained = load(slug), load(slug, "train")
    if data is not None:
        report.update_readme(README, report.markdown(data["machine"], data["records"], title=False))
    if trained is not None:
        report.update_readme(README, train.markdown(trained, title=False), TRAIN_BEGIN, TRAIN_END)


def _machine(slug):
    return (load(slug) or load(slug, "train"))["machine"]


def write_index():
    """records/README.md's table: which GPU, software, commit and build each set is from."""
    def commit(m):
        return f"{m.get('git_commit')}{' (uncommitted changes)' if m.get('git_dirty') else ''}"

    rows = ["| set | GPU | SMs | driver | torch | CUDA | date | commit | build | training record |",
            "|---|---|---:|---|---|---|---|---|---|---|"]
    for slug in sets():
        m, trained = _machine(slug), load(slug, "train")
        training = f"[{trained['machine']['date'][:10]}, {commit(trained['machine'])}]({slug}/train.md)" if trained else "-"
        rows.append(f"| [{slug}]({slug}/summary.md) | {m.get('gpu')} | {m.get('sms')} | {m.get('driver')} | {m['torch']} | "
                    f"{m['cuda']} | {m['date'][:10]} | {commit(m)} | {report.sass_rewrite(m.get('build'))} | {training} |")
    report.update_readme(INDEX, "\n".join(rows), INDEX_BEGIN, INDEX_END)


def measure(args):
    """Run the benchmarks of record (args.what) on this GPU and write its set; returns the
    set's slug."""
    import torch

    import torch_vecgemm
    from benchmarks.common import uncommitted_changes

    if not torch.cuda.is_available():
        raise SystemExit("records are measured on a GPU and there is none here "
                         "(--report-only regenerates the summaries, plots and README from the stored JSON)")
    if not torch_vecgemm._C.cuda_kernels_built():
        raise SystemExit("this torch_vecgemm was built without its CUDA kernels")
    changes = uncommitted_changes() or []
    if changes and not args.allow_dirty:
        raise SystemExit("uncommitted changes; a record is of a commit (or pass --allow-dirty):\n  " + "\n  ".join(changes))
    slug = args.gpu or gpu_slug(torch.cuda.get_device_name())
    os.makedirs(os.path.join(ROOT, slug), exist_ok=True)
    what = WHAT if args.what == "all" else (args.what,)
    if "bench" in what:
        measure_bench(slug)
    if "train" in what:
        measure_train(slug)
    return slug


def measure_bench(slug):
    from benchmarks import bench

    info, settings, records = bench.run(bench.parse_args(RECORD_ARGS))
    bench.print_table(records)
    wrong = bench.wrong_results(records)
    if wrong:
        for r in wrong:
            print(f"!!! {r['name']} {r['variant']}: {r['note']}", file=sys.stderr)
        raise SystemExit(f"{len(wrong)} results disagree with cuBLAS; no record written")
    written = bench.write_outputs(os.path.join(ROOT, slug, "bench"), info, records, settings)
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))


def measure_train(slug):
    from benchmarks import train

    data = train.run(train.parse_args(TRAIN_ARGS))
    print(train.markdown(data))
    failed = train.failures(data)
    if failed:
        for name, checks in failed:
            print(f"!!! {name}: the swapped model's loss departs from the reference's ({', '.join(checks)})", file=sys.stderr)
        raise SystemExit("a model's loss departs from the reference's; no training record written")
    written = train.write_outputs(os.path.join(ROOT, slug, "train"), data)
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.records", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite summary.md, bench.png, train.md, train.png, the index and the README "
                    "from the stored JSON")
    ap.add_argument("--gpu", help="the set's directory under records/ (default: the slug of this GPU's name; "
                    "with --report-only, every set)")
    ap.add_argument("--readme", choices=("auto", "yes", "no"), default="auto",
                    help="rewrite the README's results section: auto = from the set of the GPU it shows")
    ap.add_argument("--no-plot", action="store_true", help="with --report-only, leave bench.png as it is")
    ap.add_argument("--allow-dirty", action="store_true", help="measure a checkout with uncommitted changes")
    ap.add_argument("--what", choices=("all",) + WHAT, default="all",
                    help="which benchmarks of record to measure: the GEMM benchmark, the training one, or both")
    args = ap.parse_args(argv)

    if args.report_only:
        slugs = [args.gpu] if args.gpu else sets()
    else:
        slugs = [measure(args)]
    shown = readme_gpu()
    for slug in slugs:
        write_derived(slug, plot=args.report_only and not args.no_plot)  # a measurement has plotted
        gpu = _machine(slug).get("gpu")
        if args.readme == "yes" or (args.readme == "auto" and (shown in (None, gpu))):
            write_readme(slug)
            shown = gpu
            print(f"README.md: results of {slug}")
        elif args.readme == "auto":
            print(f"README.md shows {shown}, left as it is (--readme yes puts {slug} there)")
    write_index()
    print(f"{os.path.relpath(INDEX, REPO)}: the table of sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
