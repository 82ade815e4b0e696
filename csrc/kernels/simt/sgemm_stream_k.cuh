// The stream-K tail (docs/performance.md). A problem whose tiles fill w >= 0 whole waves
// of the GPU's resident blocks and then part of one more runs the whole waves with
// sgemm_tiled (a grid of w waves; none for w = 0), and the R tiles of the partial wave
// with this kernel: one block per resident slot, each a contiguous range of those tiles' K
// iterations (StreamK, gemm_params.h), so that every block has the same work instead of R
// blocks a whole tile and the rest none. With fewer iterations a block than a tile has, a
// block runs at most two pieces: the end of one tile and the start of the next. Each
// piece's partial tile goes to the workspace, and stream_k_fixup.cu adds each tile's pieces
// in block order (the same order every run) and applies alpha, beta and C. All three take
// the tiles in the raster order with the edge tiles last, so that the tail gets them.
#pragma once
#include "kernels/simt/sgemm_tiled.cuh"

namespace vecgemm {

template <class S, Layout LA, Layout LB>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_stream_k(const GemmParams p, const StreamK sk) {
  static_assert(!S::kSteerBanks, "the partial tiles are stored from the accumulators themselves");
  __shared__ __align__(16) float As[2][S::BK * S::kAsStride];
  __shared__ __align__(16) float Bs[2][S::BK * S::kBsStride];
  allow_dependents();  // the fix-up may launch now (dependent_launch.cuh)
  const int64_t begin = sk.start(blockIdx.x), end = sk.start(blockIdx.x + 1);
  const int tile = int(begin / sk.iters);
  const int64_t split = min(end, int64_t(tile + 1) * sk.iters);  // where the first piece ends
  // The pieces as a loop, not two inlined copies of the main loop: measured 2.5% faster
  // at 4096.
#pragma unroll 1
  for (int j = 0; j < 2; ++j) {
    const int64_t from = j == 0 ? begin : split, to = j == 0 ? split : end;
    if (from >= to) break;
    if (j == 1) __syncthreads();  // every thread is done reading the first piece's last stage
    const int it0 = int(from - int64_t(tile + j) * sk.iters);
    const int k_begin = it0 * S::BK;
    const BlockTile<S> blk(p, sk.first_tile + tile + j, k_begin, min(int(to - from) * S::BK, p.k - k_begin));
    float acc[S::TM][S::TN];
    block_product<S, LA, LB, 4>(p, blk, As, Bs, acc);
    // The partial tile, dense BM x BN in slot 2 b + j; elements outside the problem hold the
    // zero-filled loads' zeros, and the fix-up does not store them.
    store_partial_tile<S>(p.workspace + (2 * int64_t(blockIdx.x) + j) * (S::BM * S::BN), blk.a_row, blk.b_col, acc);
  }
}

}  // namespace vecgemm
