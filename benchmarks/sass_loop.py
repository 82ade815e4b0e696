"""Regenerate a GEMM main loop below ptxas: in-place accumulators, an FFMA order chosen for
the operand reuse cache, fragment loads one K step ahead, registers allocated afresh.

docs/performance.md, steps 24-26, in the line of `sass_schedule.py`: steps 13-18 found the
8 x 16 kernels' speed set by ptxas' register allocation and load placement, which nothing in
the source controls. This rewrites the main loop of a built kernel (setup.py: the built
extension itself; by hand: a copy) as a permutation of ptxas' own instructions:

- Every instruction that is not an FFMA or an in-body `LDS` keeps its relative order, its
  stall count (padded so that no two of them come closer in cycles than before, on both
  paths of each skipped block) and its block: the next tile's global loads and the
  shared-memory stores + barrier stay behind their `@P BRA`.
- The FFMAs of each K step (128 for 8 x 16) are issued in one order, the same every step:
  a beam search over the reuse cache (one entry per operand slot and register bank, as
  `ffma_banks.py` models it), cost = w x (two register-file reads in one bank) + reads
  (`--conflict-weight`, measured best at 0), or a fixed walk (`--order`).
- The fragment loads of step n + 1 are issued early in step n; the accumulators stay in
  the registers they hold at the loop head; every other value that does not cross the back
  edge gets a register by interval allocation (quads and pairs aligned).
- Control bits are recomputed: write scoreboards per producer class, a wait on the first
  reader of each variable-latency result, a read scoreboard where a register a memory
  instruction reads is written again in the iteration, a wait on every scoreboard at the
  loop head and on the back edge. `.reuse` is set where the next FFMA that reads the slot
  from the same bank (register mod 2) reads the same register, and nothing between reads
  that slot, writes that register or branches.

Checks before anything is written: the new loop computes the same values (a symbolic
evaluation of both loops: every register live at the back edge or after the loop, and
every store, global load and barrier in order, on both paths) and cuobjdump reads every
rewritten instruction back as the text it was meant to be. Timing is kept by rule (kept
instructions at least min(ptxas' distance, HOLD) cycles apart) and then checked: no
dependence outside the scoreboards' reach may be shorter than the shortest ptxas makes of
its kind (producer, consumer, resource class) in the function or its own loop
(`latency_violations`; conservative: a kind ptxas only places far apart must stay so).
HOLD was 12 until step 25 found the back edge's `@!P0 BRA` reading the P0 of the previous
iteration (the loop ran one K tile too many) wherever the FFMAs before it issued without a
stall: ptxas never puts a predicate fewer than 13 cycles before its use. The check finds
that rewrite; it was written after it.

Step 26 took it to the stream-K tail's loop, which ptxas wrote with rematerialised addresses
(S2UR, LDC, uniform-register terms): each innermost loop of a function is a candidate
(`ffma_loops`), uniform registers and predicates are values in the symbolic check, and the
timing check knows scoreboards (a wait fewer than WAIT_MIN cycles after the instruction that
sets its scoreboard does not see it: the first tail rewrite faulted on exactly that) and pads
the code around the loop (`boundary_pads`) rather than refusing.

setup.py runs `rewrite_library` on the built extension (only on the loops whose fingerprint
it was validated on, each with its own order); by hand:

    python -m benchmarks.sass_loop torch_vecgemm/_C*.so --conflict-weight 0 --out patched.so
"""
import argparse
import functools
import hashlib
import re
import shutil
import struct
from collections import Counter, defaultdict

from .ffma_banks import loops, main_loop_bounds
from .sass_schedule import functions_in, listing, write_library

# sm_90 fields (bit offset in the 128-bit instruction): Rd 16, Ra 24, Rb 32, Rc 64.
# Each form: regex over cuobjdump's text (registers captured in order), [(field, width, is_def)].
FORMS = {
    "LDS.128": (r"LDS\.128 R(\d+), \[R(\d+)(\+UR\d+)?(\+0x[0-9a-f]+)?\]", [(16, 4, True), (24, 1, False)]),
    "LDG.E.128.CONSTANT": (
        r"LDG\.E\.128\.CONSTANT R(\d+), desc\[(UR\d+)\]\[R(\d+)\.64\]", [(16, 4, True), (24, 2, False)]),
    "STS.128": (r"STS\.128 \[R(\d+)(\+0x[0-9a-f]+)?\], R(\d+)", [(24, 1, False), (32, 4, False)]),
    "LEA": (r"LEA R(\d+), R(\d+)(\.reuse)?, (UR\d+), (0x[0-9a-f]+)", [(16, 1, True), (24, 1, False)]),
    "IADD3": (r"IADD3 R(\d+), (P\d), R(\d+)(\.reuse)?, (UR\d+), RZ", [(16, 1, True), (24, 1, False)]),
    "IADD3.X": (r"IADD3\.X R(\d+), R(\d+)(\.reuse)?, (UR\d+), RZ, (P\d), !PT", [(16, 1, True), (24, 1, False)]),
}
# More forms of the same opcodes, and others: the stream-K tail's loop (ptxas rematerialises
# addresses and strides there).
ALT_FORMS = {
    "LEA": (r"LEA R(\d+), (P\d), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, (0x[0-9a-f]+)",
            [(16, 1, True), (24, 1, False), (32, 1, False)]),
    "IADD3": (r"IADD3 R(\d+), (P\d), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, RZ",
              [(16, 1, True), (24, 1, False), (32, 1, False)]),
    "IADD3.X": (r"IADD3\.X R(\d+), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, RZ, (P\d), !PT",
                [(16, 1, True), (24, 1, False), (32, 1, False)]),
    "LEA.HI.X": (r"LEA\.HI\.X R(\d+), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, (0x[0-9a-f]+), (P\d)",
                 [(16, 1, True), (24, 1, False), (32, 1, False), (64, 1, False)]),
    "SHF.L.U32": (r"SHF\.L\.U32 R(\d+), R(\d+)(\.reuse)?, (0x[0-9a-f]+), RZ", [(16, 1, True), (24, 1, False)]),
    "LOP3.LUT": (r"LOP3\.LUT R(\d+), R(\d+)(\.reuse)?, (0x[0-9a-f]+), (?:RZ|R(\d+)(\.reuse)?), (0x[0-9a-f]+), !PT",
                 None),
    "IMAD": (r"IMAD R(\d+), R(\d+)(\.reuse)?, (0x[0-9a-f]+), R(\d+)(\.reuse)?",
             [(16, 1, True), (24, 1, False), (64, 1, False)]),
    "ISETP.LE.AND": (r"ISETP\.LE\.AND (P\d), PT, R(\d+)(\.reuse)?, (UR\d+), PT", [(24, 1, False)]),
    "LDC.64": (r"LDC\.64 R(\d+), c\[0x0\]\[0x[0-9a-f]+\]", [(16, 2, True)]),
}
# Variable-latency instructions the loop keeps in place: their results are waited for on
# scoreboard SB_KEPT by the first reader, as ptxas' loop waits for them.
KEPT_VARIABLE = ("LDC", "S2UR", "S2R")
FFMA_TEXT = re.compile(r"FFMA R(\d+), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, R(\d+)(\.reuse)?")
VARIABLE = ("LDS", "LDG", "STS")  # results (and source reads) tracked by scoreboards
SB_LDS = (0, 1)  # in-body fragment loads, by K-step parity
SB_NEXT_LDS, SB_LDG, SB_READ, SB_KEPT = 2, 3, 4, 5
ALL_SB = 0x3F
HOLD = 13  # cycles a fixed-latency result needs at most: a predicate before the instruction
# it guards or the branch it decides (ptxas never places one closer; step 25)
MAX_STALL = 11  # the largest stall count ptxas writes (more does not decode with yield)
WAIT_MIN = 2  # cycles at least from an instruction that sets a scoreboard to one that waits on
# it: a wait one cycle after does not see the scoreboard yet (ptxas never waits sooner; step 26)
COOLDOWN = 8  # positions before a register a memory instruction read is written again
SPREAD = 6  # FFMAs between the loop's other instructions at its head and tail


