"""Static checks of a GEMM main loop's SASS: operand reuse, register banks, load distance.

The main loop is taken to be the backward branch whose body holds the most FFMAs. For it:
- reads: how many source registers each FFMA reads from the register file, simulating the
  operand reuse cache as one entry per (operand slot, register bank), filled by `.reuse`;
- conflicts: FFMAs whose register-file reads put two registers in one bank (register
  number mod --banks);
- LDS distance: instructions from each LDS to the first instruction reading its result.
docs/performance.md (step 10) has these numbers for cuBLAS's kernel and ours.

    python -m benchmarks.ffma_banks kernel.sass            # text from cuobjdump -sass
    python -m benchmarks.ffma_banks torch_vecgemm/_C*.so --function sgemm_async
"""
import argparse
import re
import subprocess
from collections import Counter

from .sass_report import cuobjdump

_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_REG = re.compile(r"\bR(\d+)\b")


def functions(sass):
    """(name, [(address, instruction text)]) for each function in a cuobjdump listing."""
    out, name, body = [], None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name is not None:
                out.append((name, body))
            name, body = m.group(1), []
            continue
        m = _INSTR.search(line)
        if m and name is not None:
            body.append((int(m.group(1), 16), m.group(2)))
    if name is not None:
        out.append((name, body))
    return out


def loops(body):
    """(FFMA count, index of the head, index of the back branch) of every loop in body
    [(address, text, ...)], in the order of their back branches."""
    index = {item[0]: i for i, item in enumerate(body)}
    out = []
    for i, (addr, text, *_rest) in enumerate(body):
        m = re.search(r"BRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr and int(m.group(1), 16) in index:
            head = index[int(m.group(1), 16)]
            out.append((sum(" FFMA " in f" {item[1]} " for item in body[head : i + 1]), head, i))
    return out


def main_loop_bounds(body):
    """The loop of `loops` with the most FFMAs (the first of equals); None if there is none."""
    return max(loops(body), key=lambda c: c[0], default=None)


def main_loop(body):
    """The instructions of the loop with the most FFMAs (None if there is no loop)."""
    best = main_loop_bounds(body)
    return [t for _, t in body[best[1] : best[2] + 1]] if best else None


def operands(text):
    text = re.sub(r"^@!?U?P\w+\s+", "", text)
    parts = text.split(None, 1)
    return parts[0], [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []


def ffma_stats(loop, banks):
    cache, reads, conflicts, total = {}, Counter(), 0, 0
    for k, text in enumerate(loop * 2):  # counted on the second pass, the cache warm
        op, ops = operands(text)
        if op != "FFMA":
            continue
        rf, update = [], {}
        for slot, o in enumerate(ops[1:4]):
            m = re.match(r"-?\|?R(\d+)", o)
            if not m:
                continue
            r = int(m.group(1))
            if cache.get((slot, r % banks)) != r:
                rf.append(r % banks)
            update[(slot, r % banks)] = r if ".reuse" in o else None
        for key, r in update.items():
            if r is None:
                cache.pop(key, None)
            else:
                cache[key] = r
        if k >= len(loop):
            total += 1
            reads[len(rf)] += 1
            conflicts += any(rf.count(b) > 1 for b in rf)
    return total, reads, conflicts


def lds_distances(loop):
    out = []
    for k, text in enumerate(loop):
        op, ops = operands(text)
        if not op.startswith("LDS") or not ops:
            continue
        m = _REG.search(ops[0])
        if m is None:  # LDS RZ: a placeholder
            continue
        width = {"LDS.64": 2, "LDS.128": 4}.get(op, 1)
        first = int(m.group(1))
        dest = {first + q for q in range(width)}
        for t in range(1, len(loop)):
            _, later = operands(loop[(k + t) % len(loop)])
            if any(int(r) in dest for o in later[1:] for r in _REG.findall(o)):
                out.append(t)
                break
    return out


def report(name, body, banks):
    loop = main_loop(body)
    if loop is None:
        return
    total, reads, conflicts = ffma_stats(loop, banks)
    if total == 0:
        return
    dist = sorted(lds_distances(loop))
    print(name[:120])
    hist = ", ".join(f"{n} read{'s' if n != 1 else ''}: {reads[n] / total:.0%}" for n in sorted(reads))
    print(f"  loop: {len(loop)} instructions, {total} FFMA; register-file reads per FFMA: {hist}")
    print(f"  FFMAs with two reads in one bank (mod {banks}): {conflicts / total:.0%}")
    if dist:
        print(f"  LDS -> first use: min {dist[0]}, median {dist[len(dist) // 2]}, max {dist[-1]} instructions")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="cuobjdump -sass text, or a cubin / shared library")
    ap.add_argument("--function", default="", help="only functions whose name contains this")
    ap.add_argument("--banks", type=int, default=2)
    ap.add_argument("--cuobjdump", default=None, help="default: as sass_report finds it (PATH, then triton's)")
    args = ap.parse_args()
    try:
        sass = open(args.path).read()
    except UnicodeDecodeError:
        cmd = [args.cuobjdump or cuobjdump(), "-sass", args.path]
        sass = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for name, body in functions(sass):
        if args.function in name:
            report(name, body, args.banks)


if __name__ == "__main__":
    main()
