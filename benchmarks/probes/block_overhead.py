"""What does a block cost beyond its K tiles: the pipeline's fill, the epilogue?

The cost model prices a block as its K tiles at the config's rate and a call as its waves of
blocks plus one launch (cost_model.cpp), so a block's fixed cost shows as the model running
under the measured time where blocks run few K tiles (short K, deep splits, step 42's mid
sizes). Here each config runs whole waves of its blocks (resident_blocks a wave, so no
partial wave or edge tile), unsplit and without the stream-K tail (forced through the
tuning cache), on aligned operands in one storage order, at 1 and 3 waves and K of 4 to 256
K tiles. A least-squares fit, relative (each point weighted by its inverse), of

    time = launch + waves x (fixed + k_tiles x k_tile_time)

gives each config's fixed cost a wave, also in K tiles (fixed / k_tile_time): what a block
costs beyond its K tiles, with every resident block doing the same. Needs a GPU.

    python -m benchmarks.probes.block_overhead [--orders cr] [--configs REGEX]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

import torch_vecgemm
from benchmarks.common import block_tile, make_operands, time_ms, whole_waves_grid
from benchmarks.probes.best_variant import config_names

K_TILES = (4, 16, 64, 256)
WAVES = (1, 3)


def fit(points):
    """(launch, fixed a wave, K-tile time) by least squares over (waves, k_tiles, us), each
    point weighted by its inverse: the fixed costs show in the short calls, and unweighted,
    1% of noise on the longest (1 ms) would outweigh the whole of them."""
    x = np.array([[1.0, w, w * kt] for w, kt, _ in points])
    y = np.array([us for _, _, us in points])
    return np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", default="cr", help="storage orders, comma list of rr, rc, cr, cc")
    ap.add_argument("--configs", help="only configs whose name matches this regex")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no GPU: this probe times kernels")
    torch_vecgemm.autotune(False)
    print(f"{'config':<26} {'order':<5} {'blocks a wave':>13} {'launch us':>9} {'fixed us':>8} {'K tile us':>9} "
          f"{'fixed / K tile':>14} {'worst fit':>9}")
    for order in args.orders.split(","):
        for name in config_names(args.configs):
            bm, bn, bk = block_tile(name)
            slots = torch_vecgemm._C._testing.resident_blocks(name)
            points = []
            for waves in WAVES:
                tm, tn = whole_waves_grid(slots, waves)
                m, n = tm * bm, tn * bn
                for k_tiles in K_TILES:
                    k = k_tiles * bk
                    A, B = make_operands(m, n, k, order, "cuda", args.seed)
                    torch_vecgemm._C.add_tuning_entry(torch_vecgemm._C.tuning_key(A, B), name, 1, stream_k=False)
                    plan = torch_vecgemm.plan(A, B)
                    if (plan.kernel, plan.split_k, plan.copy_a, plan.copy_b) != (name, 1, None, None):
                        raise SystemExit(f"{m}x{n}x{k} {order}: planned {plan}, not {name} unsplit as given")
                    out = torch_vecgemm.mm(A, B)
                    torch.testing.assert_close(out, torch.matmul(A, B), rtol=1e-4, atol=1e-3 * k**0.5)
                    points.append((waves, k_tiles, time_ms(lambda: torch_vecgemm.mm(A, B)) * 1e3))
            launch, fixed, tile = fit(points)
            worst = max(abs(launch + w * (fixed + kt * tile) - us) / us for w, kt, us in points)
            print(f"{name:<26} {order:<5} {slots:13d} {launch:9.2f} {fixed:8.2f} {tile:9.3f} {fixed / tile:14.1f} "
                  f"{worst:9.1%}")
            for w, kt, us in points:
                print(f"    {w} wave{'s' if w > 1 else ' '} {kt:4d} K tiles {us:9.1f} us")
    torch_vecgemm._C.clear_tuning_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
