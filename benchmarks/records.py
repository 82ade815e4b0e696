"""Regenerate the records of record: one set per GPU, benchmarks/records/<gpu>/.

    python -m benchmarks.records                  # on the GPU: measure, write its set and the README's results
    python -m benchmarks.records --only sweep     # measure one kind again, keep the others
    python -m benchmarks.records --report-only    # anywhere: summaries, plots and README from the stored JSON

A set holds one record of each kind (KINDS), each run from a committed checkout:

    bench   the benchmark of record: bench.py with RECORD_ARGS (the square sweep and the
            model shapes of shapes.json, row-major square operands, torch.matmul, cuBLAS
            TF32, auto and vectorized, the default timing): bench.json (the stamp: GPU and
            SMs, driver, torch, CUDA, commit, the library's build; and every record),
            bench.csv (one record a row), bench.png
    sweep   the seeded random-shape sweep (sweep.py, seed 0, 128 problems): sweep.json,
            sweep.png
    host    host time per call, path by path (host_overhead.py): host.json, host.png

and summary.md, every table, each headed by its stamp. The set's directory is the GPU's
name made a slug ("NVIDIA H200" -> h200). The README's results section is rewritten from
the set of the GPU it shows (or from this one where it shows none; --readme yes / no
overrides), and records/README.md's table of sets is rewritten. A run with any result that
disagrees with cuBLAS writes nothing, and a checkout with uncommitted changes is refused
unless --allow-dirty (the stamp then says so).
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


def _load_kind(slug, kind):
    path = os.path.join(ROOT, slug, f"{kind}.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def sections(slug, data, title):
    """The set's tables as markdown: the benchmark of record, then the other kinds it holds."""
    from benchmarks import host_overhead, sweep

    parts = [report.markdown(data["machine"], data["records"], title=title)]
    for kind, module, heading in (("sweep", sweep, "Random shapes"), ("host", host_overhead, "Host time per call")):
        extra = _load_kind(slug, kind)
        if extra is not None:
            parts.append(f"### {heading}\n\n{report.stamp(extra['machine'])}\n\n{module.markdown(extra, title=False)}"
                         f"\n![{heading}](benchmarks/records/{slug}/{kind}.png)\n")
    return "\n".join(parts)


def write_derived(slug, data, plot=True):
    """summary.md (and the plots) of one set, from its JSON."""
    from benchmarks import host_overhead, sweep

    with open(os.path.join(ROOT, slug, "summary.md"), "w") as f:
        f.write(sections(slug, data, title=True).replace(f"](benchmarks/records/{slug}/", "]("))
    if plot:
        report.plot(data["machine"], data["records"], os.path.join(ROOT, slug, "bench.png"))
        for kind, module in (("sweep", sweep), ("host", host_overhead)):
            extra = _load_kind(slug, kind)
            if extra is not None:
                module.plot(extra, os.path.join(ROOT, slug, f"{kind}.png"))


def readme_gpu():
    """The GPU whose results the README shows (the first words of its results section)."""
    text = report.section(README)
    return text.split(" (")[0] if text else None


def write_readme(slug, data):
    report.update_readme(README, sections(slug, data, title=False))


def write_index():
    """records/README.md's table: which GPU, software, commit and build each set is from."""
    rows = ["| set | GPU | SMs | driver | torch | CUDA | date | commit | build |", "|---|---|---:|---|---|---|---|---|---|"]
    for slug in sets():
        m = load(slug)["machine"]
        commit = f"{m.get('git_commit')}{' (uncommitted changes)' if m.get('git_dirty') else ''}"
        rows.append(f"| [{slug}]({slug}/summary.md) | {m.get('gpu')} | {m.get('sms')} | {m.get('driver')} | {m['torch']} | "
                    f"{m['cuda']} | {m['date'][:10]} | {commit} | {report.sass_rewrite(m.get('build'))} |")
    report.update_readme(INDEX, "\n".join(rows), INDEX_BEGIN, INDEX_END)


KINDS = ("bench", "sweep", "host")


