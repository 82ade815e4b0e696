"""Static analysis of built kernels' SASS: instruction counts per kernel, and the main loop's
operand reuse, register banks and load distances."""
import collections
import re

from .cubin import disassemble
from .loop import main_loop_bounds

# --- instruction counts ----------------------------------------------------------------------

OPS = ["FFMA", "LDS.128", "LDS.64", "LDS.32", "LDG.128", "LDG.64", "LDG.32", "LDGSTS", "STS.128", "STS.32",
       "STG.128", "STG.32", "LDL", "STL", "BAR"]
WIDE = ("LDS", "STS", "LDG", "STG")


def category(op):
    """An opcode's column in the count: memory instructions by width, others by base name."""
    base = op.split(".")[0]
    if base in WIDE:
        return f"{base}.{128 if '.128' in op else 64 if '.64' in op else 32}"
    return base


def demangle_short(name):
    """A kernel's mangled name as a short label (tiling, policy, storage orders, vector width)."""
    # KernelShape<TileShape<BM, BN, BK, WM, WN, TM, TN>, MainloopPolicy<MINB, PREFETCH, STEER, PIN>>
    shape = (r"KernelShapeINS_9TileShapeILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)EEENS_14"
             r"MainloopPolicyILi(\d+)ELb(\d)ELb(\d)ELi(\d+)EEEE")

    def tiling(bm, bn, bk, wm, wn, tm, tn, minb, pf, steer, pin):
        return (f"{bm}x{bn}x{bk} w{wm}x{wn} t{tm}x{tn} minb{minb}{' prefetch' if pf == '1' else ''}"
                f"{' steer' if steer == '1' else ''}{f' pin{pin}' if pin != '0' else ''}")

    m = re.search(r"sgemm_tiledINS_11" + shape + r"ELNS_6LayoutE(\d)ELS\d_(\d)ELi(\d)", name)
    if m:
        *shape_args, la, lb, vec = m.groups()
        return f"tiled {tiling(*shape_args)} {'rc'[int(la)]}{'rc'[int(lb)]} vec{vec}"
    m = re.search(r"sgemm_stream_kINS_11" + shape + r"ELNS_6LayoutE(\d)ELS\d_(\d)E", name)
    if m:
        *shape_args, la, lb = m.groups()
        return f"stream-K {tiling(*shape_args)} {'rc'[int(la)]}{'rc'[int(lb)]}"
    m = re.search(r"sgemm_asyncINS_10AsyncShapeINS_11" + shape + r"ELi(\d+)EEELNS_6LayoutE(\d)ELS\d_(\d)E", name)
    if m:
        *shape_args, stages, la, lb = m.groups()
        return f"async {tiling(*shape_args)} stages{stages} {'rc'[int(la)]}{'rc'[int(lb)]}"
    if "sgemm_vectorized" in name:
        return "vectorized (seed)"
    if "splitk_reduce" in name:
        return "splitk_reduce"
    if "stream_k_fixup" in name:
        return "stream_k_fixup"
    if "4gemv" in name:
        return "gemv vec" + ("4" if "ILi4E" in name else "1")
    return name[:60]


def instruction_counts(lib, cuobjdump):
    """[(short kernel name, Counter of `category`)] of every function in a library."""
    sass = disassemble(lib, cuobjdump)
    rows = []
    for block in re.split(r"\n\s+Function : ", sass)[1:]:
        name = block.split("\n", 1)[0].strip()
        counts = collections.Counter()
        for op in re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", block):
            counts[category(op)] += 1
        rows.append((demangle_short(name), counts))
    return rows


def count_table(rows):
    """The lines of a table of `instruction_counts`, sorted by kernel."""
    lines = [f"{'kernel':<55}" + "".join(f"{op:>10}" for op in OPS)]
    for name, counts in sorted(rows):
        lines.append(f"{name:<55}" + "".join(f"{counts.get(op, 0):>10}" for op in OPS))
    return lines


# --- the main loop's banks and reuse -------------------------------------------------------------

_REG = re.compile(r"\bR(\d+)\b")


def main_loop(body):
    """The instructions' texts of the loop with the most FFMAs (None if there is no loop)."""
    best = main_loop_bounds(body)
    return [t for _, t in body[best[1] : best[2] + 1]] if best else None


def split_instruction(text):
    """(opcode, [operands]) of an instruction's text, its guard dropped."""
    text = re.sub(r"^@!?U?P\w+\s+", "", text)
    parts = text.split(None, 1)
    return parts[0], [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []


def ffma_stats(loop, banks):
    """(FFMAs, Counter of register-file reads per FFMA, FFMAs with two reads in one bank) of
    a loop's texts, the operand reuse cache one entry per (slot, bank), filled by `.reuse`;
    counted on a second pass, the cache warm."""
    cache, reads, conflicts, total = {}, collections.Counter(), 0, 0
    for k, text in enumerate(loop * 2):
        op, ops = split_instruction(text)
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
    """Instructions from each LDS of a loop to the first instruction reading its result
    (around the back edge)."""
    out = []
    for k, text in enumerate(loop):
        op, ops = split_instruction(text)
        if not op.startswith("LDS") or not ops:
            continue
        m = _REG.search(ops[0])
        if m is None:  # LDS RZ: a placeholder
            continue
        width = {"LDS.64": 2, "LDS.128": 4}.get(op, 1)
        first = int(m.group(1))
        dest = {first + q for q in range(width)}
        for t in range(1, len(loop)):
            _, later = split_instruction(loop[(k + t) % len(loop)])
            if any(int(r) in dest for o in later[1:] for r in _REG.findall(o)):
                out.append(t)
                break
    return out


def bank_report(name, body, banks):
    """The lines of the main-loop report of one function body [(address, text)]; none if it
    has no loop with FFMAs."""
    loop = main_loop(body)
    if loop is None:
        return []
    total, reads, conflicts = ffma_stats(loop, banks)
    if total == 0:
        return []
    dist = sorted(lds_distances(loop))
    hist = ", ".join(f"{n} read{'s' if n != 1 else ''}: {reads[n] / total:.0%}" for n in sorted(reads))
    lines = [name[:120],
             f"  loop: {len(loop)} instructions, {total} FFMA; register-file reads per FFMA: {hist}",
             f"  FFMAs with two reads in one bank (mod {banks}): {conflicts / total:.0%}"]
    if dist:
        lines.append(f"  LDS -> first use: min {dist[0]}, median {dist[len(dist) // 2]}, max {dist[-1]} instructions")
    return lines
