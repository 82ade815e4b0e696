"""One-off (measured at e3ce594 on the H200, not kept): where a handed product's host time
goes, layer by layer: torch.mm, the lenient op through _C.gemm, the boxed op, tv.mm; and
our kernel path's host time beside them. python -m benchmarks.probes.handed_host_time"""
import statistics, torch, torch_vecgemm as tv
from benchmarks.host_overhead import per_call_us
from benchmarks.common import torch_handoff
g = torch.Generator(device="cuda").manual_seed(0)
A = torch.randn(1523, 24, device="cuda", generator=g); B = torch.randn(24, 1290, device="cuda", generator=g)
a = torch.randn(64, 64, device="cuda", generator=g); b = torch.randn(64, 64, device="cuda", generator=g)
print(tv.plan(A, B))
op = torch.ops.vecgemm.gemm.default
paths = {
    "torch.mm (handed shape)": lambda: torch.mm(A, B),
    "tv.mm (handed)": lambda: tv.mm(A, B),
    "_C.gemm (handed)": lambda: tv._C.gemm(A, B, None, 1.0, 0.0, "auto"),
    "torch.ops.vecgemm.gemm (handed)": lambda: op(A, B, None, 1.0, 0.0, "auto"),
    "torch.mm 64^3": lambda: torch.mm(a, b),
    "tv.mm 64^3 (kernel)": lambda: tv.mm(a, b),
    "_C.gemm 64^3 (kernel)": lambda: tv._C.gemm(a, b, None, 1.0, 0.0, "auto"),
}
with torch_handoff(False):
    off = lambda: tv.mm(A, B)
    for _ in range(50): off()
    k = statistics.median(per_call_us(off, 100) for _ in range(15))
for fn in paths.values():
    for _ in range(50): fn()
res = {n: [] for n in paths}
for _ in range(15):
    for n, fn in paths.items():
        res[n].append(per_call_us(fn, 100))
for n, v in res.items():
    print(f"{n:<36} {statistics.median(v):6.2f} us")
print(f"{'tv.mm (hand-off off: kernels)':<36} {k:6.2f} us")
