"""Regenerate the records of record: one set per GPU, benchmarks/records/<gpu>/.

    python -m benchmarks.records                  # on the GPU: measure every kind, write its set and the README's results
    python -m benchmarks.records --only sweep,host  # measure some kinds again, keep the others
    python -m benchmarks.records --report-only    # anywhere: summaries, plots and README from the stored JSON

A set holds one record of each kind (KINDS), each measured from a committed checkout:

    bench   the benchmark of record: bench.py with RECORD_ARGS (the square sweep and the
            model shapes of shapes.json, row-major square operands, torch.matmul, cuBLAS
            TF32, auto and vectorized, the default timing): bench.json (the stamp: GPU and
            SMs, driver, torch, CUDA, commit, the library's build; and every record),
            bench.csv (one record a row), bench.png
    sweep, sweep_seed1  the seeded random-shape sweep in IEEE fp32 (sweep.py, 128 problems),
            seed 0 (the problems the cost model's figures were fitted on) and seed 1 (problems
            no figure was fitted on): sweep.json, sweep.png, sweep_seed1.*
    sweep_3xtf32, sweep_3xtf32_seed1  the same sweep in precision 3xTF32, seed 0 (the
            problems its planning rule was fitted on) and seed 1 (problems no figure was
            fitted on), each problem's time and error beside torch.matmul's
    host    host time per call, path by path (host_overhead.py): host.json, host.png
    train   the training benchmark, train.py at its defaults (TRAIN_ARGS: gpt2-small and the
            MLP, each trained with torch.nn.Linear and with torch_vecgemm's, timed eager and
            compiled): train.json (the stamp, the settings, the loss curves, the agreement
            check, tokens/s, what inductor generated), train.png, train.md
    device  the GPU's facts as the planner reads them (SMs, compute capability, each kernel
            instance's resident blocks, which 3xTF32 rows run): device.json, from which
            tests/test_recorded_device.py plans the sweeps' problems without the GPU and
            checks them against the plans of record
    precision  accuracy and speed of the fp32 paths (precision.py at its defaults: cuBLAS
            SGEMM, torch_vecgemm IEEE and 3xTF32, Triton ieee and tf32x3, cuBLAS TF32 at
            2048, 4096 and 8192, their errors against float64 at 4096, and 3xTF32 on the
            model shapes): precision.json, precision.png (error against TFLOP/s)

and summary.md, the tables of bench, sweep, host and precision, each headed by its stamp. The set's
directory is the GPU's name made a slug ("NVIDIA H200" -> h200). The README's results
section (and its training section) is rewritten from the set of the GPU it shows (or from
this one where it shows none; --readme yes / no overrides), and records/README.md's table
of sets is rewritten. A run with any result that disagrees with cuBLAS, or a model whose
loss departs from the reference's, writes nothing of that kind, and a checkout with
uncommitted changes is refused unless --allow-dirty (the stamp then says so).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from benchmarks import report
from benchmarks.common import CUBLAS, REPO, write_record

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
KINDS = ("bench", "sweep", "sweep_seed1", "sweep_3xtf32", "sweep_3xtf32_seed1", "host", "train", "precision",
         "device")
# The kinds the README's results table answers from: train has a section of its own, and
# device holds the planner's facts for the tests, not a result.
HEADLINE_KINDS = tuple(kind for kind in KINDS if kind not in ("train", "device"))
# Each sweep kind's seed, precision and the question its README row answers (128 problems
# each). Seed 0's problems are those the figures were fitted on; seed 1's are not.
SWEEPS = {"sweep": (0, "ieee", "IEEE fp32, random shapes"),
          "sweep_seed1": (1, "ieee", "IEEE fp32, random shapes, another seed"),
          "sweep_3xtf32": (0, "3xtf32", "3xTF32, random shapes"),
          "sweep_3xtf32_seed1": (1, "3xtf32", "3xTF32, random shapes, another seed")}
SWEEP_COUNT = 128


def gpu_slug(name):
    """The set's directory for a GPU: 'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' ->
    'h100-80gb-hbm3', 'NVIDIA GeForce RTX 4090' -> 'rtx-4090'."""
    name = re.sub(r"\b(nvidia|geforce)\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "gpu"


def sets():
    """The slugs of the sets under records/ (with a record of any kind), sorted."""
    return sorted(d for d in os.listdir(ROOT)
                  if any(os.path.isfile(os.path.join(ROOT, d, f"{kind}.json")) for kind in KINDS))


def load(slug, kind="bench"):
    """A set's record of one kind, or None where it has none."""
    path = os.path.join(ROOT, slug, f"{kind}.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _kind_modules():
    from benchmarks import host_overhead, precision, sweep

    return (*((kind, sweep, question[0].upper() + question[1:]) for kind, (_, _, question) in SWEEPS.items()),
            ("host", host_overhead, "Host time per call"),
            ("precision", precision, "Accuracy and speed: IEEE fp32 and 3xTF32"))


def sections(slug, title, image_dir=None):
    """The set's bench, sweep, host and precision tables as markdown, each headed by its
    stamp; the plots of sweep, host and precision linked from image_dir (default: as seen from the repository's
    root)."""
    image_dir = f"benchmarks/records/{slug}/" if image_dir is None else image_dir
    parts = []
    data = load(slug)
    if data is not None:
        parts.append(report.markdown(data["machine"], data["records"], title=title))
    for kind, module, heading in _kind_modules():
        extra = load(slug, kind)
        if extra is not None:
            parts.append(f"### {heading}\n\n{report.stamp(extra['machine'])}\n\n{module.markdown(extra, title=False)}"
                         f"\n![{heading}]({image_dir}{kind}.png)\n")
    return "\n".join(parts)


def _ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def headline(slug):
    """The README's results: a row for each question a user asks of the set, from its
    records, each linked to summary.md (which holds every table, stamped)."""
    from benchmarks import precision, sweep

    link = f"benchmarks/records/{slug}/summary.md"
    rows = []

    def row(question, answer, kind):
        data = load(slug, kind)
        rows.append(f"| {question} | {answer} | [{kind}]({link}), {data['machine'].get('git_commit')} |")

    bench = load(slug)
    if bench is not None:
        ours = [r for r in bench["records"] if r["variant"] == "auto"]
        square = {r["m"]: r["ratio_to_torch_matmul"] for r in ours if r["suite"] == "square"}
        model = [r["ratio_to_torch_matmul"] for r in ours if r["suite"] == "model"]
        if square:
            row("IEEE fp32, square M = N = K", ", ".join(f"{m}: {_ratio(square[m])}" for m in sorted(square) if m >= 1024),
                "bench")
        if model:
            row(f"IEEE fp32, {len(model)} model shapes", f"geometric mean {_ratio(report.geomean(model))}, "
                f"lowest {_ratio(min(model))}", "bench")
    for kind, (_, precision_of_kind, question) in SWEEPS.items():
        data = load(slug, kind)
        if data is None:
            continue
        s = sweep.summary_of(data)
        below = (f"{s['below_0_97']} below 0.97x" if "below_0_97" in s else f"{s['below_0_95']} below 0.95x")
        answer = (f"{s['problems']} problems: geometric mean {s['geomean']:.3f}x, lowest {_ratio(s['lowest'])}, "
                  f"{below}")
        if precision_of_kind == "3xtf32":
            answer += f"; {s['on_3xtf32']} run on 3xTF32, the rest on fp32"
        elif s.get("handed_to_torch"):
            answer += f"; {s['handed_to_torch']} handed to torch.matmul"
        if "lowest_on_kernels" in s:
            answer += f" (on our kernels: lowest {_ratio(s['lowest_on_kernels'])}, {s['below_1_0_on_kernels']} below 1.0x)"
        if "error_highest" in s:
            answer += f"; error at most {_ratio(s['error_highest'])} torch.matmul's"
        row(f"{question} (seed {data['settings']['seed']})", answer, kind)
    data = load(slug, "precision")
    if data is not None:
        speed = {r["size"]: r["ratio_to_torch_matmul"] for r in data["speed"] if r["path"] == precision.TF32X3}
        error = {r["path"]: r["rel_fro"] for r in data["errors"] if r["size"] == 4096 and r["distribution"] == "randn"}
        answer = ", ".join(f"{n}: {_ratio(speed[n])}" for n in sorted(speed) if speed[n] is not None)
        if error.get(precision.TF32X3) and error.get(CUBLAS):
            answer += (f"; error at 4096 {error[precision.TF32X3]:.2g} against torch.matmul's "
                       f"{error[CUBLAS]:.2g}")
        row("3xTF32, square M = N = K", answer, "precision")
        m = data["model"]["summary"]
        row(f"3xTF32, {m['shapes']} model shapes", f"geometric mean {_ratio(m['geomean'])}, lowest {_ratio(m['lowest'])}",
            "precision")
    data = load(slug, "host")
    if data is not None:
        extra = [r["extra_us"] for r in data["records"]]
        worst = max(data["records"], key=lambda r: r["extra_us"])
        row("Host time per call, against the torch call replaced",
            f"{sum(x <= 0 for x in extra)} of {len(extra)} paths at or below torch's; the most over: "
            f"{worst['path']}, +{worst['extra_us']:.1f} us", "host")
    if not rows:
        return ""
    gpu = _machine(slug).get("gpu")
    # The GPU's name comes first: readme_gpu() reads it back.
    return "\n".join([
        f"{gpu} ([{link}]({link}) has every table with its stamp: GPU, driver, torch, commit, build). "
        "Against `torch.matmul` in float32 (TF32 off) measured in the same process on the same inputs (median, "
        "L2 cleared); ratios are torch.matmul's time over ours.",
        "",
        "| question | result | record, commit |",
        "|---|---|---|",
        *rows,
    ])


def write_derived(slug, plot=True):
    """summary.md and train.md (and the plots) of one set, from its JSON."""
    from benchmarks import train

    with open(os.path.join(ROOT, slug, "summary.md"), "w") as f:
        f.write(sections(slug, title=True, image_dir=""))
    data = load(slug)
    if plot and data is not None:
        report.plot(data["machine"], data["records"], os.path.join(ROOT, slug, "bench.png"))
    for kind, module, _ in _kind_modules():
        extra = load(slug, kind)
        if plot and extra is not None:
            module.plot(extra, os.path.join(ROOT, slug, f"{kind}.png"))
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
    """The README's results from a set: the benchmarks' tables, and the training one's."""
    from benchmarks import train

    if any(load(slug, kind) is not None for kind in HEADLINE_KINDS):
        report.update_readme(README, headline(slug))
    trained = load(slug, "train")
    if trained is not None:
        report.update_readme(README, train.headline(trained, f"benchmarks/records/{slug}/train.md"), TRAIN_BEGIN,
                             TRAIN_END)


def _machine(slug):
    """The stamp of the set's first record (in KINDS order)."""
    records = (load(slug, kind) for kind in KINDS)
    return next(r for r in records if r is not None)["machine"]


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


def _wrote(paths):
    print("wrote " + ", ".join(os.path.relpath(p, REPO) for p in paths))


def measure_bench(slug):
    from benchmarks import bench

    info, settings, records = bench.run(bench.parse_args(RECORD_ARGS))
    bench.print_table(records)
    wrong = bench.wrong_results(records)
    if wrong:
        for r in wrong:
            print(f"!!! {r['name']} {r['variant']}: {r['note']}", file=sys.stderr)
        raise SystemExit(f"{len(wrong)} results disagree with cuBLAS; no record written")
    _wrote(bench.write_outputs(os.path.join(ROOT, slug, "bench"), info, records, settings))


def measure_sweep(slug, kind="sweep"):
    from benchmarks import sweep

    seed, precision, _ = SWEEPS[kind]
    data = sweep.run(seed=seed, count=SWEEP_COUNT, precision=precision)
    wrong = [r for r in data["records"] if r["note"]]
    if wrong:
        raise SystemExit(f"{len(wrong)} sweep results disagree with torch.matmul; no {kind} record written")
    print(sweep.markdown(data))
    _wrote(sweep.write(data, os.path.join(ROOT, slug, kind)))


def measure_host(slug):
    from benchmarks import host_overhead

    data = host_overhead.run()
    print(host_overhead.markdown(data))
    _wrote(write_record(data, os.path.join(ROOT, slug, "host"), host_overhead.plot))


def measure_train(slug):
    from benchmarks import train

    data = train.run(train.parse_args(TRAIN_ARGS))
    print(train.markdown(data))
    failed = train.failures(data)
    if failed:
        for name, linear, checks in failed:
            print(f"!!! {name}: the loss with {linear} departs from the reference's ({', '.join(checks)})", file=sys.stderr)
        raise SystemExit("a model's loss departs from the reference's; no training record written")
    _wrote(train.write_outputs(os.path.join(ROOT, slug, "train"), data))


def measure_precision(slug):
    from benchmarks import precision

    data = precision.run()
    print(precision.markdown(data))
    wrong = precision.wrong_results(data)
    if wrong:
        for r in wrong:
            print(f"!!! {r.get('path') or r.get('name')}: {r['note']}", file=sys.stderr)
        raise SystemExit(f"{len(wrong)} precision results disagree with torch.matmul; no precision record written")
    _wrote(precision.write(data, os.path.join(ROOT, slug, "precision")))


def measure_device(slug):
    import torch_vecgemm
    from benchmarks.common import machine_info

    data = dict(machine=machine_info(), facts=torch_vecgemm._C._testing.device_facts())
    path = os.path.join(ROOT, slug, "device.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    _wrote([path])


MEASURE = {"bench": measure_bench, "host": measure_host, "train": measure_train, "precision": measure_precision,
           "device": measure_device,
           **{kind: (lambda slug, kind=kind: measure_sweep(slug, kind)) for kind in SWEEPS}}


def measure(args):
    """Measure the kinds asked for on this GPU and write them into its set; returns the slug."""
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
    kinds = args.only.split(",") if args.only else list(KINDS)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown record kinds {sorted(unknown)}; the kinds are {', '.join(KINDS)}")
    slug = args.gpu or gpu_slug(torch.cuda.get_device_name())
    os.makedirs(os.path.join(ROOT, slug), exist_ok=True)
    for kind in KINDS:
        if kind in kinds:
            MEASURE[kind](slug)
    return slug


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.records", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite the summaries, the plots, the index and the README from the stored JSON")
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
        write_derived(slug, plot=not args.no_plot)
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