class LoopError(Exception):
    pass


def field(lo, hi, off):
    return ((hi >> (off - 64)) if off >= 64 else (lo >> off)) & 0xFF


def set_field(lo, hi, off, v):
    if off >= 64:
        return lo, (hi & ~(0xFF << (off - 64))) | (v << (off - 64))
    return (lo & ~(0xFF << off)) | (v << off), hi


class Node:
    """One instruction of the loop: kind ffma / lds / kept; operands as
    [(field, width, is_def, [value ids])] once analysed."""

    def __init__(self, idx, addr, text, lo, hi):
        self.idx, self.addr, self.text, self.lo, self.hi = idx, addr, text, lo, hi
        self.guard = re.match(r"@!?U?P\w+\s+", text)
        self.op = text[self.guard.end():].split(None, 1)[0] if self.guard else text.split(None, 1)[0]
        self.slot_regs = []  # [(field, width, is_def, base register)]
        m = FFMA_TEXT.fullmatch(text)
        if m and (lo & 0xFFFF) == 0x7223:
            self.kind = "ffma"
            self.slot_regs = [(16, 1, True, int(m.group(1))), (24, 1, False, int(m.group(2))),
                              (32, 1, False, int(m.group(4))), (64, 1, False, int(m.group(6)))]
        else:
            self.kind = "kept"
            if self.op in FORMS or self.op in ALT_FORMS:
                bare = text[self.guard.end():] if self.guard else text
                for rx, fields in (f for f in (FORMS.get(self.op), ALT_FORMS.get(self.op)) if f):
                    m = re.fullmatch(rx, bare)
                    if m:
                        break
                else:
                    raise LoopError(f"unexpected form: {text}")
                if fields is None:  # LOP3.LUT: Rc a register or RZ
                    fields = [(16, 1, True), (24, 1, False)] + ([(64, 1, False)] if m.group(5) else [])
                named = [int(r) for r in re.findall(r"\bR(\d+)", text)]  # in field order
                if len(named) != len(fields):
                    raise LoopError(f"operand count of {text}")
                for (f, w, d), r in zip(fields, named):
                    self.slot_regs.append((f, w, d, r))
            elif re.search(r"\bR\d+", text):
                raise LoopError(f"no operand table for: {text}")
            if self.op == "LDS.128":
                self.kind = "lds"  # in-body loads become movable; the caller re-marks the rest
        for f, _w, _d, r in self.slot_regs:
            if field(lo, hi, f) != r:
                raise LoopError(f"field {f} of {text} is {field(lo, hi, f)}")
        self.vals = []

    @property
    def ctrl(self):
        return self.hi >> 41

    def branch_target(self):
        m = re.search(r"BRA (0x[0-9a-f]+)", self.text)
        return int(m.group(1), 16) if m else None

    def variable(self):
        return self.op.startswith(VARIABLE)


# --- values -----------------------------------------------------------------------------------

class Values:
    """Values in the loop's registers: each def makes a group (width 1, 2 or 4) whose
    registers must be consecutive and aligned; uses of a .64 operand pair two groups."""

    def __init__(self):
        self.group = []  # value -> [group id, offset]
        self.groups = []  # group id -> list of values
        self.pinned = {}  # group id -> base register
        self.defined_by = {}  # value -> node index (absent: live in)

    def new(self, width, node=None):
        g = len(self.groups)
        vals = list(range(len(self.group), len(self.group) + width))
        self.groups.append(vals)
        for k, v in enumerate(vals):
            self.group.append([g, k])
            if node is not None:
                self.defined_by[v] = node
        return vals

    def pair(self, vals):
        """Make consecutive uses (a .64 operand) one aligned group."""
        gs = {self.group[v][0] for v in vals}
        if len(gs) == 1 and [self.group[v][1] for v in vals] == list(range(len(vals))):
            return
        if any(len(self.groups[self.group[v][0]]) != 1 for v in vals):
            raise LoopError("an operand spans two multi-register groups")
        g = len(self.groups)
        self.groups.append(list(vals))
        for k, v in enumerate(vals):
            old = self.group[v][0]
            if old in self.pinned:
                self.pinned[g] = self.pinned.pop(old) - k
            self.groups[old] = []
            self.group[v] = [g, k]

    def pin(self, v, reg):
        g, k = self.group[v]
        if self.pinned.get(g, reg - k) != reg - k:
            raise LoopError(f"value {v} pinned to two registers")
        self.pinned[g] = reg - k


