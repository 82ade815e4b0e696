// Second pass of split-K: sums the k_splits partial products in a fixed order (so results
// are deterministic, unlike atomics) and applies alpha, beta and C through the same
// epilogue as the tiled kernel. One thread per four consecutive outputs of a row.
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "dependent_launch.cuh"
#include "dependent_launch.h"
#include "epilogue.cuh"
#include "kernels.h"

namespace vecgemm {

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
    for (int s = 0; s < p.k_splits; ++s) {
      const float* w = partial_row(p, s, batch, row) + col;
      if (whole) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(w));
        sum[0] += v.x; sum[1] += v.y; sum[2] += v.z; sum[3] += v.w;
      } else {
        for (int j = 0; j < 4; ++j)
          if (col + j < p.n) sum[j] += w[j];
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
