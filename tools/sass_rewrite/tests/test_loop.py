"""A loop's instructions and the loops of a function."""
import pytest
from handmade import ffma, loop_body, node

from sass_rewrite.loop import LoopError, ffma_loops, loops, main_loop_bounds


def test_operand_fields_are_read_and_checked():
    n = ffma(0, 16, 8, 12, 20)
    assert n.kind == "ffma" and [r for *_x, r in n.slot_regs] == [16, 8, 12, 20]
    lds = node(1, "LDS.128 R4, [R15+0x210]", 4 << 16 | 15 << 24)
    assert lds.kind == "lds" and lds.slot_regs == [(16, 4, True, 4), (24, 1, False, 15)]
    with pytest.raises(LoopError, match="field 16"):
        node(2, "LDS.128 R4, [R15+0x210]", 5 << 16 | 15 << 24)  # text and encoding disagree
    with pytest.raises(LoopError, match="no operand table"):
        node(3, "IMAD.MOV.U32 R4, RZ, RZ, R5")


def test_loops_of_a_function():
    body = [(a, t) for a, t, *_w in loop_body()]
    assert loops(body) == [(2, 1, 3)] and main_loop_bounds(body) == (2, 1, 3)
    assert main_loop_bounds(body[:3]) is None
    # An outer loop around the inner one: only the innermost loop with the most FFMAs counts.
    nested = body[:4] + [(0x40, "FFMA R8, R5, R6, R8"), (0x50, "@P1 BRA 0x0"), (0x60, "EXIT")]
    assert loops(nested) == [(2, 1, 3), (3, 0, 5)]
    assert ffma_loops(nested) == [(2, 1, 3)]