def analyse(nodes, live_out):
    """Values of one iteration: operands of each node, FFMA chains, pinned groups."""
    vals, cur, live_in = Values(), {}, {}

    def read(r):
        if r not in cur:
            (v,) = vals.new(1)
            cur[r] = v
            live_in[r] = v
            vals.pin(v, r)
        return cur[r]

    for n in nodes:
        n.vals = []
        for f, w, d, r in n.slot_regs:
            if not d:
                vs = [read(r + k) for k in range(w)]
                if w > 1:
                    vals.pair(vs)
                n.vals.append((f, w, d, vs))
        for f, w, d, r in n.slot_regs:
            if d:
                vs = vals.new(w, n.idx)
                for k, v in enumerate(vs):
                    cur[r + k] = v
                n.vals.append((f, w, d, vs))
    # Registers read at the head (the back edge) or after the loop hold their final value there.
    for r, v in cur.items():
        if r in live_in or r in live_out:
            vals.pin(v, r)
    return vals, cur, live_in


def chains(nodes, live_in):
    """{canonical register: [FFMA node index per K step]} and each FFMA's (chain, step)."""
    canon = {v: r for r, v in live_in.items()}
    where = {}  # value -> (chain register, step)
    out = defaultdict(list)
    for n in nodes:
        if n.kind != "ffma":
            continue
        a, b, c, d = (vs[0] for _f, _w, _d, vs in n.vals)  # uses first (a, b, c), then Rd
        if c in canon:
            ch, step = canon[c], 0
        elif c in where:
            ch, step = where[c][0], where[c][1] + 1
        else:
            raise LoopError(f"accumulator of {n.text} comes from outside the FFMAs")
        where[d] = (ch, step)
        n.chain, n.step = ch, step
        out[ch].append(n.idx)
    return out, where


# --- the FFMA order ---------------------------------------------------------------------------

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
    """Order [(cell, swapped)] of one K step's outer product. cells: [(bank a, bank b,
    bank c, a label, b label)]; cost per FFMA: conflict_weight x (two register-file reads
    in one bank) + register-file reads, the cache one entry per (slot, bank)."""
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


# --- liveness after the loop --------------------------------------------------------------------

def _defs_uses(text):
    """Registers an instruction writes (only when certain) and reads (widths from the
    operand: `.64` pairs, store data as wide as the store, 64-bit addends and doubles)."""
    t = re.sub(r"^@!?U?P\w+\s+", "", text)
    guarded = t != text
    op = t.split(None, 1)[0]
    wide = 4 if ".128" in op else 2 if ".64" in op else 1
    defs, uses = set(), set()
    first = re.match(r"\S+\s+R(\d+)\b", t)
    for m in re.finditer(r"\bR(\d+)(\.64)?", t):
        r = int(m.group(1))
        if first and m.start() == first.start(1) - 1 and not op.startswith(("ST", "RED", "BRA")):
            if not guarded:
                w = wide if op.startswith(("LD", "CS2R")) else 2 if ("WIDE" in op or op.startswith("D")) else 1
                defs.update(range(r, r + w))
            continue
        w = 2 if m.group(2) else wide if op.startswith(("ST", "RED", "ATOM")) else 1
        if "WIDE" in op or op.startswith(("D", "F2F.F64")):
            w = max(w, 2)
        uses.update(range(r, r + w))
    return defs, uses


def live_after(body, start):
    """Registers that may be read on some path from instruction index `start` before being
    written (backward dataflow over the function's blocks; uses over-approximated)."""
    index = {a: i for i, (a, _) in enumerate(body)}
    leaders = {0, start}
    calls = []  # calls, returns and indirect branches: fine where start cannot reach them
    for i, (a, t) in enumerate(body):
        m = re.search(r"BRA (0x[0-9a-f]+)", t)
        if m or t.startswith(("EXIT", "RET")) or re.search(r"\bEXIT\b", t):
            leaders.add(i + 1)
            if m and int(m.group(1), 16) in index:
                leaders.add(index[int(m.group(1), 16)])
        if re.search(r"\b(BRX|JMX|CALL|RET)\b", t):
            calls.append(i)
    starts = sorted(x for x in leaders if x < len(body))
    blocks = {s: (s, (starts[k + 1] if k + 1 < len(starts) else len(body))) for k, s in enumerate(starts)}
    info = {}
    for s, (b, e) in blocks.items():
        use, kill, succ = set(), set(), []
        for i in range(b, e):
            d, u = _defs_uses(body[i][1])
            use |= u - kill
            kill |= d
        last = body[e - 1][1]
        m = re.search(r"BRA (0x[0-9a-f]+)", last)
        uncond = (m and not last.startswith("@")) or re.fullmatch(r"EXIT", last)
        if m and int(m.group(1), 16) in index:
            succ.append(index[int(m.group(1), 16)])
        if not uncond and e < len(body):
            succ.append(e)
        info[s] = (use, kill, succ)
    reached, todo = set(), [start]
    while todo:
        s = todo.pop()
        if s not in reached:
            reached.add(s)
            todo += info[s][2]
    for i in calls:
        if any(b <= i < e for b, e in (blocks[s] for s in reached)):
            raise LoopError(f"indirect control flow after the loop: {body[i][1]}")
    live = {s: set() for s in blocks}
    changed = True
    while changed:
        changed = False
        for s in reversed(starts):
            use, kill, succ = info[s]
            out = set().union(*(live[x] for x in succ)) if succ else set()
            new = use | (out - kill)
            if new != live[s]:
                live[s], changed = new, True
    return live[start]


# --- the new order ------------------------------------------------------------------------------

