"""Instruction words: branch offsets, register fields, control bits, effects."""
from sass_rewrite import isa


def test_branch_offsets_as_ptxas_encodes_them():
    # Two branches of a ptxas loop: +0x110 bytes past the next instruction, and -0x45c0.
    fwd = (0x444947, 0x3800000)
    back = (0xFFFFFFB800908947, 0x383FFFF)
    assert isa.branch_offset(*fwd) * 4 == 0x110
    assert isa.branch_offset(*back) * 4 == -0x45C0
    for lo, hi in (fwd, back):
        assert isa.set_branch_offset(lo, hi, isa.branch_offset(lo, hi)) == (lo, hi)
    lo, hi = isa.set_branch_offset(*fwd, -3)
    assert isa.branch_offset(lo, hi) == -3 and lo & 0xFFFF == fwd[0] & 0xFFFF


def test_register_fields_and_control_bits():
    lo, hi = 0x7223 | 16 << 16 | 8 << 24 | 12 << 32, 20 | 0x7F1 << 41
    assert [isa.field(lo, hi, f) for f in (16, 24, 32, 64)] == [16, 8, 12, 20]
    lo2, hi2 = isa.set_field(lo, hi, 64, 99)
    assert lo2 == lo and isa.field(lo2, hi2, 64) == 99 and hi2 >> 41 == 0x7F1
    lo3, hi3 = isa.set_field(lo, hi, 24, 7)
    assert hi3 == hi and isa.field(lo3, hi3, 24) == 7 and isa.field(lo3, hi3, 16) == 16
    ctrl = 3 | 1 << 4 | 2 << 5 | 7 << 8 | 0b101 << 11
    assert (isa.stall(ctrl), isa.write_scoreboard(ctrl), isa.wait_mask(ctrl)) == (3, 2, 0b101)
    assert isa.with_ctrl(hi, ctrl) >> 41 == ctrl and isa.with_ctrl(hi, ctrl) & 0xFF == 20


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
        _op, w, r = isa.effects(text)
        assert (w, r) == (written, read), text


def test_liveness_reads_and_writes():
    # A guarded write is not certain (no def); a store reads its data as wide as the store.
    assert isa.defs_uses("@P1 MOV R9, RZ") == (set(), set())
    assert isa.defs_uses("STG.E.128 [R6.64], R8") == (set(), {6, 7, 8, 9, 10, 11})
    assert isa.defs_uses("LDS.128 R12, [R4+0x10]") == ({12, 13, 14, 15}, {4})
