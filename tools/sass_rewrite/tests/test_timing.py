"""The timing check against ptxas' distances, and padding around the loop."""
from handmade import CTRL

from sass_rewrite.timing import boundary_pads, latency_violations


def test_latency_check_holds_the_new_loop_to_ptxas_distances():
    # A loop whose exit predicate ptxas writes 14 cycles before the back branch reads it.
    texts = ["MOV R1, c[0x0][0x28]", "PLOP3.LUT P1, PT, PT, PT, UP0, 0x80, 0x0", "FFMA R4, R5, R6, R4",
             "@!P1 BRA 0x10", "EXIT"]
    stalls = [2, 13, 1, 1, 1]
    body = [(0x10 * i, t, 0, (CTRL & ~0xF | s) << 41) for i, (t, s) in enumerate(zip(texts, stalls))]
    rewritten = lambda plop3_stall: [(0x10, texts[1], CTRL & ~0xF | plop3_stall), (0x20, texts[2], CTRL),  # noqa: E731
                                     (0x30, texts[3], CTRL)]
    assert latency_violations(body, 1, 3, rewritten(13)) == []
    bad = latency_violations(body, 1, 3, rewritten(12))
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
    assert latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 2), (0x20, texts[2], waits_sb3),
                                           (0x30, texts[3], CTRL)]) == []
    bad = latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 11), (0x20, texts[2], far),
                                          (0x30, texts[3], CTRL)])
    assert (("LDS", "FFMA", "R"), 11, "a wait", "loop") in {(k, c, n, w) for _p, k, c, n, w in bad}
    # A wait one cycle after the load does not see its scoreboard yet: not a wait.
    soon = latency_violations(body, 1, 3, [(0x10, texts[1], sets_sb3 & ~0xF | 1), (0x20, texts[2], waits_sb3),
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
    assert [b[1:] for b in latency_violations(body, 2, 4, new)] == [(("CS2R", "FFMA", "R"), 6, 7, "entry")] * 2
    assert boundary_pads(body, 2, 4, new) == {1: 4}
    assert latency_violations(body, 2, 4, new, {1: 4}) == []