class Loop:
    """The main loop of one function: nodes, its blocks and its values."""

    def __init__(self, body, head, end, live_exit):
        self.nodes = [Node(k, *body[i]) for k, i in enumerate(range(head, end + 1))]
        nodes = self.nodes
        if not (nodes[-1].branch_target() == nodes[0].addr and nodes[-1].guard):
            raise LoopError("the loop does not end in its conditional back branch")
        fwd = [n for n in nodes[:-1] if n.branch_target() is not None]
        if len(fwd) != 2 or any(n.branch_target() <= n.addr or not n.guard for n in fwd):
            raise LoopError(f"expected two guarded forward branches, found {len(fwd)}")
        by_addr = {n.addr: n.idx for n in nodes}
        self.branches = fwd
        self.blocks = []
        for br in fwd:
            stop = by_addr[br.branch_target()]
            blk = nodes[br.idx + 1 : stop]
            if any(n.kind == "ffma" or n.branch_target() is not None for n in blk):
                raise LoopError("an FFMA or a branch inside a skipped block")
            for n in blk:
                n.kind = "kept"  # the shared stores' block keeps its fragment loads
            self.blocks.append(blk)
        if not self.blocks[0][-1].idx < fwd[1].idx:
            raise LoopError("the skipped blocks overlap")
        self.in_block = {n.idx: b for b, blk in enumerate(self.blocks) for n in blk}
        self.live_exit = live_exit
        self.vals, self.final, self.live_in = analyse(nodes, live_exit)
        self.chains, self.where = chains(nodes, self.live_in)
        self.load_step = {}  # in-body load -> the K step its values feed
        for n in nodes:
            if n.kind == "lds":
                steps = {m.step for m in nodes if m.kind == "ffma"
                         for v in (m.vals[0][3][0], m.vals[1][3][0]) if v in defined(n)}
                if len(steps) != 1:
                    raise LoopError(f"{n.text} feeds K steps {steps}")
                self.load_step[n.idx] = steps.pop()
        steps = {len(v) for v in self.chains.values()}
        if len(steps) != 1:
            raise LoopError(f"chains of different lengths {steps}")
        self.ksteps = steps.pop()
        for ch, idxs in self.chains.items():
            last = nodes[idxs[-1]]
            if self.final.get(ch) != last.vals[3][3][0]:
                raise LoopError(f"accumulator R{ch} does not end in its register")
        kept = [n for n in nodes if n.kind == "kept"]
        b0, b1 = self.blocks
        self.top = [n for n in kept if n.idx < fwd[0].idx]
        middle = [n for n in kept if b0[-1].idx < n.idx < fwd[1].idx]
        self.tail = [n for n in kept if b1[-1].idx < n.idx < nodes[-1].idx]
        if middle:
            raise LoopError(f"instructions between the blocks: {[n.text for n in middle]}")
        if not self.top or self.top[0].idx != 0:
            raise LoopError("the loop head is not a kept instruction")

    def cells(self):
        """One K step's outer product: per chain (bank a, bank b, bank c, a label, b label),
        the 8-value side in slot a. Labels are the step-0 values; each later step must
        load the same labels at the same register parity."""
        nodes = self.nodes
        per_step = defaultdict(list)
        for ch, idxs in self.chains.items():
            for s, i in enumerate(idxs):
                per_step[s].append((ch, nodes[i]))
        cells = {}
        label = {}
        for s in range(self.ksteps):
            count = Counter()
            for _ch, n in per_step[s]:
                count[n.vals[0][3][0]] += 1
                count[n.vals[1][3][0]] += 1
            for ch, n in per_step[s]:
                a, b = n.vals[0][3][0], n.vals[1][3][0]
                if count[a] < count[b]:
                    a, b = b, a
                n.order_ab = (a, b)
                parity = (self.parity(a), self.parity(b))
                if s == 0:  # step 0's values are live in: labelled by their registers
                    label[a], label[b] = ("a", self.register(a)), ("b", self.register(b))
                    cells[ch] = [parity[0], parity[1], ch % 2, label[a], label[b]]
                else:
                    want = cells[ch]
                    if self.parity(a) != want[0] or self.parity(b) != want[1]:
                        raise LoopError(f"step {s} loads a fragment at another register parity")
        return cells

    def register(self, v):
        g, k = self.vals.group[v]
        return self.vals.pinned[g] + k

    def parity(self, v):
        g, k = self.vals.group[v]
        base = self.vals.pinned.get(g)
        return (base + k) % 2 if base is not None else k % 2

    def schedule(self, order, lds_gap=2, d_after=16):
        """The new sequence of node indices."""
        nodes, n_ffma = self.nodes, self.ksteps * len(self.chains)
        ffmas = [nodes[self.chains[ch][s]] for s in range(self.ksteps) for ch, _sw in order]
        self.swapped = {nodes[self.chains[ch][s]].idx: sw for s in range(self.ksteps) for ch, sw in order}
        before = defaultdict(list)  # FFMA position -> nodes issued just before it
        for k, n in enumerate(self.top):
            before[SPREAD * k].append(n)
        b_at = SPREAD * len(self.top)
        before[b_at] += [self.branches[0]] + self.blocks[0]
        loads = defaultdict(list)
        for n in nodes:
            if n.kind == "lds":
                loads[self.load_step[n.idx]].append(n)
        per = len(self.chains)
        for s, group in loads.items():
            if s == 0:
                raise LoopError("an in-body load feeds the first K step")
            base = b_at + 8 if s == 1 else per * (s - 1) + 4
            for k, n in enumerate(group):
                before[base + lds_gap * k].append(n)
        before[per * (self.ksteps - 1) + d_after] += [self.branches[1]] + self.blocks[1]
        for k, n in enumerate(self.tail):
            before[n_ffma - SPREAD * (len(self.tail) - k)].append(n)
        seq = []
        for k in range(n_ffma + 1):
            seq += before.pop(k, [])
            if k < n_ffma:
                seq.append(ffmas[k])
        if before:
            raise LoopError("instructions placed past the loop's end")
        seq.append(nodes[-1])
        if sorted(n.idx for n in seq) != list(range(len(nodes))):
            raise LoopError("the schedule is not a permutation of the loop")
        return seq


# --- registers ----------------------------------------------------------------------------------

def allocate(loop, seq, nregs, reserved):
    """{group: base register} for the new sequence: pinned groups where they were,
    accumulators in place, the rest first-fit by interval."""
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


def defined(n):
    return {v for _f, _w, d, vs in n.vals if d for v in vs}


def reg_of(loop, alloc, v):
    g, k = loop.vals.group[v]
    return alloc[g] + k


# --- control bits -------------------------------------------------------------------------------

