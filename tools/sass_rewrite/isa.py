"""sm_90 instruction words as the rewrite reads and writes them: register fields, control
bits, branch offsets, the operand forms it knows, and what an instruction reads and writes.

A 128-bit instruction is two little-endian words (lo, hi). Register fields are 8 bits at
bit offsets Rd 16, Ra 24, Rb 32, Rc 64. The control bits are hi >> 41 (as in every
architecture since Volta): stall count 0-3, yield 4, scoreboard set on write 5-7 and on
read 8-10 (7: none), wait mask 11-16 (one bit a scoreboard), reuse flags 17-20 (bit s:
operand slot s).
"""
import functools
import re

CTRL_SHIFT = 41
NO_SCOREBOARD = 7
ALL_SCOREBOARDS = 0x3F
MAX_STALL = 11  # the largest stall count ptxas writes (more does not decode with yield)
FFMA_OPCODE = 0x7223  # FFMA R, R, R, R with guard PT, lo bits 0-15
FFMA_TEXT = re.compile(r"FFMA R(\d+), R(\d+)(\.reuse)?, R(\d+)(\.reuse)?, R(\d+)(\.reuse)?")
GUARD = re.compile(r"@!?U?P\w+\s+")
BRANCH = re.compile(r"BRA (0x[0-9a-f]+)")

# Operand tables: regex over cuobjdump's text (registers captured in order) and the
# register fields [(bit offset, width, is a definition)] in the order the text names them.
FORMS = {
    "LDS.128": (r"LDS\.128 R(\d+), \[R(\d+)(\+UR\d+)?(\+0x[0-9a-f]+)?\]", [(16, 4, True), (24, 1, False)]),
    "LDG.E.128.CONSTANT": (
        r"LDG\.E\.128\.CONSTANT R(\d+), desc\[(UR\d+)\]\[R(\d+)\.64\]", [(16, 4, True), (24, 2, False)]),
    "STS.128": (r"STS\.128 \[R(\d+)(\+0x[0-9a-f]+)?\], R(\d+)", [(24, 1, False), (32, 4, False)]),
    "LEA": (r"LEA R(\d+), R(\d+)(\.reuse)?, (UR\d+), (0x[0-9a-f]+)", [(16, 1, True), (24, 1, False)]),
    "IADD3": (r"IADD3 R(\d+), (P\d), R(\d+)(\.reuse)?, (UR\d+), RZ", [(16, 1, True), (24, 1, False)]),
    "IADD3.X": (r"IADD3\.X R(\d+), R(\d+)(\.reuse)?, (UR\d+), RZ, (P\d), !PT", [(16, 1, True), (24, 1, False)]),
}
# Other forms of the same opcodes, and more opcodes: where ptxas rematerialises addresses and
# strides inside the loop (the stream-K tail's).
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
                 None),  # Rc is a register or RZ: the fields follow the match
    "IMAD": (r"IMAD R(\d+), R(\d+)(\.reuse)?, (0x[0-9a-f]+), R(\d+)(\.reuse)?",
             [(16, 1, True), (24, 1, False), (64, 1, False)]),
    "ISETP.LE.AND": (r"ISETP\.LE\.AND (P\d), PT, R(\d+)(\.reuse)?, (UR\d+), PT", [(24, 1, False)]),
    "LDC.64": (r"LDC\.64 R(\d+), c\[0x0\]\[0x[0-9a-f]+\]", [(16, 2, True)]),
}
LOP3_FIELDS = [(16, 1, True), (24, 1, False)]
LOP3_RC = (64, 1, False)

# Variable-latency instructions: their results (and their source reads) are tracked by
# scoreboards, not by stall counts.
VARIABLE = ("LDS", "LDG", "STS")
# Variable-latency instructions a loop keeps in place (address and stride rematerialisation).
KEPT_VARIABLE = ("LDC", "S2UR", "S2R")


