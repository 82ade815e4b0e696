"""Which schedule of gemv's loop serves one to eight vectors: does keeping a lane's matrix
loads in flight (the next chunks loaded before this round's products), loading every vector
chunk ahead, more chunks in flight, or one row a warp beat the two-row form, whose six and
eight vectors ran 0.63-1.10x torch.matmul where five and seven ran 0.99-1.45x (H100,
docs/history.md step 79), and one vector against a small or narrow matrix 0.72-0.91x? ptxas
issues a lane's matrix loads two by two, each pair after the products of the one before.

An experiment: the build must carry the kernel's switch VECGEMM_GEMV_EXP (the experiment
commit docs/history.md names in step 79), which picks the form at each launch (for one to
four vectors only 1 and 2 differ from 0, each with one row a warp and four chunks): 0 as
built, for five to eight vectors two rows a warp, two chunks of each in flight (the form of
02912e4); 1 the same with the next round's matrix chunks loaded before this round's
products; 2 every vector chunk loaded before the products; 3 two rows, four chunks each; 4
one row a warp, four chunks; 5 one row, four chunks, the next round's loaded ahead; 6 two
rows, one chunk each, the next loaded ahead. For each product (V x rows x K in rc, the
vectors A's rows): torch.matmul's time, then each form's (do_bench median, L2 cleared), a
`!` where its relative error against float64 exceeds 5e-7. Needs a GPU.

    python -m benchmarks.probes.gemv_schedules [--vectors 1,4,5,6,7,8]
"""
from __future__ import annotations

import argparse
import os

import torch

import torch_vecgemm
from benchmarks.common import make_operands, time_ms
from benchmarks.sweep import relative_error

FORMS = {0: "R2 U2", 1: "R2 U2 ahead", 2: "R2 U2 vectors first", 3: "R2 U4", 4: "R1 U4", 5: "R1 U4 ahead",
         6: "R2 U1 ahead"}
MATRICES = [(4096, 4096), (768, 3072), (3072, 768), (11008, 4096), (50257, 768), (768, 768), (300, 4096),
            (16, 65536), (1024, 16384)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", default="1,4,5,6,7,8")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("gemv_schedules times CUDA kernels; no CUDA device here")
    print(torch.cuda.get_device_name(), "| forms:", " | ".join(f"{e} {name}" for e, name in FORMS.items()))
    for rows, k in MATRICES:
        for v in (int(x) for x in args.vectors.split(",")):
            A, B = make_operands(v, rows, k, "rc", "cuda", seed=5)
            exact = A.double() @ B.double()
            torch_ms = time_ms(lambda: torch.matmul(A, B))
            cells = []
            for form in FORMS:
                os.environ["VECGEMM_GEMV_EXP"] = str(form)
                err = relative_error(torch_vecgemm.mm(A, B), exact)
                ms = time_ms(lambda: torch_vecgemm.mm(A, B))
                cells.append(f"{ms * 1e3:6.1f}{'!' if err > 5e-7 else ' '}")
            print(f"{v} x {rows} x {k}: torch {torch_ms * 1e3:6.1f} us | " + " ".join(cells))
    os.environ.pop("VECGEMM_GEMV_EXP", None)


if __name__ == "__main__":
    main()
