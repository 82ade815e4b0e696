"""Timing of the rewritten loop: stall counts, scoreboards and waits, set by rule and then
checked against ptxas itself.

What a scoreboard does not guard is a fixed-latency result read too soon. The rule: kept
instructions stay min(ptxas' distance, HOLD) cycles apart (`pad_gaps`), every wait comes
WAIT_MIN cycles or more after the instruction that sets its scoreboard (`settle_waits`).
The check (`latency_violations`): every dependence in the new loop, entered from the code
before it and left into the code after it, must be at least as many cycles long as the
shortest ptxas leaves between that kind of pair (producer, consumer, resource class) in the
function or in its own loop, and every variable-latency result must be waited for.
Conservative: a kind ptxas only places far apart must stay so.
"""
import re
from collections import defaultdict

from . import isa
from .isa import ALL_SCOREBOARDS, MAX_STALL, NO_SCOREBOARD, effects, stall
from .loop import LoopError, block_targets, original_targets, paths
from .registers import reg_of

# At 12 cycles the back branch read the previous iteration's predicate (the loop ran one
# K tile too many); ptxas never puts a predicate fewer than 13 cycles before the
# instruction it guards or the branch it decides.
HOLD = 13
# A wait one cycle after the instruction that sets its scoreboard does not see it yet
# (a late LDC overwrote an address); ptxas never waits sooner than 2 cycles.
WAIT_MIN = 2
# Scoreboards of the rewritten loop: the in-body fragment loads by K-step parity, the
# fragment loads of the stores' block, the global loads, read scoreboards of memory
# instructions, and the variable-latency instructions the loop keeps in place.
SB_LDS = (0, 1)
SB_NEXT_LDS, SB_LDG, SB_READ, SB_KEPT = 2, 3, 4, 5


def pad_gaps(loop, seq, ctrl):
    """Raise stall counts until no kept instruction (or in-body load, against the kept
    instruction that computes its address) is fewer cycles after its predecessor than in
    ptxas' order, up to HOLD, on either path."""
    orig_paths = paths(loop, loop.nodes, original_targets(loop))
    orig_ctrl = {n.idx: n.ctrl for n in loop.nodes}
    defs = {}
    for n in loop.nodes:
        for _f, _w, d, vs in n.vals:
            if d:
                for v in vs:
                    defs[v] = n
    for _round in range(20):
        changed = False
        for orig, new in zip(orig_paths, paths(loop, seq, block_targets(loop, seq))):
            ocyc, c = {}, 0
            for n in orig:
                ocyc[n.idx] = c
                c += stall(orig_ctrl[n.idx])
            ncyc, c = {}, 0
            for n in new:
                ncyc[n.idx] = c
                c += stall(ctrl[n.idx])
            pos = {n.idx: p for p, n in enumerate(new)}
            kept = [n for n in new if n.kind == "kept"]
            pairs = list(zip(kept, kept[1:]))
            for n in new:
                if n.kind == "lds":
                    for _f, _w, d, vs in n.vals:
                        if not d:
                            for v in vs:
                                if v in defs and defs[v].kind == "kept" and defs[v].idx in pos:
                                    pairs.append((defs[v], n))
            for x, y in pairs:
                want = min(ocyc[y.idx] - ocyc[x.idx], HOLD) if y.kind == "kept" else HOLD
                have = ncyc[y.idx] - ncyc[x.idx]
                if have < want:
                    p = pos[y.idx] - 1
                    while have < want and p >= pos[x.idx]:
                        idx = new[p].idx
                        add = max(0, min(MAX_STALL - stall(ctrl[idx]), want - have))
                        ctrl[idx] += add
                        have += add
                        p -= 1
                    if have < want:
                        raise LoopError("cannot pad a gap")
                    changed = True
        if not changed:
            return
    raise LoopError("gap padding does not settle")


