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

}  // namespace vecgemm
