// Matrix-vector products: a GEMM with M = 1 whose B is column-major (x @ W.t() for one
// token, as nn.Linear computes it in decoding) or with N = 1 whose A is row-major. Each
// output is then the dot product of one contiguous row of the matrix with the vector, and
// the problem is bound by reading the matrix once: the tiled kernels, built to reuse
// operands from shared memory, would spend 31 of every 32 rows of an M tile on nothing.
// One warp per output: 16-byte loads along the row (a warp reads 512 contiguous bytes),
// several loads in flight per lane, a shuffle reduction, the epilogue of the tiled kernels.
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"

namespace vecgemm {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;  // row chunks a lane has in flight (summed as a tree of four below)

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

}  // namespace

bool gemv_fits(int m, int n, Layout la, Layout lb) {
  return (m == 1 && lb == Layout::ColMajor) || (n == 1 && la == Layout::RowMajor);
}

void launch_gemv(const GemmParams& p, Layout la, Layout lb, cudaStream_t stream) {
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
