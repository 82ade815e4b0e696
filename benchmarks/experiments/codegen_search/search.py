"""Runs the code-generation search (docs/performance.md, step 18) on the GPU.

Stage 1 times every variant once at one size against cuBLAS in the same process. Stage 2
times the best few again, with the production variant (id 0), at several sizes, each size
in several rounds whose process order rotates; the median ratio per variant and size is
the result. A variant whose output misses the float64 reference is dropped.

    python3 search.py OUT_DIR [--top 8] [--rounds 3] [--sizes 2048,4096,8192]
"""
import argparse
import collections
import glob
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ERR = 1e-3  # |D - D64| on 2048 x 2048 inputs in [-1, 1): fp32 round-off is ~1e-5


def run(binary, size, ids=()):
    out = subprocess.run([binary, str(size), *map(str, ids)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        vid, name, n, ms, base, ratio, err = line.split()
        rows.append(dict(id=int(vid), name=name, size=int(n), ms=float(ms), cublas=float(base),
                         ratio=float(ratio), err=float(err)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--sizes", default="2048,4096,8192")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    binaries = [b for b in glob.glob(os.path.join(HERE, "search_[0-9]*")) if b.rsplit("_", 1)[1].isdigit()]
    binaries.sort(key=lambda b: int(b.rsplit("_", 1)[1]))
    shard_of = {}
    stage1 = []
    with open(os.path.join(args.out, "stage1.txt"), "w") as f:
        for b in binaries:
            for r in run(b, args.size):
                shard_of[r["id"]] = b
                stage1.append(r)
                f.write(f"{r['id']:4d} {r['name']:44s} {r['ms']:.4f} ms  cublas {r['cublas']:.4f}  "
                        f"x {r['ratio']:.4f}  err {r['err']:.1e}\n")
    ok = [r for r in stage1 if r["err"] <= MAX_ERR]
    wrong = [r for r in stage1 if r["err"] > MAX_ERR]
    best = sorted(ok, key=lambda r: -r["ratio"])[: args.top]
    ids = sorted({0} | {r["id"] for r in best})
    by_binary = collections.defaultdict(list)
    for i in ids:
        by_binary[shard_of[i]].append(i)
    ratios = collections.defaultdict(list)
    names = {r["id"]: r["name"] for r in stage1}
    order = list(by_binary.items())
    for size in map(int, args.sizes.split(",")):
        for rnd in range(args.rounds):
            for b, bids in order[rnd % len(order):] + order[: rnd % len(order)]:
                for r in run(b, size, bids):
                    ratios[(r["id"], size)].append(r["ratio"])
    sizes = list(map(int, args.sizes.split(",")))
    with open(os.path.join(args.out, "stage2.txt"), "w") as f:
        f.write(f"stage 1: {len(stage1)} variants at {args.size}, {len(wrong)} wrong: "
                f"{[r['name'] for r in wrong]}\n")
        f.write("median ratio to cublasSgemm (cr) over rounds [min max]\n")
        f.write(f"{'id':>4} {'variant':44s}" + "".join(f"{s:>22d}" for s in sizes) + "\n")
        for i in sorted(ids, key=lambda i: -statistics.median(ratios[(i, args.size)])):
            cells = []
            for s in sizes:
                v = ratios[(i, s)]
                cells.append(f"{statistics.median(v):.4f} [{min(v):.3f} {max(v):.3f}]".rjust(22))
            f.write(f"{i:4d} {names[i]:44s}" + "".join(cells) + "\n")
    print(open(os.path.join(args.out, "stage2.txt")).read())


if __name__ == "__main__":
    main()
