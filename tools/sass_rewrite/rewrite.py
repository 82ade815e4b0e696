"""Rewrite a main loop, and the loops of a library.

A loop is rewritten as a permutation of ptxas' own instructions:
- every instruction that is not an FFMA or an in-body `LDS` keeps its relative order, its
  stall count (padded so that no two of them come closer in cycles than before, on both
  paths of each skipped block) and its block: the next tile's global loads and the
  shared-memory stores + barrier stay behind their `@P BRA`;
- the FFMAs of each K step are issued in one order, the same every step (`ordering`);
- the fragment loads of step n + 1 are issued early in step n; the accumulators stay in the
  registers they hold at the loop head; every other value that does not cross the back edge
  gets a register by interval allocation (`registers`);
- control bits are recomputed (`timing`) and `.reuse` set by the cache model (`ordering`).

Nothing is written unless the new loop computes what ptxas' loop computes (`dataflow`),
keeps ptxas' distances (`timing.latency_violations`), and cuobjdump reads every rewritten
instruction back as the text it was meant to be.
"""
import dataclasses
import hashlib
import re
import struct
from collections import defaultdict

from . import isa
from .cubin import find_cuobjdump, functions_in, instruction_words, listing, write_library, write_words
from .dataflow import live_after, same, symbolic
from .loop import Loop, LoopError, block_targets, ffma_loops, main_loop_bounds, original_targets
from .ordering import ORDERS, ffma_order, model_reads, reuse_bits, template_order
from .registers import allocate, node_regs
from .timing import boundary_pads, pad_gaps, scoreboards, settle_waits

# States of a loop after `rewrite_library`, and why one was left alone.
REWRITTEN, ALREADY, LEFT = "rewritten", "rewritten already", "left alone"
NOT_VALIDATED = "not validated"  # its fingerprint is no validated ptxas output
CHECK_FAILED = "check failed"  # the loop's form, the symbolic, timing or read-back check
OUTPUT_MISMATCH = "output fingerprint mismatch"  # the rewrite is not the validated one
MIN_FFMAS = 256  # a loop with fewer FFMAs is not a GEMM main loop


@dataclasses.dataclass(frozen=True)
class Options:
    """How a loop is rewritten."""

    order_from: str = "model"  # the FFMA order: searched under the cache model ("model"),
    # ptxas' first K step ("ptxas"), or a fixed walk ("rows", "cols", "walk42", "walk24")
    beam: int = 32  # the search's beam width
    conflict_weight: int = 100  # the search's price of two register-file reads in one bank, in reads
    per_bank: bool = True  # the cache model: an entry per (operand slot, bank), else one per slot
    reuse_on: bool = True  # set `.reuse` flags (off: a control)

    def __post_init__(self):
        if self.order_from not in ORDERS:
            raise ValueError(f"order_from {self.order_from!r} is not one of {', '.join(ORDERS)}")
        if type(self.beam) is not int or self.beam < 1:
            raise ValueError(f"beam {self.beam!r} is not a positive integer")
        if type(self.conflict_weight) is not int or self.conflict_weight < 0:
            raise ValueError(f"conflict_weight {self.conflict_weight!r} is not a non-negative integer")
        for name in ("per_bank", "reuse_on"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"{name} {getattr(self, name)!r} is not a boolean")

    @classmethod
    def from_dict(cls, values):
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown rewrite options: {', '.join(sorted(unknown))}")
        return cls(**values)

    def to_dict(self):
        return dataclasses.asdict(self)


def fingerprint_words(words):
    """The first 16 hex digits of the sha256 of instruction words [(lo, hi)]."""
    h = hashlib.sha256()
    for lo, hi in words:
        h.update(struct.pack("<QQ", lo, hi))
    return h.hexdigest()[:16]


def fingerprint(body, bounds=None):
    """A loop's instruction words, from its head to its back branch, hashed: a rewrite is
    validated on one ptxas output. body [(address, text, lo, hi)]; `bounds` (FFMA count,
    head, back branch), by default the loop with the most FFMAs. None if there is no loop."""
    best = bounds or main_loop_bounds(body)
    if best is None:
        return None
    _n, head, end = best
    return fingerprint_words((lo, hi) for _a, _t, lo, hi in body[head : end + 1])


def output_fingerprint(body, bounds, new):
    """The fingerprint of the loop at `bounds` once the words `new` [(address, lo, hi, text)]
    replace body's."""
    words = {a: (lo, hi) for a, lo, hi, _t in new}
    _n, head, end = bounds
    return fingerprint_words(words.get(a, (lo, hi)) for a, _t, lo, hi in body[head : end + 1])


