"""benchmarks/sass_loop.py on hand-made instructions and listings (no GPU, no cuobjdump)."""
from benchmarks import sass_loop as sl

CTRL = 0x7F1  # stall 1, yield, no scoreboards set, no wait, no reuse


def ffma(idx, d, a, b, c):
    return sl.Node(idx, 0x10 * idx, f"FFMA R{d}, R{a}, R{b}, R{c}", 0x7223 | d << 16 | a << 24 | b << 32, c | CTRL << 41)


def node(idx, text, lo=0, hi=CTRL << 41):
    return sl.Node(idx, 0x10 * idx, text, lo, hi)


def test_branch_offsets_as_ptxas_encodes_them():
    # Two branches of a ptxas loop: +0x110 bytes past the next instruction, and -0x45c0.
    fwd = (0x444947, 0x3800000)
    back = (0xFFFFFFB800908947, 0x383FFFF)
    assert sl.branch_offset(*fwd) * 4 == 0x110
    assert sl.branch_offset(*back) * 4 == -0x45C0
    for lo, hi in (fwd, back):
        assert sl.set_branch_offset(lo, hi, sl.branch_offset(lo, hi)) == (lo, hi)
    lo, hi = sl.set_branch_offset(*fwd, -3)
    assert sl.branch_offset(lo, hi) == -3 and lo & 0xFFFF == fwd[0] & 0xFFFF


def test_operand_fields_are_read_and_checked():
    n = ffma(0, 16, 8, 12, 20)
    assert n.kind == "ffma" and [r for *_x, r in n.slot_regs] == [16, 8, 12, 20]
    lds = node(1, "LDS.128 R4, [R15+0x210]", 4 << 16 | 15 << 24)
    assert lds.kind == "lds" and lds.slot_regs == [(16, 4, True, 4), (24, 1, False, 15)]
    try:
        node(2, "LDS.128 R4, [R15+0x210]", 5 << 16 | 15 << 24)  # text and encoding disagree
        raise AssertionError("accepted a field that does not hold its register")
    except sl.LoopError:
        pass
    try:
        node(3, "IMAD R4, R5, R6, RZ")
        raise AssertionError("accepted an instruction without an operand table")
    except sl.LoopError:
        pass


def test_ffma_order_visits_every_cell_once_and_uses_the_cache():
    # A 2 x 4 outer product: a in banks 0, 1; b in banks 0, 1, 0, 1; accumulators alternate.
    cells = [(i % 2, j % 2, (i + j) % 2, ("a", i), ("b", j)) for i in range(2) for j in range(4)]
    order, cost = sl.ffma_order(cells, beam=16)
    assert sorted(k for k, _sw in order) == list(range(len(cells)))
    # Without any reuse every FFMA reads three registers: the order must do better.
    assert cost < 8 * (100 + 3)
    one_entry, cost1 = sl.ffma_order(cells, beam=16, per_bank=False)
    assert sorted(k for k, _sw in one_entry) == list(range(len(cells))) and cost1 >= cost


def test_reuse_flags_follow_slot_and_bank_and_stop_at_slot_readers():
    seq = [ffma(0, 40, 8, 12, 40), ffma(1, 41, 9, 12, 41), ffma(2, 42, 8, 13, 42),
           node(3, "LDS.128 R4, [R15+0x210]", 4 << 16 | 15 << 24), ffma(4, 43, 8, 13, 43)]
    ops = {n.idx: tuple(r for *_x, r in n.slot_regs) for n in seq if n.kind == "ffma"}
    bits = sl.reuse_bits(seq, ops, boundaries={0})
    # R8 (slot a, bank 0): the next slot-a bank-0 read is R8 at 2 -> kept; R9 at 1 is bank 1.
    assert bits[0] & 1
    # R12 (slot b) is read again by 1: kept; 1's R12 is followed by R13 (bank 1) then nothing in bank 0.
    assert bits[0] & 2 and not bits[1] & 2
    # The LDS reads slot a (its address): R8 is not kept across it; slot b (R13) is.
    assert not bits[2] & 1 and bits[2] & 2
    # With one entry per slot R12 at 0 is still kept (1 reads it next), R8 at 0 is not (1 reads R9).
    single = sl.reuse_bits(seq, ops, boundaries={0}, per_bank=False)
    assert single[0] == 0b10
    # A branch target between two readers clears the cache: 0's R12 is not kept for 1.
    assert not sl.reuse_bits(seq, ops, boundaries={0, 1})[0] & 2


