"""The SASS analyses: the main loop's banks and reuse, and the instruction counts."""
from collections import Counter

from handmade import LISTING

from sass_rewrite import analysis
from sass_rewrite.cubin import parse_listing


def test_main_loop_statistics():
    [(name, body)] = parse_listing(LISTING)
    assert name == "kernel"
    loop = analysis.main_loop(body)
    assert len(loop) == 6
    total, reads, conflicts = analysis.ffma_stats(loop, banks=2)
    assert total == 4
    assert reads == {3: 2, 2: 2}
    assert conflicts == 2
    assert analysis.ffma_stats(loop, banks=4)[2] == 1
    assert analysis.lds_distances(loop) == [1]  # R12 is read by the next instruction
    lines = analysis.bank_report(name, body, 2)
    assert lines[0] == "kernel" and "4 FFMA" in lines[1] and "50%" in lines[2] and "min 1" in lines[3]


def test_instruction_categories_and_table():
    assert [analysis.category(op) for op in ("LDS.U.128", "LDG.E.64.CONSTANT", "STS", "FFMA", "BAR.SYNC")] == [
        "LDS.128", "LDG.64", "STS.32", "FFMA", "BAR"]
    name = ("_ZN7vecgemm11sgemm_tiledINS_11KernelShapeINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16EEENS_14"
            "MainloopPolicyILi2ELb1ELb0ELi12EEEEELNS_6LayoutE1ELS7_0ELi4ELb0EEEvNS_10GemmParamsE")
    assert analysis.demangle_short(name) == "tiled 128x128x8 w64x64 t8x16 minb2 prefetch pin12 cr vec4"
    header, row = analysis.count_table([("k", Counter({"FFMA": 7, "LDS.128": 2}))])
    assert header.split()[:3] == ["kernel", "FFMA", "LDS.128"] and row.split()[:3] == ["k", "7", "2"]
