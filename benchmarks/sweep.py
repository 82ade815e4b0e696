"""A seeded random-shape sweep: torch_vecgemm against torch.matmul on problems no table was
fitted to.

    python -m benchmarks.sweep                        # 128 problems, seed 0, ~1.5 min on an H200
    python -m benchmarks.sweep --count 40 --seed 7 --out /tmp/sweep
    python -m benchmarks.sweep --precision 3xtf32     # the same problems, precision 3xTF32

Each problem draws M, N and K log-uniformly from 16..8192, the storage order of each operand
(row- or column-major) and its alignment: half the problems have both operands 16-byte
aligned where their shapes allow it, a quarter start A one float past an aligned address, a
quarter B. (An odd K or N misaligns rows on its own.) The problems are a function of the
seed alone, so a sweep is replayed with the same --seed anywhere.

A problem the planner hands to torch.matmul in IEEE fp32 (plan family "torch": the device
profile's rule predicts torch faster) is timed as handed and on the kernels' own plan too
(the record's kernels_* fields): the data the rule is fitted on.

Both sides run on the same inputs in the same process, each the median of
triton.testing.do_bench with the L2 cleared before every run: what the user calls
(`torch_vecgemm.mm` in the given precision, launch cost included) against `torch.matmul`
in fp32 (TF32 off). Every result is checked against torch.matmul's (a mismatch makes the
exit status 1), and both sides' relative Frobenius errors against float64 are recorded:
the error ratio says whether the precision asked for kept SGEMM's accuracy.
"""
from __future__ import annotations

import argparse
import math
import random
import sys

import torch

import torch_vecgemm
from benchmarks import report
from benchmarks.common import figure, machine_info, save_figure, time_ms, torch_handoff, write_record

LOW, HIGH = 16, 8192
REL_ERR_LIMIT = 1e-4  # fp32 against fp32 lands near 1e-6
ALIGNMENTS = ("aligned", "aligned", "A + 1 float", "B + 1 float")  # drawn uniformly: 1/2, 1/4, 1/4


def draw_problems(seed, count):
    """The sweep's problems: dicts of m, n, k, layout ('rc': A row-, B column-major), align."""
    rng = random.Random(seed)
    log_uniform = lambda: int(round(math.exp(rng.uniform(math.log(LOW), math.log(HIGH)))))
    problems = []
    for _ in range(count):
        m, n, k = log_uniform(), log_uniform(), log_uniform()
        layout = rng.choice("rc") + rng.choice("rc")
        problems.append(dict(m=m, n=n, k=k, layout=layout, align=rng.choice(ALIGNMENTS)))
    return problems


def operand(rows, cols, order, offset, generator, device):
    """A rows x cols matrix of N(0, 1) values in the given storage order ('r' or 'c'),
    starting `offset` floats into its allocation (1: not 16-byte aligned)."""
    numel = rows * cols
    flat = torch.randn(numel + offset, generator=generator, device=device)[offset:]
    return flat.view(rows, cols) if order == "r" else flat.view(cols, rows).t()