def test_liveness_after_a_point():
    body = [(0x00, "MOV R1, R2"), (0x10, "@P0 BRA 0x40"), (0x20, "IADD3 R3, R4, R5, RZ"),
            (0x30, "EXIT"), (0x40, "STG.E.128 [R6.64], R8"), (0x50, "@P1 MOV R9, RZ"), (0x60, "FADD R10, R9, R11"),
            (0x70, "EXIT")]
    live = sl.live_after(body, 1)
    # Both paths: R4, R5 on the fall-through; the store's address pair and data quad, R9
    # (its guarded write does not kill it) and R11 on the branch.
    assert live == {4, 5, 6, 7, 8, 9, 10, 11}
    assert 3 not in live and 1 not in live


def test_reuse_flag_not_kept_across_a_write_of_the_register():
    # Slot b: R13 read, then an LDS loads R12-R15 (its address in slot a only), then R13
    # read again: the second read wants the new value, so the first must not keep R13.
    seq = [ffma(0, 40, 8, 13, 40), node(1, "LDS.128 R12, [R4+0x10]", 12 << 16 | 4 << 24), ffma(2, 41, 8, 13, 41)]
    ops = {n.idx: tuple(r for *_x, r in n.slot_regs) for n in seq if n.kind == "ffma"}
    written = lambda n: {r + k for _f, w, d, r in n.slot_regs if d for k in range(w)}  # noqa: E731
    assert sl.reuse_bits(seq, ops, boundaries={0})[0] & 2  # the rule without writes: kept
    assert not sl.reuse_bits(seq, ops, boundaries={0}, written=written)[0] & 2


def loop_body():
    """(address, text, lo, hi) of a function whose loop is two FFMAs and a back branch."""
    texts = ["MOV R1, c[0x0][0x28]", "FFMA R4, R5, R6, R4", "FFMA R7, R5, R6, R7", "@!P0 BRA 0x10", "EXIT"]
    return [(0x10 * i, t, 0x100 + i, CTRL << 41) for i, t in enumerate(texts)]


def test_fingerprint_is_the_loops_instruction_words():
    body = loop_body()
    fp = sl.fingerprint(body)
    outside = [body[0][:2] + (0x999, body[0][3])] + body[1:]
    assert sl.fingerprint(outside) == fp
    inside = body[:2] + [body[2][:2] + (0x999, body[2][3])] + body[3:]
    assert sl.fingerprint(inside) != fp
    assert sl.fingerprint(body[:3]) is None  # no back branch, no loop


def test_rewrite_library_only_touches_validated_loops(monkeypatch, tmp_path):
    import struct

    body = loop_body()
    data = bytearray(0x10 * len(body))
    for addr, _t, lo, hi in body:
        struct.pack_into("<QQ", data, addr, lo, hi)
    lib, out = tmp_path / "lib.so", tmp_path / "out.so"
    lib.write_bytes(bytes(data))
    lines = [(addr, text) for addr, text, *_w in body]
    monkeypatch.setattr(sl, "functions_in", lambda d, pattern: [(0, len(d), "f", 0, len(d), lines)])
    fp = sl.fingerprint(body)
    status = sl.rewrite_library(str(lib), str(out), fingerprints={"0" * 16: "1" * 16})
    assert status == {"f, loop at 0x10": f"left alone (loop {fp} is not a validated ptxas output)"}
    assert sl.rewrite_library(str(lib), str(out), fingerprints={"0" * 16: fp}) == {"f, loop at 0x10": "rewritten already"}
    assert not out.exists() and lib.read_bytes() == bytes(data)


def test_effects_of_kept_instructions():
    cases = {
        "IADD3 R6, P0, R12, UR20, RZ": ({"R6", "P0"}, {"R12", "UR20"}),
        "IADD3.X R7, R11, UR21, RZ, P0, !PT": ({"R7"}, {"R11", "UR21", "P0"}),
        "ISETP.GE.AND P0, PT, R1, R2, PT": ({"P0"}, {"R1", "R2"}),
        "PLOP3.LUT P4, PT, PT, PT, UP0, 0x80, 0x0": ({"P4"}, {"UP0"}),
        "@!P0 BRA 0x1900": (set(), {"P0"}),
        "STS.128 [R4], R56": (set(), {"R4", "R56", "R57", "R58", "R59"}),
        "LDG.E.128.CONSTANT R64, desc[UR22][R16.64]": ({"R64", "R65", "R66", "R67"}, {"UR22", "R16", "R17"}),
        "FFMA R4, R5.reuse, R6, R4": ({"R4"}, {"R5", "R6", "R4"}),
    }
    for text, (written, read) in cases.items():
        _op, w, r = sl.effects(text)
        assert (w, r) == (written, read), text