def expected_text(n, regs, reuse, new_target):
    """cuobjdump's text of a rewritten node: its registers `regs` {field: register}, its
    `.reuse` bits, its new branch target."""
    if n.kind == "ffma":
        f = lambda r, s: f"R{r}" + (".reuse" if reuse >> s & 1 else "")
        return f"FFMA R{regs[16]}, {f(regs[24], 0)}, {f(regs[32], 1)}, R{regs[64]}"
    text = n.text.replace(".reuse", "")
    it = iter(regs[f] for f, _w, _d, _r in n.slot_regs)
    text = re.sub(r"\bR\d+", lambda m: f"R{next(it)}", text)
    if new_target is not None:
        text = re.sub(r"0x[0-9a-f]+$", f"{new_target:#x}", text)
    return text


def _order(loop, options):
    """(order [(chain, swapped)], its cost under the cache model or None) of one K step."""
    cells = loop.cells()
    chs = sorted(cells)
    if options.order_from == "ptxas":
        return loop.ptxas_order(), None
    if options.order_from == "model":
        order, cost = ffma_order([cells[ch] for ch in chs], options.beam, options.per_bank, options.conflict_weight)
    else:
        order, cost = template_order([cells[ch] for ch in chs], options.order_from), None
    return [(chs[k], sw) for k, sw in order], cost