def make_problem_operands(p, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    A = operand(p["m"], p["k"], p["layout"][0], int(p["align"].startswith("A")), g, device)
    B = operand(p["k"], p["n"], p["layout"][1], int(p["align"].startswith("B")), g, device)
    return A, B


def relative_error(out, ref64):
    """The relative Frobenius error of `out` against a float64 reference."""
    return (torch.linalg.norm(out.double() - ref64) / torch.linalg.norm(ref64)).item()


def measure(p, index, seed, timing, precision="ieee"):
    device = "cuda"
    A, B = make_problem_operands(p, device, seed * 100003 + index)
    plan = torch_vecgemm.plan(A, B, precision=precision)
    ref = torch.matmul(A, B)
    out = torch_vecgemm.mm(A, B, precision=precision)
    rel = (torch.linalg.norm(out - ref) / torch.linalg.norm(ref)).item()
    exact = A.double() @ B.double()
    err, torch_err = relative_error(out, exact), relative_error(ref, exact)
    torch_ms = time_ms(lambda: torch.matmul(A, B), **timing)
    ours_ms = time_ms(lambda: torch_vecgemm.mm(A, B, precision=precision), **timing)
    flops = 2.0 * p["m"] * p["n"] * p["k"]
    notes = [] if rel < REL_ERR_LIMIT else [f"WRONG: relative error {rel:.3g} vs torch.matmul"]
    kernels = {}
    if plan.family == "torch" and plan.precision == "ieee" and precision == "ieee":
        # Handed to torch.matmul by the device profile's rule: the kernels' own plan is timed
        # too, since the rule is fitted on it (benchmarks/probes/torch_handoff_fit.py).
        with torch_handoff(False):
            kernels_plan = torch_vecgemm.plan(A, B, precision=precision)
            kernels_out = torch_vecgemm.mm(A, B, precision=precision)
            kernels_ms = time_ms(lambda: torch_vecgemm.mm(A, B, precision=precision), **timing)
        kernels_rel = (torch.linalg.norm(kernels_out - ref) / torch.linalg.norm(ref)).item()
        if kernels_rel >= REL_ERR_LIMIT:
            notes.append(f"WRONG on the kernels: relative error {kernels_rel:.3g} vs torch.matmul")
        kernels = dict(kernels_plan=str(kernels_plan), kernels_family=kernels_plan.family, kernels_ms=kernels_ms,
                       kernels_model_ms=model_ms_of(kernels_plan))
    return dict(
        **p, plan=str(plan), family=plan.family, precision=plan.precision, torch_ms=torch_ms, ours_ms=ours_ms,
        model_ms=model_ms_of(plan), ratio_to_torch_matmul=torch_ms / ours_ms, tflops=flops / (ours_ms * 1e-3) / 1e12,
        torch_tflops=flops / (torch_ms * 1e-3) / 1e12, rel_err_vs_torch=rel, rel_err=err,
        torch_rel_err=torch_err, error_to_torch_matmul=err / torch_err, **kernels,
        note="; ".join(notes) or None,
    )


def model_ms_of(plan):
    """The cost model's time for a plan (copies, passes and launches included), or None
    where no model prices it."""
    return None if plan.predicted_us is None else plan.predicted_us * 1e-3


def summarize(records):
    ratios = [r["ratio_to_torch_matmul"] for r in records]
    worst = min(records, key=lambda r: r["ratio_to_torch_matmul"])
    summary = dict(
        problems=len(records),
        geomean=math.exp(sum(map(math.log, ratios)) / len(ratios)),
        lowest=worst["ratio_to_torch_matmul"],
        lowest_problem=f"{worst['m']}x{worst['n']}x{worst['k']} {worst['layout']} {worst['align']}",
        below_0_95=sum(x < 0.95 for x in ratios),
        below_0_97=sum(x < 0.97 for x in ratios),
        below_1_0=sum(x < 1.0 for x in ratios),
        at_least_1_05=sum(x >= 1.05 for x in ratios),
        handed_to_torch=sum(r["family"] == "torch" for r in records),
    )
    # A handed problem runs torch's own product, so its ratio is torch.matmul timed twice;
    # what the library's kernels do shows on the rest.
    on_kernels = [r for r in records if r["family"] != "torch"]
    if on_kernels:
        worst = min(on_kernels, key=lambda r: r["ratio_to_torch_matmul"])
        summary.update(on_kernels=len(on_kernels), lowest_on_kernels=worst["ratio_to_torch_matmul"],
                       lowest_on_kernels_problem=f"{worst['m']}x{worst['n']}x{worst['k']} {worst['layout']} "
                                                 f"{worst['align']}",
                       below_1_0_on_kernels=sum(r["ratio_to_torch_matmul"] < 1.0 for r in on_kernels))
    errors = [r["error_to_torch_matmul"] for r in records if "error_to_torch_matmul" in r]
    if errors:
        summary.update(error_geomean=math.exp(sum(map(math.log, errors)) / len(errors)), error_highest=max(errors),
                       error_above_1_25=sum(x > 1.25 for x in errors),
                       on_3xtf32=sum(r.get("precision") == "3xtf32" for r in records))
    return summary


def summary_of(data):
    """A stored sweep's summary, with what summarize() now derives from its records."""
    return {**data["summary"], **summarize(data["records"])}


def markdown(data, title=True):
    """The sweep's summary and its weakest problems, as markdown."""
    s, records = summary_of(data), data["records"]
    settings = data["settings"]
    precision = settings.get("precision", "ieee")
    lines = []
    if title:
        m = data["machine"]
        lines += [f"# Random-shape sweep, {m.get('gpu')}, precision {precision}", "", report.stamp(m), "",
                  f"Seed {settings['seed']}, {s['problems']} problems (M, N, K log-uniform in {LOW}..{HIGH}, "
                  "random storage orders and alignment).", ""]
    if "error_highest" in s:
        lines += [
            "| precision | problems | on 3xTF32 | handed to torch | geometric mean x torch.matmul | lowest | "
            "below 0.97x | below 1.0x | error x torch.matmul's (geometric mean) | highest | above 1.25x |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {precision} | {s['problems']} | {s['on_3xtf32']} | {s.get('handed_to_torch', '-')} | "
            f"{s['geomean']:.3f} | {s['lowest']:.3f} ({s['lowest_problem']}) | {s.get('below_0_97', '-')} | "
            f"{s['below_1_0']} | {s['error_geomean']:.2f} | {s['error_highest']:.2f} | {s['error_above_1_25']} |",
        ]
    else:  # a record from before the errors were measured
        lines += [
            "| problems | geometric mean x torch.matmul | lowest | below 0.95x | at least 1.05x |",
            "|---:|---:|---:|---:|---:|",
            f"| {s['problems']} | {s['geomean']:.3f} | {s['lowest']:.3f} ({s['lowest_problem']}) | {s['below_0_95']} | {s['at_least_1_05']} |",
        ]
    if "lowest_on_kernels" in s:
        lines += ["", f"On the library's kernels ({s['on_kernels']} problems; the others run torch's own product): "
                      f"lowest {s['lowest_on_kernels']:.3f} ({s['lowest_on_kernels_problem']}), "
                      f"{s['below_1_0_on_kernels']} below 1.0x."]
    lines += [
        "",
        "The ten weakest:",
        "",
        "| M x N x K | orders | alignment | plan | torch us | ours us | x torch.matmul |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in sorted(records, key=lambda r: r["ratio_to_torch_matmul"])[:10]:
        lines.append(f"| {r['m']}x{r['n']}x{r['k']} | {r['layout']} | {r['align']} | {r['plan']} | "
                     f"{r['torch_ms'] * 1e3:.1f} | {r['ours_ms'] * 1e3:.1f} | {r['ratio_to_torch_matmul']:.3f} |")
    return "\n".join(lines) + "\n"


def plot(data, path):
    records, m = data["records"], data["machine"]
    fig, ax = figure(figsize=(9, 5.5))
    for family in sorted({r["family"] for r in records}):
        pts = [(2.0 * r["m"] * r["n"] * r["k"], r["ratio_to_torch_matmul"]) for r in records if r["family"] == family]
        ax.scatter(*zip(*pts), s=16, label=family)
    for y, style in ((1.0, "-"), (0.95, ":"), (1.05, ":")):
        ax.axhline(y, color="gray", linestyle=style, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("FLOP (2 M N K)")
    ax.set_ylabel("x torch.matmul (higher is faster)")
    s = data["summary"]
    ax.set_title(f"Random shapes, precision {data['settings'].get('precision', 'ieee')}: geometric mean "
                 f"{s['geomean']:.3f}, lowest {s['lowest']:.3f}", fontsize=10)
    ax.legend(title="plan family")
    save_figure(fig, path, m)


def run(seed=0, count=128, warmup_ms=25, rep_ms=100, precision="ieee"):
    """Measures the sweep in the given precision; returns its data (machine, settings,
    records, summary)."""
    if not torch.cuda.is_available():
        raise SystemExit("the sweep times the CUDA kernels and there is no GPU here")
    problems = draw_problems(seed, count)
    timing = dict(warmup_ms=warmup_ms, rep_ms=rep_ms)
    try:
        from tqdm import tqdm

        progress = tqdm(list(enumerate(problems)), desc="sweep", file=sys.stderr)
    except ImportError:
        progress = list(enumerate(problems))
    records = [measure(p, i, seed, timing, precision) for i, p in progress]
    settings = dict(seed=seed, count=count, low=LOW, high=HIGH, warmup_ms=warmup_ms, rep_ms=rep_ms,
                    precision=precision)
    return dict(machine=machine_info(), settings=settings, records=records, summary=summarize(records))


def write(data, out):
    return write_record(data, out, plot)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=128)
    ap.add_argument("--rep-ms", type=float, default=100)
    ap.add_argument("--precision", choices=("ieee", "3xtf32"), default="ieee")
    ap.add_argument("--out", help="write OUT.json and OUT.png")
    args = ap.parse_args(argv)
    data = run(args.seed, args.count, rep_ms=args.rep_ms, precision=args.precision)
    print(markdown(data))
    for r in sorted(data["records"], key=lambda r: r["ratio_to_torch_matmul"]):
        print(f"{r['m']:>5}x{r['n']:>5}x{r['k']:>5} {r['layout']} {r['align']:<12} {r['plan'][:60]:<60} "
              f"{r['torch_ms'] * 1e3:9.1f} {r['ours_ms'] * 1e3:9.1f} {r['ratio_to_torch_matmul']:6.3f}")
    if args.out:
        print("wrote " + ", ".join(write(data, args.out)))
    wrong = [r for r in data["records"] if r["note"]]
    for r in wrong:
        print(f"!!! {r['m']}x{r['n']}x{r['k']} {r['layout']} {r['align']}: {r['note']}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