def test_latency_check_holds_the_new_loop_to_ptxas_distances():
    # A loop whose exit predicate ptxas writes 14 cycles before the back branch reads it.
    texts = ["MOV R1, c[0x0][0x28]", "PLOP3.LUT P1, PT, PT, PT, UP0, 0x80, 0x0", "FFMA R4, R5, R6, R4",
             "@!P1 BRA 0x10", "EXIT"]
    stalls = [2, 13, 1, 1, 1]
    body = [(0x10 * i, t, 0, (CTRL & ~0xF | s) << 41) for i, (t, s) in enumerate(zip(texts, stalls))]
    rewritten = lambda plop3_stall: [(0x10, texts[1], CTRL & ~0xF | plop3_stall), (0x20, texts[2], CTRL),
                                     (0x30, texts[3], CTRL)]
    assert sl.latency_violations(body, 1, 3, rewritten(13)) == []
    bad = sl.latency_violations(body, 1, 3, rewritten(12))
    assert {(kind, cycles, need, where) for _path, kind, cycles, need, where in bad} >= {
        (("PLOP3", "BRA", "P"), 13, 14, "loop")}


def test_latency_check_wants_a_wait_on_a_variable_latency_result():
    # The loop loads R8 (write scoreboard 3); the FFMA reading it must wait on scoreboard 3,
    # however far away it is.
    texts = ["MOV R1, c[0x0][0x28]", "LDS.128 R8, [R2]", "FFMA R4, R8, R6, R4", "@!P1 BRA 0x10", "EXIT"]
    sets_sb3 = CTRL & ~(7 << 5) | 3 << 5
    waits_sb3 = CTRL | 1 << 3 << 11
    body = [(0x10 * i, t, 0, c << 41) for i, (t, c) in enumerate(zip(texts, [CTRL, sets_sb3, waits_sb3, CTRL, CTRL]))]
    far = CTRL & ~0xF | 11
    assert sl.latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 2), (0x20, texts[2], waits_sb3),
                                              (0x30, texts[3], CTRL)]) == []
    bad = sl.latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 11), (0x20, texts[2], far), (0x30, texts[3], CTRL)])
    assert (("LDS", "FFMA", "R"), 11, "a wait", "loop") in {(k, c, n, w) for _p, k, c, n, w in bad}
    # A wait one cycle after the load does not see its scoreboard yet (step 26): not a wait.
    soon = sl.latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 1), (0x20, texts[2], waits_sb3),
                                              (0x30, texts[3], CTRL)])
    assert (("LDS", "FFMA", "R"), 1, "a wait", "loop") in {(k, c, n, w) for _p, k, c, n, w in soon}


def test_boundary_pads_keep_the_code_before_the_loop_away_from_its_first_reads():
    # ptxas zeroes R4 7 cycles before its loop reads it (3 + 3 + 1); the new loop reads R4
    # in its first FFMA, 6 cycles after, so the instruction before the loop waits one cycle
    # longer. Padding inside the loop would cost every iteration; before it, once.
    texts = ["CS2R R4, SRZ", "MOV R1, c[0x0][0x28]", "FFMA R7, R5, R6, R7", "FFMA R4, R5, R6, R4", "@!P1 BRA 0x20",
             "EXIT"]
    stalls = [3, 3, 1, 1, 1, 1]
    body = [(0x10 * i, t, 0, (CTRL & ~0xF | s) << 41) for i, (t, s) in enumerate(zip(texts, stalls))]
    new = [(0x20, texts[3], CTRL), (0x30, texts[2], CTRL), (0x40, texts[4], CTRL)]
    assert [b[1:] for b in sl.latency_violations(body, 2, 4, new)] == [(("CS2R", "FFMA", "R"), 6, 7, "entry")] * 2
    assert sl.boundary_pads(body, 2, 4, new) == {1: 4}
    assert sl.latency_violations(body, 2, 4, new, {1: 4}) == []