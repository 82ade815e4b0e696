// Second pass of split-K: sums the k_splits partial products in a fixed order (so results
// are deterministic, unlike atomics) and applies alpha, beta and C through the same
// epilogue as the tiled kernel. One thread per four consecutive outputs of a row.
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "kernels/dependent_launch.cuh"
#include "kernels/dependent_launch.h"
#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"

namespace vecgemm {

// Each thread keeps kSplitkReduceLoadsInFlight loads in flight: the partials are read once
// and the sum is latency-bound wherever the output is small (a few hundred threads reading
// 32 partials each); reading them one after another cost 10-27 us on the H200 where
// cuBLAS's reduction took 2-5.
constexpr int kLoadsInFlight = kSplitkReduceLoadsInFlight;

__device__ __forceinline__ float4 load_partial4(const GemmParams& p, int split, int batch, int row, int col,
                                                bool whole) {
  const float* w = partial_row(p, split, batch, row) + col;
  if (whole) return __ldg(reinterpret_cast<const float4*>(w));
  float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (col + j < p.n) v[j] = __ldg(w + j);
  return make_float4(v[0], v[1], v[2], v[3]);
}

__global__ void splitk_reduce(const GemmParams p) {
  wait_for_predecessor();  // the partial products (dependent_launch.cuh)
  const int quads = (p.n + 3) / 4;
  const int64_t total = int64_t(p.batch) * p.m * quads;
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < total;
       q += int64_t(gridDim.x) * blockDim.x) {
    const int col = int(q % quads) * 4;
    const int row = int((q / quads) % p.m);
    const int batch = int(q / (int64_t(quads) * p.m));
    const bool whole = col + 4 <= p.n && p.n % 4 == 0;
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
    for (int s0 = 0; s0 < p.k_splits; s0 += kLoadsInFlight) {
      float4 v[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j)
        if (s0 + j < p.k_splits) v[j] = load_partial4(p, s0 + j, batch, row, col, whole);
      // Summed in split order, whatever the loads' order of arrival: the result is the
      // same bits on every run.
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

void launch_splitk_reduce(const GemmParams& p, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t quads = int64_t(p.batch) * p.m * ((p.n + 3) / 4);
  const int blocks = static_cast<int>(std::min<int64_t>((quads + kThreads - 1) / kThreads, 65536));
  launch_dependent(splitk_reduce, blocks, kThreads, stream, p);
}

}  // namespace vecgemm
