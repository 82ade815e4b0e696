"""Experiment (step 69, removed by the commit after this one): the narrow-side row's K slices added in the kernel (clusters)
against the workspace and reduction pass, through torch.ops.vecgemm.gemm in 3xTF32, beside
torch.matmul fp32 in the same process; alternating rounds. Then the decode model shapes
under auto."""
import json
import sys

import torch

import torch_vecgemm
from benchmarks.common import time_ms

torch.backends.cuda.matmul.allow_tf32 = False
knob = torch_vecgemm._C._testing.set_narrow_splits_in_kernel
g = torch.Generator(device="cuda").manual_seed(0)
# (m, n, k, orders): decode through nn.Linear (rc), few columns, x @ W with W (in, out).
SHAPES = [(8, 4096, 4096, "rc"), (16, 11008, 4096, "rc"), (32, 4096, 4096, "rc"), (4096, 8, 4096, "rc"),
          (8, 4096, 4096, "rr"), (20, 70, 4100, "rc")]


def operand(rows, cols, layout):
    t = torch.randn(rows, cols, device="cuda", generator=g) if layout == "r" else \
        torch.randn(cols, rows, device="cuda", generator=g).t()
    return t


out = []
for m, n, k, orders in SHAPES:
    A, B = operand(m, k, orders[0]), operand(k, n, orders[1])
    plan = torch_vecgemm.plan(A, B, precision="3xtf32")
    row = {"shape": f"{m}x{n}x{k} {orders}", "plan": str(plan),
           "torch_us": [], "kernel_us": [], "pass_us": []}
    fn = lambda: torch.ops.vecgemm.gemm(A, B, None, 1.0, 0.0, "3xtf32")
    results = {}
    for rnd in range(2):
        row["torch_us"].append(1e3 * time_ms(lambda: torch.matmul(A, B)))
        for on in ((True, False) if rnd % 2 == 0 else (False, True)):
            knob(on)
            results[on] = fn()
            row["kernel_us" if on else "pass_us"].append(1e3 * time_ms(fn))
    knob(True)
    row["same_bits"] = bool(torch.equal(results[True], results[False]))
    for key in ("torch_us", "kernel_us", "pass_us"):
        row[key] = min(row[key])
    row["x_torch_kernel"] = row["torch_us"] / row["kernel_us"]
    row["x_torch_pass"] = row["torch_us"] / row["pass_us"]
    print(json.dumps(row), flush=True)
    out.append(row)
json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "fold_ab.json", "w"), indent=1)
