// Second pass of a product run on its transpose (planner/plan.h, Plan::transposed): the
// kernel computed C^T = B^T A^T in K slices, writing C^T's partial sums
// ([k_splits][batch][n][m], dense: C^T's rows are D's columns). This sums each element's
// partials in split order, as splitk_reduce does (the same bits), and writes
// D = alpha * sum + beta * C in D's own order through the same epilogue. A 32 x 32 tile a
// block goes through shared memory, so that the partials are read along m and D is written
// along n, both in whole 128-byte lines.
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "kernels/dependent_launch.cuh"
#include "kernels/dependent_launch.h"
#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"

namespace vecgemm {
namespace {

constexpr int kTile = 32;
constexpr int kThreads = 256;
constexpr int kLoadsInFlight = kSplitkReduceLoadsInFlight;
static_assert(kThreads == kTile * kTile / 4, "each thread writes four outputs of the tile");

// p: D's problem (m x n, its C, alpha and beta) with the split's workspace and k_splits.
// Grid: (n tiles, m tiles, batch).
__global__ void __launch_bounds__(kThreads) splitk_reduce_transposed(const GemmParams p) {
  __shared__ float tile[kTile][kTile + 1];  // [n][m]; the pad keeps the column reads off one bank
  wait_for_predecessor();                   // the partial products (dependent_launch.cuh)
  const int n0 = blockIdx.x * kTile, m0 = blockIdx.y * kTile, batch = blockIdx.z;
  const int64_t split_stride = int64_t(p.batch) * p.n * p.m;
  // Each warp sums one line of C^T (one n, 32 consecutive m) at a time.
  const int m = m0 + int(threadIdx.x) % kTile;
  for (int nl = int(threadIdx.x) / kTile; nl < kTile; nl += kThreads / kTile) {
    const int n = n0 + nl;
    float sum = 0.f;
    if (m < p.m && n < p.n) {
      const float* w = p.workspace + (int64_t(batch) * p.n + n) * p.m + m;
      for (int s0 = 0; s0 < p.k_splits; s0 += kLoadsInFlight) {
        float v[kLoadsInFlight];
#pragma unroll
        for (int j = 0; j < kLoadsInFlight; ++j)
          if (s0 + j < p.k_splits) v[j] = __ldg(w + (s0 + j) * split_stride);
        // In split order, whatever the loads' order of arrival.
#pragma unroll
        for (int j = 0; j < kLoadsInFlight; ++j)
          if (s0 + j < p.k_splits) sum += v[j];
      }
    }
    tile[nl][m - m0] = sum;
  }
  __syncthreads();
  // Each thread writes four consecutive outputs of one row of D.
  const int quad = int(threadIdx.x) % (kTile / 4), row = int(threadIdx.x) / (kTile / 4);
  float out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = tile[quad * 4 + j][row];
  store_output4(p, batch, m0 + row, n0 + quad * 4, out);
}

}  // namespace

void launch_splitk_reduce_transposed(const GemmParams& p, cudaStream_t stream) {
  const dim3 grid((p.n + kTile - 1) / kTile, (p.m + kTile - 1) / kTile, p.batch);
  launch_dependent(splitk_reduce_transposed, grid, kThreads, stream, p);
}

}  // namespace vecgemm