def scoreboards(loop, seq, alloc, ctrl):
    """Write/read scoreboards and wait masks (ctrl bits 5-7, 8-10, 11-16): a wait on the
    first reader of each variable-latency result on every path, a read scoreboard where a
    register a memory instruction reads is written again in the iteration, a wait on every
    scoreboard at the loop head and on the back edge."""
    vals = loop.vals
    wsb, rsb, wait = {}, {}, defaultdict(int)
    for n in seq:
        if n.kind == "lds":
            wsb[n.idx] = SB_LDS[loop.load_step[n.idx] % 2]
        elif n.op == "LDS.128":
            wsb[n.idx] = SB_NEXT_LDS
        elif n.op.startswith("LDG"):
            wsb[n.idx] = SB_LDG
        elif n.op.startswith(isa.KEPT_VARIABLE):
            wsb[n.idx] = SB_KEPT
    regs = lambda n, want_def: [reg_of(loop, alloc, v) for _f, _w, d, vs in n.vals if d == want_def for v in vs]
    pos = {n.idx: p for p, n in enumerate(seq)}
    # A memory instruction may read its registers after it issues: a later writer of one waits.
    for p, n in enumerate(seq):
        if not n.variable():
            continue
        src = set(regs(n, False))
        for m in seq[p + 1 :]:
            if src & set(regs(m, True)):
                rsb[n.idx] = SB_READ
                wait[m.idx] |= 1 << SB_READ
                blk = loop.in_block.get(m.idx)
                if blk is None or blk == loop.in_block.get(n.idx):
                    break  # every later writer runs after this one
    # Results: the first reader on every path waits; a later write of the register too.
    waits_at = defaultdict(list)  # scoreboard -> positions of waits that every path runs
    for p, n in enumerate(seq):
        for _f, _w, d, vs in n.vals:
            for v in vs:
                q = vals.defined_by.get(v)
                if q is None or q not in wsb or d:
                    continue
                sb, qp = wsb[q], pos[q]
                blk = loop.in_block.get(n.idx)
                done = any(qp < w <= p and (wb is None or wb == blk) for w, wb in waits_at[sb])
                if not done:
                    wait[n.idx] |= 1 << sb
                    waits_at[sb].append((p, blk))
    # Uniform registers and predicates such an instruction writes: its first reader waits.
    for p, n in enumerate(seq):
        if n.op.startswith(isa.KEPT_VARIABLE):
            for x in effects(n.text)[1]:
                if re.fullmatch(r"R\d+", x):
                    continue  # a register value: waited for above
                reader = next((m for m in seq[p + 1 :] if x in effects(m.text)[2]), None)
                if reader is not None:
                    if loop.in_block.get(reader.idx) != loop.in_block.get(n.idx):
                        raise LoopError(f"{n.text}: its first reader is behind a branch")
                    wait[reader.idx] |= 1 << SB_KEPT
    for n in seq:
        if n.idx == 0 or n is seq[-1]:
            wait[n.idx] = ALL_SCOREBOARDS
    for n in seq:
        c = ctrl[n.idx] & ~(0x3F << 5) & ~(0x3F << 11)
        c |= (wsb.get(n.idx, NO_SCOREBOARD) << 5) | (rsb.get(n.idx, NO_SCOREBOARD) << 8) | (wait[n.idx] << 11)
        ctrl[n.idx] = c


def settle_waits(loop, seq, ctrl):
    """Raise stall counts until every wait is WAIT_MIN cycles or more after the latest
    instruction before it that sets the scoreboard it waits on, on both paths."""
    for _round in range(20):
        changed = False
        for path in paths(loop, seq, block_targets(loop, seq)):
            cyc, c = [], 0
            for n in path:
                cyc.append(c)
                c += stall(ctrl[n.idx])
            last_set = {}
            for p, n in enumerate(path):
                mask = isa.wait_mask(ctrl[n.idx])
                short = [WAIT_MIN - (cyc[p] - cyc[last_set[sb]]) for sb in last_set if mask >> sb & 1]
                need = max(short, default=0)
                if need > 0:
                    prev = path[p - 1].idx
                    if stall(ctrl[prev]) + need > MAX_STALL:
                        raise LoopError("cannot space a wait from its scoreboard")
                    ctrl[prev] += need
                    changed = True
                    break
                sb = isa.write_scoreboard(ctrl[n.idx])
                if sb != NO_SCOREBOARD:
                    last_set[sb] = p
            if changed:
                break
        if not changed:
            return
    raise LoopError("wait spacing does not settle")


# --- the check -----------------------------------------------------------------------------

def _kind(producer, consumer, resource):
    return producer.split(".")[0], consumer.split(".")[0], re.sub(r"\d+$", "", resource)


def _dependences(seq):
    """(kind, cycles, how, producer position, reader position) of every read of a resource
    against its last writer in [(text, control bits)]. how: "fixed" where the writer sets no
    scoreboard, "waited" where it does and an instruction after it, up to the reader, waits
    on that scoreboard WAIT_MIN cycles or more after it, "unwaited" otherwise."""
    last, cyc, out, last_wait = {}, 0, [], {}  # last_wait: scoreboard -> (position, cycle)
    for p, (text, ctrl) in enumerate(seq):
        op, written, read = effects(text)
        for sb in range(6):
            if (ctrl >> 11) >> sb & 1:
                last_wait[sb] = (p, cyc)
        for r in read:
            if r in last:
                w_op, w_cyc, w_sb, w_pos = last[r]
                # The latest wait is the latest in cycles: if it is too close, so is any other.
                q, q_cyc = last_wait.get(w_sb, (-1, 0))
                waited = q > w_pos and q_cyc - w_cyc >= WAIT_MIN
                how = "fixed" if w_sb == NO_SCOREBOARD else "waited" if waited else "unwaited"
                out.append((_kind(w_op, op, r), cyc - w_cyc, how, w_pos, p))
        last.update({r: (op, cyc, isa.write_scoreboard(ctrl), p) for r in written})
        cyc += stall(ctrl)
    return out


