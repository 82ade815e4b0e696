"""Re-schedule the FFMAs of the GEMM main loops in a built extension, below ptxas.

An experiment tool for the question the performance log left open (docs/performance.md,
steps 10, 11 and 13): how much of the gap to cuBLAS is the order of the FFMAs and their
`.reuse` flags, which ptxas decides after PTX. It rewrites them in the cubins embedded in
the extension's shared library (a copy), and nothing else; the result is for measuring,
not shipped.

- A *run* is a stretch of consecutive plain FFMAs (FFMA Rd, Ra, Rb, Rc; no guard, no
  modifiers, no scoreboard set) inside a loop of 64 FFMAs or more; FFMAs that wait on a
  scoreboard split it into *segments*. Inside a segment FFMAs are permuted; control bits
  (stall count, yield, scoreboards, wait mask) stay with the position, so a wait stays
  first; Ra and Rb may be swapped (fma(a, b, c) == fma(b, a, c) exactly).
- Dependencies: within a segment, a read of an FFMA's result stays at least
  min(original distance, FFMA_LAT) behind it, other conflicts keep their order; with
  instructions outside the segment (also around the loop's back edge) no distance shrinks
  below min(original, FFMA_LAT) for FFMAs on a straight path, min(original, T_FAR)
  otherwise; runs within T_FAR of a branch that jumps further than BRANCH_SPAN are left
  alone.
- `.reuse` flags are recomputed per run: set on slot s of an FFMA when the next FFMA of the
  run that reads slot s from the same register bank reads the same register and nothing
  writes it in between (ptxas' own flags follow this per-bank pattern).

Strategies: `noreuse` (order kept, reuse flags cleared: what the reuse cache is worth),
`min2` / `min4` (beam search: fewest FFMAs reading two registers of one bank, mod 2 / mod 4,
then fewest register-file reads), `max2` (the most same-bank pairs and no reuse: a control).

    python -m benchmarks.sass_schedule torch_vecgemm/_C*.so --strategy min2 --out patched.so
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import tempfile

from .ffma_banks import functions
from .sass_report import cuobjdump

EM_CUDA = 190
FFMA_RRR = 0x223
T_FAR = 64  # distance at which any outside dependency is certainly met
BRANCH_SPAN = 48
FFMA_LAT = 6


# --- ELF: the cubins inside a shared library ------------------------------------------------------

def cubins(data):
    """(offset, size, {section name: (offset in cubin, size)}) of each embedded CUDA ELF.
    Every ELF magic is tried (no skipping by the computed size): a header that does not
    parse as a CUDA ELF is passed over."""
    out, pos = [], -1
    while True:
        pos = data.find(b"\x7fELF\x02\x01", pos + 1)
        if pos < 0:
            return out
        if struct.unpack_from("<H", data, pos + 18)[0] != EM_CUDA:
            continue
        shoff = struct.unpack_from("<Q", data, pos + 40)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, pos + 58)
        if shentsize != 64 or not 0 < shstrndx < shnum or pos + shoff + shnum * 64 > len(data):
            continue
        secs = [struct.unpack_from("<IIQQQQ", data, pos + shoff + i * 64) for i in range(shnum)]
        stroff = secs[shstrndx][4]
        names, end = {}, shoff + shnum * 64
        for name, _typ, _flags, _addr, off, size in secs:
            s = data[pos + stroff + name : data.index(b"\0", pos + stroff + name)].decode(errors="replace")
            names[s] = (off, size)
            end = max(end, off + size)
        out.append((pos, end, names))


# --- instructions ------------------------------------------------------------------------------

class Instr:
    """One 128-bit instruction (lo, hi: its two little-endian words) and its cuobjdump text.
    sm_90 FFMA R, R, R, R: opcode 0x223 with guard PT (7) in lo bits 0-15, Rd lo 16-23, Ra
    lo 24-31, Rb lo 32-39, Rc hi 0-7. Control bits (hi >> 41, as in every architecture since
    Volta): stall count 0-3, yield 4, scoreboard set on write 5-7 and on read 8-10 (7: none),
    wait mask 11-16, reuse flags 17-20 (bit s: operand slot s)."""

    def __init__(self, addr, text, lo, hi):
        self.addr, self.text, self.lo, self.hi = addr, text, lo, hi
        self.op = re.sub(r"^@!?U?P\w+\s+", "", text).split(None, 1)[0] if text else ""
        self.ffma = False
        if (lo & 0xFFFF) == (0x7000 | FFMA_RRR) and re.fullmatch(
            r"FFMA R\d+, R\d+(\.reuse)?, R\d+(\.reuse)?, R\d+(\.reuse)?", text
        ):
            self.ffma = True
            self.d, self.a, self.b, self.c = (lo >> 16) & 0xFF, (lo >> 24) & 0xFF, (lo >> 32) & 0xFF, hi & 0xFF
            regs = [int(r) for r in re.findall(r"R(\d+)", text)]
            assert regs == [self.d, self.a, self.b, self.c], (text, hex(lo), hex(hi))
        regs = set()
        width = 4 if ".128" in self.op else 2 if ".64" in self.op else 1
        for r, wide in re.findall(r"\bR(\d+)(\.64)?", text):
            w = max(width, 2 if wide else 1)
            regs.update(int(r) + q for q in range(w))
        self.regs = regs  # every register the instruction may touch (non-FFMA: read and write)

    @property
    def ctrl(self):
        return self.hi >> 41

    @property
    def wait(self):
        return (self.ctrl >> 11) & 0x3F

    @property
    def barriers(self):
        return ((self.ctrl >> 5) & 7, (self.ctrl >> 8) & 7)

    def branch_target(self):
        m = re.search(r"BRA (0x[0-9a-f]+)", self.text)
        return int(m.group(1), 16) if m else None

    def reads(self):
        return {self.a, self.b, self.c} if self.ffma else self.regs

    def writes(self):
        return {self.d} if self.ffma else self.regs

    def conflicts(self, other):
        """Whether the two must keep their order: one writes what the other reads or writes."""
        return bool(self.writes() & (other.reads() | other.writes()) or self.reads() & other.writes())


def listing(cubin_bytes):
    """{function: [(address, text)]} from cuobjdump."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin_bytes)
        f.flush()
        run = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    return dict(functions(run.stdout))


