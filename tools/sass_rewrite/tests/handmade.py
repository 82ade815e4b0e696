"""Hand-made instructions, loops and listings for the tests."""
import json
import struct

from sass_rewrite.loop import Node
from sass_rewrite.validated import DATA

CTRL = 0x7F1  # stall 1, yield, no scoreboards set, no wait, no reuse

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


def ffma(idx, d, a, b, c):
    return Node(idx, 0x10 * idx, f"FFMA R{d}, R{a}, R{b}, R{c}", 0x7223 | d << 16 | a << 24 | b << 32, c | CTRL << 41)


def node(idx, text, lo=0, hi=CTRL << 41):
    return Node(idx, 0x10 * idx, text, lo, hi)


def loop_body():
    """(address, text, lo, hi) of a function whose loop is two FFMAs and a back branch."""
    texts = ["MOV R1, c[0x0][0x28]", "FFMA R4, R5, R6, R4", "FFMA R7, R5, R6, R7", "@!P0 BRA 0x10", "EXIT"]
    return [(0x10 * i, t, 0x100 + i, CTRL << 41) for i, t in enumerate(texts)]


def code(body):
    """The bytes of a function body: its instruction words at their addresses."""
    data = bytearray(0x10 * len(body))
    for addr, _t, lo, hi in body:
        struct.pack_into("<QQ", data, addr, lo, hi)
    return bytes(data)


def validated_file(tmp_path, change):
    """The path of a copy of validated.json that `change` (a function of its JSON) edited."""
    with open(DATA) as f:
        raw = json.load(f)
    change(raw)
    path = tmp_path / "validated.json"
    path.write_text(json.dumps(raw))
    return str(path)
