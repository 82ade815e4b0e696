"""What do operands whose rows are not 16-byte aligned cost each config that takes them?

The planner copies a large problem's misaligned operands into aligned storage unless the
cost model predicts the plan without copies faster (plan.cpp, plan_copies), pricing a
config's 4-byte-load instance by the device profile's scalar_load_percent: this measures
those figures (torch_vecgemm/profiles/). For each storage order, each config with a 4-byte instance runs the same problem twice
through the strict op (`variant=<config>`, the split the model picks for it, no copies):
with every row 16-byte aligned, and with the leading dimensions one float longer, which
leaves the rows off 16 bytes and sends it to that instance. K is a multiple of 16, so only
the alignment differs. torch.matmul on the unaligned operands alongside. Needs a GPU.

    python -m benchmarks.probes.unaligned_cost [--shapes 1024x3072x1024,2048x2048x2048]
"""
from __future__ import annotations

import argparse

import torch

import torch_vecgemm
from benchmarks.common import time_ms
from benchmarks.probes.best_variant import config_names
from benchmarks.report import geomean

ORDERS = ("rr", "rc", "cr", "cc")


def operand(rows, cols, order, pad, gen):
    """N(0, 1), row-major ('r') or column-major ('c'), its leading dimension `pad` floats
    longer than the matrix's contiguous side."""
    if order == "r":
        return torch.randn(rows, cols + pad, device="cuda", generator=gen)[:, :cols]
    return torch.randn(cols, rows + pad, device="cuda", generator=gen)[:, :rows].t()


def parse_shapes(text):
    shapes = [tuple(int(v) for v in s.split("x")) for s in text.split(",")]
    for m, n, k in shapes:
        if k % 16:
            raise SystemExit(f"K = {k}: a multiple of 16 keeps K's remainder out of the comparison")
    return shapes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1024x3072x1024,2048x2048x2048", help="MxNxK, comma list")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no GPU: this probe times kernels")
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    print("unaligned / aligned: our time with the rows off 16 bytes over the same config's aligned time")
    print(f"{'problem':<16} {'order':<5} {'config':<26} {'aligned us':>10} {'unaligned us':>12} "
          f"{'unaligned / aligned':>19} {'torch us':>9}")
    per_config = {}
    for m, n, k in parse_shapes(args.shapes):
        for order in ORDERS:
            aligned = operand(m, k, order[0], 0, gen), operand(k, n, order[1], 0, gen)
            unaligned = operand(m, k, order[0], 1, gen), operand(k, n, order[1], 1, gen)
            torch_ms = time_ms(lambda: torch.matmul(*unaligned))
            for name in config_names():
                if torch_vecgemm.fallback_reason(*unaligned, variant=name) is not None:
                    continue  # no 4-byte instance
                times = []
                for A, B in (aligned, unaligned):
                    out = torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, name)
                    torch.testing.assert_close(out, torch.matmul(A, B), rtol=1e-4, atol=1e-3)
                    times.append(time_ms(lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, name)))
                ratio = times[1] / times[0]
                per_config.setdefault(name, []).append(ratio)
                print(f"{m}x{n}x{k:<6} {order:<5} {name:<26} {times[0] * 1e3:10.1f} {times[1] * 1e3:12.1f} "
                      f"{ratio:19.3f} {torch_ms * 1e3:9.1f}")
    for name, ratios in per_config.items():
        print(f"{name}: unaligned {geomean(ratios):.3f}x the aligned time (geometric mean over {len(ratios)} problems)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
