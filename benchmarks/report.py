"""Turn a benchmark JSON into the plot, a markdown summary and the README's results.

    python -m benchmarks.report /tmp/h200.json --summary /tmp/h200.md --plot /tmp/h200.png
    python -m benchmarks.report benchmarks/records/h200/bench.json --readme README.md

The README's results section (between the results:begin / results:end markers) is
generated here from the JSON, never typed; `python -m benchmarks.records` does all of it
for the records of record.
"""
from __future__ import annotations

import argparse
import json
import math
import re

from benchmarks.common import CUBLAS, TF32, figure, save_figure

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _by(records, **match):
    return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def _one(records, **match):
    found = _by(records, **match)
    return found[0] if found else None


def _variants(records):
    seen = []
    for r in records:
        if r["variant"] not in (CUBLAS, TF32) and r["variant"] not in seen:
            seen.append(r["variant"])
    return seen


def plot(info, records, path):
    square = _by(records, suite="square")
    model = _by(records, suite="model", variant="auto")
    fig, axes = figure(nrows=1, ncols=2 if model else 1, figsize=(15 if model else 8, 5.5), squeeze=False)
    ax = axes[0][0]
    for v in [CUBLAS, TF32] + _variants(records):
        pts = [(r["m"], r["tflops"]) for r in square if r["variant"] == v and r["tflops"]]
        if pts:
            style = "--" if v == TF32 else ("-o" if v == CUBLAS else "-s")
            ax.plot(*zip(*pts), style, label=v, linewidth=2.5 if v in (CUBLAS, "auto") else 1.2, markersize=4)
    if info.get("fp32_peak_tflops"):
        ax.axhline(info["fp32_peak_tflops"], color="gray", linestyle=":", label="fp32 SIMT peak")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("float32 GEMM")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    if model:
        ax = axes[0][1]
        ratios = [r["ratio_to_torch_matmul"] or 0 for r in model]
        ax.barh(range(len(model)), ratios, color=["tab:green" if x >= 1 else "tab:orange" for x in ratios])
        ax.set_yticks(range(len(model)), [f"{r['name']} ({r['m']}x{r['n']}x{r['k']} {r['layout']})" for r in model], fontsize=7)
        ax.axvline(1.0, color="black", linewidth=1)
        ax.invert_yaxis()
        ax.set_xlabel("throughput / torch.matmul (fp32), same run")
        ax.set_title("model shapes, variant auto")
    save_figure(fig, path, info)


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def sass_rewrite(build):
    """What the build did to the SASS main loops, in words, from build_info()["sass_rewrite"]
    (the record tools/sass_rewrite writes: its loops, each rewritten or left alone and why),
    or from the sentence an older record carries."""
    if not build or "sass_rewrite" not in build:
        return "SASS rewrite not recorded (the library has no build_info())"
    done = build["sass_rewrite"]
    if isinstance(done, dict) and "loops" in done:
        loops = done.get("loops") or []
        rewritten = [loop for loop in loops if str(loop.get("state", "")).startswith("rewritten")]
        validated = done.get("validated_for") or {}
        where = ", ".join(str(v) for v in validated.values())
        if not done.get("enabled", True) or not loops:
            return f"SASS main loops as ptxas wrote them ({done.get('reason') or 'rewrite off'})"
        left = sorted({str(loop.get("reason")) for loop in loops if loop not in rewritten})
        return (f"SASS main loops: {len(rewritten)} of {len(loops)} validated loops rewritten"
                + (f" ({where})" if where else "") + (f", the rest left alone: {'; '.join(left)}" if left else ""))
    if done is True:
        return "SASS main loops rewritten below ptxas"
    if not done:
        return "SASS main loops as ptxas wrote them (not rewritten)"
    return f"SASS main loops: {done}"


def stamp(info):
    """The header line's stamp: the GPU, the software, the date, the commit and the build."""
    commit = str(info.get("git_commit"))
    if info.get("git_dirty"):
        commit += " with uncommitted changes"
    return (
        f"{info.get('gpu')} ({info.get('sms')} SMs, fp32 peak {_f(info.get('fp32_peak_tflops'), '.1f')} TFLOP/s, "
        f"copy bandwidth {_f(info.get('copy_bandwidth_tbs'), '.2f')} TB/s), torch {info['torch']}, CUDA {info['cuda']}, "
        f"driver {info.get('driver')}, {info['date'][:10]}, commit {commit}, {sass_rewrite(info.get('build'))}."
    )


