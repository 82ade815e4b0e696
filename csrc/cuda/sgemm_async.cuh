// The tiled kernel with a cp.async pipeline instead of register staging (async_tile.cuh):
//  - kStages shared-memory stages: the copies of K tile t + kStages - 1 are in flight while
//    tile t is multiplied, with no registers held for them and no STS instructions;
//  - operands keep their storage order in shared memory, so the K-contiguous ones (row-major
//    A, column-major B) cost no transposing scalar stores: their fragments are read along
//    K, one LDS.64 per row for two K steps (kKGroup) instead of one LDS.128 per K step
//    along M or N. What the profiler showed for the register-staged kernel: the transposing
//    operands were where the layouts lost (docs/performance.md, step 4);
//  - one barrier per K tile: after it every thread has finished the previous tile, whose
//    stage is the one the next copies overwrite.
// Operands must be 16-byte aligned (pointer, leading dimension, batch stride): cp.async
// moves 16-byte chunks. Block tiling, warp tiling and the epilogue are those of
// sgemm_tiled.cuh (block_tile.cuh).
#pragma once
#include "../gemm_params.h"
#include "async_tile.cuh"
#include "block_tile.cuh"
#include "tile_shape.h"

namespace vecgemm {

// K steps whose fragments a K-contiguous operand loads at once (one LDS.64 per row).
constexpr int kKGroup = 2;

// The K loop: tile t is copied into stage t % kStages, kStages - 1 tiles ahead of the one
// being multiplied. Every thread commits one group of copies per tile (empty ones past the
// last tile), so "all but the newest kStages - 2 groups have landed" always means "tile t
// has landed" for this thread; the barrier after the wait makes it so for the block, and
// also means every thread has finished tile t - 1, whose stage the next copies overwrite.
template <class S, bool kChecked, class TileA, class TileB>
__device__ __forceinline__ void async_mainloop(TileA& tile_a, TileB& tile_b, float (*As)[TileA::kFloats],
                                               float (*Bs)[TileB::kFloats], int k_len, int a_row, int b_col,
                                               float (&acc)[S::TM][S::TN]) {
  const int tiles = (k_len + S::BK - 1) / S::BK;
  int next = 0, next_stage = 0;  // the next tile to copy, and its stage
  auto copy_next = [&]() {
    if (next < tiles) {
      tile_a.template copy<kChecked>(As[next_stage], k_len - next * S::BK);
      tile_b.template copy<kChecked>(Bs[next_stage], k_len - next * S::BK);
      tile_a.advance();
      tile_b.advance();
    }
    cp_async_commit();
    ++next;
    next_stage = next_stage + 1 == S::kStages ? 0 : next_stage + 1;
  };
#pragma unroll
  for (int t = 0; t < S::kStages - 1; ++t) copy_next();

  int stage = 0;
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<S::kStages - 2>();
    __syncthreads();
    copy_next();
    const float* as = As[stage];
    const float* bs = Bs[stage];
#pragma unroll
    for (int kk = 0; kk < S::BK; kk += kKGroup) {
      float ra[kKGroup][S::TM], rb[kKGroup][S::TN];
      TileA::template read<S::kFragsM, S::kLanesM, kKGroup>(as, a_row, kk, ra);
      TileB::template read<S::kFragsN, S::kLanesN, kKGroup>(bs, b_col, kk, rb);
#pragma unroll
      for (int g = 0; g < kKGroup; ++g) outer_product<S>(ra[g], rb[g], acc);
    }
    stage = stage + 1 == S::kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // nothing may still be landing in shared memory when the block exits
}

template <class S, Layout LA, Layout LB>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_async(const GemmParams p) {
  static_assert(S::kStages >= 2, "a pipeline needs two stages");
  static_assert(S::BK % kKGroup == 0, "whole K groups per tile");
  using TileA = AsyncTile<S::BM, S::BK, S::kThreads, LA == Layout::RowMajor>;
  using TileB = AsyncTile<S::BN, S::BK, S::kThreads, LB == Layout::ColMajor>;
  __shared__ __align__(16) float As[S::kStages][TileA::kFloats];
  __shared__ __align__(16) float Bs[S::kStages][TileB::kFloats];

  const BlockTile<S> blk(p);
  TileA tile_a(blk.template a_panel<LA>(p), p.a.ld, p.m - blk.m0);
  TileB tile_b(blk.template b_panel<LB>(p), p.b.ld, p.n - blk.n0);

  float acc[S::TM][S::TN];
  zero<S>(acc);
  // As in sgemm_tiled: interior blocks copy without bounds checks.
  if (blk.unchecked(p))
    async_mainloop<S, false>(tile_a, tile_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  else
    async_mainloop<S, true>(tile_a, tile_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  store_accumulators(p, blk, acc);
}

}  // namespace vecgemm
