// Matrix-vector products: a GEMM with M = 1 or N = 1, bound by reading the matrix once: the
// tiled kernels, built to reuse operands from shared memory, would spend 31 of every 32 rows
// of an M tile on nothing. Two forms, by which way the matrix's lines run:
//  - dot: M = 1 with a column-major B (x @ W.t() for one token, as nn.Linear computes it in
//    decoding) or N = 1 with a row-major A. Each output is the dot product of one contiguous
//    line of the matrix with the vector: one warp an output, 16-byte loads along the line (a
//    warp reads 512 contiguous bytes), several in flight a lane, a shuffle reduction.
//  - strip: M = 1 with a row-major B (x @ W with W stored (in, out)) or N = 1 with a
//    column-major A. The lines run along the outputs: out[j] = sum_i vec[i] * line_i[j]. A
//    block owns a strip of 32 x VEC outputs (a lane VEC of them, one load a line) and a K
//    slice; its warps take the slice's lines in turn, several in flight a lane, and add their
//    sums through shared memory; K slices past one go through the split-K reduction.
// Both in a fixed order, with the epilogue of the tiled kernels.
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"

namespace vecgemm {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;  // row chunks a lane has in flight (summed as a tree of four below)
constexpr int kStripWarps = kGemvStripWarps;
constexpr int kStripLines = kGemvStripLines;

// The product seen as out[r] = sum_k mat[r][k] * vec[k], r < rows.
struct GemvView {
  const float* mat;
  int64_t mat_ld, mat_batch;
  const float* vec;
  int64_t vec_stride, vec_batch;
  int rows;
  bool over_n;  // outputs run along N (M = 1) rather than along M (N = 1)
};

GemvView view_of(const GemmParams& p, Layout la, Layout lb) {
  if (p.m == 1)  // B column-major: row n of the matrix is column n of B; the vector is A's row
    return {p.b.ptr, p.b.ld, p.b.batch_stride, p.a.ptr, la == Layout::RowMajor ? 1 : p.a.ld,
            p.a.batch_stride, p.n, true};
  // N = 1, A row-major: the vector is B's one column
  return {p.a.ptr, p.a.ld, p.a.batch_stride, p.b.ptr, lb == Layout::ColMajor ? 1 : p.b.ld,
          p.b.batch_stride, p.m, false};
}

// The matrix is read once, so its 16-byte loads skip L1 (no_allocate), where they would only
// evict the vector every warp shares, and ask L2 for 256-byte lines, the next chunks of the
// row (docs/history.md, step 75). The vector keeps __ldg.
__device__ __forceinline__ float4 load_once(const float* p) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

// VEC = 4: matrix rows and the vector 16-byte aligned, the vector contiguous, K % 4 == 0.
template <int VEC>
__device__ __forceinline__ float dot_chunk(const float* m, const float* v) {
  if constexpr (VEC == 4) {
    const float4 a = load_once(m);
    const float4 b = __ldg(reinterpret_cast<const float4*>(v));
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  } else {
    return __ldg(m) * __ldg(v);
  }
}

template <int VEC>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv(const GemmParams p, const GemvView g) {
  static_assert(VEC == 1 || VEC == 4, "vector width");
  const int r = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= g.rows) return;
  constexpr int kStep = 32 * VEC;
  for (int batch = blockIdx.y; batch < p.batch; batch += gridDim.y) {
    const float* row = g.mat + batch * g.mat_batch + r * g.mat_ld;
    const float* vec = g.vec + batch * g.vec_batch;
    float sum[kUnroll] = {};
    int k = lane * VEC;
    for (; k + (kUnroll - 1) * kStep < p.k; k += kUnroll * kStep)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        sum[u] += dot_chunk<VEC>(row + k + u * kStep, vec + (k + u * kStep) * g.vec_stride);
    for (; k < p.k; k += kStep) sum[0] += dot_chunk<VEC>(row + k, vec + k * g.vec_stride);
    float total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    if (lane == 0) {
      // The tiled kernels' epilogue, one element wide: n = col + 1 masks the other three.
      GemmParams q = p;
      const int out_row = g.over_n ? 0 : r, out_col = g.over_n ? r : 0;
      q.n = out_col + 1;
      const float v[4] = {total, 0.f, 0.f, 0.f};
      store_output4(q, batch, out_row, out_col, v);
    }
  }
}

// The strip form's view: line i of the matrix (i < k) holds `cols` outputs' terms.
struct StripView {
  const float* mat;
  int64_t mat_ld, mat_batch;
  const float* vec;
  int64_t vec_stride, vec_batch;
  int cols;
  bool over_n;  // outputs run along N (M = 1) rather than along M (N = 1)
};

StripView strip_view_of(const GemmParams& p, Layout la, Layout lb) {
  if (p.m == 1)  // B row-major: line k of the matrix is row k of B; the vector is A's row
    return {p.b.ptr, p.b.ld, p.b.batch_stride, p.a.ptr, la == Layout::RowMajor ? 1 : p.a.ld,
            p.a.batch_stride, p.n, true};
  // N = 1, A column-major: line k is column k of A; the vector is B's one column
  return {p.a.ptr, p.a.ld, p.a.batch_stride, p.b.ptr, lb == Layout::ColMajor ? 1 : p.b.ld,
          p.b.batch_stride, p.m, false};
}

// One output of the strip form: D's element, or its K slice's partial sum.
__device__ __forceinline__ void store_one(const GemmParams& p, int slice, int batch, int row, int col, float value) {
  if (p.k_splits > 1) {
    partial_row(p, slice, batch, row)[col] = value;
    return;
  }
  GemmParams q = p;
  q.n = col + 1;  // masks the other three of the epilogue's four
  const float v[4] = {value, 0.f, 0.f, 0.f};
  store_output4(q, batch, row, col, v);
}

