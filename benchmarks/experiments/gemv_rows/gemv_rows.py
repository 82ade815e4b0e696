"""An experiment for a kernel the library lacks: a vector times a row-major matrix,
out[j] = sum_i vec[i] * mat[i][j] (x @ W with W stored (in, out), as HF's Conv1D keeps GPT-2's
weights; M = 1 with a row-major B, or N = 1 with a column-major A). The library plans it on a
tiled kernel with a K split (`tiled_32x128x16_t84 split-k 16` at 1 x 4096 x 4096 on the H200's
profile), which spends 31 of every 32 rows of its M tile on nothing; gemv.cu serves only the
other orientation, whose outputs are dot products of contiguous rows.

Here a block owns a strip of 32 * VEC columns (a lane VEC of them, one 4 * VEC-byte load a row)
and a chunk of the rows; its WARPS warps take the chunk's rows in turn, each lane U rows in
flight (loaded an iteration ahead of their FMAs: written plainly, ptxas put each load beside
its use and kept one or two in flight), and add their sums through shared memory in a fixed
order. With S > 1 chunks a column, each block writes its sums to a workspace and a second
kernel adds the S in order (no atomics: the same bits every run). Variants: VEC, WARPS, U, the matrix's load policy (__ldg or past L1
with 256-byte L2 lines, as gemv.cu), and S (picked to give the GPU about `target` blocks per SM,
or 1: one launch). Timed with triton's do_bench (median, L2 cleared) against torch.matmul in
the same process, each with its error against float64, and, where torch_vecgemm is built in
this checkout, the library's plan for the product today.

    python benchmarks/experiments/gemv_rows/gemv_rows.py   (compiles in about a minute)
"""
import math

import torch
from torch.utils.cpp_extension import load_inline
from triton.testing import do_bench

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

template <int VEC, bool STREAM>
__device__ __forceinline__ void load_row(const float* p, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    float4 t;
    if constexpr (STREAM)
      asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
          : "=f"(t.x), "=f"(t.y), "=f"(t.z), "=f"(t.w) : "l"(p));
    else
      t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else if constexpr (VEC == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(p));
    v[0] = t.x, v[1] = t.y;
  } else {
    v[0] = __ldg(p);
  }
}

// Block (strip x, chunk y): columns [x * 32 VEC, +32 VEC), rows [y * chunk, +chunk).
template <int VEC, int WARPS, int U, bool STREAM>
__global__ void __launch_bounds__(WARPS * 32) colsum(const float* __restrict__ mat, int64_t ld,
    const float* __restrict__ vec, float* __restrict__ out, int rows, int cols, int chunk) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = (blockIdx.x * 32 + lane) * VEC;
  const int r_begin = blockIdx.y * chunk, r_end = min(rows, r_begin + chunk);
  float acc[VEC] = {};  // one chain a column: the loads, not the FMAs, set the pace
  if (col < cols) {  // VEC > 1: cols % VEC == 0 (the aligned variants' shapes)
    // Software-pipelined: a group of U rows is loaded one iteration before its FMAs, so that
    // ptxas cannot put each load next to its use (it did, keeping 1-2 in flight, to save
    // registers) and all U stay in flight across the loop's back edge.
    auto load_group = [&](int r0, float (&m)[U][VEC], float (&x)[U]) {
#pragma unroll
      for (int u = 0; u < U; ++u) load_row<VEC, STREAM>(mat + int64_t(r0 + u * WARPS) * ld + col, m[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) x[u] = __ldg(vec + r0 + u * WARPS);
    };
    int r = r_begin + warp;
    bool full = r + (U - 1) * WARPS < r_end;
    float m[U][VEC], x[U];
    if (full) load_group(r, m, x);
    while (full) {
      const int r_next = r + U * WARPS;
      const bool next = r_next + (U - 1) * WARPS < r_end;
      float m_next[U][VEC], x_next[U];
      if (next) load_group(r_next, m_next, x_next);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = fmaf(x[u], m[u][v], acc[v]);
      r = r_next, full = next;
      if (next) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          x[u] = x_next[u];
#pragma unroll
          for (int v = 0; v < VEC; ++v) m[u][v] = m_next[u][v];
        }
      }
    }
    for (; r < r_end; r += WARPS) {
      float row[VEC];
      load_row<VEC, STREAM>(mat + int64_t(r) * ld + col, row);
      const float xr = __ldg(vec + r);
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = fmaf(xr, row[v], acc[v]);
    }
  }
  __shared__ float part[WARPS][32 * VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) part[warp][lane * VEC + v] = acc[v];
  __syncthreads();
  for (int c = threadIdx.x; c < 32 * VEC; c += WARPS * 32) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s += part[w][c];
    const int j = blockIdx.x * 32 * VEC + c;
    if (j < cols) out[int64_t(blockIdx.y) * cols + j] = s;
  }
}

__global__ void add_chunks(const float* __restrict__ ws, float* __restrict__ out, int cols, int chunks) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float s = 0.f;
  for (int c = 0; c < chunks; ++c) s += ws[int64_t(c) * cols + j];
  out[j] = s;
}

