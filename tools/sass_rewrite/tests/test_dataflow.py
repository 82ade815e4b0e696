"""Liveness after the loop."""
import pytest

from sass_rewrite.dataflow import live_after
from sass_rewrite.loop import LoopError


def test_liveness_after_a_point():
    body = [(0x00, "MOV R1, R2"), (0x10, "@P0 BRA 0x40"), (0x20, "IADD3 R3, R4, R5, RZ"),
            (0x30, "EXIT"), (0x40, "STG.E.128 [R6.64], R8"), (0x50, "@P1 MOV R9, RZ"), (0x60, "FADD R10, R9, R11"),
            (0x70, "EXIT")]
    live = live_after(body, 1)
    # Both paths: R4, R5 on the fall-through; the store's address pair and data quad, R9
    # (its guarded write does not kill it) and R11 on the branch.
    assert live == {4, 5, 6, 7, 8, 9, 10, 11}
    assert 3 not in live and 1 not in live


def test_liveness_refuses_a_call_it_can_reach_only():
    body = [(0x00, "@P0 BRA 0x30"), (0x10, "MOV R2, R3"), (0x20, "EXIT"), (0x30, "CALL.REL.NOINC 0x100"),
            (0x40, "EXIT")]
    assert live_after(body, 1) == {3}  # the call is on the other path
    with pytest.raises(LoopError, match="indirect control flow"):
        live_after(body, 0)