def field(lo, hi, off):
    """The 8-bit register field at bit offset `off`."""
    return ((hi >> (off - 64)) if off >= 64 else (lo >> off)) & 0xFF


def set_field(lo, hi, off, v):
    if off >= 64:
        return lo, (hi & ~(0xFF << (off - 64))) | (v << (off - 64))
    return (lo & ~(0xFF << off)) | (v << off), hi


def stall(ctrl):
    return ctrl & 0xF


def write_scoreboard(ctrl):
    return (ctrl >> 5) & 7


def wait_mask(ctrl):
    return (ctrl >> 11) & ALL_SCOREBOARDS


def with_ctrl(hi, ctrl):
    """hi with its control bits replaced."""
    return (hi & ((1 << CTRL_SHIFT) - 1)) | (ctrl << CTRL_SHIFT)


def branch_target(text):
    m = BRANCH.search(text)
    return int(m.group(1), 16) if m else None


def branch_offset(lo, hi):
    """BRA: (target - next address) / 4, low byte at bits 16-23, the rest signed from bit 34."""
    raw = ((hi & 0x3FFFF) << 30) | (lo >> 34)
    if raw >> 47:
        raw -= 1 << 48
    return (raw << 8) | ((lo >> 16) & 0xFF)


def set_branch_offset(lo, hi, off):
    raw = (off >> 8) & ((1 << 48) - 1)
    lo = (lo & ~(0xFF << 16) & ((1 << 34) - 1)) | ((off & 0xFF) << 16) | ((raw & ((1 << 30) - 1)) << 34)
    hi = (hi & ~0x3FFFF) | (raw >> 30)
    return lo, hi


def defs_uses(text):
    """Registers an instruction writes (only when certain) and reads (widths from the
    operand: `.64` pairs, store data as wide as the store, 64-bit addends and doubles), for
    liveness: reads over-approximated (a store's address as wide as its data), no guarded
    write kills."""
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


def operands(text):
    """The comma-separated operands of an instruction's text after its opcode, commas inside
    brackets kept."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def resources(token, width=1):
    """Registers (R, UR), predicates (P, UP) an operand names; a `.64` register is a pair,
    a register of a `width`-wide access `width` registers; `!P0` names P0."""
    res = set()
    for m in re.finditer(r"\b(U?R)(\d+)(\.64)?", token):
        res.update(f"{m.group(1)}{int(m.group(2)) + k}" for k in range(2 if m.group(3) else width))
    res.update(m.group(0) for m in re.finditer(r"(?<![A-Z!])U?P[0-6]\b", token))
    res.update(m.group(0)[1:] for m in re.finditer(r"!U?P[0-6]\b", token))
    return res


@functools.lru_cache(maxsize=None)
def effects(text):
    """(opcode, registers / predicates written, read) of one instruction's text, for timing:
    reads exact and every write, guarded or not (unlike `defs_uses`)."""
    t = text.replace(".reuse", "")
    guard = set()
    m = re.match(r"@!?(U?P\d) (.*)", t)
    if m:
        guard, t = {m.group(1)}, m.group(2)
    op = t.split()[0]
    base = op.split(".")[0]
    ops = operands(t[len(op):])
    width = 4 if ".128" in op else 2 if ".64" in op else 1
    if base in ("STS", "STG", "BAR", "BRA", "EXIT", "NOP") or not ops:
        return op, frozenset(), frozenset(guard.union(*(resources(o, width if i else 1) for i, o in enumerate(ops))))
    nd = 2 if base in ("ISETP", "FSETP", "UISETP", "PLOP3") else 1
    while base not in ("ISETP", "FSETP", "UISETP", "PLOP3") and nd < len(ops) and re.fullmatch(r"U?P(\d|T)", ops[nd]):
        nd += 1  # carry-out predicates follow the destination
    written = set().union(*(resources(o, width if base in ("LDS", "LDG", "LDC") else 1) for o in ops[:nd]))
    return op, frozenset(written), frozenset(guard.union(*(resources(o) for o in ops[nd:])))