def ptxas_minima(body):
    """{kind: fewest cycles ptxas leaves} between a fixed-latency result and its reader, over
    the straight-line runs of a function [(address, text, lo, hi)]."""
    targets = {t for _a, text, *_w in body for t in [isa.branch_target(text)] if t is not None}
    runs, cur = [], []
    for a, t, _lo, hi in body:
        if a in targets and cur:
            runs.append(cur)
            cur = []
        cur.append((t, hi >> isa.CTRL_SHIFT))
        if re.search(r"\b(BRA|EXIT)\b", t):
            runs.append(cur)
            cur = []
    mins = {}
    for run in runs + [cur]:
        for kind, cycles, how, _p, _r in _dependences(run):
            if how == "fixed":
                mins[kind] = min(mins.get(kind, cycles), cycles)
    return mins


def exit_start(body, end):
    """Index of the first instruction the loop ending at body[end] runs after it exits (past
    an unconditional branch there)."""
    nxt = end + 1
    m = re.fullmatch(r"BRA (0x[0-9a-f]+)", body[nxt][1]) if nxt < len(body) else None
    if not m:
        return nxt
    return next(i for i, (a, *_r) in enumerate(body) if a == int(m.group(1), 16))


def latency_violations(body, head, end, new, pads=None, mins=None):
    """Dependences in the rewritten loop `new` [(address, text, control bits)] (body[head..end]
    replaced) that nothing guarantees, on both paths through two iterations, entered from the
    code before the loop and left into the code after it: a variable-latency result read with
    no wait on its scoreboard, or a fixed-latency one read sooner than ptxas reads that kind
    anywhere in `body`. Each as (path, kind, cycles, cycles needed, where): "entry" for a
    result of the code before the loop, "exit" for a read in the code after it, else "loop".
    `pads` {body index: stall} replace the stall counts of instructions outside the loop.
    `mins`, a dict, is filled with ptxas' minima on the first call and reused by later ones
    on the same loop (they do not depend on the new loop or the pads)."""
    start = head
    while start > max(0, head - 32) and not re.search(r"\bBRA\b", body[start - 1][1]):
        start -= 1
    first = exit_start(body, end)

    def runs(loop, pads):  # both blocks run; every forward branch in the loop taken
        word = lambda i: (body[i][1], (body[i][3] >> 41 & ~0xF) | pads.get(i, body[i][3] >> 41 & 0xF))
        before = [word(i) for i in range(start, head)]
        after = [word(i) for i in range(first, min(first + 32, len(body)))]
        in_loop = {a for a, _t, _c in loop}
        full, skip, to = [], [], None
        for a, t, c in loop:
            full.append((t, c))
            if to is None or a >= to:
                to = None
                skip.append((t, c))
                m = re.match(r"@!?U?P\d BRA (0x[0-9a-f]+)", t)
                if m and int(m.group(1), 16) > a and int(m.group(1), 16) in in_loop:
                    to = int(m.group(1), 16)
        return [("both blocks", before + full + full + after, len(before), len(full)),
                ("blocks skipped", before + skip + skip + after, len(before), len(skip))]

    mins = {} if mins is None else mins
    if not mins:
        mins.update(ptxas_minima(body))
        for _name, seq, _b, _n in runs([(a, t, hi >> 41) for a, t, _lo, hi in body[head : end + 1]], {}):
            for kind, cycles, how, _p, _r in _dependences(seq):  # ptxas' own loop, entered and left
                if how == "fixed":
                    mins[kind] = min(mins.get(kind, cycles), cycles)
    bad = []
    for name, seq, nb, n in runs(new, pads or {}):
        for kind, cycles, how, p, r in _dependences(seq):
            need = 0 if how == "waited" else mins.get(kind, HOLD)
            if how == "unwaited" or cycles < need:
                where = "entry" if p < nb else "exit" if r >= nb + 2 * n else "loop"
                bad.append((name, kind, cycles, need if how == "fixed" else "a wait", where))
    return bad


def boundary_pads(body, head, end, new):
    """{body index: stall} for the instructions just before the loop and just after its exit
    that keep the code around the loop as far from the new loop's first reads and last writes
    as ptxas keeps it from its own (each runs once a loop, not once an iteration); raises
    LoopError if a violation is inside the loop or padding cannot remove it."""
    pads, mins = {}, {}
    for _round in range(32):
        bad = latency_violations(body, head, end, new, pads, mins)
        if not bad:
            return pads
        name, kind, cycles, need, where = bad[0]
        if where == "loop" or need == "a wait":
            raise LoopError(f"{len(bad)} dependences closer than ptxas places them, e.g. {bad[:3]}")
        # Before the loop: the last instruction there; after it: the first, which delays
        # every later one (a read by that first instruction itself cannot be padded).
        order = [head - 1 - k for k in range(8)] if where == "entry" else [exit_start(body, end) + k for k in range(8)]
        for i in order:
            have = pads.get(i, body[i][3] >> 41 & 0xF)
            if have < MAX_STALL:
                pads[i] = min(MAX_STALL, have + need - cycles)
                break
        else:
            raise LoopError(f"cannot pad around the loop for {bad[0]}")
    raise LoopError("padding around the loop does not settle")
