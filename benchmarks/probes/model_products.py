"""Which of a model's matrix products lose to torch's, and how much of a training step does
each one cost?

One eager training step of a model of `benchmarks/models.json` (default: GPT-2 small of the
training record) runs under a dispatch mode that records every aten `mm`, `addmm`, `bmm`
and `baddbmm` it issues, forward and backward: the operands' shapes, strides and 16-byte
alignment, and the scalars. Each distinct product is then replayed on fresh N(0, 1)
operands of the same layout, as torch runs it (fp32, TF32 off) and under
`torch_vecgemm.enable(precision)` for each precision asked, each timed with
`benchmarks.common.time_ms` (median, L2 cleared) in the same process. It prints, product by
product, the library's plan, the times, the ratio to torch and what the difference costs a
step (calls a step x microseconds), then the step's products in total: where a precision
loses to torch in a model, and on which products first. Needs a GPU.

    python -m benchmarks.probes.model_products [--model gpt2-small] [--precision ieee,3xtf32]
        [--out FILE.json]

With VECGEMM_AUTOTUNE=1 each product is tuned by its first timed call, torch.matmul's own
product among the candidates, so the times are autotune's; the plans printed are the ones
made before it (step 60: GPT-2's IEEE products 0.945x torch's a step, 1.022x under it).

With --candidates N each product is also timed in IEEE fp32 on the cost model's N best
tilings (config, K slices, stream-K) and on every stream-K one it ranks, each forced through
the tuning cache: whether a loss is the choice's or the kernels'. The candidates run on the
operands as the kernel would read them: where auto copies an operand into another order,
the copy is made once beforehand and its own time printed beside (a copy that pads K is
not made: such products are left out).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_vecgemm
from benchmarks import train
from benchmarks.common import time_ms, torch_handoff

aten = torch.ops.aten
PRODUCTS = {aten.mm.default: "mm", aten.addmm.default: "addmm", aten.bmm.default: "bmm",
            aten.baddbmm.default: "baddbmm"}


def layout(t):
    """A tensor's layout as a hashable record: shape, strides, whether it starts 16-byte aligned."""
    return ("tensor", tuple(t.shape), tuple(t.stride()), t.data_ptr() % 16 == 0)


