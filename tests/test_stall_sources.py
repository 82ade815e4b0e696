"""benchmarks/probes/stall_sources.py on a hand-written ncu source-page export (no GPU needed)."""
from benchmarks.probes import stall_sources

CSV = '''"Kernel Name","void k(int)",
"Address","Source","stall_long_sb","stall_dispatch","stall_selected"
"0x10","      LEA R2, P0, R4, UR6, 0x2","30","0","5"
"0x20","      FFMA R8, R9, R10, R8","0","12","20"
"0x30","  @P0 FFMA R11, R9, R12, R11","0","4","20"
"0x40","      LDS.128 R12, [R3]","10","0","5"
'''


def test_summary(tmp_path):
    path = tmp_path / "rep.csv"
    path.write_text(CSV)
    kernel, rows = stall_sources.read_rows(str(path))
    assert kernel == "void k(int)"
    total, by_op = stall_sources.summarise(rows)
    assert total["long_sb"] == 40 and total["dispatch"] == 16 and total["selected"] == 50
    assert by_op["FFMA"]["dispatch"] == 16  # the predicated FFMA counts as an FFMA
    assert by_op["LEA"]["long_sb"] == 30 and by_op["LDS.128"]["long_sb"] == 10