def rewrite_loop(body, bounds=None, options=Options()):
    """(new words [(address, lo, hi, expected text)], statistics) for one main loop of a
    function body [(address, text, lo, hi)]: `bounds` (FFMA count, head, back branch) as
    `ffma_loops` gives them, or the loop with the most FFMAs. The words are the loop's and,
    where the code around the loop needs more distance from it, the stall counts of a few
    instructions before and after it. Raises LoopError where a check refuses."""
    best = bounds or main_loop_bounds(body)
    if best is None or best[0] < MIN_FFMAS:
        raise LoopError("no FFMA loop")
    _n, head, end = best
    texts = [(a, t) for a, t, *_r in body]
    live_exit = live_after(texts, end + 1)
    loop = Loop(body, head, end, live_exit)
    order, cost = _order(loop, options)
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
    stats = {"d_after": d_after}
    ctrl = {}
    for n in loop.nodes:
        if n.kind == "kept":
            ctrl[n.idx] = n.ctrl & ~(0xF << 17)
        else:  # stall 1 and the yield bit, as ptxas issues FFMAs; no scoreboards yet
            ctrl[n.idx] = (n.ctrl & ~((1 << 21) - 1)) | 1 | (1 << 4)
    pad_gaps(loop, seq, ctrl)
    scoreboards(loop, seq, alloc, ctrl)
    settle_waits(loop, seq, ctrl)
    regs = {n.idx: node_regs(loop, n, alloc) for n in seq}
    ops = {i: (R[16], R[24], R[32], R[64]) for i, R in regs.items() if loop.nodes[i].kind == "ffma"}
    targets = block_targets(loop, seq)
    boundaries = {0} | set(targets.values())

    def written(n):
        return {regs[n.idx][f] + k for f, w, d, _r in n.slot_regs if d for k in range(w)}

    reuse = reuse_bits(seq, ops, boundaries, options.per_bank, written) if options.reuse_on else {}
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
            lo, hi = isa.set_field(lo, hi, f, r)
        target = None
        if n.branch_target() is not None:
            if isa.branch_offset(n.lo, n.hi) * 4 != n.branch_target() - n.addr - 16:
                raise LoopError(f"branch offset not understood: {n.text}")
            target = new_addr[seq[targets[n.idx]].idx] if n.idx in targets else n.branch_target()
            lo, hi = isa.set_branch_offset(lo, hi, (target - new_addr[n.idx] - 16) // 4)
        hi = isa.with_ctrl(hi, ctrl[n.idx] | (reuse.get(n.idx, 0) << 17))
        out.append((new_addr[n.idx], lo, hi, expected_text(n, regs[n.idx], reuse.get(n.idx, 0), target)))
    pads = boundary_pads(body, head, end, [(a, t, hi >> isa.CTRL_SHIFT) for a, _lo, hi, t in out])
    for i, st in sorted(pads.items()):
        a, t, lo, hi = body[i]
        out.append((a, lo, hi & ~(0xF << isa.CTRL_SHIFT) | st << isa.CTRL_SHIFT, t))
    stats["pads"] = {hex(body[i][0]): st for i, st in pads.items()}
    # Statistics under the reuse model, ptxas' loop against the new one.
    old_bounds = {0} | set(original_targets(loop).values())
    old_ops = {n.idx: tuple(node_regs(loop, n)[f] for f in (16, 24, 32, 64)) for n in loop.nodes if n.kind == "ffma"}
    old = model_reads(loop.nodes, old_ops, {i: (loop.nodes[i].ctrl >> 17) & 3 for i in old_ops}, old_bounds)
    new = model_reads(seq, ops, reuse, boundaries)
    stats.update(ffma=len(ops), model_cost=cost, regs=1 + max(alloc[g] + len(loop.vals.groups[g]) - 1 for g in alloc),
                 nregs=nregs, one_read=(old[0], new[0]), same_bank=(old[1], new[1]))
    return out, stats


# --- a library ---------------------------------------------------------------------------------

@dataclasses.dataclass
class LoopOutcome:
    """What `rewrite_library` did with one loop."""

    function: str
    address: int  # of the loop's head
    input: str  # the loop's fingerprint as found
    state: str = LEFT  # REWRITTEN, ALREADY or LEFT
    reason: str | None = None  # why it was left alone: NOT_VALIDATED, CHECK_FAILED, OUTPUT_MISMATCH
    detail: str = ""
    output: str | None = None  # the rewrite's fingerprint, where one was made
    stats: dict = dataclasses.field(default_factory=dict)

    def describe(self):
        where = f"{self.function}, loop at {self.address:#x}"
        if self.state == REWRITTEN:
            return f"{where}: rewritten ({self.input} -> {self.output}): {self.stats}"
        if self.state == ALREADY:
            return f"{where}: rewritten already ({self.input})"
        return f"{where}: left alone ({self.reason}: {self.detail})"


@dataclasses.dataclass
class LibraryReport:
    loops: list  # [LoopOutcome]
    unreadable_cubins: list  # offsets of cubins cuobjdump could not read
    written: bool  # whether the output library was written


def rewrite_library(path, out, validated=None, function=None, options=Options(), cuobjdump=None):
    """Rewrite the main loops (`ffma_loops`) of the functions whose name matches the regex
    `function` in the library (or cubin) at `path`, and write the result to `out` (which may
    be `path`; atomically), only if a loop was rewritten. Returns a LibraryReport.

    With `validated` (a `validated.Validated`), a loop is rewritten only if its fingerprint
    is a validated ptxas output, with that loop's options, and written only if the rewrite's
    fingerprint is the validated rewrite's; a loop that already is a validated rewrite is
    reported as such; `function` defaults to the validated loops' name patterns. Without
    it, every such loop is rewritten with `options`.

    Before anything is written cuobjdump must read every rewritten instruction back as the
    text intended; the loops of a function where it does not are left as they were.
    Raises FileNotFoundError without cuobjdump (`cubin.find_cuobjdump`)."""
    cuobjdump = cuobjdump or find_cuobjdump()
    if cuobjdump is None:
        raise FileNotFoundError("no cuobjdump (PATH, CUDA_HOME/bin, triton/backends/nvidia/bin)")
    if function is None:
        if validated is None:
            raise ValueError("which functions: a name pattern or the validated loops")
        function = validated.function_pattern
    by_input = validated.by_input if validated is not None else {}
    outputs = validated.outputs if validated is not None else set()
    with open(path, "rb") as f:
        original = f.read()
    data = bytearray(original)
    outcomes, unreadable = [], []
    done = defaultdict(list)  # (cubin offset, size) -> [(function, code offset, outcome, words)]
    for pos, size, name, base, lines in functions_in(data, function, cuobjdump, unreadable):
        body = instruction_words(data, base, lines)
        for bounds in ffma_loops(body):
            outcome = LoopOutcome(name, body[bounds[1]][0], fingerprint(body, bounds))
            outcomes.append(outcome)
            entry = by_input.get(outcome.input)
            if validated is not None and entry is None:
                if outcome.input in outputs:
                    outcome.state = ALREADY
                else:
                    outcome.reason = NOT_VALIDATED
                    outcome.detail = f"loop {outcome.input} is not a validated ptxas output"
                continue
            try:
                words, outcome.stats = rewrite_loop(body, bounds, entry.options if entry else options)
            except LoopError as e:
                outcome.reason, outcome.detail = CHECK_FAILED, str(e)
                continue
            outcome.output = output_fingerprint(body, bounds, words)
            if entry is not None and outcome.output != entry.output:
                outcome.reason = OUTPUT_MISMATCH
                outcome.detail = f"the rewrite is {outcome.output}, the validated one {entry.output}"
                continue
            write_words(data, base, words)
            outcome.state = REWRITTEN
            done[(pos, size)].append((name, base, outcome, words))
    for (pos, size), items in done.items():
        _read_back(data, original, pos, size, items, cuobjdump)
    written = any(o.state == REWRITTEN for o in outcomes)
    if written:
        write_library(data, path, out)
    return LibraryReport(outcomes, unreadable, written)


def _read_back(data, original, pos, size, items, cuobjdump):
    """Disassemble a rewritten cubin; restore ptxas' words in each function where an
    instruction does not read back as the text intended."""
    funcs = listing(bytes(data[pos : pos + size]), cuobjdump)
    bad_functions = {}
    for name, _base, _outcome, words in items:
        lines = dict((funcs or {}).get(name, []))
        bad = [(hex(a), lines.get(a), t) for a, _lo, _hi, t in words if lines.get(a) != t]
        if bad:
            bad_functions.setdefault(name, f"{len(bad)} instructions read back differently, e.g. {bad[:3]}")
    for name, base, outcome, words in items:
        if name in bad_functions:
            for addr, *_w in words:
                data[base + addr : base + addr + 16] = original[base + addr : base + addr + 16]
            outcome.state, outcome.reason, outcome.detail = LEFT, CHECK_FAILED, bad_functions[name]