def block_targets(loop, seq):
    """{forward branch: position in seq it jumps to}: just past its block, which must
    follow it contiguously."""
    pos = {n.idx: p for p, n in enumerate(seq)}
    out = {}
    for br, blk in zip(loop.branches, loop.blocks):
        p = pos[br.idx]
        if [n.idx for n in seq[p + 1 : p + 1 + len(blk)]] != [n.idx for n in blk]:
            raise LoopError("a skipped block is not contiguous behind its branch")
        out[br.idx] = p + 1 + len(blk)
    return out


def original_targets(loop):
    by_addr = {n.addr: n.idx for n in loop.nodes}
    return {br.idx: by_addr[br.branch_target()] for br in loop.branches}


def paths(loop, seq, targets):
    """The two ways through an iteration: both blocks run, or (the last tile) each forward
    branch is taken to its target position."""
    taken, p = [], 0
    while p < len(seq):
        taken.append(seq[p])
        p = targets.get(seq[p].idx, p + 1)
    return [list(seq), taken]


def stall(ctrl):
    return ctrl & 0xF


def pad_gaps(loop, seq, ctrl):
    """Raise stall counts until no kept instruction (or in-body load, against the kept
    instruction that computes its address) is fewer cycles after its predecessor than in
    ptxas' order, on either path."""
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
    """Write/read scoreboards and wait masks (ctrl bits 5-7, 8-10, 11-16)."""
    vals = loop.vals
    wsb, rsb, wait = {}, {}, defaultdict(int)
    for n in seq:
        if n.kind == "lds":
            wsb[n.idx] = SB_LDS[loop.load_step[n.idx] % 2]
        elif n.op == "LDS.128":
            wsb[n.idx] = SB_NEXT_LDS
        elif n.op.startswith("LDG"):
            wsb[n.idx] = SB_LDG
        elif n.op.startswith(KEPT_VARIABLE):
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
        if n.op.startswith(KEPT_VARIABLE):
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
            wait[n.idx] = ALL_SB
    for n in seq:
        c = ctrl[n.idx] & ~(0x3F << 5) & ~(0x3F << 11)
        c |= (wsb.get(n.idx, 7) << 5) | (rsb.get(n.idx, 7) << 8) | (wait[n.idx] << 11)
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
                mask = (ctrl[n.idx] >> 11) & ALL_SB
                short = [WAIT_MIN - (cyc[p] - cyc[last_set[sb]]) for sb in last_set if mask >> sb & 1]
                need = max(short, default=0)
                if need > 0:
                    prev = path[p - 1].idx
                    if stall(ctrl[prev]) + need > MAX_STALL:
                        raise LoopError("cannot space a wait from its scoreboard")
                    ctrl[prev] += need
                    changed = True
                    break
                sb = (ctrl[n.idx] >> 5) & 7
                if sb != 7:
                    last_set[sb] = p
            if changed:
                break
        if not changed:
            return
    raise LoopError("wait spacing does not settle")


def cache_kills(n, boundary):
    """Operand slots whose reuse-cache entries an instruction between two FFMAs may replace:
    those it reads registers in; every slot at a branch or a branch target."""
    if boundary or n.branch_target() is not None:
        return {0, 1, 2}
    return {{24: 0, 32: 1, 64: 2}[f] for f, _w, d, _r in n.slot_regs if not d}


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


REUSE_FILTER = None  # experiment: keep only some flags (slot0, slot1, adjacent, nocross, samebankgap)
SWAP_ALL = False  # experiment: the other multiplicand in slot a
FFMA_STALL = 1  # experiment: the FFMAs' stall count (2: half the issue rate)
FILL_STALL = 0  # experiment: the least stall count of an FFMA that sets a .reuse flag


def reuse_bits(seq, ops, boundaries, per_bank=True, written=lambda n: set()):
    """`.reuse` per FFMA: slot s kept when the next FFMA that reads slot s from the same
    bank reads the same register, and nothing between reads slot s, writes that register
    (`written(node)`: the registers a node writes) or branches."""
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
                    keep = r2 == r
                    between = seq[p + 1 : q]
                    if REUSE_FILTER == "slot0":
                        keep &= slot == 0
                    elif REUSE_FILTER == "slot1":
                        keep &= slot == 1
                    elif REUSE_FILTER == "adjacent":
                        keep &= q == p + 1
                    elif REUSE_FILTER == "nocross":
                        keep &= all(x.kind == "ffma" for x in between)
                    elif REUSE_FILTER == "samebankgap":  # no other-bank read of the slot between
                        keep &= all(x.kind != "ffma" or ops[x.idx][1 + slot] == r for x in between)
                    elif REUSE_FILTER == "noconf_reader":  # the reader's other two reads in two banks
                        keep &= ops[m.idx][2 - slot] % 2 != ops[m.idx][3] % 2
                    elif REUSE_FILTER == "noconf_filler":  # the same of the FFMA that sets the flag
                        keep &= ops[n.idx][2 - slot] % 2 != ops[n.idx][3] % 2
                    b |= (1 << slot) if keep else 0
                    break
        bits[n.idx] = b
    return bits


# --- timing check -------------------------------------------------------------------------------
# What no scoreboard guards is a fixed-latency result read too soon. The rewrite keeps timing
# by rule (`pad_gaps`, HOLD); this checks the written loop against ptxas itself: every
# dependence must be at least as many cycles long as the shortest ptxas leaves between that
# kind of pair (producer, consumer, resource class) in the function or in its own loop.
# Scoreboarded pairs are checked the same way; ptxas places those close, so they pass.

