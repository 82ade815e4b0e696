// The general kernel: the seed's block tiling and transposed-A shared layout, plus what the
// seed lists under "What Could Be Improved" and what real inputs need:
//  - deliberate warp tiling (TileShape): a warp owns a compact WM x WN sub-tile and reads
//    a compact stretch of shared memory, instead of being smeared across the block;
//  - padded shared rows, so the transposing stores are free of bank conflicts;
//  - two shared-memory stages with register prefetch: the loads of tile t+1 are issued
//    before the arithmetic on tile t and one barrier per K tile suffices; optionally
//    (kPrefetchFragments) the fragments of each K step load during the previous step;
//  - any M, N, K (predicated, zero-filling loads and masked stores), both storage orders
//    of A and B (LA, LB), any alignment (VEC), batches and split-K (blockIdx.z), and
//    64-bit offsets throughout;
//  - grouped rasterization, so blocks running together share panels of A and B in L2.
#pragma once
#include <cstdint>

#include "kernels/dependent_launch.cuh"
#include "kernels/gemm_params.h"
#include "kernels/simt/block_tile.cuh"
#include "kernels/simt/kernel_configs.h"
#include "kernels/simt/tile_loader.cuh"
#include "kernels/simt/tile_shape.h"

namespace vecgemm {

// The K loop over one block's tiles: two shared-memory stages, the next tile's global
// loads in flight (in registers) while the current one is multiplied, one barrier a tile.
template <class S, bool kChecked, bool kPinLoads, class LoaderA, class LoaderB>
__device__ __forceinline__ void mainloop(LoaderA& load_a, LoaderB& load_b, float (*As)[S::BK * S::kAsStride],
                                         float (*Bs)[S::BK * S::kBsStride], int k_len, int a_row, int b_col,
                                         float (&acc)[S::TM][S::TN]) {
  const int tiles = (k_len + S::BK - 1) / S::BK;
  load_a.template load<kChecked>(k_len);
  load_b.template load<kChecked>(k_len);
  load_a.store(As[0]);
  load_b.store(Bs[0]);
  __syncthreads();
  float ra[2][S::TM], rb[2][S::TN];  // k_steps' register sets
  if (S::kPrefetchFragments) load_fragments<S>(As[0], Bs[0], 0, a_row, b_col, ra[0], rb[0]);

  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) {
      // Issued now, consumed at the end of the tile: global latency hides behind the FFMAs.
      load_a.advance();
      load_b.advance();
      load_a.template load<kChecked>(k_len - (t + 1) * S::BK);
      load_b.template load<kChecked>(k_len - (t + 1) * S::BK);
      // Left alone, ptxas sinks the loads toward their stores at the tile's end (it frees the
      // staging registers; their latency then shows as long-scoreboard stalls). Memory
      // accesses do not move across a warp barrier, a NOP here. Whether holding them here
      // pays depends on what ptxas then does with the rest of the loop: measured per tiling
      // and storage order (MainloopPolicy::kPinLoadsMask, docs/performance.md).
      if (kPinLoads) __syncwarp();
    }
    // The other stage was last read before the previous tile's barrier.
    k_steps<S>(As[cur], Bs[cur], a_row, b_col, more, [&]() {
      load_a.store(As[cur ^ 1]);
      load_b.store(Bs[cur ^ 1]);
      __syncthreads();
      return SharedTiles{As[cur ^ 1], Bs[cur ^ 1]};
    }, ra, rb, acc);
    if (!S::kPrefetchFragments && more) {
      load_a.store(As[cur ^ 1]);
      load_b.store(Bs[cur ^ 1]);
    }
    if (!S::kPrefetchFragments) __syncthreads();
  }
}

// The block's product acc = A @ B over the tile and K range of blk.
template <class S, Layout LA, Layout LB, int VEC>
__device__ __forceinline__ void block_product(const GemmParams& p, const BlockTile<S>& blk,
                                              float (*As)[S::BK * S::kAsStride],
                                              float (*Bs)[S::BK * S::kBsStride], float (&acc)[S::TM][S::TN]) {
  // Row-major A and column-major B are K-contiguous: their loader transposes.
  using LoaderA = TileLoader<S::BM, S::BK, S::kThreads, VEC, LA == Layout::RowMajor, S::kAsStride>;
  using LoaderB = TileLoader<S::BN, S::BK, S::kThreads, VEC, LB == Layout::ColMajor, S::kBsStride, S::kSteerBanks>;
  LoaderA load_a(blk.template a_panel<LA>(p), p.a.ld, p.m - blk.m0);
  LoaderB load_b(blk.template b_panel<LB>(p), p.b.ld, p.n - blk.n0);
  zero<S>(acc);
  constexpr bool kPin = (S::kPinLoadsMask >> order_index(LA, LB)) & 1;
  // Interior blocks, nearly all of a large problem, take a copy of the main loop whose loads
  // carry no bounds checks; edge blocks take the checked copy.
  if (blk.unchecked(p))
    mainloop<S, false, kPin>(load_a, load_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  else
    mainloop<S, true, kPin>(load_a, load_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
}

// kEdgesLast: the raster order with the edge tiles last (tile_origin), for the whole waves
// of the stream-K plan (sgemm_stream_k.cuh).
template <class S, Layout LA, Layout LB, int VEC, bool kEdgesLast = false>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_tiled(const GemmParams p) {
  __shared__ __align__(16) float As[2][S::BK * S::kAsStride];
  __shared__ __align__(16) float Bs[2][S::BK * S::kBsStride];
  allow_dependents();  // a split-K reduction after it may launch now (dependent_launch.cuh)
  const BlockTile<S> blk(p, kEdgesLast);
  float acc[S::TM][S::TN];
  block_product<S, LA, LB, VEC>(p, blk, As, Bs, acc);
  store_accumulators(p, blk, acc);
}

}  // namespace vecgemm
