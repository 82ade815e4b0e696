"""Which operand a rewritten t816 cr loop gets wrong, decoded exactly.

One 128 x 128 block (cr, K = 16 and 24: two and three K tiles). In the first design every
A element is a distinct integer id and B is small integers (1-7); in the second the roles
swap. Every product and sum is an integer below 2^24, so fp32 computes the reference
exactly and an error is an exact integer. For a wrong output (i, j) and each K index k,
if err / B[k, j] is an integer, A[i, k] + err / B[k, j] names the A element the loop
would have used in place of A[i, k] (0: the term dropped). The histogram of
(k, row offset, k offset) over the wrong outputs shows the substitution: a value of the
previous K step, of the same step in the previous tile, of a neighbouring row, ...

    python3 benchmarks/experiments/sass_loop/exact.py
"""
import collections
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path[:0] = [ROOT]
import torch_vecgemm  # noqa: E402,F401

M = N = 128
VARIANT = "tiled_128x128x8_t816"


def small(r, c, a, b):
    """Integers 1-7 that vary along both dimensions."""
    i = torch.arange(r).view(-1, 1)
    j = torch.arange(c).view(1, -1)
    return (1 + (a * i + b * j) % 7).double()


def run(A, B):
    """A (m x k) stored column-major, B (k x n) row-major: the cr instance."""
    Ad = A.t().contiguous().float().cuda().t()
    Bd = B.contiguous().float().cuda()
    return torch.ops.vecgemm.sgemm(Ad, Bd, None, 1.0, 0.0, VARIANT).double().cpu()


def decode(K, ids_in_a):
    if ids_in_a:
        A = (1 + torch.arange(M).view(-1, 1) + M * torch.arange(K).view(1, -1)).double()
        B = small(K, N, 3, 5)
    else:
        A = small(M, K, 5, 3)
        B = (1 + torch.arange(N).view(1, -1) + N * torch.arange(K).view(-1, 1)).double()
    ref = A @ B
    got = run(A, B)
    got2 = run(A, B)
    err = got - ref
    bad = err != 0
    name = "A ids" if ids_in_a else "B ids"
    print(f"K={K} {name}: wrong {int(bad.sum())}/{M * N}, runs agree {torch.equal(got, got2)}, "
          f"non-integer {int((err != err.round()).sum())}")
    if not bad.any():
        return
    hist, unique, none = collections.Counter(), 0, 0
    idx = bad.nonzero().tolist()
    for i, j in idx:
        e = err[i, j].item()
        cands = []
        for k in range(K):
            if ids_in_a:
                f, own = B[k, j].item(), A[i, k].item()
            else:
                f, own = A[i, k].item(), B[k, j].item()
            q = e / f
            if q != round(q):
                continue
            x = own + q
            if x == 0:
                cands.append(("drop", k, 0, 0))
            elif 1 <= x <= (M if ids_in_a else N) * K:
                x = int(x) - 1
                pos, k2 = x % (M if ids_in_a else N), x // (M if ids_in_a else N)
                cands.append(("sub", k, pos - (i if ids_in_a else j), k2 - k))
        unique += len(cands) == 1
        none += not cands
        for c in cands:
            hist[c] += 1
    print(f"  decoded: {unique} with one candidate, {none} with none, of {len(idx)}")
    # A run of K terms lost or added twice (a stale or doubled accumulator): err = -/+ the
    # sum of the terms k0 .. k1 - 1 of that output.
    ii, jj = bad.nonzero(as_tuple=True)
    P = torch.cat([torch.zeros(len(ii), 1, dtype=torch.float64), (A[ii] * B[:, jj].t()).cumsum(1)], 1)
    D = P.unsqueeze(1) - P.unsqueeze(2)  # D[e, k0, k1] = sum of terms k0 .. k1 - 1
    e = err[ii, jj].view(-1, 1, 1)
    runs = collections.Counter()
    for sign, hit in (("lost", D == -e), ("twice", D == e)):
        for _e, k0, k1 in hit.nonzero().tolist():
            if k1 > k0:
                runs[(sign, k0, k1)] += 1
    print("  runs of terms (lost/twice, k0, k1):", runs.most_common(8))
    print("  top (kind, k, row/col offset, k offset):", hist.most_common(12))
    rows = collections.Counter(i % 16 for i, _j in idx)
    cols = collections.Counter(j % 16 for _i, j in idx)
    print("  wrong by row % 16:", [rows[r] for r in range(16)], "by col % 16:", [cols[c] for c in range(16)])
    for i, j in idx[:3]:
        print(f"  ({i},{j}) got {got[i, j].item():.0f} want {ref[i, j].item():.0f}")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    for K in (8, 16, 24):
        for ids_in_a in (True, False):
            decode(K, ids_in_a)


if __name__ == "__main__":
    main()
