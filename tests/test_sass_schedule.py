"""benchmarks/sass_schedule.py on hand-made instructions (no GPU, no cuobjdump needed)."""
from collections import Counter

from benchmarks import sass_schedule as ss

CTRL = 0x7F1  # stall 1, yield, no scoreboards set, no wait, no reuse


def ffma(addr, d, a, b, c, wait=0):
    lo = 0x7223 | d << 16 | a << 24 | b << 32
    hi = c | (CTRL | wait << 11) << 41
    return ss.Instr(addr, f"FFMA R{d}, R{a}, R{b}, R{c}", lo, hi)


def other(addr, text):
    return ss.Instr(addr, text, 0, CTRL << 41)


def loop_body():
    """A loop: 6 FFMAs, an LDS, 2 FFMAs of which the first waits on it, the back branch."""
    body = [ffma(0x00, 16, 8, 12, 16), ffma(0x10, 17, 9, 13, 17), ffma(0x20, 18, 8, 13, 18),
            ffma(0x30, 19, 9, 12, 19), ffma(0x40, 20, 10, 12, 16), ffma(0x50, 21, 11, 13, 21),
            other(0x60, "LDS.128 R8, [R2]"), ffma(0x70, 22, 8, 12, 22, wait=1), ffma(0x80, 23, 9, 13, 23),
            other(0x90, "@P0 BRA 0x0")]
    return body


def test_fields_and_encode():
    ins = ffma(0, 16, 8, 12, 20, wait=2)
    assert (ins.d, ins.a, ins.b, ins.c) == (16, 8, 12, 20) and ins.ffma
    assert ins.wait == 2 and ins.barriers == (7, 7)
    host = ffma(0, 1, 2, 3, 4)  # the position whose control bits are kept
    lo, hi = ss.encode(ins, True, host, 0b11)
    moved = ss.Instr(0, "FFMA R16, R12, R8, R20", lo, hi)
    assert (moved.d, moved.a, moved.b, moved.c) == (16, 12, 8, 20)
    assert moved.wait == 0 and (moved.ctrl >> 17) & 0xF == 0b11


def test_runs_split_at_waits_and_other_instructions():
    body = loop_body()
    [(head, end)] = ss.loops(body)
    assert (head, end) == (0, 9)
    assert ss.runs(body, head, end) == [[[0, 1, 2, 3, 4, 5]], [[7, 8]]]
    body[3] = ffma(0x30, 19, 9, 12, 19, wait=4)
    assert ss.runs(body, head, end)[0] == [[0, 1, 2], [3, 4, 5]]


def test_reuse_flags():
    # (d, a, b). FFMA 0: R12 (slot 1) is read next; R8 (slot 0) is read again by FFMA 3,
    # but FFMA 2 writes R8 first. FFMA 1: R9 is read by FFMA 2 in slot 0; R12 by FFMA 3 in
    # slot 1, FFMA 2's R13 (bank 1) in between does not displace it.
    assert ss.reuse_flags([(16, 8, 12), (17, 9, 12), (8, 9, 13), (18, 8, 12)]) == [0b10, 0b11, 0, 0]


def test_schedule_keeps_dependencies_and_lowers_conflicts():
    body = loop_body()
    seg = [0, 1, 2, 3, 4, 5]  # FFMA 4 reads R16, written by FFMA 0: four positions apart
    early, late = {i: 0 for i in seg}, {i: len(seg) - 1 for i in seg}
    order, _ = ss.schedule(body, seg, early, late, "min2")
    pos = {i: p for p, (i, _) in enumerate(order)}
    assert sorted(pos) == seg
    assert pos[4] - pos[0] >= min(4, ss.FFMA_LAT)

    def conflicts(seq):
        cache, n = {}, 0
        for i, sw in seq:
            a, b = (body[i].b, body[i].a) if sw else (body[i].a, body[i].b)
            rf = [r % 2 for s, r in ((0, a), (1, b)) if cache.get((s, r % 2)) != r] + [body[i].c % 2]
            n += len(rf) - len(set(rf))
            cache[(0, a % 2)], cache[(1, b % 2)] = a, b
        return n

    assert conflicts(order) <= conflicts([(i, False) for i in seg])
    # A member that must stay last (late bound from outside the segment) stays last.
    late[5] = early[5] = len(seg) - 1
    order, _ = ss.schedule(body, seg, early, late, "min2")
    assert order[-1][0] == 5


def test_patch_function_permutes_and_keeps_control_by_position():
    body = loop_body()
    stats = Counter()
    changes = ss.patch_function(body, "min2", stats)
    # the loop has fewer than 64 FFMAs: nothing is touched
    assert changes == {} and stats["ffma"] == 0
    big = [ffma(16 * i, 32 + i, 8 + i % 4, 12 + i // 4 % 4, 32 + i) for i in range(64)]
    big += [other(16 * 64, "LDS.128 R8, [R2]"), ffma(16 * 65, 100, 8, 12, 100, wait=1),
            other(16 * 66, "@P0 BRA 0x0")]
    changes = ss.patch_function(big, "min2", stats)
    assert stats["ffma"] == 65
    rewritten = {i: ss.Instr(big[i].addr, "", *changes.get(i, (big[i].lo, big[i].hi))) for i in range(65)}
    for i in range(65):
        ins = ss.Instr(0, "", rewritten[i].lo, rewritten[i].hi)
        assert (ins.ctrl & ~(0xF << 17)) == (big[i].ctrl & ~(0xF << 17))  # control bits stay put
    old = Counter((big[i].lo & 0xFF << 16, frozenset({(big[i].lo >> 24) & 0xFF, (big[i].lo >> 32) & 0xFF}))
                  for i in range(65) if i != 64)
    new = Counter((rewritten[i].lo & 0xFF << 16,
                   frozenset({(rewritten[i].lo >> 24) & 0xFF, (rewritten[i].lo >> 32) & 0xFF}))
                  for i in range(65) if i != 64)
    assert old == new  # a permutation of the same FFMAs (operands possibly swapped)
    assert changes[65][0] == big[65].lo  # the waiting FFMA is alone in its segment
