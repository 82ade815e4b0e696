"""Where a rewritten t816 cr loop goes wrong: per problem, the fraction of outputs off the
float64 reference, whether two runs agree bit for bit (a race or a stale operand that
depends on timing shows as disagreement), and for the first bad elements the K index whose
single term the error matches (a dropped or doubled term)."""
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
from conftest import make_operand  # noqa: E402

import torch_vecgemm  # noqa: E402,F401

ops = torch.ops.vecgemm
torch.manual_seed(0)
for m, n, k in [(128, 128, 8), (128, 128, 64), (256, 256, 256), (2048, 2048, 2048)]:
    A, B = make_operand(m, k, "c"), make_operand(k, n, "r")
    out1 = ops.sgemm(A, B, None, 1.0, 0.0, "tiled_128x128x8_t816")
    out2 = ops.sgemm(A, B, None, 1.0, 0.0, "tiled_128x128x8_t816")
    ref = A.double() @ B.double()
    R = out1.double() - ref
    bad = R.abs() > 1e-4 * ref.abs().max()
    same = torch.equal(out1, out2)
    print(f"{m}x{n}x{k}: bad {bad.float().mean().item():.4f}, runs agree {same}, max err {R.abs().max().item():.3g}")
    if bad.any():
        tile = bad[:128, :128]
        print("  bad (row % 8, col % 16) counts in tile 0:",
              torch.stack([tile[i::8, :].sum() for i in range(8)]).tolist(),
              torch.stack([tile[:, j::16].sum() for j in range(16)]).tolist())
        for i, j in bad.nonzero()[:4].tolist():
            terms = A[i, :].double() * B[:, j].double()
            kk = int((terms + R[i, j]).abs().argmin())
            print(f"  ({i},{j}) err {R[i, j].item():.4g}; -term k={kk} {-terms[kk].item():.4g}, +term k="
                  f"{int((terms - R[i, j]).abs().argmin())}")
