"""Count the instructions that matter in each kernel of the built library's SASS:
FFMA, shared loads by width (LDS.128 is what the transposed layout buys), global loads by
width, shared stores, and local-memory traffic (LDL/STL: spills).

    python -m benchmarks.sass_report [path/to/_C*.so]     # needs cuobjdump
"""
from __future__ import annotations

import collections
import glob
import os
import re
import shutil
import subprocess
import sys

OPS = ["FFMA", "LDS.128", "LDS.64", "LDS.32", "LDG.128", "LDG.64", "LDG.32", "LDGSTS", "STS.128", "STS.32", "STG.128", "STG.32", "LDL", "STL", "BAR"]
WIDE = ("LDS", "STS", "LDG", "STG")


def category(op):
    base = op.split(".")[0]
    if base in WIDE:
        return f"{base}.{128 if '.128' in op else 64 if '.64' in op else 32}"
    return base


def cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "cuobjdump")):
        return os.path.join(home, "bin", "cuobjdump")
    try:
        import triton

        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        return path if os.path.exists(path) else None
    except ImportError:
        return None


def demangle_short(name):
    # TileShape<BM, BN, BK, WM, WN, TM, TN, MINB, PREFETCH, STEER, PIN, ORDER, STORE_STEP>; -1 mangles as n1.
    shape = r"TileShapeILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb(\d)ELb(\d)ELi(\d+)ELi(\d+)ELi(n?\d+)EE"

    def tiling(bm, bn, bk, wm, wn, tm, tn, minb, pf, steer, pin, order, store):
        return (f"{bm}x{bn}x{bk} w{wm}x{wn} t{tm}x{tn} minb{minb}{' prefetch' if pf == '1' else ''}"
                f"{' steer' if steer == '1' else ''}{f' pin{pin}' if pin != '0' else ''}"
                f"{f' order{order}' if order != '0' else ''}{f' store{store}' if store != 'n1' else ''}")

    m = re.search(r"sgemm_tiledINS_9" + shape + r"ELNS_6LayoutE(\d)ELS\d_(\d)ELi(\d)", name)
    if m:
        *shape_args, la, lb, vec = m.groups()
        return f"tiled {tiling(*shape_args)} {'rc'[int(la)]}{'rc'[int(lb)]} vec{vec}"
    m = re.search(r"sgemm_stream_kINS_9" + shape + r"ELNS_6LayoutE(\d)ELS\d_(\d)E", name)
    if m:
        *shape_args, la, lb = m.groups()
        return f"stream-K {tiling(*shape_args)} {'rc'[int(la)]}{'rc'[int(lb)]}"
    for kernel, wrapper, label in (("sgemm_async", "10AsyncShape", "async"), ("sgemm_ws", "13ProducerShape", "ws")):
        m = re.search(kernel + r"INS_" + wrapper + r"INS_9" + shape + r"ELi(\d+)EEELNS_6LayoutE(\d)ELS\d_(\d)E", name)
        if m:
            *shape_args, stages, la, lb = m.groups()
            return f"{label} {tiling(*shape_args)} stages{stages} {'rc'[int(la)]}{'rc'[int(lb)]}"
    if "sgemm_vectorized" in name:
        return "vectorized (seed)"
    if "splitk_reduce" in name:
        return "splitk_reduce"
    if "stream_k_fixup" in name:
        return "stream_k_fixup"
    if "4gemv" in name:
        return "gemv vec" + ("4" if "ILi4E" in name else "1")
    return name[:60]


def report(lib):
    sass = subprocess.run([cuobjdump(), "--dump-sass", lib], check=True, capture_output=True, text=True).stdout
    rows = []
    for block in re.split(r"\n\s+Function : ", sass)[1:]:
        name = block.split("\n", 1)[0].strip()
        counts = collections.Counter()
        for op in re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", block):
            counts[category(op)] += 1
        rows.append((demangle_short(name), counts))
    return rows


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    lib = argv[0] if argv else (glob.glob(os.path.join(os.path.dirname(__file__), "..", "torch_vecgemm", "_C*.so")) or [None])[0]
    if lib is None or cuobjdump() is None:
        print("need the built library and cuobjdump", file=sys.stderr)
        return 2
    print(f"{'kernel':<55}" + "".join(f"{op:>10}" for op in OPS))
    for name, counts in sorted(report(lib)):
        print(f"{name:<55}" + "".join(f"{counts.get(op, 0):>10}" for op in OPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
