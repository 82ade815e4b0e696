// Matrix-vector products, and products with a few vectors: a GEMM with M <= 4 whose B is
// column-major (x @ W.t() for one to four tokens, as nn.Linear computes it in decoding) or
// with N <= 4 whose A is row-major. Each output is then the dot product of one contiguous
// row of the matrix with a vector, and the problem is bound by reading the matrix once: the
// tiled kernels, built to reuse operands from shared memory, would spend 28 to 31 of every
// 32 rows of an M tile on nothing (and split K to fill the GPU, adding a reduction).
// One warp per matrix row, its dot products with every vector at once, so the row is read
// once: 16-byte loads along the row (a warp reads 512 contiguous bytes), several loads in
// flight per lane, a shuffle reduction, the epilogue of the tiled kernels. A warp keeps
// only kUnroll loads in flight, so a matrix of few rows fills the GPU with warps only where
// K is split (p.k_splits slices, a warp a row and slice): each slice's sums then go to the
// split-K workspace, and splitk_reduce.cu adds them in slice order.
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "kernels/dependent_launch.cuh"
#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"

namespace vecgemm {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;  // row chunks a lane has in flight (summed as a tree of four below)
static_assert(kGemvKRound == 32 * 4 * kUnroll, "a K slice is whole rounds of a warp's 16-byte loads");

// The product seen as out[r][v] = sum_k mat[r][k] * vec_v[k], r < rows, v < vectors.
struct GemvView {
  const float* mat;
  int64_t mat_ld, mat_batch;
  const float* vec;                         // the first vector
  int64_t vec_stride, vec_apart, vec_batch;  // between a vector's elements; between vectors
  int rows, vectors;
  bool over_n;  // the matrix is B (rows along N, the vectors A's rows), not A
};

// The matrix is B (its rows along N) where M is few and B column-major, and the vectors,
// where there are several, A's contiguous rows; else A, with B's columns for vectors. A
// product both would serve (M and N few) takes the longer side for rows: more warps.
bool serves_over_n(int m, Layout la, Layout lb) {
  return m <= kGemvMaxVectors && lb == Layout::ColMajor && (m == 1 || la == Layout::RowMajor);
}

bool serves_over_m(int n, Layout la, Layout lb) {
  return n <= kGemvMaxVectors && la == Layout::RowMajor && (n == 1 || lb == Layout::ColMajor);
}

bool gemv_over_n(int m, int n, Layout la, Layout lb) {
  return serves_over_n(m, la, lb) && (!serves_over_m(n, la, lb) || n >= m);
}

GemvView view_of(const GemmParams& p, Layout la, Layout lb) {
  if (gemv_over_n(p.m, p.n, la, lb)) {  // row n of the matrix is column n of B
    const bool rows_of_a = la == Layout::RowMajor;
    return {p.b.ptr, p.b.ld, p.b.batch_stride, p.a.ptr, rows_of_a ? 1 : p.a.ld, rows_of_a ? p.a.ld : 1,
            p.a.batch_stride, p.n, p.m, true};
  }
  const bool columns_of_b = lb == Layout::ColMajor;
  return {p.a.ptr, p.a.ld, p.a.batch_stride, p.b.ptr, columns_of_b ? 1 : p.b.ld, columns_of_b ? p.b.ld : 1,
          p.b.batch_stride, p.m, p.n, false};
}

// The matrix is read once, so its 16-byte loads skip L1 (no_allocate), where they would only
// evict the vectors every warp shares, and ask L2 for 256-byte lines, the next chunks of the
// row (docs/history.md, step 75). The vectors keep __ldg.
__device__ __forceinline__ float4 load_once(const float* p) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "l"(p));
  return v;
}

// VEC elements of a matrix row. VEC = 4: matrix rows and the vectors 16-byte aligned, the
// vectors contiguous, K % 4 == 0.
template <int VEC>
struct RowChunk {
  float x[VEC];
};

template <int VEC>
__device__ __forceinline__ RowChunk<VEC> load_chunk(const float* m) {
  if constexpr (VEC == 4) {
    const float4 a = load_once(m);
    return {{a.x, a.y, a.z, a.w}};
  } else {
    return {{__ldg(m)}};
  }
}

template <int VEC>
__device__ __forceinline__ float dot_chunk(const RowChunk<VEC>& a, const float* v) {
  if constexpr (VEC == 4) {
    const float4 b = __ldg(reinterpret_cast<const float4*>(v));
    return a.x[0] * b.x + a.x[1] * b.y + a.x[2] * b.z + a.x[3] * b.w;
  } else {
    return a.x[0] * __ldg(v);
  }
}