template <int VEC, int WARPS, int U, bool STREAM>
void launch(const torch::Tensor& mat, const torch::Tensor& vec, torch::Tensor& out, torch::Tensor& ws, int chunks) {
  const int rows = mat.size(0), cols = mat.size(1);
  const int chunk = (rows + chunks - 1) / chunks;
  const dim3 grid((cols + 32 * VEC - 1) / (32 * VEC), (rows + chunk - 1) / chunk);
  auto stream = c10::cuda::getCurrentCUDAStream();
  float* dst = grid.y == 1 ? out.data_ptr<float>() : ws.data_ptr<float>();
  colsum<VEC, WARPS, U, STREAM><<<grid, WARPS * 32, 0, stream>>>(mat.data_ptr<float>(), mat.stride(0),
      vec.data_ptr<float>(), dst, rows, cols, chunk);
  if (grid.y > 1) add_chunks<<<(cols + 255) / 256, 256, 0, stream>>>(ws.data_ptr<float>(), out.data_ptr<float>(), cols, grid.y);
}

// The variants, by index: VEC, WARPS, U, load past L1.
#define VARIANTS(X) X(4, 8, 4, true) X(4, 8, 8, true) X(4, 4, 8, true) X(4, 16, 4, true) \
  X(4, 8, 4, false) X(2, 8, 8, false) X(1, 8, 8, false) X(1, 16, 8, false)
void run(int64_t variant, torch::Tensor mat, torch::Tensor vec, torch::Tensor out, torch::Tensor ws, int64_t chunks) {
  int64_t i = 0;
#define CASE(V, W, U, S) if (variant == i++) return launch<V, W, U, S>(mat, vec, out, ws, int(chunks));
  VARIANTS(CASE)
  TORCH_CHECK(false, "no variant ", variant);
}
"""
VARIANTS = [(4, 8, 4, True), (4, 8, 8, True), (4, 4, 8, True), (4, 16, 4, True), (4, 8, 4, False),
            (2, 8, 8, False), (1, 8, 8, False), (1, 16, 8, False)]  # the order of VARIANTS above
# (rows = K, cols = N): GPT-2's Conv1D weights (qkv, proj, fc, fc proj), LLaMA-7B's, square 4096.
SHAPES = [(768, 2304), (768, 768), (768, 3072), (3072, 768), (4096, 4096), (4096, 11008), (11008, 4096),
          (4096, 4095)]


def chunks_for(rows, cols, vec, warps, u, blocks_per_sm, sms):
    strips = math.ceil(cols / (32 * vec))
    most = max(1, math.ceil(rows / (warps * u)))  # a chunk at least a round of the warps' loads
    return max(1, min(most, math.ceil(blocks_per_sm * sms / strips)))


def main():
    ext = load_inline("gemv_rows", cpp_sources="void run(int64_t, torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor, int64_t);",
                      cuda_sources=CUDA, functions=["run"], extra_cuda_cflags=["-O3"], verbose=False)
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        import torch_vecgemm as tv
    except ImportError:
        tv = None
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name(), sms, "SMs; us (x torch.matmul), error / torch's; S = chunks a column")
    g = torch.Generator(device="cuda").manual_seed(0)
    for rows, cols in SHAPES:
        W = torch.randn(rows, cols, device="cuda", generator=g)
        x = torch.randn(1, rows, device="cuda", generator=g)
        ref = (x.double() @ W.double()).squeeze(0)
        scale = ref.abs().max().item()
        t_torch = do_bench(lambda: torch.matmul(x, W), warmup=10, rep=60, return_mode="median") * 1e3
        err_torch = ((torch.matmul(x, W).squeeze(0).double() - ref).abs().max().item()) / scale
        err_torch = max(err_torch, 1e-30)
        print(f"{rows} x {cols}: torch.matmul {t_torch:7.2f} us ({rows * cols * 4 / t_torch / 1e6:5.2f} TB/s), error {err_torch:.1e}")
        if tv is not None:
            us = do_bench(lambda: tv.mm(x, W), warmup=10, rep=60, return_mode="median") * 1e3
            print(f"  library today: {tv.plan(x, W)}  {us:7.2f} us ({t_torch / us:4.2f}x)")
        for i, (vec, warps, u, stream) in enumerate(VARIANTS):
            if cols % vec:
                continue
            for target in (2, 4, 8, 0):
                chunks = 1 if target == 0 else chunks_for(rows, cols, vec, warps, u, target, sms)
                out = torch.full((cols,), float("nan"), device="cuda")
                ws = torch.empty(chunks * cols, device="cuda")
                ext.run(i, W, x.squeeze(0), out, ws, chunks)
                err = (out.double() - ref).abs().max().item() / scale
                us = do_bench(lambda: ext.run(i, W, x.squeeze(0), out, ws, chunks), warmup=10, rep=60, return_mode="median") * 1e3
                name = f"VEC {vec} WARPS {warps:2d} U {u} {'past L1' if stream else '__ldg '} S {chunks:3d}"
                print(f"  {name}  {us:7.2f} us ({t_torch / us:4.2f}x, {rows * cols * 4 / us / 1e6:5.2f} TB/s)  error {err:.1e} ({err / err_torch:4.2f}x)")


if __name__ == "__main__":
    main()