# --- scheduling ------------------------------------------------------------------------------

def loops(body):
    """(head, end) index ranges of the backward branches."""
    index = {ins.addr: i for i, ins in enumerate(body)}
    out = []
    for i, ins in enumerate(body):
        t = ins.branch_target()
        if t is not None and t < ins.addr and t in index:
            out.append((index[t], i))
    return out


def runs(body, head, end):
    """Runs of consecutive movable FFMAs in the loop, each split into segments at the FFMAs
    that wait on a scoreboard (which start a segment)."""
    out, run, cur = [], [], []
    for i in range(head, end + 1):
        ins = body[i]
        if ins.ffma and ins.barriers == (7, 7):
            if ins.wait and cur:
                run.append(cur)
                cur = []
            cur.append(i)
            continue
        if cur:
            run.append(cur)
        if run:
            out.append(run)
        run, cur = [], []
    if cur:
        run.append(cur)
    if run:
        out.append(run)
    return out


def neighbours(body, head, end, start, step):
    """Paths of indices from `start` walking `step`, up to T_FAR each: straight through
    the function (into the preheader or the exit) and around the loop's back edge."""
    straight = [i for i in range(start + step, start + step * (T_FAR + 1), step) if 0 <= i < len(body)]
    around, i = [], start
    for _ in range(T_FAR):
        i += step
        if step < 0 and i < head:
            i = end
        if step > 0 and i > end:
            i = head
        around.append(i)
    return [straight, around]


def branch_indices(body):
    """(index of each instruction that a branch jumps to, index of each branch)."""
    index = {ins.addr: i for i, ins in enumerate(body)}
    targets = {index[t] for ins in body if (t := ins.branch_target()) is not None and t in index}
    return targets, {i for i, ins in enumerate(body) if ins.branch_target() is not None}


def outside_walk(body, head, end, start, step, members, crossed_at_start, barriers):
    """(distance, instruction, whether a barrier lies between) for each instruction outside
    the segment on the paths from `start` walking `step`, up to the segment itself."""
    out = []
    for path in neighbours(body, head, end, start, step):
        crossed = crossed_at_start
        for dist, j in enumerate(path, start=1):
            if j in members:
                break
            out.append((dist, body[j], crossed))
            crossed = crossed or j in barriers
    return out


def outside_bounds(body, head, end, seg, targets, branches):
    """Earliest and latest new position of each member, from dependencies outside the
    segment. With an FFMA on a straight path (no join on the way back, no branch on the way
    forward) the distance must stay at least min(original, FFMA_LAT); otherwise, or with any
    other instruction, min(original, T_FAR)."""
    n, first, last = len(seg), seg[0], seg[-1]
    members = set(seg)
    joins = targets - {head}
    before = outside_walk(body, head, end, first, -1, members, first in joins, joins)
    after = outside_walk(body, head, end, last, +1, members, False, branches - {end})
    early, late = {}, {}
    for k, i in enumerate(seg):
        ins = body[i]
        lo, hi = 0, n - 1
        for dist, o, crossed in before:
            if o.conflicts(ins):
                cap = FFMA_LAT if o.ffma and not crossed else T_FAR
                lo = max(lo, min(dist + k, cap) - dist)  # dist + k' >= min(orig, cap)
        for dist, o, crossed in after:
            if ins.conflicts(o):
                cap = FFMA_LAT if o.ffma and not crossed else T_FAR
                orig = dist + (n - 1 - k)
                hi = min(hi, n - 1 - (min(orig, cap) - dist))  # dist + n-1-k' >= min(orig, cap)
        early[i], late[i] = lo, hi
    return early, late