def markdown(info, records, *, title=True, variants=None):
    lines = []
    if title:
        lines.append(f"## Results: {info.get('gpu')}\n")
    lines.append(
        stamp(info) + " Median of `triton.testing.do_bench` (L2 cleared before each run); ratio = torch.matmul time / our time, "
        "both float32, measured in the same process on the same inputs.\n"
    )
    variants = [v for v in _variants(records) if variants is None or v in variants]
    square = sorted({r["m"] for r in _by(records, suite="square")})
    if square:
        cols = ["size", "torch.matmul TFLOP/s"] + [f"{v} TFLOP/s (x mm)" for v in variants] + ["cuBLAS TF32 TFLOP/s"]
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---:|" * len(cols))
        for s in square:
            row = [str(s), _f((_one(records, suite="square", m=s, variant=CUBLAS) or {}).get("tflops"), ".1f")]
            for v in variants:
                r = _one(records, suite="square", m=s, variant=v) or {}
                row.append(f"{_f(r.get('tflops'), '.1f')} ({_f(r.get('ratio_to_torch_matmul'), '.2f')})" if r.get("tflops") else "not run")
            row.append(_f((_one(records, suite="square", m=s, variant=TF32) or {}).get("tflops"), ".0f"))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    model = _by(records, suite="model", variant="auto")
    if model:
        lines.append("| model shape | M x N x K | layout | kernel chosen | torch.matmul TFLOP/s | ours TFLOP/s | x mm |")
        lines.append("|---|---|---|---|---:|---:|---:|")
        for r in model:
            ref = _one(records, suite="model", name=r["name"], variant=CUBLAS) or {}
            lines.append(
                f"| {r['name']} | {r['m']} x {r['n']} x {r['k']} | {r['layout']} | {r['kernel'] or r['note']} | "
                f"{_f(ref.get('tflops'), '.1f')} | {_f(r['tflops'], '.1f')} | {_f(r['ratio_to_torch_matmul'], '.2f')} |"
            )
        ratios = [r["ratio_to_torch_matmul"] for r in model]
        lines.append(
            f"\nModel shapes: geometric mean {_f(geomean(ratios), '.2f')}x torch.matmul, "
            f"lowest {_f(min((x for x in ratios if x), default=None), '.2f')}x.\n"
        )
    return "\n".join(lines)


def _between(begin, end):
    return re.compile(re.escape(begin) + "(.*?)" + re.escape(end), re.DOTALL)


def section(path, begin=BEGIN, end=END):
    """The text between the markers in the file at path, or None where it has none."""
    with open(path) as f:
        found = _between(begin, end).search(f.read())
    return found.group(1).strip() if found else None


def update_readme(path, text, begin=BEGIN, end=END):
    """Replace what stands between the markers in the file at path with text."""
    with open(path) as f:
        readme = f.read()
    pattern = _between(begin, end)
    if not pattern.search(readme):
        raise SystemExit(f"{path} has no {begin} ... {end} section")
    readme = pattern.sub(lambda _: f"{begin}\n{text}\n{end}", readme)
    with open(path, "w") as f:
        f.write(readme)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--summary", help="write a markdown summary here")
    ap.add_argument("--readme", help="rewrite this README's results section")
    ap.add_argument("--plot", help="write the PNG plot here")
    ap.add_argument("--variants", default="auto,vectorized", help="columns of the square-size table ('all' for every variant)")
    args = ap.parse_args(argv)
    with open(args.json) as f:
        data = json.load(f)
    variants = None if args.variants == "all" else args.variants.split(",")
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(markdown(data["machine"], data["records"], variants=None))
    if args.readme:
        update_readme(args.readme, markdown(data["machine"], data["records"], title=False, variants=variants))
    if args.plot:
        plot(data["machine"], data["records"], args.plot)
    if not (args.summary or args.readme or args.plot):
        print(markdown(data["machine"], data["records"], variants=variants))


if __name__ == "__main__":
    main()
