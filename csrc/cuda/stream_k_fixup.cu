// Second pass of the stream-K tail (sgemm_stream_k.cuh): each tail tile's pieces summed in
// block order (deterministic, unlike atomics), then alpha, beta and C through the tiled
// kernel's epilogue. blockIdx.x: the tile; blockIdx.y: a stretch of it, one float4 of
// the partial tiles a thread, so that thousands of threads have the pieces' loads in
// flight (with one block a tile the loads ran one after another: 60 us at 3001 x 2999).
#include <c10/cuda/CUDAException.h>

#include "block_tile.cuh"
#include "dependent_launch.cuh"
#include "dependent_launch.h"
#include "epilogue.cuh"
#include "kernels.h"

namespace vecgemm {

constexpr int kFixupThreads = 256;

__global__ void __launch_bounds__(kFixupThreads) stream_k_fixup(const GemmParams p, const StreamK sk, int bm, int bn) {
  wait_for_predecessor();  // the tail's pieces (dependent_launch.cuh)
  const int t = blockIdx.x;
  const int e = (blockIdx.y * kFixupThreads + threadIdx.x) * 4;
  if (e >= bm * bn) return;
  const int64_t lo = int64_t(t) * sk.iters, hi = lo + sk.iters;
  // The block holding the tile's first iteration, then every block up to its last.
  int first = int(lo * sk.blocks / (int64_t(sk.tiles) * sk.iters));
  while (first > 0 && sk.start(first) > lo) --first;
  while (first + 1 < sk.blocks && sk.start(first + 1) <= lo) ++first;
  const int64_t tile_floats = int64_t(bm) * bn;
  float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int b = first; b < sk.blocks && sk.start(b) < hi; ++b) {
    if (sk.start(b + 1) == sk.start(b)) continue;  // a block with no iterations
    const int piece = sk.start(b) / sk.iters == t ? 0 : 1;
    const float4 v = __ldg(reinterpret_cast<const float4*>(p.workspace + (2 * int64_t(b) + piece) * tile_floats + e));
    sum[0] += v.x; sum[1] += v.y; sum[2] += v.z; sum[3] += v.w;
  }
  int m0, n0;
  tile_origin(p.m, p.n, bm, bn, sk.first_tile + t, m0, n0, true);
  store_output4(p, 0, m0 + e / bn, n0 + e % bn, sum);
}

void launch_stream_k_fixup(const GemmParams& p, const StreamK& sk, int bm, int bn, cudaStream_t stream) {
  const dim3 grid(sk.tiles, (bm * bn / 4 + kFixupThreads - 1) / kFixupThreads);
  launch_dependent(stream_k_fixup, grid, kFixupThreads, stream, p, sk, bm, bn);
}

}  // namespace vecgemm
