#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "kernels/launchers.h"
#include "kernels/simt/sgemm_vectorized.cuh"

namespace vecgemm {

void launch_vectorized(const GemmParams& p, cudaStream_t stream) {
  // The seed's configuration and launch, but for the batch in grid.z; grid.y and grid.z
  // take at most 65535 blocks, so taller matrices and longer batches go in chunks.
  constexpr int BM = VectorizedTile::BM, BN = VectorizedTile::BN, BK = VectorizedTile::BK;
  constexpr int TM = VectorizedTile::TM, TN = VectorizedTile::TN;
  const dim3 block((BM * BN) / (TM * TN));
  for (int b0 = 0; b0 < p.batch; b0 += kMaxGridYZ) {
    const GemmParams q = batch_slice(p, b0, std::min(kMaxGridYZ, p.batch - b0));
    for (int64_t m0 = 0; m0 < q.m; m0 += int64_t(kMaxGridYZ) * BM) {
      const int rows = int(std::min<int64_t>(int64_t(kMaxGridYZ) * BM, q.m - m0));
      const dim3 grid(q.n / BN, rows / BM, q.batch);
      sgemm_vectorized<BM, BN, BK, TM, TN><<<grid, block, 0, stream>>>(
          rows, q.n, q.k, q.alpha, q.a.ptr + m0 * q.k, q.b.ptr, q.beta, q.d + m0 * q.n, q.a.batch_stride,
          q.b.batch_stride, q.d_batch_stride);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
}

}  // namespace vecgemm
