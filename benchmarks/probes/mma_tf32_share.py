"""What share of the GPU's mma.sync TF32 peak do the 3xTF32 mma.sync rows reach, and what
ratio to SGEMM does that share predict on an A100-class GPU (issue 40, item 4)?

The mma.sync rows are what every GPU from sm_80 to sm_89 runs (A100, L4, L40, RTX 30xx and
40xx); only the H200 is here. So the probe measures, on this GPU:
- the mma.sync TF32 peak: a kernel whose warps issue nothing but independent
  `mma.sync.m16n8k8` TF32 products from registers (no memory traffic), timed whole;
- each mma.sync 3xTF32 row forced by name at M = N = K (4096 by default) through the strict
  op, and torch.matmul fp32 on the same operands (`benchmarks.common.time_ms`: median, L2
  cleared); a row's tensor work is three TF32 products, 3 x 2 M N K operations;
and prints each row's share of the peak. Carried to another GPU, a row at the same share of
that GPU's TF32 peak runs share x peak / 3 in fp32-equivalent FLOP/s; against SGEMM at the
efficiency cuBLAS reaches here (torch.matmul's TFLOP/s over this GPU's fp32 peak), that is
the predicted ratio. The A100's figures are its datasheet's (SXM: 156 TFLOP/s dense TF32,
19.5 fp32). A prediction, not a measurement: the share moves with what the kernel waits on
(shared memory and L2 against the tensor pipe), whose balance differs between GPUs.

    python -m benchmarks.probes.mma_tf32_share [--size 4096]

Needs a GPU of sm_80 or newer and compiles its peak kernel at first use (about a minute).
"""
from __future__ import annotations

import argparse
import sys

import torch

import torch_vecgemm
from benchmarks.common import machine_info, make_operands, tf32_allowed, time_ms

# Datasheet figures of the GPU the share is carried to: (name, dense TF32 TFLOP/s, fp32 TFLOP/s).
TARGETS = [("A100 SXM", 156.0, 19.5)]
# One m16n8k8 product: 2 x 16 x 8 x 8 operations a warp.
MMA_OPS = 2 * 16 * 8 * 8
CHAINS, WARPS, ITERS = 8, 8, 4096

PEAK_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

// Each warp runs CHAINS independent accumulators through ITERS rounds of m16n8k8 TF32 mma.sync,
// its fragments in registers: the tensor pipe's issue rate, nothing else.
template <int CHAINS>
__global__ void mma_tf32_loop(float* out, int iters) {
  float acc[CHAINS][4] = {};
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = __float_as_uint(1e-3f * (threadIdx.x + i));
  for (int i = 0; i < 2; ++i) b[i] = __float_as_uint(1e-3f * (threadIdx.x - i));
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float sum = 0.f;
  for (int c = 0; c < CHAINS; ++c)
    for (int j = 0; j < 4; ++j) sum += acc[c][j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the products live
}

void mma_tf32_peak(torch::Tensor out, int64_t blocks, int64_t threads, int64_t iters) {
  mma_tf32_loop<%CHAINS%><<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.data_ptr<float>(), int(iters));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""


def peak_kernel():
    from torch.utils.cpp_extension import load_inline

    declaration = "void mma_tf32_peak(torch::Tensor out, int64_t blocks, int64_t threads, int64_t iters);"
    return load_inline(name="vecgemm_mma_tf32_peak", cpp_sources=declaration,
                       cuda_sources=PEAK_SOURCE.replace("%CHAINS%", str(CHAINS)), functions=["mma_tf32_peak"],
                       extra_cuda_cflags=["-O3"], verbose=False)


def measured_peak_tflops(module, sms):
    """The mma.sync TF32 rate with every SM full of warps issuing nothing else."""
    blocks, threads = 4 * sms, 32 * WARPS
    out = torch.empty(blocks * threads, device="cuda")
    ms = time_ms(lambda: module.mma_tf32_peak(out, blocks, threads, ITERS))
    ops = blocks * WARPS * ITERS * CHAINS * MMA_OPS
    return ops / (ms * 1e-3) / 1e12


def predicted_ratio(share, tf32_peak, fp32_peak, sgemm_efficiency):
    """3xTF32 against SGEMM on a GPU of those peaks: the row at `share` of the TF32 peak (three
    products an fp32 product) against SGEMM at `sgemm_efficiency` of the fp32 peak."""
    return share * tf32_peak / 3.0 / (sgemm_efficiency * fp32_peak)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.probes.mma_tf32_share", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("the probe times the tensor cores and there is no GPU here")
    info = machine_info()  # SMs, and the fp32 peak at the GPU's top clock (nvidia-smi's)
    peak = measured_peak_tflops(peak_kernel(), info["sms"])
    print(f"{info['gpu']}: mma.sync m16n8k8 TF32 peak, measured: {peak:.1f} TFLOP/s")
    n = args.size
    A, B = make_operands(n, n, n, "rr", "cuda", seed=n)
    flops = 2.0 * n * n * n
    with tf32_allowed(False):
        torch_tflops = flops / (time_ms(lambda: torch.matmul(A, B)) * 1e-3) / 1e12
    efficiency = torch_tflops / info["fp32_peak_tflops"]
    print(f"torch.matmul fp32 at {n}^3: {torch_tflops:.1f} TFLOP/s, {efficiency:.0%} of the fp32 peak "
          f"({info['fp32_peak_tflops']:.1f} TFLOP/s at {info['max_sm_clock_ghz']:.2f} GHz)")
    rows = [v for v in torch_vecgemm.variants() if v.startswith("tf32x3_") and v.endswith("_mma")]
    for row in rows:
        if torch_vecgemm.fallback_reason(A, B, variant=row, precision="3xtf32") is not None:
            continue
        ms = time_ms(lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, row, "3xtf32"))
        tflops = flops / (ms * 1e-3) / 1e12
        share = 3 * tflops / peak
        line = f"{row:<24} {tflops:6.1f} TFLOP/s fp32-equivalent, {tflops / torch_tflops:.2f}x torch.matmul, " \
               f"{share:.0%} of the mma.sync TF32 peak"
        for name, tf32, fp32 in TARGETS:
            line += f"; predicts {predicted_ratio(share, tf32, fp32, efficiency):.2f}x SGEMM on an {name}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
