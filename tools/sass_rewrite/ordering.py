"""The order of one K step's FFMAs and their `.reuse` flags.

The operand reuse cache is modelled as one entry per (operand slot, register bank), banks
being register number mod 2, filled by an FFMA whose slot carries `.reuse`. An order is
searched under that model (a beam search; cost per FFMA = conflict_weight x (two
register-file reads in one bank) + register-file reads) or taken as a fixed walk over the
outer product. The flags are then set where the model says the cached value is read next.
"""

FIXED_WALKS = ("rows", "cols", "walk42", "walk24")
ORDERS = ("model", "ptxas") + FIXED_WALKS


def template_order(cells, name):
    """A fixed walk over the outer product, [(cell, swapped)]: `rows` (an a value held in
    slot a while b runs, serpentine), `cols` (a b value held in slot b), `walk42` / `walk24`
    (blocks of 4 x 2 / 2 x 4, each visited so that every FFMA shares an operand with the one
    before, the blocks serpentine). a and b values are indexed by their registers."""
    a_regs = sorted({c[3][1] for c in cells})
    b_regs = sorted({c[4][1] for c in cells})
    at = {(a_regs.index(c[3][1]), b_regs.index(c[4][1])): k for k, c in enumerate(cells)}
    na, nb = len(a_regs), len(b_regs)
    if name == "rows":
        walk = [(i, j) for i in range(na) for j in (range(nb) if i % 2 == 0 else reversed(range(nb)))]
    elif name == "cols":
        walk = [(i, j) for j in range(nb) for i in (range(na) if j % 2 == 0 else reversed(range(na)))]
    else:
        ba, bb = (4, 2) if name == "walk42" else (2, 4)
        walk = []
        for jb in range(nb // bb):
            for ib in (range(na // ba) if jb % 2 == 0 else reversed(range(na // ba))):
                cells_ = []
                for j in range(bb):  # serpentine over the block's columns
                    rows = range(ba) if j % 2 == 0 else reversed(range(ba))
                    cells_ += [(ib * ba + i, jb * bb + j) for i in rows]
                walk += cells_
    order = [(at[ij], name == "cols") for ij in walk]
    assert sorted(k for k, _ in order) == list(range(len(cells)))
    return order


def ffma_order(cells, beam=32, per_bank=True, conflict_weight=100):
    """(order [(cell, swapped)], its cost) of one K step's outer product. cells: [(bank a,
    bank b, bank c, a label, b label)]; cost per FFMA: conflict_weight x (two register-file
    reads in one bank) + register-file reads, the cache one entry per (slot, bank), or per
    slot without `per_bank`."""
    n = len(cells)
    states = [(0, [], frozenset(), {})]
    for _ in range(n):
        nxt = {}
        for cost, order, used, cache in states:
            for k in range(n):
                if k in used:
                    continue
                ba, bb, bc, la, lb = cells[k]
                for sw in (False, True):
                    ops = ((1, lb, bb), (0, la, ba)) if sw else ((0, la, ba), (1, lb, bb))
                    key_of = (lambda slot, bank: (slot, bank)) if per_bank else (lambda slot, bank: (slot, 0))
                    rf = [bank for slot, lab, bank in ops if cache.get(key_of(slot, bank)) != lab] + [bc]
                    step = conflict_weight * (len(rf) - len(set(rf))) + len(rf)
                    new_cache = dict(cache)
                    for slot, lab, bank in ops:
                        new_cache[key_of(slot, bank)] = lab
                    key = (used | {k}, tuple(sorted(new_cache.items())))
                    if key not in nxt or cost + step < nxt[key][0]:
                        nxt[key] = (cost + step, order + [(k, sw)], used | {k}, new_cache)
        states = sorted(nxt.values(), key=lambda s: s[0])[:beam]
    return states[0][1], states[0][0]


def cache_kills(n, boundary):
    """Operand slots whose reuse-cache entries an instruction between two FFMAs may replace:
    those it reads registers in; every slot at a branch or a branch target."""
    if boundary or n.branch_target() is not None:
        return {0, 1, 2}
    return {{24: 0, 32: 1, 64: 2}[f] for f, _w, d, _r in n.slot_regs if not d}


def reuse_bits(seq, ops, boundaries, per_bank=True, written=lambda n: set()):
    """{FFMA node index: `.reuse` bits}: slot s kept when the next FFMA that reads slot s
    from the same bank reads the same register, and nothing between reads slot s, writes
    that register (`written(node)`: the registers a node writes) or branches. ops: {FFMA
    node index: (Rd, Ra, Rb, Rc)}; boundaries: positions in seq where the cache is empty."""
    bits = {}
    for p, n in enumerate(seq):
        if n.kind != "ffma":
            continue
        b = 0
        for slot in (0, 1):
            r = ops[n.idx][1 + slot]
            for q, m in enumerate(seq[p + 1 :], start=p + 1):
                if r in written(m):
                    break
                if m.kind != "ffma":
                    if slot in cache_kills(m, q in boundaries):
                        break
                    continue
                if q in boundaries:
                    break
                r2 = ops[m.idx][1 + slot]
                if r2 % 2 == r % 2 or not per_bank:
                    b |= (1 << slot) if r2 == r else 0
                    break
        bits[n.idx] = b
    return bits


def model_reads(seq, ops, bits, boundaries):
    """(FFMAs reading only the accumulator from the register file, FFMAs with two
    register-file reads in one bank) under the reuse-cache model."""
    cache, one, same_bank = {}, 0, 0
    for p, n in enumerate(seq):
        if n.kind != "ffma" or p in boundaries:
            kills = cache_kills(n, p in boundaries) if n.kind != "ffma" else {0, 1, 2}
            cache = {k: v for k, v in cache.items() if k[0] not in kills}
            if n.kind != "ffma":
                continue
        _d, a, b, c = ops[n.idx]
        rf = [r % 2 for s, r in ((0, a), (1, b)) if cache.get((s, r % 2)) != r] + [c % 2]
        one += len(rf) == 1
        same_bank += len(rf) != len(set(rf))
        for s, r in ((0, a), (1, b)):
            if bits.get(n.idx, 0) >> s & 1:
                cache[(s, r % 2)] = r
            else:
                cache.pop((s, r % 2), None)
    return one, same_bank
