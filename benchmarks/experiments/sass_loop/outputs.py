"""Saves what a (rewritten) t816 cr loop computes on one 128 x 128 block for designed inputs,
for decoding offline: `python3 outputs.py OUT.pt`. Designs (K = 16, two K tiles):
- "step k": only K index k non-zero, A[:, k] = 1 + row, B[k, :] = 1 + col: a right result
  is (1 + i)(1 + j), and a value taken from another K step or lane shows as a product of
  other factors or as a non-zero where the step had no terms;
- "ones": A and B all ones (16 everywhere);
- "A ids" / "B ids": exact.py's designs."""
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]
from exact import M, N, run, small  # noqa: E402

K = 16
out = {}
for k in range(K):
    A = torch.zeros(M, K, dtype=torch.float64)
    B = torch.zeros(K, N, dtype=torch.float64)
    A[:, k] = 1 + torch.arange(M)
    B[k, :] = 1 + torch.arange(N)
    out[f"step {k}"] = run(A, B)
out["ones"] = run(torch.ones(M, K, dtype=torch.float64), torch.ones(K, N, dtype=torch.float64))
out["A ids"] = run((1 + torch.arange(M).view(-1, 1) + M * torch.arange(K).view(1, -1)).double(), small(K, N, 3, 5))
out["B ids"] = run(small(M, K, 5, 3), (1 + torch.arange(N).view(1, -1) + N * torch.arange(K).view(-1, 1)).double())
torch.save(out, sys.argv[1])
bad = {name: int(((t - t.round()) != 0).sum()) for name, t in out.items()}
print("saved", sys.argv[1], "non-integer entries:", {k: v for k, v in bad.items() if v})
