"""What the code computes: registers live after the loop, and the symbolic check that the
rewritten loop computes what ptxas' loop computes."""
import re

from . import isa
from .isa import effects
from .loop import LoopError, paths
from .registers import node_regs


def live_after(body, start):
    """Registers that may be read on some path from instruction index `start` of body
    [(address, text)] before being written (backward dataflow over the function's blocks;
    reads over-approximated). Raises LoopError if such a path meets an indirect branch,
    a call or a return."""
    index = {a: i for i, (a, _) in enumerate(body)}
    leaders = {0, start}
    calls = []  # calls, returns and indirect branches: fine where start cannot reach them
    for i, (a, t) in enumerate(body):
        target = isa.branch_target(t)
        if target is not None or t.startswith(("EXIT", "RET")) or re.search(r"\bEXIT\b", t):
            leaders.add(i + 1)
            if target is not None and target in index:
                leaders.add(index[target])
        if re.search(r"\b(BRX|JMX|CALL|RET)\b", t):
            calls.append(i)
    starts = sorted(x for x in leaders if x < len(body))
    blocks = {s: (s, (starts[k + 1] if k + 1 < len(starts) else len(body))) for k, s in enumerate(starts)}
    info = {}
    for s, (b, e) in blocks.items():
        use, kill, succ = set(), set(), []
        for i in range(b, e):
            d, u = isa.defs_uses(body[i][1])
            use |= u - kill
            kill |= d
        last = body[e - 1][1]
        target = isa.branch_target(last)
        uncond = (target is not None and not last.startswith("@")) or re.fullmatch(r"EXIT", last)
        if target is not None and target in index:
            succ.append(index[target])
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
