#!/usr/bin/env python3
"""Instruction counts of every loop (a backward branch's span) of each 3xTF32 kernel in the
output of `cuobjdump -sass`, to check the interior loop without a GPU: its HMMA, FADD, LDS,
LDGSTS and BAR per K tile, and that no STL/LDL (spills) sit inside it. The first loop of
each function is the interior (unchecked Fast) loop; spans of several thousand instructions
that cover the others are jumps back across the rare passes, not loops.

    nvcc ... -c csrc/kernels/tf32x3/sgemm_3xtf32.cu -o /tmp/k.o && cuobjdump -sass /tmp/k.o > /tmp/k.sass
    python3 benchmarks/probes/tf32x3/sass_loops.py /tmp/k.sass
"""
import collections
import re
import sys

KINDS = ['HMMA', 'HGMMA', 'WARPGROUP', 'SYNCS', 'UTMALDG', 'FADD', 'FMUL', 'FFMA', 'LDS', 'LDGSTS', 'BAR', 'STL', 'LDL', 'IADD3', 'LOP3', 'IMAD']


def opcode(ins):
    return re.sub(r'^@!?U?P\w+\s+', '', ins).split()[0].split('.')[0]


def main(path):
    text = open(path).read()
    for f in re.split(r'\n\s+Function : ', text)[1:]:
        name = f.split('\n', 1)[0].strip()
        short = re.sub(r'.*Tf32x3ShapeILi(\d+)ELi(\d+)ELi(\d)EEELNS_6LayoutE(\d)ELS4_(\d)ELb(\d).*',
                       r'\1x\2 stages \3, A layout \4, B layout \5, vec4 \6', name)
        lines = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+(.*?);', f)]
        index = {a: i for i, (a, _) in enumerate(lines)}
        total = collections.Counter(opcode(ins) for _, ins in lines)
        print(f'== {short}: {len(lines)} instructions, STL {total["STL"]}, LDL {total["LDL"]}')
        for i, (a, ins) in enumerate(lines):
            m = re.search(r'BRA\s+(?:`\(\.L_x_\d+\)\s*)?(0x[0-9a-f]+)', ins)
            if not m or int(m.group(1), 16) >= a or int(m.group(1), 16) not in index:
                continue
            body = lines[index[int(m.group(1), 16)]:i + 1]
            c = collections.Counter(opcode(b) for _, b in body)
            never = sum(1 for _, b in body if b.startswith('@!PT LDS'))  # padding, never executed
            counts = ' '.join(f'{k} {c[k]}' for k in KINDS if c[k])
            print(f'  loop {int(m.group(1), 16):#x}-{a:#x}: {len(body)} instructions: {counts}'
                  + (f' (of the LDS, {never} @!PT never executed)' if never else ''))


if __name__ == '__main__':
    main(sys.argv[1])
