"""The variants of the code-generation search (docs/performance.md, step 18), as data.

Every variant is a TileShape of the register-staged kernel (csrc/cuda/tile_shape.h), built
for column-major A and row-major B (cr), the order auto copies large problems into. They
differ only in choices that change what ptxas is given, not the algorithm: the warp layout,
BK, whether the next tile's loads are held (kPinLoadsMask), the FFMA order (kFfmaOrder),
the K step at which the staged loads go to shared memory (kStoreStep) and bank steering.

    python3 variants.py SHARDS    writes variants_<i>.inc for i < SHARDS
"""
import itertools
import sys

# TileShape<BM, BN, BK, WM, WN, TM, TN, MINB, PREFETCH, STEER, PIN, ORDER, STORE_STEP>
FIELDS = "bm bn bk wm wn tm tn minb prefetch steer pin order store".split()
PRODUCTION = dict(bm=128, bn=128, bk=8, wm=64, wn=64, tm=8, tn=16, minb=2, prefetch=1, steer=0, pin=1,
                  order=0, store=-1)  # tiled_128x128x8_t816 as built for cr


def variants():
    out = [dict(PRODUCTION)]
    seen = {tuple(PRODUCTION.values())}

    def add(**kw):
        v = dict(PRODUCTION, **kw)
        key = tuple(v[f] for f in FIELDS)
        if key not in seen:
            seen.add(key)
            out.append(v)

    # 128 x 128 blocks of 128 threads, 8 x 16 per thread: the production tiling's neighbours.
    for (wm, wn), bk, pin, order, store in itertools.product(
            [(64, 64), (32, 128), (128, 32)], [8, 16], [0, 1], [0, 1, 2, 3, 4], ["late", "early", "mid"]):
        st = {"late": -1, "early": 1, "mid": bk // 2 - 1}[store]
        add(wm=wm, wn=wn, bk=bk, pin=pin, order=order, store=st)
    # 16 x 8 per thread.
    for (wm, wn), pin, order, st in itertools.product([(64, 64), (128, 32)], [0, 1], [0, 2, 3, 4], [-1, 3]):
        add(tm=16, tn=8, wm=wm, wn=wn, pin=pin, order=order, store=st)
    # 256 threads, one block per SM: 256 x 128 (cuBLAS' tile) and 128 x 256.
    for (bm, bn), pin, order, st in itertools.product([(256, 128), (128, 256)], [0, 1], [0, 3], [-1, 3]):
        add(bm=bm, bn=bn, minb=1, pin=pin, order=order, store=st)
    # Steered banks on the production tiling.
    for pin, order, st in itertools.product([0, 1], [0, 3], [-1, 3]):
        add(steer=1, pin=pin, order=order, store=st)
    return out


def name(v):
    return (f"{v['bm']}x{v['bn']}x{v['bk']}_w{v['wm']}x{v['wn']}_t{v['tm']}x{v['tn']}"
            f"_o{v['order']}_s{v['store']}_p{v['pin']}{'_steer' if v['steer'] else ''}")


def main():
    shards = int(sys.argv[1])
    vs = variants()
    for s in range(shards):
        with open(f"variants_{s}.inc", "w") as f:
            for i, v in enumerate(vs):
                if i % shards == s:
                    # pin holds the loads in every storage order (a mask, tile_configs.h).
                    c = dict(v, prefetch=str(bool(v["prefetch"])).lower(), steer=str(bool(v["steer"])).lower(),
                             pin=0xF if v["pin"] else 0)
                    f.write(f'VARIANT({i}, "{name(v)}", {", ".join(str(c[k]) for k in FIELDS)})\n')
    print(len(vs), "variants in", shards, "shards")


if __name__ == "__main__":
    main()
