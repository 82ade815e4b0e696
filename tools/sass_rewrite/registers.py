"""Registers for the loop's values in a new order: the values pinned by the loop's entry and
exit where they were, the accumulators in place, the rest first-fit by live interval."""
from collections import defaultdict

from .loop import LoopError

COOLDOWN = 8  # positions before a register a memory instruction read is written again


def allocate(loop, seq, nregs, reserved):
    """{group: base register} for the new sequence `seq`, within `nregs` registers and
    outside `reserved`; quads and pairs aligned."""
    vals = loop.vals
    end_pos = len(seq)
    start, last = {}, {}
    for p, n in enumerate(seq):
        for _f, _w, d, vs in n.vals:
            for v in vs:
                g = vals.group[v][0]
                if d:
                    start[g] = min(start.get(g, p), p)
                else:
                    last[g] = max(last.get(g, -1), p)
    finals = {vals.group[loop.final[r]][0] for r in loop.final if r in loop.live_in or r in loop.live_exit}
    groups = [g for g, m in enumerate(vals.groups) if m]
    span = {}
    slow_reader = {}
    for p, n in enumerate(seq):
        for _f, _w, d, vs in n.vals:
            if not d:
                for v in vs:
                    slow_reader[vals.group[v][0]] = n.variable()
    for g in groups:
        s = start.get(g, -1)
        e = end_pos if g in finals else last.get(g, s)
        if slow_reader.get(g) and e < end_pos:
            e = min(e + COOLDOWN, end_pos)  # a memory instruction may read it after issue
        span[g] = (s, e)
    occupied = defaultdict(list)  # register -> [(start, end)]

    def free(reg, s, e):
        return reg < nregs and reg not in reserved and all(e <= s2 or e2 <= s for s2, e2 in occupied[reg])

    alloc = {}
    for g in groups:
        if g in vals.pinned:
            base = vals.pinned[g]
            s, e = span[g]
            for k in range(len(vals.groups[g])):
                if not all(e <= s2 or e2 <= s for s2, e2 in occupied[base + k]):
                    raise LoopError(f"pinned values collide in R{base + k}")
                occupied[base + k].append((s, e))
            alloc[g] = base
    prefer = {}
    for n in seq:
        if n.kind == "ffma":
            prefer[vals.group[n.vals[3][3][0]][0]] = n.vals[2][3][0]
    for g in sorted((g for g in groups if g not in alloc), key=lambda g: span[g]):
        s, e = span[g]
        w = len(vals.groups[g])
        align = 4 if w > 2 else w
        tries = []
        if g in prefer:
            c = prefer[g]
            cg, ck = vals.group[c]
            if cg in alloc:
                tries.append(alloc[cg] + ck)
        tries += range(0, nregs, align)
        for base in tries:
            if base % align == 0 and all(free(base + k, s, e) for k in range(w)):
                break
        else:
            raise LoopError(f"no register for a group of {w} over [{s}, {e}]")
        for k in range(w):
            occupied[base + k].append((s, e))
        alloc[g] = base
    return alloc


def reg_of(loop, alloc, v):
    g, k = loop.vals.group[v]
    return alloc[g] + k


def node_regs(loop, n, alloc=None):
    """{field: register} of a node, in the original allocation or a new one (an FFMA's
    multiplicands in the slots the order chose)."""
    if alloc is None:
        return {f: r for f, _w, _d, r in n.slot_regs}
    out = {f: reg_of(loop, alloc, vs[0]) for f, _w, _d, vs in n.vals}
    if n.kind == "ffma":
        a, b = n.order_ab[::-1] if loop.swapped[n.idx] else n.order_ab
        out[24], out[32] = reg_of(loop, alloc, a), reg_of(loop, alloc, b)
    return out
