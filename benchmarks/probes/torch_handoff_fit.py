"""Where would handing an IEEE product to torch.matmul pay, and how well does a rule on
what the planner knows predict it (issue 42, item 1)?

Reads IEEE random-shape sweeps of record (``benchmarks/records/<gpu>/sweep*.json``; a
problem handed to torch there carries the kernels' own time too), fits log(ours /
torch.matmul) by least squares on the plan's own figures (the model's time, the
multiply-adds, the split, whether operands are copied, a term for each config the rule
speaks for), prints the weights as the device profile's ``torch_handoff`` section, and what
a hand-off rule "hand where the predicted ratio is above 1 + margin" would give: problems handed, geometric mean, lowest, problems below 0.97x,
on the sweep it was fitted on (each problem predicted by a fit without itself) and on the
other sweeps (problems no figure was fitted on). A handed problem is priced at torch's own
time times ``--handoff-cost`` (the wrapper's host time shows in tiny problems' times).

    python -m benchmarks.probes.torch_handoff_fit --fit sweep --check sweep_seed1

With --products, also what the fitted rule would make of a model's training products, as
`benchmarks.probes.model_products --precision ieee --out FILE.json` timed them (each product
on the kernels and torch.matmul's, the model's time beside): products handed, and the
step's products against torch's, calls counted.

No GPU: the records hold the times; the plan text and the model's time are in each row.
"""
from __future__ import annotations

import argparse
import json
import math
import re
from typing import Sequence

import numpy as np

from benchmarks import records

# The configs the rule speaks for, each with a term of its own: those seed 0's sweep plans
# at least three times. Every other config stays on our kernels whatever the figures say: a
# term shared with them, learnt from the sweep's mid-size problems, would hand large
# problems the sweep hardly holds (3072^3 and llama's mlp up on tiled_128x128x8_t816,
# 1.10-1.11x torch.matmul; the squares 512 and 1024 on tiled_128x128x16, 1.03-1.04x).
CONFIG_TERMS = ("async_32x32x16_t44_s4", "async_64x64x8_t84_s4", "async_128x64x16_s3", "async_128x128x8_t816_s4")
# The weights shared by every config, by the names the device profile gives them.
SHARED_TERMS = ("log_predicted_ms", "log_macs", "log_splits", "copies")
TERMS = SHARED_TERMS + tuple(f"config {c}" for c in CONFIG_TERMS)


def plan_figures(plan: str) -> tuple[str, int, bool]:
    """(config, K splits, operands copied) of a plan's description, e.g.
    "tiled_128x64x8b split-k 3, copy of A (column-major)"."""
    config = plan.split(" ")[0].rstrip(",")
    split = re.search(r"split-k (\d+)", plan)
    return config, int(split.group(1)) if split else 1, "copy of" in plan


def priced(row: dict) -> bool:
    """A row the rule speaks for: the plan of a config with a term, priced by the model."""
    return (row.get("model_ms") is not None and row.get("family") in ("tiled", "async")
            and plan_figures(row["plan"])[0] in CONFIG_TERMS)


def features(row: dict) -> list[float]:
    config, splits, copies = plan_figures(row["plan"])
    macs = row.get("batch", 1) * row["m"] * row["n"] * row["k"]
    return [math.log(row["model_ms"]), math.log(macs), math.log(splits), float(copies)] + [
        float(config == c) for c in CONFIG_TERMS]


def on_the_kernels(row: dict) -> dict:
    """The row as our kernels ran it: a problem the sweep handed to torch carries the
    kernels' own plan and time beside (sweep.py's kernels_* fields)."""
    if row.get("family") != "torch" or "kernels_ms" not in row:
        return row
    return dict(row, plan=row["kernels_plan"], family=row["kernels_family"], model_ms=row["kernels_model_ms"],
                ours_ms=row["kernels_ms"])


def log_ratio(row: dict) -> float:
    """log(ours / torch.matmul): above 0 where torch was faster."""
    return math.log(row["ours_ms"] / row["torch_ms"])


def fit(rows: Sequence[dict]) -> np.ndarray:
    """Least-squares weights of TERMS for log(ours / torch) over the priced rows."""
    rows = [r for r in rows if priced(r)]
    X = np.array([features(r) for r in rows])
    y = np.array([log_ratio(r) for r in rows])
    weights, *_ = np.linalg.lstsq(X, y, rcond=None)
    return weights


def predictions(rows: Sequence[dict], weights: np.ndarray | None = None) -> list[float | None]:
    """Each row's predicted log ratio (None where the rule does not speak): with `weights`,
    from them; without, each priced row from a fit on the others (leave one out)."""
    out: list[float | None] = []
    for i, row in enumerate(rows):
        if not priced(row):
            out.append(None)
            continue
        w = weights if weights is not None else fit([r for j, r in enumerate(rows) if j != i])
        out.append(float(np.dot(w, features(row))))
    return out


def outcome(rows: Sequence[dict], predicted: Sequence[float | None], margin: float, handoff_cost: float) -> dict:
    """The sweep with every row predicted above log(1 + margin) handed to torch."""
    threshold = math.log1p(margin)
    ratios, handed = [], 0
    for row, p in zip(rows, predicted):
        if p is not None and p > threshold:
            handed += 1
            ratios.append(1.0 / handoff_cost)
        else:
            ratios.append(row["torch_ms"] / row["ours_ms"])
    r = np.array(ratios)
    return dict(handed=handed, geomean=float(np.exp(np.log(r).mean())), lowest=float(r.min()),
                below_0_97=int((r < 0.97).sum()))