def branch_guard(body, head, end, index):
    """Indices near a branch that jumps more than BRANCH_SPAN within the loop (left alone)."""
    bad = set()
    for i in range(head, end):
        t = body[i].branch_target()
        if t is None or t not in index:
            continue
        j = index[t]
        if abs(j - i) > BRANCH_SPAN:
            for x in (i, j):
                bad.update(range(x - T_FAR, x + T_FAR + 1))
    return bad


def schedule(body, seg, early, late, strategy, beam=16, cache0=None):
    """A new order [(index, swapped)] of the segment and the reuse cache after it. Beam
    search over orders: cost = 100 x same-bank FFMAs + register-file
    reads (max2: minus same-bank FFMAs), the reuse cache modelled as one entry per (operand
    slot, bank), as `reuse_flags` then sets the flags."""
    banks = 4 if strategy == "min4" else 2
    sign = -1 if strategy == "max2" else 1
    n = len(seg)
    deps = [[] for _ in range(n)]  # (pred, min distance) in segment positions
    for x in range(n):
        for y in range(x + 1, n):
            p, q = body[seg[x]], body[seg[y]]
            if p.d in q.reads():
                deps[y].append((x, min(y - x, FFMA_LAT)))
            elif p.d == q.d or q.d in p.reads():
                deps[y].append((x, 1))
    ops = [(body[i].a, body[i].b, body[i].c) for i in seg]
    lo = [early[i] for i in seg]
    hi = [late[i] for i in seg]
    # state: (cost, order [(k, swapped)], pos_of list, cache dict)
    def place(state, k, swapped, pos):
        cost, order, pos_of, cache = state
        a0, b0, c = ops[k]
        a, b = (b0, a0) if swapped else (a0, b0)
        rf = [r % banks for slot, r in ((0, a), (1, b)) if cache.get((slot, r % banks)) != r]
        rf.append(c % banks)
        new_cache = dict(cache)
        new_cache[(0, a % banks)] = a
        new_cache[(1, b % banks)] = b
        new_pos = list(pos_of)
        new_pos[k] = pos
        new_order = order + [(k, swapped)]
        key = (frozenset(j for j, _ in new_order), tuple(sorted(new_cache.items())))
        step = sign * 100 * (len(rf) - len(set(rf))) + len(rf)
        return key, (cost + step, new_order, new_pos, new_cache)

    # The original order meets every constraint; it is kept in the beam, so the search
    # always ends, no worse than it under the model.
    original = (0, [], [-1] * n, dict(cache0 or {}))
    states = [original]
    for pos in range(n):
        nxt = {}
        for state in states:
            pos_of = state[2]
            left = [k for k in range(n) if pos_of[k] < 0]
            if any(hi[k] < pos for k in left):
                continue
            ready = [
                k for k in left
                if lo[k] <= pos and all(pos_of[pr] >= 0 and pos - pos_of[pr] >= d for pr, d in deps[k])
            ]
            forced = [k for k in ready if hi[k] == pos]
            if len(forced) > 1:
                continue
            for k in forced or ready:
                for swapped in (False, True):
                    key, new = place(state, k, swapped, pos)
                    if key not in nxt or new[0] < nxt[key][0]:
                        nxt[key] = new
        _, original = place(original, pos, False, pos)
        states = sorted(nxt.values(), key=lambda st: (st[0], [k for k, _ in st[1]]))[:beam]
        if not any(st[1] == original[1] for st in states):
            states.append(original)
    best = min(states, key=lambda st: st[0])
    return [(seg[k], sw) for k, sw in best[1]], best[3]


def encode(ins, swapped, ctrl_from, reuse):
    lo, hi = ins.lo, ins.hi
    if swapped:
        a, b = ins.a, ins.b
        lo = (lo & ~(0xFF << 24) & ~(0xFF << 32)) | (b << 24) | (a << 32)
    ctrl = (ctrl_from.ctrl & ~(0xF << 17)) | (reuse << 17)
    hi = (hi & ((1 << 41) - 1)) | (ctrl << 41)
    return lo, hi