class ProductRecorder(TorchDispatchMode):
    """Counts each distinct product (op, operand layouts, scalars) dispatched inside it."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in PRODUCTS and all(a.dtype == torch.float32 for a in args if isinstance(a, torch.Tensor)):
            record = tuple(layout(a) if isinstance(a, torch.Tensor) else ("value", a) for a in args)
            self.counts[(PRODUCTS[func], record, tuple(sorted(kwargs.items())))] += 1
        return func(*args, **kwargs)


def record_step(model_name, device="cuda"):
    """{(op, operand records, kwargs): calls} of one eager training step of the model."""
    configs = train.load_configs()
    config = dict(configs["models"][model_name])
    base = train.build(config, seed=0).to(device)
    model, _ = train.variant(base, train.TORCH)
    opt, _ = train.optimizer(model, configs["training"], schedule=False)
    tokens = torch.randint(0, config["vocab"], (config["batch"], config["context"] + 1),
                           generator=torch.Generator().manual_seed(0)).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    train.train_step(model, model, opt, configs["training"]["clip"], x, y)  # warm: lazy state
    recorder = ProductRecorder()
    with recorder:
        train.train_step(model, model, opt, configs["training"]["clip"], x, y)
    return recorder.counts


def operand(record, generator, device="cuda"):
    """A fresh tensor of N(0, 1) values laid out as `record` says (strides and alignment)."""
    _, shape, stride, aligned = record
    span = 1 + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    offset = 0 if aligned else 1
    storage = torch.randn(span + offset, generator=generator, device=device)
    return storage[offset:].as_strided(shape, stride)


def describe(op, records):
    shapes = [r[1] for r in records if r[0] == "tensor"]
    a, b = shapes[-2], shapes[-1]
    orders = "".join("r" if r[2][-1] == 1 else "c" for r in records[-2:])
    batch = f"{a[0]}x" if len(a) == 3 else ""
    aligned = "" if all(r[3] for r in records[-2:]) else ", unaligned"
    return f"{op} {batch}{a[-2]}x{b[-1]}x{a[-1]} {orders}{aligned}"


def replay(key, precisions, generator, device="cuda"):
    """One recorded product timed as torch runs it and under the switch in each precision:
    {"product", "torch_us", precision: {"plan", "model_us", "us", "x_torch"}} (model_us: the
    cost model's time for the plan, None where it has none); a product the switch hands to
    torch is timed on the kernels' own plan too ("kernels_plan", "kernels_model_us",
    "kernels_us"), the data the hand-off rule is fitted on."""
    op, records, kwargs = key
    func = getattr(aten, op).default
    args = [operand(r, generator, device) if r[0] == "tensor" else r[1] for r in records]
    kwargs = dict(kwargs)  # once, not inside the timed calls
    A, B = args[-2], args[-1]
    row = {"product": describe(op, records)}
    row["torch_us"] = time_ms(lambda: func(*args, **kwargs)) * 1e3
    for precision in precisions:
        plan = torch_vecgemm.plan(A, B, precision=precision)
        with torch_vecgemm.enable(precision):
            us = time_ms(lambda: func(*args, **kwargs)) * 1e3
        row[precision] = {"plan": str(plan), "model_us": plan.predicted_us, "us": us, "x_torch": row["torch_us"] / us}
        if plan.family == "torch":
            with torch_handoff(False), torch_vecgemm.enable(precision):
                kernels = torch_vecgemm.plan(A, B, precision=precision)
                row[precision]["kernels_plan"] = str(kernels)
                row[precision]["kernels_model_us"] = kernels.predicted_us
                row[precision]["kernels_us"] = time_ms(lambda: func(*args, **kwargs)) * 1e3
    return row


def kernel_operands(A, B, plan):
    """A and B in the storage orders `plan` copies them into (the copies made here, untimed),
    with the time of those copies in us; None where a copy also pads K."""
    if plan.copy_a is None and plan.copy_b is None:
        return A, B, 0.0
    if A.shape[-1] % 16:  # auto's copies pad K to a multiple of 16 (plan.cpp, kKPadding)
        return None

    def into(t, order):
        """(t in `order`, the copy that makes it) or (t, None) where it is not copied."""
        if order is None:
            return t, None
        row_major = order == "row-major"
        copy = t.contiguous if row_major else (lambda: t.transpose(-1, -2).contiguous())
        return (copy() if row_major else copy().transpose(-1, -2)), copy

    (A2, copy_a), (B2, copy_b) = into(A, plan.copy_a), into(B, plan.copy_b)
    copies_us = sum(time_ms(c) * 1e3 for c in (copy_a, copy_b) if c is not None)
    return A2, B2, copies_us


def candidates(A, B, best):
    """The auto IEEE plan's candidates on A @ B, each forced through the tuning cache:
    [{"tiling", "model_us", "us"}] for the cost model's `best` first tilings and every stream-K
    one it ranks, on the operands as the plan's kernel reads them ("copies_us": the copies'
    own time), or None where the plan's copies pad K."""
    plan = torch_vecgemm.plan(A, B, precision="ieee")
    made = kernel_operands(A, B, plan)
    if made is None:
        return None
    A2, B2, copies_us = made
    key = torch_vecgemm._C.tuning_key(A2, B2)
    ranked = torch_vecgemm._C._testing.model_ranking(key)
    chosen = [c for i, c in enumerate(ranked) if i < best or c[3]]
    out = []
    try:
        for ns, config, splits, stream_k in chosen:
            torch_vecgemm._C.clear_tuning_cache()
            torch_vecgemm._C.add_tuning_entry(key, config, splits, stream_k=stream_k)
            forced = torch_vecgemm.plan(A2, B2, precision="ieee")
            if forced.copy_a is not None or forced.copy_b is not None:
                continue  # the operands were not as the plan reads them after all
            us = time_ms(lambda: torch_vecgemm.mm(A2, B2)) * 1e3
            out.append({"tiling": str(forced), "model_us": ns / 1e3, "us": us})
    finally:
        torch_vecgemm._C.clear_tuning_cache()
    return {"copies_us": copies_us, "candidates": sorted(out, key=lambda c: c["us"])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2-small", help="a model of benchmarks/models.json")
    ap.add_argument("--precision", default="ieee,3xtf32", help="the switch's precisions, comma-separated")
    ap.add_argument("--candidates", type=int, default=0, metavar="N",
                    help="also time the cost model's N best IEEE tilings (and its stream-K ones) on each product")
    ap.add_argument("--out", help="write the products and totals to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("model_products needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    precisions = args.precision.split(",")
    counts = record_step(args.model)
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows, totals = [], collections.Counter()
    for key, calls in sorted(counts.items(), key=lambda kv: str(kv[0])):
        row = replay(key, precisions, generator)
        row["calls"] = calls
        if args.candidates:
            A, B = (operand(r, generator) for r in key[1][-2:])
            row["candidates"] = candidates(A, B, args.candidates)
        totals["torch"] += calls * row["torch_us"]
        for p in precisions:
            totals[p] += calls * row[p]["us"]
            row[p]["step_us_over_torch"] = calls * (row[p]["us"] - row["torch_us"])
        rows.append(row)
    for p in precisions:
        print(f"\n== {args.model}, switch {p}: products {totals[p] / 1e3:.2f} ms a step against torch's "
              f"{totals['torch'] / 1e3:.2f} ({totals['torch'] / totals[p]:.3f}x)")
        print(f"{'product':44s} {'calls':>5s} {'torch us':>9s} {'ours us':>9s} {'x torch':>7s} {'step us':>8s}  plan")
        for row in sorted(rows, key=lambda r: -r[p]["step_us_over_torch"]):
            q = row[p]
            kernels = f" (on the kernels {q['kernels_us']:.1f} us: {q['kernels_plan']})" if "kernels_us" in q else ""
            print(f"{row['product']:44s} {row['calls']:5d} {row['torch_us']:9.1f} {q['us']:9.1f} {q['x_torch']:7.3f} "
                  f"{q['step_us_over_torch']:+8.0f}  {q['plan']}{kernels}")
    if args.candidates:
        print(f"\n== {args.model}, IEEE candidates forced (operands as the kernel reads them; copies apart)")
        for row in rows:
            found = row["candidates"]
            if found is None:
                print(f"{row['product']:44s} its copies pad K: not timed")
                continue
            print(f"{row['product']:44s} torch {row['torch_us']:.1f} us, copies {found['copies_us']:.1f} us")
            for c in found["candidates"]:
                print(f"    {c['us']:9.1f} us {row['torch_us'] / c['us']:6.3f}x  model {c['model_us']:8.1f} us  {c['tiling']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "products": rows, "totals_us": dict(totals)}, f, indent=1)


if __name__ == "__main__":
    main()
