"""A function's FFMA loops and the structure of one main loop: its instructions (`Node`),
the two blocks its forward branches skip, the values in its registers (`Values`), the
accumulator chains and the K steps, and a schedule of its instructions in a new order.
"""
import re
from collections import Counter, defaultdict

from . import isa

SPREAD = 6  # FFMAs between the loop's other instructions at its head and tail


class LoopError(Exception):
    """The loop is not of a form the rewrite handles, or a check refused the rewrite."""


# --- loops of a function --------------------------------------------------------------------

def loops(body):
    """(FFMA count, index of the head, index of the back branch) of every loop in body
    [(address, text, ...)], in the order of their back branches."""
    index = {item[0]: i for i, item in enumerate(body)}
    out = []
    for i, (addr, text, *_rest) in enumerate(body):
        target = isa.branch_target(text)
        if target is not None and target < addr and target in index:
            head = index[target]
            out.append((sum(" FFMA " in f" {item[1]} " for item in body[head : i + 1]), head, i))
    return out


def main_loop_bounds(body):
    """The loop of `loops` with the most FFMAs (the first of equals); None if there is none."""
    return max(loops(body), key=lambda c: c[0], default=None)


def ffma_loops(body):
    """(FFMA count, head, back branch) of the innermost loops with the function's most FFMAs,
    in address order: a tiled kernel's unchecked and checked main loops, not the stream-K
    tail's loop over its pieces around them."""
    found = loops(body)
    inner = [c for c in found if not any(c[1] <= h and e < c[2] for _n, h, e in found)]
    most = max((n for n, _h, _e in inner), default=0)
    return [c for c in inner if most and c[0] == most]


# --- instructions -----------------------------------------------------------------------------

class Node:
    """One instruction of the loop: kind ffma / lds (an in-body fragment load, movable) /
    kept; operands as [(field, width, is_def, [value ids])] once analysed."""

    def __init__(self, idx, addr, text, lo, hi):
        self.idx, self.addr, self.text, self.lo, self.hi = idx, addr, text, lo, hi
        self.guard = isa.GUARD.match(text)
        self.op = text[self.guard.end():].split(None, 1)[0] if self.guard else text.split(None, 1)[0]
        self.slot_regs = []  # [(field, width, is_def, base register)]
        m = isa.FFMA_TEXT.fullmatch(text)
        if m and (lo & 0xFFFF) == isa.FFMA_OPCODE:
            self.kind = "ffma"
            self.slot_regs = [(16, 1, True, int(m.group(1))), (24, 1, False, int(m.group(2))),
                              (32, 1, False, int(m.group(4))), (64, 1, False, int(m.group(6)))]
        else:
            self.kind = "kept"
            if self.op in isa.FORMS or self.op in isa.ALT_FORMS:
                bare = text[self.guard.end():] if self.guard else text
                for rx, fields in (f for f in (isa.FORMS.get(self.op), isa.ALT_FORMS.get(self.op)) if f):
                    m = re.fullmatch(rx, bare)
                    if m:
                        break
                else:
                    raise LoopError(f"unexpected form: {text}")
                if fields is None:
                    fields = isa.LOP3_FIELDS + ([isa.LOP3_RC] if m.group(5) else [])
                named = [int(r) for r in re.findall(r"\bR(\d+)", text)]  # in field order
                if len(named) != len(fields):
                    raise LoopError(f"operand count of {text}")
                for (f, w, d), r in zip(fields, named):
                    self.slot_regs.append((f, w, d, r))
            elif re.search(r"\bR\d+", text):
                raise LoopError(f"no operand table for: {text}")
            if self.op == "LDS.128":
                self.kind = "lds"  # the caller re-marks the loads of the skipped blocks as kept
        for f, _w, _d, r in self.slot_regs:
            if isa.field(lo, hi, f) != r:
                raise LoopError(f"field {f} of {text} is {isa.field(lo, hi, f)}")
        self.vals = []

    @property
    def ctrl(self):
        return self.hi >> isa.CTRL_SHIFT

    def branch_target(self):
        return isa.branch_target(self.text)

    def variable(self):
        return self.op.startswith(isa.VARIABLE)


def defined(n):
    """The values a node defines."""
    return {v for _f, _w, d, vs in n.vals if d for v in vs}


# --- values ---------------------------------------------------------------------------------

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
    """Values of one iteration: operands of each node, pinned groups; (values, the value in
    each register at the end, the value of each register read before it is written)."""
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


# --- the loop ---------------------------------------------------------------------------------

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

    def ptxas_order(self):
        """ptxas' FFMA order and operand slots of the first K step, [(chain, swapped)]."""
        return [(n.chain, n.vals[0][3][0] != n.order_ab[0]) for n in self.nodes if n.kind == "ffma" and n.step == 0]

    def register(self, v):
        g, k = self.vals.group[v]
        return self.vals.pinned[g] + k

    def parity(self, v):
        g, k = self.vals.group[v]
        base = self.vals.pinned.get(g)
        return (base + k) % 2 if base is not None else k % 2

    def schedule(self, order, lds_gap=2, d_after=16):
        """The new sequence of nodes: the FFMAs of every K step in `order` [(chain, swapped)],
        the kept instructions spread over the first and last K steps, the fragment loads of
        step n + 1 early in step n, the stores' block `d_after` FFMAs into the last step."""
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


# --- ways through an iteration -----------------------------------------------------------------

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
    """{forward branch: node index it jumps to} in ptxas' loop."""
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