template <int VEC, int V>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv(const GemmParams p, const GemvView g) {
  static_assert(VEC == 1 || VEC == 4, "vector width");
  static_assert(V >= 1 && V <= kGemvMaxVectors && V <= 32, "one lane stores each vector's output");
  allow_dependents();  // the split-K reduction may launch now (dependent_launch.cuh)
  const int r = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= g.rows) return;
  constexpr int kStep = 32 * VEC;
  // blockIdx.y = batch * k_splits + split, as the tiled kernels' blockIdx.z.
  const int batch = blockIdx.y / p.k_splits, split = blockIdx.y % p.k_splits;
  const int k_begin = split * p.k_slice, k_len = min(p.k - k_begin, p.k_slice);
  const float* row = g.mat + batch * g.mat_batch + r * g.mat_ld + k_begin;
  const float* vec = g.vec + batch * g.vec_batch + k_begin * g.vec_stride;
  float sum[V][kUnroll] = {};
  int k = lane * VEC;
  for (; k + (kUnroll - 1) * kStep < k_len; k += kUnroll * kStep) {
    RowChunk<VEC> chunk[kUnroll];  // every load of the row first, then the vectors'
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) chunk[u] = load_chunk<VEC>(row + k + u * kStep);
#pragma unroll
    for (int v = 0; v < V; ++v)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        sum[v][u] += dot_chunk<VEC>(chunk[u], vec + v * g.vec_apart + (k + u * kStep) * g.vec_stride);
  }
  for (; k < k_len; k += kStep) {
    const RowChunk<VEC> chunk = load_chunk<VEC>(row + k);
#pragma unroll
    for (int v = 0; v < V; ++v) sum[v][0] += dot_chunk<VEC>(chunk, vec + v * g.vec_apart + k * g.vec_stride);
  }
  float mine = 0.0f;  // lane v stores vector v's output
#pragma unroll
  for (int v = 0; v < V; ++v) {
    float total = (sum[v][0] + sum[v][1]) + (sum[v][2] + sum[v][3]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    if (lane == v) mine = total;
  }
  if (lane < V) {
    const int out_row = g.over_n ? lane : r, out_col = g.over_n ? r : lane;
    if (p.k_splits > 1) {
      partial_row(p, split, batch, out_row)[out_col] = mine;
    } else {
      // The tiled kernels' epilogue, one element wide: n = col + 1 masks the other three.
      GemmParams q = p;
      q.n = out_col + 1;
      const float v[4] = {mine, 0.f, 0.f, 0.f};
      store_output4(q, batch, out_row, out_col, v);
    }
  }
}

template <int VEC>
void launch_with(const GemmParams& p, const GemvView& g, dim3 grid, cudaStream_t stream) {
  const int threads = kWarpsPerBlock * 32;
  switch (g.vectors) {
    case 1: gemv<VEC, 1><<<grid, threads, 0, stream>>>(p, g); break;
    case 2: gemv<VEC, 2><<<grid, threads, 0, stream>>>(p, g); break;
    case 3: gemv<VEC, 3><<<grid, threads, 0, stream>>>(p, g); break;
    default: gemv<VEC, 4><<<grid, threads, 0, stream>>>(p, g); break;
  }
}

}  // namespace

bool gemv_fits(int m, int n, Layout la, Layout lb) {
  return serves_over_n(m, la, lb) || serves_over_m(n, la, lb);
}

void launch_gemv(const GemmParams& p, Layout la, Layout lb, cudaStream_t stream) {
  TORCH_INTERNAL_ASSERT(gemv_fits(p.m, p.n, la, lb), "vecgemm: gemv launched on a product it does not serve");
  const GemvView g = view_of(p, la, lb);
  // The vectors are contiguous lines (stride 1), g.vec_apart apart where there are several.
  const bool vec4 = lines_aligned16(g.mat, g.mat_ld, g.mat_batch) && g.vec_stride == 1 &&
                    lines_aligned16(g.vec, g.vectors > 1 ? g.vec_apart : 0, g.vec_batch) && p.k % 4 == 0;
  TORCH_INTERNAL_ASSERT(int64_t(p.batch) * p.k_splits <= kMaxGridYZ && (p.k_splits == 1 || p.k_slice % 4 == 0),
                        "vecgemm: gemv launched on ", p.batch, " batches of ", p.k_splits, " K slices of ", p.k_slice);
  const dim3 grid((g.rows + kWarpsPerBlock - 1) / kWarpsPerBlock, p.batch * p.k_splits);
  if (vec4)
    launch_with<4>(p, g, grid, stream);
  else
    launch_with<1>(p, g, grid, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
