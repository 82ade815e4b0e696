"""The SASS checks of benchmarks/ffma_banks.py on a hand-written loop (no GPU needed)."""
from benchmarks import ffma_banks

# One LDS.128 and four FFMAs. FFMA 1 reads all three sources and keeps R8 (slot 0) and
# R12 (slot 1) in the reuse cache; FFMA 2 takes R8 from it, FFMA 3 takes R12; FFMA 4 reads
# all three again. Register banks (mod 2) of the register-file reads: FFMA 1 {0, 0, 0},
# 2 {1, 0}, 3 {1, 0}, 4 {1, 0, 0}; mod 4: {0, 0, 0}, {1, 2}, {1, 0}, {3, 2, 0}.
LISTING = """
        Function : kernel
        /*0000*/                   LDS.128 R12, [R2] ;
        /*0010*/                   FFMA R16, R8.reuse, R12.reuse, R16 ;
        /*0020*/                   FFMA R18, R8, R13, R18 ;
        /*0030*/                   FFMA R20, R9, R12, R20 ;
        /*0040*/                   FFMA R24, R11, R14, R24 ;
        /*0050*/               @P0 BRA 0x0 ;
"""


def test_main_loop_statistics():
    [(name, body)] = ffma_banks.functions(LISTING)
    assert name == "kernel"
    loop = ffma_banks.main_loop(body)
    assert len(loop) == 6
    total, reads, conflicts = ffma_banks.ffma_stats(loop, banks=2)
    assert total == 4
    assert reads == {3: 2, 2: 2}
    assert conflicts == 2
    assert ffma_banks.ffma_stats(loop, banks=4)[2] == 1
    assert ffma_banks.lds_distances(loop) == [1]  # R12 is read by the next instruction