def reuse_flags(new, banks=2):
    """Reuse bits per instruction of a segment's new order [(d, a, b)]: slot s keeps its
    register if the next read of slot s in the same bank is of the same register and
    nothing writes that register in between."""
    out = []
    for k, (d, a, b) in enumerate(new):
        bits = 0
        for slot, r in ((0, a), (1, b)):
            if r == d:
                continue
            for d2, a2, b2 in new[k + 1 :]:
                r2 = (a2, b2)[slot]
                if r2 % banks == r % banks:
                    bits |= (1 << slot) if r2 == r else 0
                    break
                if d2 == r:
                    break
        out.append(bits)
    return out


def simulate(body, seg, cache, banks=2):
    """The cache after the segment in its original order."""
    cache = dict(cache)
    for i in seg:
        cache[(0, body[i].a % banks)] = body[i].a
        cache[(1, body[i].b % banks)] = body[i].b
    return cache


def patch_function(body, strategy, stats, beam=16):
    """{index: (lo, hi)} for the instructions rewritten in the function's loops."""
    changes = {}
    index = {ins.addr: i for i, ins in enumerate(body)}
    targets, branches = branch_indices(body)
    for head, end in loops(body):
        if sum(body[i].ffma for i in range(head, end + 1)) < 64:
            continue
        guard = branch_guard(body, head, end, index)
        for run in runs(body, head, end):
            members = [i for seg in run for i in seg]
            if guard & set(members):
                stats["guarded"] += len(run)
                continue
            order = []  # the run's new order [(index, swapped)]
            cache = {}
            for seg in run:
                if strategy == "noreuse" or len(seg) == 1:
                    order += [(i, False) for i in seg]
                    cache = simulate(body, seg, cache)
                    continue
                early, late = outside_bounds(body, head, end, seg, targets, branches)
                new, cache = schedule(body, seg, early, late, strategy, beam, cache)
                order += new
                stats["segments"] += 1
            regs = [(body[i].d,) + ((body[i].b, body[i].a) if sw else (body[i].a, body[i].b)) for i, sw in order]
            bits = reuse_flags(regs) if strategy in ("min2", "min4") else [0] * len(order)
            for pos, ((i, sw), r) in enumerate(zip(order, bits)):
                changes[members[pos]] = encode(body[i], sw, body[members[pos]], r)
            stats["ffma"] += len(members)
    # An FFMA just before a rewritten run may keep an operand for the run's old first
    # instruction: clear its flags (always safe: the operand is read again).
    for i in sorted(changes):
        p = i - 1
        if p >= 0 and p not in changes and body[p].ffma:
            changes[p] = encode(body[p], False, body[p], 0)
    return changes


def functions_in(data, pattern):
    """(cubin offset, cubin size, name, offset of its code in data, code size, [(address,
    text)]) for each function whose name matches `pattern` in the cubins embedded in data."""
    for pos, size, sections in cubins(bytes(data)):
        if not any(name.startswith(".text.") and re.search(pattern, name[6:]) for name in sections):
            continue  # disassembling is most of the run time
        funcs = listing(bytes(data[pos : pos + size]))
        if funcs is None:
            print(f"cubin at {pos:#x} ({size} bytes): cuobjdump cannot read it, left alone")
            continue
        for name, lines in funcs.items():
            if re.search(pattern, name):
                off, sec_size = sections[".text." + name]
                yield pos, size, name, pos + off, sec_size, lines


def write_library(data, like, out):
    """Write data to out (atomically), with the file mode of `like`."""
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    shutil.copymode(like, tmp)
    os.replace(tmp, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--strategy", choices=["noreuse", "min2", "min4", "max2"], required=True)
    ap.add_argument("--function", default="sgemm_", help="functions whose name matches this regex")
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--verbose", action="store_true", help="a line per function")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    data = bytearray(open(args.path, "rb").read())
    stats = {"functions": 0, "segments": 0, "ffma": 0, "guarded": 0}
    for _pos, _size, name, base, sec_size, lines in functions_in(data, args.function):
        body = []
        for addr, text in lines:
            lo, hi = struct.unpack_from("<QQ", data, base + addr)
            body.append(Instr(addr, text, lo, hi))
        assert len(body) * 16 <= sec_size
        before = dict(stats)
        changes = patch_function(body, args.strategy, stats, args.beam)
        if args.verbose:
            print(name, {k: stats[k] - before[k] for k in stats}, f"{len(changes)} rewritten")
        for i, (lo, hi) in changes.items():
            struct.pack_into("<QQ", data, base + body[i].addr, lo, hi)
        stats["functions"] += 1
    write_library(data, args.path, args.out)
    print(args.strategy, stats)


if __name__ == "__main__":
    main()