def _operands(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _resources(token, width=1):
    res = set()
    for m in re.finditer(r"\b(U?R)(\d+)(\.64)?", token):
        res.update(f"{m.group(1)}{int(m.group(2)) + k}" for k in range(2 if m.group(3) else width))
    res.update(m.group(0) for m in re.finditer(r"(?<![A-Z!])U?P[0-6]\b", token))
    res.update(m.group(0)[1:] for m in re.finditer(r"!U?P[0-6]\b", token))
    return res


@functools.lru_cache(maxsize=None)
def effects(text):
    """(opcode, registers / predicates written, read) of one instruction's text. Not
    `_defs_uses`, which serves liveness: that one over-reads (a store's address as wide as its
    data) and lets no guarded write kill; timing needs the reads exact and every write."""
    t = text.replace(".reuse", "")
    guard = set()
    m = re.match(r"@!?(U?P\d) (.*)", t)
    if m:
        guard, t = {m.group(1)}, m.group(2)
    op = t.split()[0]
    base = op.split(".")[0]
    ops = _operands(t[len(op):])
    width = 4 if ".128" in op else 2 if ".64" in op else 1
    if base in ("STS", "STG", "BAR", "BRA", "EXIT", "NOP") or not ops:
        return op, frozenset(), frozenset(guard.union(*(_resources(o, width if i else 1) for i, o in enumerate(ops))))
    nd = 2 if base in ("ISETP", "FSETP", "UISETP", "PLOP3") else 1
    while base not in ("ISETP", "FSETP", "UISETP", "PLOP3") and nd < len(ops) and re.fullmatch(r"U?P(\d|T)", ops[nd]):
        nd += 1  # carry-out predicates follow the destination
    written = set().union(*(_resources(o, width if base in ("LDS", "LDG", "LDC") else 1) for o in ops[:nd]))
    return op, frozenset(written), frozenset(guard.union(*(_resources(o) for o in ops[nd:])))


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
                how = "fixed" if w_sb == 7 else "waited" if waited else "unwaited"
                out.append((_kind(w_op, op, r), cyc - w_cyc, how, w_pos, p))
        last.update({r: (op, cyc, (ctrl >> 5) & 7, p) for r in written})
        cyc += ctrl & 0xF
    return out


def ptxas_minima(body):
    """{kind: fewest cycles ptxas leaves} between a fixed-latency result and its reader, over
    the straight-line runs of a function [(address, text, lo, hi)]."""
    targets = {int(m.group(1), 16) for _a, t, *_w in body for m in [re.search(r"BRA (0x[0-9a-f]+)", t)] if m}
    runs, cur = [], []
    for a, t, _lo, hi in body:
        if a in targets and cur:
            runs.append(cur)
            cur = []
        cur.append((t, hi >> 41))
        if re.search(r"\b(BRA|EXIT)\b", t):
            runs.append(cur)
            cur = []
    mins = {}
    for run in runs + [cur]:
        for kind, cycles, how, _p, _r in _dependences(run):
            if how == "fixed":
                mins[kind] = min(mins.get(kind, cycles), cycles)
    return mins


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


def exit_start(body, end):
    """Index of the first instruction the loop ending at body[end] runs after it exits (past
    an unconditional branch there)."""
    nxt = end + 1
    m = re.fullmatch(r"BRA (0x[0-9a-f]+)", body[nxt][1]) if nxt < len(body) else None
    if not m:
        return nxt
    return next(i for i, (a, *_r) in enumerate(body) if a == int(m.group(1), 16))


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


# --- encoding and checks ------------------------------------------------------------------------

def branch_offset(lo, hi):
    """sm_90 BRA: (target - next address) / 4, low byte at bits 16-23, the rest signed from bit 34."""
    raw = ((hi & 0x3FFFF) << 30) | (lo >> 34)
    if raw >> 47:
        raw -= 1 << 48
    return (raw << 8) | ((lo >> 16) & 0xFF)


def set_branch_offset(lo, hi, off):
    raw = (off >> 8) & ((1 << 48) - 1)
    lo = (lo & ~(0xFF << 16) & ((1 << 34) - 1)) | ((off & 0xFF) << 16) | ((raw & ((1 << 30) - 1)) << 34)
    hi = (hi & ~0x3FFFF) | (raw >> 30)
    return lo, hi


def node_regs(loop, n, alloc=None):
    """{field: register} of a node, in the original allocation or a new one."""
    if alloc is None:
        return {f: r for f, _w, _d, r in n.slot_regs}
    out = {f: reg_of(loop, alloc, vs[0]) for f, _w, _d, vs in n.vals}
    if n.kind == "ffma":
        a, b = n.order_ab[::-1] if loop.swapped[n.idx] else n.order_ab
        out[24], out[32] = reg_of(loop, alloc, a), reg_of(loop, alloc, b)
    return out


def symbolic(loop, seq, targets, alloc, intern):
    """Per path: (memory effects in order, {register: value} at the end) of one iteration,
    values as expressions over the registers' values at the head, interned in `intern`.
    Uniform registers and predicates, which keep their names, are values too: a moved load
    must read the same version of its uniform address term."""

    def E(t):
        return intern.setdefault(t, len(intern))

    def named(resources):  # the uniform registers and predicates among them
        return sorted(x for x in resources if not re.fullmatch(r"R\d+", x))

    out = []
    for path in paths(loop, seq, targets):
        state, ordered, mem = {}, [], 0
        for n in path:
            R = node_regs(loop, n, alloc)
            srcs = tuple(state.get(R[f] + k, E(("in", R[f] + k))) for f, w, d, _r in n.slot_regs
                         if not d for k in range(w))
            _op, written, read = effects(n.text)
            srcs += tuple(state.get(x, E(("in", x))) for x in named(read))
            templ = re.sub(r"\bR\d+", "R", n.text.replace(".reuse", ""))
            if n.branch_target() is not None:
                templ = re.sub(r"0x[0-9a-f]+", "", templ)
            if n.kind == "ffma":
                key = ("ffma", tuple(sorted(srcs[:2])), srcs[2])
            elif n.op.startswith("LDS"):
                key = (templ, srcs, mem)
            else:
                key = (templ, srcs)
            if n.op.startswith(("STS", "BAR")):
                ordered.append(key)
                mem += 1
            elif n.op.startswith("LDG"):
                ordered.append(key)
            for f, w, d, _r in n.slot_regs:
                if d:
                    for k in range(w):
                        state[R[f] + k] = E(key + (k,))
            for x in named(written):
                state[x] = E(key + (x,))
        keep = set(loop.live_in) | set(loop.live_exit)
        out.append((ordered, {r: v for r, v in state.items() if r in keep or isinstance(r, str)}))
    return out


def same(loop, new, old, intern):
    """Whether two `symbolic` results agree. On the last tile's path the loop exits, and a
    register whose old value there is a fragment (a shared-memory load) is not compared:
    nothing after the loop reads fragments, only liveness over-approximated says so."""
    names = {v: k for k, v in intern.items()}
    for p, ((e_new, r_new), (e_old, r_old)) in enumerate(zip(new, old)):
        if e_new != e_old:
            return False
        for r in set(r_new) | set(r_old):
            if r_new.get(r) == r_old.get(r):
                continue
            if p == 1 and r in r_old and names[r_old[r]][0].startswith("LDS"):
                continue
            return False
    return True


def expected_text(loop, n, R, reuse, new_target):
    if n.kind == "ffma":
        f = lambda r, s: f"R{r}" + (".reuse" if reuse >> s & 1 else "")
        return f"FFMA R{R[16]}, {f(R[24], 0)}, {f(R[32], 1)}, R{R[64]}"
    text = n.text.replace(".reuse", "")
    regs = iter(R[f] for f, _w, _d, _r in n.slot_regs)
    text = re.sub(r"\bR\d+", lambda m: f"R{next(regs)}", text)
    if new_target is not None:
        text = re.sub(r"0x[0-9a-f]+$", f"{new_target:#x}", text)
    return text


def rewrite(body, stats, beam=32, order_from="model", per_bank=True, reuse_on=True, conflict_weight=100,
            bounds=None):
    """[(address, lo, hi, expected text)] for one main loop of a function: `bounds` (FFMA
    count, head, back branch) as `ffma_loops` gives them, or the loop with the most FFMAs."""
    best = bounds or main_loop_bounds(body)
    if best is None or best[0] < 256:
        raise LoopError("no FFMA loop")
    _n, head, end = best
    texts = [(a, t) for a, t, *_r in body]
    live_exit = live_after(texts, end + 1)
    loop = Loop(body, head, end, live_exit)
    cells = loop.cells()
    chs = sorted(cells)
    if order_from == "ptxas":  # ptxas' order and operand slots of the first K step
        order = [(n.chain, n.vals[0][3][0] != n.order_ab[0]) for n in loop.nodes if n.kind == "ffma" and n.step == 0]
        cost = None
    elif order_from == "model":
        order, cost = ffma_order([cells[ch] for ch in chs], beam, per_bank, conflict_weight)
        order = [(chs[k], sw) for k, sw in order]
    else:
        order, cost = template_order([cells[ch] for ch in chs], order_from), None
        order = [(chs[k], sw) for k, sw in order]
    if SWAP_ALL:
        order = [(ch, not sw) for ch, sw in order]
    referenced = {r + k for n in loop.nodes for _f, w, _d, r in n.slot_regs for k in range(w)}
    nregs = 1 + max(int(r) for _a, t, *_x in body for r in re.findall(r"\bR(\d+)", t))
    reserved = (live_exit - referenced) | {1}  # R1: the stack pointer by convention
    # The shared stores' block as early in the last K step as the registers allow: the later
    # it comes, the more of that step's fragments are dead by then.
    for d_after in (16, 32, 48, 64, 96):
        seq = loop.schedule(order, d_after=d_after)
        try:
            alloc = allocate(loop, seq, nregs, reserved)
            break
        except LoopError:
            if d_after == 96:
                raise
    stats["d_after"] = d_after
    ctrl = {}
    for n in loop.nodes:
        if n.kind == "kept":
            ctrl[n.idx] = n.ctrl & ~(0xF << 17)
        else:
            stall_ = FFMA_STALL if n.kind == "ffma" else 1
            ctrl[n.idx] = (n.ctrl & ~((1 << 21) - 1)) | stall_ | (1 << 4)  # stall 1, yield bit as ptxas
    pad_gaps(loop, seq, ctrl)
    scoreboards(loop, seq, alloc, ctrl)
    settle_waits(loop, seq, ctrl)
    regs = {n.idx: node_regs(loop, n, alloc) for n in seq}
    ops = {i: (R[16], R[24], R[32], R[64]) for i, R in regs.items() if loop.nodes[i].kind == "ffma"}
    targets = block_targets(loop, seq)
    boundaries = {0} | set(targets.values())
    def written(n):
        return {regs[n.idx][f] + k for f, w, d, _r in n.slot_regs if d for k in range(w)}

    reuse = reuse_bits(seq, ops, boundaries, per_bank, written) if reuse_on else {}
    if FILL_STALL:  # experiment: every FFMA that sets a flag waits longer before the next issue
        for idx, bits in reuse.items():
            if bits:
                ctrl[idx] = (ctrl[idx] & ~0xF) | max(FILL_STALL, stall(ctrl[idx]))
    intern = {}
    if block_targets(loop, loop.nodes) != original_targets(loop):
        raise LoopError("ptxas' branches do not jump just past their blocks")
    if not same(loop, symbolic(loop, seq, targets, alloc, intern),
                symbolic(loop, loop.nodes, original_targets(loop), None, intern), intern):
        raise LoopError("the new loop computes something else")
    base_addr = loop.nodes[0].addr
    new_addr = {n.idx: base_addr + 16 * p for p, n in enumerate(seq)}
    out = []
    for p, n in enumerate(seq):
        lo, hi = n.lo, n.hi
        for f, r in regs[n.idx].items():
            lo, hi = set_field(lo, hi, f, r)
        target = None
        if n.branch_target() is not None:
            if branch_offset(n.lo, n.hi) * 4 != n.branch_target() - n.addr - 16:
                raise LoopError(f"branch offset not understood: {n.text}")
            target = new_addr[seq[targets[n.idx]].idx] if n.idx in targets else n.branch_target()
            lo, hi = set_branch_offset(lo, hi, (target - new_addr[n.idx] - 16) // 4)
        c = ctrl[n.idx] | (reuse.get(n.idx, 0) << 17)
        hi = (hi & ((1 << 41) - 1)) | (c << 41)
        out.append((new_addr[n.idx], lo, hi, expected_text(loop, n, regs[n.idx], reuse.get(n.idx, 0), target)))
    pads = boundary_pads(body, head, end, [(a, t, hi >> 41) for a, _lo, hi, t in out])
    for i, st in sorted(pads.items()):
        a, t, lo, hi = body[i]
        out.append((a, lo, hi & ~(0xF << 41) | st << 41, t))
    stats["pads"] = {hex(body[i][0]): st for i, st in pads.items()}
    # Statistics under the reuse model, ptxas' loop against the new one.
    old_bounds = {0} | set(original_targets(loop).values())
    old_ops = {n.idx: tuple(node_regs(loop, n)[f] for f in (16, 24, 32, 64)) for n in loop.nodes if n.kind == "ffma"}
    old = model_reads(loop.nodes, old_ops, {i: (loop.nodes[i].ctrl >> 17) & 3 for i in old_ops}, old_bounds)
    new = model_reads(seq, ops, reuse, boundaries)
    stats.update(ffma=len(ops), model_cost=cost, regs=1 + max(alloc[g] + len(loop.vals.groups[g]) - 1 for g in alloc),
                 nregs=nregs, one_read=(old[0], new[0]), same_bank=(old[1], new[1]))
    return out


FUNCTION = r"(sgemm_tiled|sgemm_stream_k)INS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16E.*LNS_6LayoutE1ELS3_0E"


def ffma_loops(body):
    """(FFMA count, head, back branch) of the innermost loops with the function's most FFMAs,
    in address order: a tiled kernel's unchecked and checked main loops, not the stream-K
    tail's loop over its pieces around them."""
    found = loops(body)
    inner = [c for c in found if not any(c[1] <= h and e < c[2] for _n, h, e in found)]
    most = max((n for n, _h, _e in inner), default=0)
    return [c for c in inner if most and c[0] == most]


def fingerprint(body, bounds=None):
    """A main loop's instruction words, hashed: a rewrite is validated on one ptxas output.
    `bounds` as `rewrite` takes them."""
    best = bounds or main_loop_bounds(body)
    if best is None:
        return None
    _n, head, end = best
    h = hashlib.sha256()
    for _a, _t, lo, hi in body[head : end + 1]:
        h.update(struct.pack("<QQ", lo, hi))
    return h.hexdigest()[:16]


def rewrite_library(path, out, function=FUNCTION, fingerprints=None, **options):
    """Rewrite the main loops (`ffma_loops`) of every function matching `function` in the
    library at path and write the result to out (only if a loop was rewritten). With `fingerprints`
    ({validated loop: its rewrite, or (its rewrite, {rewrite option: value})}), only a loop
    whose `fingerprint` is a key is rewritten, with `options` and its own; one that is a
    rewrite is reported as rewritten already. `options` go to `rewrite`.
    Returns {"function, loop at address": what was done}; raises LoopError, writing nothing, if cuobjdump does
    not read every rewritten instruction back as intended."""
    data = bytearray(open(path, "rb").read())
    done, status = [], {}
    validated = {k: v if isinstance(v, tuple) else (v, {}) for k, v in (fingerprints or {}).items()}
    rewrites = {v[0] for v in validated.values()}
    for pos, size, name, base, _sec_size, lines in functions_in(data, function):
        body = [(a, t, *struct.unpack_from("<QQ", data, base + a)) for a, t in lines]
        for bounds in ffma_loops(body):
            where = f"{name}, loop at {body[bounds[1]][0]:#x}"
            fp = fingerprint(body, bounds)
            if fingerprints is not None and fp not in validated:
                status[where] = "rewritten already" if fp in rewrites else f"left alone (loop {fp} is not a validated ptxas output)"
                continue
            stats = {}
            try:
                new = rewrite(body, stats, bounds=bounds, **{**options, **validated.get(fp, (None, {}))[1]})
            except LoopError as e:
                status[where] = f"left alone ({e})"
                continue
            for addr, lo, hi, _t in new:
                struct.pack_into("<QQ", data, base + addr, lo, hi)
            done.append((pos, size, name, new))
            status[where] = f"rewritten (loop {fp}): {stats}"
    # cuobjdump must read every rewritten instruction back as intended.
    for pos, size, name, new in done:
        lines = dict(listing(bytes(data[pos : pos + size]))[name])
        bad = [(hex(a), lines.get(a), t) for a, _lo, _hi, t in new if lines.get(a) != t]
        if bad:
            raise LoopError(f"{name}: {len(bad)} instructions read back differently, e.g. {bad[:3]}")
    if done:
        write_library(data, path, out)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="a shared library or a cubin")
    ap.add_argument("--function", default=FUNCTION, help="functions whose name matches this regex")
    ap.add_argument("--beam", type=int, default=32)
    ap.add_argument("--order", choices=["model", "ptxas", "rows", "cols", "walk42", "walk24"], default="model",
                    help="the FFMA order: searched under the cache model, ptxas' first K step, or a fixed walk")
    ap.add_argument("--conflict-weight", type=int, default=100,
                    help="the search's price of two register-file reads in one bank, in reads")
    ap.add_argument("--cache", choices=["bank", "slot"], default="bank",
                    help="reuse cache model: an entry per (slot, bank), or one per slot")
    ap.add_argument("--no-reuse", action="store_true", help="no .reuse flags (a control)")
    ap.add_argument("--reuse-filter", choices=["slot0", "slot1", "adjacent", "nocross", "samebankgap",
                                               "noconf_reader", "noconf_filler"])
    ap.add_argument("--swap-all", action="store_true", help="the other multiplicand in slot a (an experiment)")
    ap.add_argument("--ffma-stall", type=int, default=1, help="the FFMAs' stall count (an experiment)")
    ap.add_argument("--fill-stall", type=int, default=0, help="least stall of a flag-setting FFMA (an experiment)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    global REUSE_FILTER, SWAP_ALL, FFMA_STALL, FILL_STALL
    REUSE_FILTER, SWAP_ALL, FFMA_STALL, FILL_STALL = args.reuse_filter, args.swap_all, args.ffma_stall, args.fill_stall
    try:
        status = rewrite_library(args.path, args.out, args.function, beam=args.beam, order_from=args.order,
                                 per_bank=args.cache == "bank", reuse_on=not args.no_reuse,
                                 conflict_weight=args.conflict_weight)
    except LoopError as e:
        raise SystemExit(str(e))
    for name, what in status.items():
        print(f"{name}: {what}")
    done = sum(what.startswith("rewritten (") for what in status.values())
    if not done:
        shutil.copy(args.path, args.out)
    print(f"{done} loops rewritten, read back as intended -> {args.out}")


if __name__ == "__main__":
    main()
