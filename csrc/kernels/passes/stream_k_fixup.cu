// Second pass of the stream-K tail (sgemm_stream_k.cuh): each tail tile's pieces summed in
// block order (deterministic, unlike atomics), then alpha, beta and C through the tiled
// kernel's epilogue. blockIdx.x: the tile; blockIdx.y: a stretch of it, kVecs float4 of the
// partial tiles a thread, so that thousands of threads have the pieces' loads in flight
// (with one block a tile the loads ran one after another: 60 us at 3001 x 2999), while the
// pieces' bounds, 64-bit divisions that every thread computes, are paid once for kVecs
// float4 (one a thread: 30-40 us at 4096, for 47 MB; docs/performance.md).
#include <c10/cuda/CUDAException.h>

#include "kernels/dependent_launch.cuh"
#include "kernels/dependent_launch.h"
#include "kernels/epilogue.cuh"
#include "kernels/launchers.h"
#include "kernels/simt/block_tile.cuh"

namespace vecgemm {

constexpr int kFixupThreads = 256;
constexpr int kVecs = 4;  // float4 a thread, kFixupThreads * 4 floats apart

__global__ void __launch_bounds__(kFixupThreads) stream_k_fixup(const GemmParams p, const StreamK sk, int bm, int bn) {
  wait_for_predecessor();  // the tail's pieces (dependent_launch.cuh)
  const int t = blockIdx.x;
  const int e0 = (blockIdx.y * kFixupThreads * kVecs + threadIdx.x) * 4;
  if (e0 >= bm * bn) return;
  const int64_t lo = int64_t(t) * sk.iters, hi = lo + sk.iters;
  // The block holding the tile's first iteration, then every block up to its last.
  int first = int(lo * sk.blocks / (int64_t(sk.tiles) * sk.iters));
  while (first > 0 && sk.start(first) > lo) --first;
  while (first + 1 < sk.blocks && sk.start(first + 1) <= lo) ++first;
  const int64_t tile_floats = int64_t(bm) * bn;
  float sum[kVecs][4] = {};
  for (int b = first; b < sk.blocks && sk.start(b) < hi; ++b) {
    if (sk.start(b + 1) == sk.start(b)) continue;  // a block with no iterations
    const int piece = sk.start(b) / sk.iters == t ? 0 : 1;
    const float* part = p.workspace + (2 * int64_t(b) + piece) * tile_floats;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      const int e = e0 + j * kFixupThreads * 4;
      if (e < bm * bn) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(part + e));
        sum[j][0] += v.x; sum[j][1] += v.y; sum[j][2] += v.z; sum[j][3] += v.w;
      }
    }
  }
  int m0, n0;
  tile_origin(p.m, p.n, bm, bn, sk.first_tile + t, m0, n0, true);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int e = e0 + j * kFixupThreads * 4;
    if (e < bm * bn) store_output4(p, 0, m0 + e / bn, n0 + e % bn, sum[j]);
  }
}

void launch_stream_k_fixup(const GemmParams& p, const StreamK& sk, int bm, int bn, cudaStream_t stream) {
  const int per_block = kFixupThreads * kVecs * 4;  // floats
  const dim3 grid(sk.tiles, (bm * bn + per_block - 1) / per_block);
  launch_dependent(stream_k_fixup, grid, kFixupThreads, stream, p, sk, bm, bn);
}

}  // namespace vecgemm
