"""How far below the kernels' time does the SIMT cost model price our IEEE plans, config by
config, and what scale and per-call term would close the gap (issue 42, item 4; docs/
performance.md, question 0, "The model")?

The model ranks a problem's candidates among themselves, where a bias common to them
cancels; its absolute time matters where it meets another estimate: the 3xTF32 rows' waves
model (the 3xTF32 rule weighs them against it) and the hand-off rule (which reads it). This
reads IEEE random-shape sweeps of record (each problem on the kernels, a handed one by its
kernels_* fields) and prints, for each config, the median of time / model and of time -
model, and a fit of time = scale x model + per-call term by least squares in log space
(what would price the plans of record within its RMS).

    python -m benchmarks.probes.model_level --sweeps sweep,sweep_seed1

No GPU: the records hold the times and the model's time of each plan.
"""
from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import Sequence

import numpy as np

from benchmarks.probes.torch_handoff_fit import load, plan_figures


def timed(rows: Sequence[dict]) -> list[tuple[str, float, float]]:
    """(config, model us, measured us) of each plan the model priced."""
    return [(plan_figures(r["plan"])[0], r["model_ms"] * 1e3, r["ours_ms"] * 1e3)
            for r in rows if r.get("family") in ("tiled", "async") and r.get("model_ms")]


def affine_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """(scale, per-call us, RMS log error) of time = scale x model + per-call, the least
    squared log error on a grid (0.01 in scale, 0.05 us), points being (model, time) in us."""
    model, time = (np.array(v) for v in zip(*points))
    scales, calls = np.arange(0.5, 2.0001, 0.01), np.arange(0.0, 20.0001, 0.05)
    best = None
    for scale in scales:
        errors = (np.log((scale * model[:, None] + calls[None, :]) / time[:, None]) ** 2).mean(axis=0)
        i = int(np.argmin(errors))
        if best is None or errors[i] < best[2]:
            best = (float(round(scale, 2)), float(round(calls[i], 2)), float(errors[i]))
    return best[0], best[1], math.sqrt(best[2])


def report(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Lines: per config (most plans first) the median time / model and time - model, then the
    affine fit over all and the RMS log error as priced."""
    by_config = defaultdict(list)
    for config, model, time in points:
        by_config[config].append((model, time))
    lines = []
    for config, pairs in sorted(by_config.items(), key=lambda kv: -len(kv[1])):
        ratios = [t / m for m, t in pairs]
        gaps = [t - m for m, t in pairs]
        lines.append(f"{config:<26} {len(pairs):>4} plans: time / model median {np.median(ratios):.2f} "
                     f"({min(ratios):.2f}-{max(ratios):.2f}), time - model median {np.median(gaps):+.1f} us")
    pairs = [(m, t) for _, m, t in points]
    scale, call, rms = affine_fit(pairs)
    as_priced = math.sqrt(sum(math.log(m / t) ** 2 for m, t in pairs) / len(pairs))
    lines.append(f"all {len(pairs)} plans: time = {scale:.2f} x model + {call:.2f} us, RMS log error {rms:.3f} "
                 f"(as priced {as_priced:.3f})")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", default="sweep,sweep_seed1", help="comma list of IEEE sweeps of record")
    ap.add_argument("--gpu", default="h200", help="the records' set")
    args = ap.parse_args(argv)
    for name in args.sweeps.split(","):
        print(f"{args.gpu} {name}:")
        print("\n".join("  " + line for line in report(timed(load(name, args.gpu)))))


if __name__ == "__main__":
    main()