template <int VEC>
__device__ __forceinline__ void load_line(const float* p, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    const float4 t = load_once(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else {
    v[0] = __ldg(p);
  }
}

// VEC = 4: every line 16-byte aligned and cols % 4 == 0, so a lane's four outputs are all in
// or all out. Block (strip x, batch and K slice z = batch * k_splits + slice).
template <int VEC>
__global__ void __launch_bounds__(kStripWarps * 32) gemv_strip(const GemmParams p, const StripView g) {
  static_assert(VEC == 1 || VEC == 4, "vector width");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = (blockIdx.x * 32 + lane) * VEC;
  const int batch = blockIdx.z / p.k_splits, slice = blockIdx.z % p.k_splits;
  const int k_begin = slice * p.k_slice, k_end = min(p.k, k_begin + p.k_slice);
  const float* mat = g.mat + batch * g.mat_batch + col;
  const float* vec = g.vec + batch * g.vec_batch;
  float acc[VEC] = {};  // one chain an output: the loads, not the FMAs, set the pace
  if (col < g.cols) {
    // A group of kStripLines lines is loaded an iteration before its FMAs: written plainly,
    // ptxas put each load beside its use and kept one or two in flight.
    auto load_group = [&](int k0, float (&m)[kStripLines][VEC], float (&x)[kStripLines]) {
#pragma unroll
      for (int u = 0; u < kStripLines; ++u) load_line<VEC>(mat + int64_t(k0 + u * kStripWarps) * g.mat_ld, m[u]);
#pragma unroll
      for (int u = 0; u < kStripLines; ++u) x[u] = __ldg(vec + int64_t(k0 + u * kStripWarps) * g.vec_stride);
    };
    constexpr int kGroup = kStripLines * kStripWarps;
    int k = k_begin + warp;
    bool full = k + kGroup - kStripWarps < k_end;
    float m[kStripLines][VEC], x[kStripLines];
    if (full) load_group(k, m, x);
    while (full) {
      const bool next = k + 2 * kGroup - kStripWarps < k_end;
      float m_next[kStripLines][VEC], x_next[kStripLines];
      if (next) load_group(k + kGroup, m_next, x_next);
#pragma unroll
      for (int u = 0; u < kStripLines; ++u)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = fmaf(x[u], m[u][v], acc[v]);
      k += kGroup, full = next;
      if (next) {
#pragma unroll
        for (int u = 0; u < kStripLines; ++u) {
          x[u] = x_next[u];
#pragma unroll
          for (int v = 0; v < VEC; ++v) m[u][v] = m_next[u][v];
        }
      }
    }
    for (; k < k_end; k += kStripWarps) {
      float line[VEC];
      load_line<VEC>(mat + int64_t(k) * g.mat_ld, line);
      const float xk = __ldg(vec + int64_t(k) * g.vec_stride);
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = fmaf(xk, line[v], acc[v]);
    }
  }
  __shared__ float sums[kStripWarps][32 * VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) sums[warp][lane * VEC + v] = acc[v];
  __syncthreads();
  if (warp != 0 || col >= g.cols) return;
  float total[4] = {};
#pragma unroll
  for (int v = 0; v < VEC; ++v)
#pragma unroll
    for (int w = 0; w < kStripWarps; ++w) total[v] += sums[w][lane * VEC + v];
  if (g.over_n && VEC == 4) {
    store_result4(p, slice, batch, 0, col, total);
  } else {
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      if (g.over_n)
        store_one(p, slice, batch, 0, col + v, total[v]);
      else
        store_one(p, slice, batch, col + v, 0, total[v]);
    }
  }
}

}  // namespace

bool gemv_fits(int m, int n, Layout, Layout) { return m == 1 || n == 1; }

bool gemv_strip_form(int m, int n, Layout la, Layout lb) {
  return !((m == 1 && lb == Layout::ColMajor) || (n == 1 && la == Layout::RowMajor)) && gemv_fits(m, n, la, lb);
}

void launch_gemv(const GemmParams& p, Layout la, Layout lb, cudaStream_t stream) {
  if (gemv_strip_form(p.m, p.n, la, lb)) {
    const StripView g = strip_view_of(p, la, lb);
    const bool vec4 = lines_aligned16(g.mat, g.mat_ld, g.mat_batch) && g.cols % 4 == 0;
    const int per_block = 32 * (vec4 ? 4 : 1);
    // run_k_slices keeps batch * k_splits within grid.z's limit.
    const dim3 grid((g.cols + per_block - 1) / per_block, 1, p.batch * p.k_splits);
    if (vec4)
      gemv_strip<4><<<grid, kStripWarps * 32, 0, stream>>>(p, g);
    else
      gemv_strip<1><<<grid, kStripWarps * 32, 0, stream>>>(p, g);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const GemvView g = view_of(p, la, lb);
  // The vector is one line (contiguous: its stride 1), so it has no ld of its own.
  const bool vec4 = lines_aligned16(g.mat, g.mat_ld, g.mat_batch) && g.vec_stride == 1 &&
                    lines_aligned16(g.vec, 0, g.vec_batch) && p.k % 4 == 0;
  const dim3 grid((g.rows + kWarpsPerBlock - 1) / kWarpsPerBlock, std::min(p.batch, kMaxGridYZ));
  if (vec4)
    gemv<4><<<grid, kWarpsPerBlock * 32, 0, stream>>>(p, g);
  else
    gemv<1><<<grid, kWarpsPerBlock * 32, 0, stream>>>(p, g);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
