"""Is a weak problem of the random sweep lost to the planner's choice or to the kernels?

For the sweep's weakest problems (same seed, same operands as the sweep drew them), times
auto, torch.matmul and every kernel config this build has (the strict op with
``variant=<config>``: that kernel, the split the model picks for it, no copies), and prints
the best config against auto and against torch. Where the best config beats auto, the cost
model ranked the candidates wrongly; where even the best config loses to torch, the kernels
(or the copies the planner would add) are what is missing. Beside each time, the cost
model's prediction for it (auto's kernel, copies aside; each config on the operands as
given), so that a wrong ranking shows which estimate was off. Needs a GPU.

    python -m benchmarks.probes.best_variant /tmp/sweep.json [--weakest 24] [--json out.json]

With --plan, the problems whose recorded plan matches a regex (the weakest first); with
--configs, only the configs whose name matches one. Two configs timed on the same problems
compare kernels in one process: the last lines give each config's geometric mean against
torch.matmul over the problems it took.

    python -m benchmarks.probes.best_variant /tmp/sweep.json --plan '^async_64x64' \
        --weakest 200 --configs '^async_64x64'
"""
from __future__ import annotations

import argparse
import json
import re

import torch

import torch_vecgemm
from benchmarks.common import time_ms
from benchmarks.report import geomean
from benchmarks.sweep import make_problem_operands


def config_names(pattern=None):
    """The IEEE tilings (3xTF32 rows compute in another precision: not a choice of auto's),
    those matching `pattern` if given."""
    return [v for v in torch_vecgemm.variants()
            if v.startswith(("tiled_", "async_")) and (pattern is None or re.search(pattern, v))]


def key_as_given(A, B):
    """The tuning key of A @ B without copies (the planner's rule for 16-byte rows: plan.cpp,
    vec4_ok), under which the model ranks the configs as the strict op runs them."""
    def order_and_aligned(t):
        row_major = t.size(-1) == 1 or t.stride(-1) == 1
        ld = t.stride(-2) if row_major else t.stride(-1)
        batch_stride = t.stride(0) if t.dim() == 3 and t.size(0) > 1 else 0
        # The storage must also hold the last line's last 16-byte chunk whole.
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        held = t.untyped_storage().nbytes() // 4 - t.storage_offset()
        aligned = t.data_ptr() % 16 == 0 and ld % 4 == 0 and batch_stride % 4 == 0 and (last // 4 + 1) * 4 <= held
        return "r" if row_major else "c", aligned

    (oa, va), (ob, vb) = order_and_aligned(A), order_and_aligned(B)
    m, k, n = A.size(0), A.size(1), B.size(1)
    return f"b1_m{m}_n{n}_k{k}_{oa}{ob}_v{4 if va and vb else 1}_d{4 if n % 4 == 0 else 1}"


def model_predictions_ms(A, B):
    """{name: ms}: the model's time for auto's kernel choice and for each config's best split."""
    out = {"auto": torch_vecgemm._C._testing.model_ranking(torch_vecgemm._C.tuning_key(A, B))[0][0] * 1e-6}
    for ns, config, _, _ in torch_vecgemm._C._testing.model_ranking(key_as_given(A, B)):
        out.setdefault(config, ns * 1e-6)
    return out


def time_variants(A, B, configs):
    """{name: ms} for auto, torch and every config of `configs` that takes these operands."""
    out = {"torch": time_ms(lambda: torch.matmul(A, B)), "auto": time_ms(lambda: torch_vecgemm.mm(A, B))}
    for name in configs:
        if torch_vecgemm.fallback_reason(A, B, variant=name) is not None:
            continue
        out[name] = time_ms(lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, name))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="a sweep's JSON (python -m benchmarks.sweep --out X)")
    ap.add_argument("--weakest", type=int, default=24)
    ap.add_argument("--plan", help="only problems whose recorded plan matches this regex")
    ap.add_argument("--configs", help="only configs whose name matches this regex")
    ap.add_argument("--json", help="also write every timing here")
    args = ap.parse_args(argv)
    with open(args.sweep) as f:
        data = json.load(f)
    seed = data["settings"]["seed"]
    indexed = [(i, r) for i, r in enumerate(data["records"]) if args.plan is None or re.search(args.plan, r["plan"])]
    indexed = sorted(indexed, key=lambda ir: ir[1]["ratio_to_torch_matmul"])[: args.weakest]
    names = config_names(args.configs)
    results = []
    print(f"{'problem':<28} {'torch us':>9} {'auto us':>8} {'(model)':>8} {'best us':>8} {'(model)':>8} "
          f"{'best/auto':>9} {'torch/best':>10}  best config; auto's plan")
    for index, r in indexed:
        A, B = make_problem_operands(r, "cuda", seed * 100003 + index)
        times = time_variants(A, B, names)
        predicted = model_predictions_ms(A, B)
        configs = {k: v for k, v in times.items() if k not in ("torch", "auto")}
        if not configs:
            continue
        best = min(configs, key=configs.get)
        name = f"{r['m']}x{r['n']}x{r['k']} {r['layout']} {r['align']}"
        print(f"{name:<28} {times['torch'] * 1e3:9.1f} {times['auto'] * 1e3:8.1f} {predicted['auto'] * 1e3:8.1f} "
              f"{configs[best] * 1e3:8.1f} {predicted.get(best, float('nan')) * 1e3:8.1f} "
              f"{times['auto'] / configs[best]:9.2f} {times['torch'] / configs[best]:10.2f}  {best}; "
              f"{torch_vecgemm.selected_kernel(A, B)}")
        results.append({"problem": r, "times_ms": times, "model_ms": predicted, "best": best})
    for name in ["auto", *names]:
        ratios = [x["times_ms"]["torch"] / x["times_ms"][name] for x in results if name in x["times_ms"]]
        if ratios:
            print(f"{name}: {geomean(ratios):.3f}x torch.matmul (geometric mean over {len(ratios)} problems)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
