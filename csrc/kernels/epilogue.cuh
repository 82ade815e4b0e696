// Output stage shared by the tiled kernel and the split-K reduction: four consecutive
// elements of one row at a time, D = alpha * acc + beta * C, 16-byte wide where the
// operands' alignment allows and element by element at the right edge of the matrix.
#pragma once
#include <cstdint>

#include "kernels/gemm_params.h"

namespace vecgemm {

// BLAS semantics: with beta == 0 (or no C) C is never read, so NaN or Inf in it cannot
// reach D.
__device__ __forceinline__ void store_output4(const GemmParams& p, int batch, int row, int col,
                                              const float (&acc)[4]) {
  if (row >= p.m || col >= p.n) return;
  const bool whole = col + 4 <= p.n;
  float out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = p.alpha * acc[j];
  if (p.beta != 0.0f && p.c != nullptr) {
    const float* c = p.c + batch * p.c_batch_stride + row * p.c_row_stride;
    if (whole && p.c_vec4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(c + col));
      out[0] += p.beta * v.x; out[1] += p.beta * v.y;
      out[2] += p.beta * v.z; out[3] += p.beta * v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (col + j < p.n) out[j] += p.beta * c[(col + j) * p.c_col_stride];
    }
  }
  float* d = p.d + batch * p.d_batch_stride + row * p.d_ld + col;
  if (whole && p.d_vec4) {
    *reinterpret_cast<float4*>(d) = make_float4(out[0], out[1], out[2], out[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (col + j < p.n) d[j] = out[j];
  }
}

// Split-K: raw partial sums into the dense workspace [k_splits][batch][m][n].
__device__ __forceinline__ float* partial_row(const GemmParams& p, int split, int batch, int row) {
  return p.workspace + ((int64_t(split) * p.batch + batch) * p.m + row) * int64_t(p.n);
}

__device__ __forceinline__ void store_partial4(const GemmParams& p, int split, int batch, int row,
                                               int col, const float (&acc)[4]) {
  if (row >= p.m || col >= p.n) return;
  float* w = partial_row(p, split, batch, row) + col;
  if (col + 4 <= p.n && p.n % 4 == 0) {
    *reinterpret_cast<float4*>(w) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (col + j < p.n) w[j] = acc[j];
  }
}

// A kernel's four results: the output, or its split's partial sums when K is split.
__device__ __forceinline__ void store_result4(const GemmParams& p, int split, int batch, int row, int col,
                                              const float (&acc)[4]) {
  if (p.k_splits == 1)
    store_output4(p, batch, row, col, acc);
  else
    store_partial4(p, split, batch, row, col, acc);
}

// Four consecutive partial sums of a slice, through L2 (ld.global.cg) where other blocks of
// the running kernel wrote them, else by the read-only path; 0 past the row's end.
template <bool kWrittenThisLaunch>
__device__ __forceinline__ float4 load_partial4(const GemmParams& p, int split, int batch, int row, int col,
                                                bool whole) {
  const float* w = partial_row(p, split, batch, row) + col;
  if (whole) {
    const float4* w4 = reinterpret_cast<const float4*>(w);
    return kWrittenThisLaunch ? __ldcg(w4) : __ldg(w4);
  }
  float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (col + j < p.n) v[j] = kWrittenThisLaunch ? __ldcg(w + j) : __ldg(w + j);
  return make_float4(v[0], v[1], v[2], v[3]);
}

// Split-K without a reduction launch (p.tile_counters set: execute.cpp): once a block has
// stored its slice's partial tile it counts itself in at the tile's counter, and the last of
// the tile's k_splits blocks to arrive adds their partials as splitk_reduce does (from zero,
// in slice order: the same bits whichever block is last), applies alpha, beta and C, and
// sets the counter back to zero, as the next launch on the stream expects to find it. Four
// slices' loads in flight: at eight ptxas spilled (docs/history.md, step 80).
template <int BM, int BN, int kThreads>
__device__ __forceinline__ void reduce_if_last_slice(const GemmParams& p, int batch, int m0, int n0) {
  __shared__ bool last;
  __threadfence();  // this thread's partials reach L2 before the block is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    const int tiles_m = (p.m + BM - 1) / BM, tiles_n = (p.n + BN - 1) / BN;
    unsigned int* counter = p.tile_counters + (int64_t(batch) * tiles_m + m0 / BM) * tiles_n + n0 / BN;
    last = atomicAdd(counter, 1u) == unsigned(p.k_splits - 1);
    if (last) *counter = 0u;  // every slice has counted: nothing reads it again in this launch
    __threadfence();          // the other slices' partials are read after their counts
  }
  __syncthreads();
  if (!last) return;
  constexpr int kLoadsInFlight = 4;
  constexpr int kQuadsPerRow = BN / 4;
  for (int q = threadIdx.x; q < BM * kQuadsPerRow; q += kThreads) {
    const int row = m0 + q / kQuadsPerRow, col = n0 + (q % kQuadsPerRow) * 4;
    if (row >= p.m || col >= p.n) continue;
    const bool whole = col + 4 <= p.n && p.n % 4 == 0;
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
    for (int s0 = 0; s0 < p.k_splits; s0 += kLoadsInFlight) {
      float4 v[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j)
        if (s0 + j < p.k_splits) v[j] = load_partial4<true>(p, s0 + j, batch, row, col, whole);
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        if (s0 + j < p.k_splits) {
          sum[0] += v[j].x; sum[1] += v[j].y; sum[2] += v[j].z; sum[3] += v[j].w;
        }
      }
    }
    store_output4(p, batch, row, col, sum);
  }
}

}  // namespace vecgemm