def measure_bench(slug_hint):
    """The benchmark of record; returns the set's slug, or exits where a result is wrong."""
    from benchmarks import bench

    info, settings, records = bench.run(bench.parse_args(RECORD_ARGS))
    bench.print_table(records)
    wrong = bench.wrong_results(records)
    if wrong:
        for r in wrong:
            print(f"!!! {r['name']} {r['variant']}: {r['note']}", file=sys.stderr)
        raise SystemExit(f"{len(wrong)} results disagree with cuBLAS; no record written")
    slug = slug_hint or gpu_slug(info["gpu"])
    os.makedirs(os.path.join(ROOT, slug), exist_ok=True)
    written = bench.write_outputs(os.path.join(ROOT, slug, "bench"), info, records, settings)
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))
    return slug


def measure_other(kind, slug):
    from benchmarks import host_overhead, sweep

    if kind == "sweep":
        data = sweep.run(seed=0, count=128)
        wrong = [r for r in data["records"] if r["note"]]
        if wrong:
            raise SystemExit(f"{len(wrong)} sweep results disagree with torch.matmul; no sweep record written")
        print(sweep.markdown(data))
        written = sweep.write(data, os.path.join(ROOT, slug, "sweep"))
    else:
        data = host_overhead.run()
        print(host_overhead.markdown(data))
        written = [os.path.join(ROOT, slug, "host.json"), os.path.join(ROOT, slug, "host.png")]
        with open(written[0], "w") as f:
            json.dump(data, f, indent=1)
        host_overhead.plot(data, written[1])
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))


def measure(args):
    """Measure the kinds asked for on this GPU and write them into its set; returns the slug."""
    import torch

    import torch_vecgemm
    from benchmarks.common import machine_info, uncommitted_changes

    if not torch.cuda.is_available():
        raise SystemExit("records are measured on a GPU and there is none here "
                         "(--report-only regenerates the summaries, plots and README from the stored JSON)")
    if not torch_vecgemm._C.cuda_kernels_built():
        raise SystemExit("this torch_vecgemm was built without its CUDA kernels")
    changes = uncommitted_changes() or []
    if changes and not args.allow_dirty:
        raise SystemExit("uncommitted changes; a record is of a commit (or pass --allow-dirty):\n  " + "\n  ".join(changes))
    kinds = args.only.split(",") if args.only else list(KINDS)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown record kinds {sorted(unknown)}; the kinds are {', '.join(KINDS)}")
    slug = args.gpu or gpu_slug(machine_info()["gpu"])
    if "bench" in kinds:
        slug = measure_bench(slug)
    elif not os.path.isfile(os.path.join(ROOT, slug, "bench.json")):
        raise SystemExit(f"records/{slug} has no benchmark of record yet; measure it first (--only bench)")
    for kind in kinds:
        if kind != "bench":
            measure_other(kind, slug)
    return slug


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.records", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite summary.md, the plots, the index and the README from the stored JSON")
    ap.add_argument("--gpu", help="the set's directory under records/ (default: the slug of this GPU's name; "
                    "with --report-only, every set)")
    ap.add_argument("--readme", choices=("auto", "yes", "no"), default="auto",
                    help="rewrite the README's results section: auto = from the set of the GPU it shows")
    ap.add_argument("--no-plot", action="store_true", help="leave the plots as they are")
    ap.add_argument("--allow-dirty", action="store_true", help="measure a checkout with uncommitted changes")
    ap.add_argument("--only", help=f"comma list of the kinds to measure (default: all of {', '.join(KINDS)})")
    args = ap.parse_args(argv)

    if args.report_only:
        slugs = [args.gpu] if args.gpu else sets()
    else:
        slugs = [measure(args)]
    shown = readme_gpu()
    for slug in slugs:
        data = load(slug)
        write_derived(slug, data, plot=not args.no_plot)
        gpu = data["machine"].get("gpu")
        if args.readme == "yes" or (args.readme == "auto" and (shown in (None, gpu))):
            write_readme(slug, data)
            shown = gpu
            print(f"README.md: results of {slug}")
        elif args.readme == "auto":
            print(f"README.md shows {shown}, left as it is (--readme yes puts {slug} there)")
    write_index()
    print(f"{os.path.relpath(INDEX, REPO)}: the table of sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
