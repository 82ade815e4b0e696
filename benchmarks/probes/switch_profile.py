"""Where does a model's step spend its device time with the whole-program switch on, eager
and compiled, against the same model on torch's products?

A model of `benchmarks/models.json` (default: the MLP of the training record) runs a few
training steps (and inference forwards) four ways: eager and compiled
(`torch.compile(fullgraph=True)`), each on torch's fp32 products (TF32 off) and under
`torch_vecgemm.enable(precision)`. For each way it prints the step's wall time (median of
the profiled steps, synchronized) and its device time by kind of kernel (the library's
GEMM kernels and passes, cuBLAS, copies, inductor's Triton kernels, the rest), then the
kernels that took the most, in device microseconds per step (torch.profiler), and the aten
products with their shapes. The difference between two ways, kind by kind, is where a
slower way loses. Needs a GPU.

    python -m benchmarks.probes.switch_profile [--model mlp] [--precision 3xtf32]
        [--steps 6] [--top 12] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time

import torch

import torch_vecgemm
from benchmarks import train

KINDS = (  # (kind, substrings of a kernel's name), first match wins
    ("library", ("vecgemm",)),
    ("cublas", ("gemm", "xmma", "cutlass", "sm90_", "sm80_", "cublas")),
    ("copy", ("copy", "Memcpy", "Memset", "elementwise_kernel")),
    ("triton", ("triton_",)),
)


def kind_of(kernel):
    for kind, keys in KINDS:
        if any(key in kernel for key in keys):
            return kind
    return "other"


def profiled(step, steps):
    """(median wall ms of a step, {kernel: device us per step}, {(aten op, shapes): calls
    per step}) over `steps` profiled steps, after two unprofiled ones."""
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    walls = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA],
                                record_shapes=True) as prof:
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
    kernels, products = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels[e.name] += e.time_range.elapsed_us() / steps
        elif e.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
            products[f"{e.name} {e.input_shapes}"] += 1 / steps
    return statistics.median(walls), dict(kernels), dict(products)


def ways(model_name, precision):
    configs = train.load_configs()
    config = dict(configs["models"][model_name])
    base = train.build(config, seed=0).cuda()
    tokens = torch.randint(0, config["vocab"], (config["batch"], config["context"] + 1),
                           generator=torch.Generator().manual_seed(0)).cuda()
    x, y = tokens[:, :-1], tokens[:, 1:]
    for compiled in (False, True):
        for switch in (None, precision):
            model, _ = train.variant(base, train.TORCH)
            opt, _ = train.optimizer(model, configs["training"], schedule=False)
            torch._dynamo.reset()
            forward = torch.compile(model, fullgraph=True) if compiled else model

            def train_step(forward=forward, model=model, opt=opt):
                train.train_step(forward, model, opt, configs["training"]["clip"], x, y)

            def infer(forward=forward):
                with torch.inference_mode():
                    forward(x)

            name = f"{'compiled' if compiled else 'eager'}, {'switch ' + switch if switch else 'torch'}"
            yield name, switch, train_step, infer


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp", help="a model of benchmarks/models.json")
    ap.add_argument("--precision", default="3xtf32", help="the switch's precision")
    ap.add_argument("--steps", type=int, default=6, help="profiled steps of each way")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per way")
    ap.add_argument("--out", help="write every way's figures to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("switch_profile needs a GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    results = {}
    for name, switch, train_step, infer in ways(args.model, args.precision):
        for mode, step in (("train", train_step), ("inference", infer)):
            if switch:
                with torch_vecgemm.enable(switch):
                    wall, kernels, products = profiled(step, args.steps)
            else:
                wall, kernels, products = profiled(step, args.steps)
            by_kind = collections.Counter()
            for kernel, us in kernels.items():
                by_kind[kind_of(kernel)] += us
            results[f"{name}, {mode}"] = dict(wall_ms=wall, device_us=sum(kernels.values()),
                                              by_kind=dict(by_kind), kernels=kernels, products=products)
            print(f"\n== {args.model}, {name}, {mode}: {wall:.2f} ms a step, device {sum(kernels.values()) / 1e3:.2f} ms")
            print("   " + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in by_kind.most_common()))
            for kernel, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:args.top]:
                print(f"   {us:9.1f} us  {kind_of(kernel):8s} {kernel[:110]}")
            for product, calls in sorted(products.items()):
                print(f"   {calls:5.1f} x  {product}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