def load(name: str, gpu: str = "h200") -> list[dict]:
    """The rows of a sweep of record (records.load), refused where the fit cannot use them."""
    doc = records.load(gpu, name)
    if doc is None:
        raise SystemExit(f"no record {name!r} for {gpu!r} under {records.ROOT}")
    if doc["settings"].get("precision") != "ieee":
        raise SystemExit(f"{name}: an IEEE sweep is needed, not {doc['settings'].get('precision')}")
    rows = [on_the_kernels(r) for r in doc["records"]]
    if any(r.get("family") == "torch" for r in rows):
        raise SystemExit(f"{name}: problems handed to torch without the kernels' times; the fit needs every "
                         "problem on the kernels (sweep.py records both since the hand-off)")
    return rows


def product_rows(doc: dict) -> list[dict]:
    """A model_products JSON's IEEE products as sweep rows on the kernels (m, n, k, batch,
    plan, family, model_ms, ours_ms, torch_ms) with their calls a step; a handed product by
    its kernels' plan and time. Products without the model's time (files written before
    model_products kept it) are refused."""
    rows = []
    for product in doc["products"]:
        ieee = product.get("ieee")
        if ieee is None:
            raise SystemExit(f"{doc.get('model')}: no IEEE times (model_products --precision ieee)")
        handed = "kernels_us" in ieee
        model_us = ieee.get("kernels_model_us" if handed else "model_us", "missing")
        if model_us == "missing":
            raise SystemExit(f"{doc.get('model')}: no model times; run model_products again")
        dims = [int(d) for d in product["product"].split()[1].split("x")]
        batch, (m, n, k) = (dims[0] if len(dims) == 4 else 1), dims[-3:]
        plan = ieee["kernels_plan"] if handed else ieee["plan"]
        rows.append(dict(m=m, n=n, k=k, batch=batch, plan=plan, family=plan.split("_")[0],
                         model_ms=None if model_us is None else model_us / 1e3,
                         ours_ms=(ieee["kernels_us"] if handed else ieee["us"]) / 1e3,
                         torch_ms=product["torch_us"] / 1e3, calls=product["calls"]))
    return rows


def step_outcome(rows: Sequence[dict], predicted: Sequence[float | None], margin: float,
                 handoff_cost: float) -> dict:
    """A model's step with every product predicted above log(1 + margin) handed to torch:
    products handed, and torch's products' time a step over theirs (calls counted)."""
    threshold = math.log1p(margin)
    ours = torch = 0.0
    handed = 0
    for row, p in zip(rows, predicted):
        hand = p is not None and p > threshold
        handed += hand
        ours += row["calls"] * (row["torch_ms"] * handoff_cost if hand else row["ours_ms"])
        torch += row["calls"] * row["torch_ms"]
    return dict(handed=handed, x_torch=torch / ours)


def profile_section(weights: np.ndarray) -> dict:
    """The weights as the device profile's torch_handoff section (DeviceProfile::TorchHandoff)."""
    shared = dict(zip(SHARED_TERMS, (round(float(w), 4) for w in weights[:len(SHARED_TERMS)])))
    configs = dict(zip(CONFIG_TERMS, (round(float(w), 4) for w in weights[len(SHARED_TERMS):])))
    return dict(shared, configs=configs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", default="sweep", help="the sweep of record fitted on (default: sweep)")
    parser.add_argument("--check", nargs="*", default=["sweep_seed1"], help="sweeps the fit is checked on")
    parser.add_argument("--gpu", default="h200", help="the set of records (benchmarks/records/<gpu>; default h200)")
    parser.add_argument("--margins", type=float, nargs="+", default=[0.0, 0.02, 0.04])
    parser.add_argument("--handoff-cost", type=float, default=1.005,
                        help="a handed problem's time over torch's own (default 1.005)")
    parser.add_argument("--products", nargs="*", default=[], metavar="FILE.json",
                        help="model_products --precision ieee outputs to check the rule on")
    args = parser.parse_args(argv)
    fitted = load(args.fit, args.gpu)
    weights = fit(fitted)
    print("weights: " + ", ".join(f"{t} {w:+.4f}" for t, w in zip(TERMS, weights)))
    print("as the profile's torch_handoff: " + json.dumps(profile_section(weights)))
    checks = {name: load(name, args.gpu) for name in args.check}
    held_out = predictions(fitted)
    print(f"{'sweep':<16} {'margin':>6} {'handed':>6} {'geomean':>8} {'lowest':>7} {'<0.97':>6}")
    for margin in args.margins:
        for name, rows, predicted in [(args.fit + " (loo)", fitted, held_out)] + [
                (n, rows, predictions(rows, weights)) for n, rows in checks.items()]:
            o = outcome(rows, predicted, margin, args.handoff_cost)
            print(f"{name:<16} {margin:>6.2f} {o['handed']:>6} {o['geomean']:>8.3f} {o['lowest']:>7.2f} "
                  f"{o['below_0_97']:>6}")
    for path in args.products:
        with open(path) as f:
            doc = json.load(f)
        rows = product_rows(doc)
        kept = step_outcome(rows, [None] * len(rows), 0.0, args.handoff_cost)
        print(f"{doc.get('model', path)}: {len(rows)} products, on the kernels {kept['x_torch']:.3f}x torch's a step")
        for margin in args.margins:
            o = step_outcome(rows, predictions(rows, weights), margin, args.handoff_cost)
            print(f"  margin {margin:.2f}: {o['handed']} handed, {o['x_torch']:.3f}x torch's a step")


if __name__ == "__main__":
    main()
