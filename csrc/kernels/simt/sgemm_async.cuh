// The tiled kernel with a cp.async pipeline instead of register staging (async_tile.cuh):
//  - kStages shared-memory stages: the copies of the next tiles are in flight while tile t
//    is multiplied, with no registers held for them and no STS instructions;
//  - the shared layout, fragment loads, FFMA product, block and warp tiling and the
//    epilogue are those of sgemm_tiled.cuh (block_tile.cuh); K-contiguous operands are
//    transposed by 4-byte copies (async_tile.cuh);
//  - one barrier per K tile.
// VEC = 4: operands 16-byte aligned (pointer, leading dimension, batch stride), the
// X-contiguous operand moving in 16-byte chunks; VEC = 1: any alignment, 4-byte copies.
#pragma once
#include "kernels/dependent_launch.cuh"
#include "kernels/gemm_params.h"
#include "kernels/simt/async_tile.cuh"
#include "kernels/simt/block_tile.cuh"
#include "kernels/simt/tile_shape.h"

namespace vecgemm {

// The K loop: tile t is copied into stage t % kStages. Every thread commits one group of
// copies per tile (empty ones past the last tile), so a wait for "all but the newest n
// groups" is a wait for one known tile, for this thread; the barrier after it makes it so
// for the block. The same barrier tells a thread that every other thread has finished
// reading the stage its next copies overwrite.
//  - Without kPrefetchFragments each K step loads its own fragments. The barrier opens
//    tile t, and the stage of tile t - 1 is refilled: kStages - 1 tiles in flight.
//  - With it, the fragments of step kk + 1 load during step kk's FFMAs (two register
//    sets), and the barrier sits before the last step of tile t so that the first
//    fragments of tile t + 1 load behind that step's FFMAs (k_steps, block_tile.cuh). By
//    then tile t's stage has been read whole, so it is refilled at once: kStages tiles in
//    flight.
// The first K tile holds the remainder of K (1 to BK of it, zeros after), every later one
// BK whole: only the first copy checks K, so a block inside the problem (kCheckX false)
// copies every other tile unchecked whatever K is. Where K is not a multiple of BK, which
// is most problems too small for auto to pad K (plan.cpp), a block would otherwise check
// every copy (docs/history.md, step 37). kCheckX: the block's tile reaches past the
// problem's last row or column, so its copies keep their sources inside the operands
// (AsyncTile::copy), at 0-11 instructions a K tile more than the interior's loop (step 39);
// an instance for both would put that in the interior's loop too.
template <class S, bool kCheckX, class TileA, class TileB>
__device__ __forceinline__ void async_mainloop(TileA& tile_a, TileB& tile_b, float (*As)[TileA::kFloats],
                                               float (*Bs)[TileB::kFloats], int k_len, int a_row, int b_col,
                                               float (&acc)[S::TM][S::TN]) {
  constexpr int kAhead = S::kPrefetchFragments ? S::kStages : S::kStages - 1;
  const int tiles = (k_len + S::BK - 1) / S::BK;
  if (tiles > 0) {
    const int first = k_len - (tiles - 1) * S::BK;
    tile_a.template copy<kCheckX, true>(As[0], first);
    tile_b.template copy<kCheckX, true>(Bs[0], first);
    tile_a.advance(first);
    tile_b.advance(first);
  }
  cp_async_commit();
  int next = 1, next_stage = 1;  // the next tile to copy, and its stage
  auto copy_next = [&]() {
    if (next < tiles) {
      tile_a.template copy<kCheckX, false>(As[next_stage], S::BK);
      tile_b.template copy<kCheckX, false>(Bs[next_stage], S::BK);
      tile_a.advance(S::BK);
      tile_b.advance(S::BK);
    }
    cp_async_commit();
    ++next;
    next_stage = next_stage + 1 == S::kStages ? 0 : next_stage + 1;
  };
  // The fill stays a loop: unrolled, it held kAhead copies of the copy code (up to 7.5 KB
  // each), fetched cold by every SM, and on problems of a few K tiles the warps mostly
  // waited for instructions (docs/history.md, step 37).
#pragma unroll 1
  for (int t = 1; t < kAhead; ++t) copy_next();

  int stage = 0;
  float ra[2][S::TM], rb[2][S::TN];  // k_steps' register sets
  if constexpr (!S::kPrefetchFragments) {
    for (int t = 0; t < tiles; ++t) {
      cp_async_wait<kAhead - 1>();
      __syncthreads();
      copy_next();
      k_steps<S>(As[stage], Bs[stage], a_row, b_col, false, [] { return SharedTiles{}; }, ra, rb, acc);
      stage = stage + 1 == S::kStages ? 0 : stage + 1;
    }
  } else {
    cp_async_wait<kAhead - 1>();
    __syncthreads();
    load_fragments<S>(As[0], Bs[0], 0, a_row, b_col, ra[0], rb[0]);
    for (int t = 0; t < tiles; ++t) {
      k_steps<S>(As[stage], Bs[stage], a_row, b_col, t + 1 < tiles, [&]() {
        cp_async_wait<kAhead - 2>();
        __syncthreads();
        copy_next();  // into `stage`, read whole by every thread before the barrier
        stage = stage + 1 == S::kStages ? 0 : stage + 1;
        return SharedTiles{As[stage], Bs[stage]};
      }, ra, rb, acc);
    }
  }
  cp_async_wait<0>();  // nothing may still be landing in shared memory when the block exits
}

template <class S, Layout LA, Layout LB, int VEC>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_async(const GemmParams p) {
  static_assert(S::kStages >= 2, "a pipeline needs two stages");
  static_assert(!S::kSteerBanks, "B's 16-byte copies cannot swap pairs (docs/performance.md)");
  static_assert(S::kPinLoadsMask == 0, "cp.async has no staging registers for ptxas to free");
  allow_dependents();  // a split-K reduction after it may launch now (dependent_launch.cuh)
  using TileA = AsyncTile<S::BM, S::BK, S::kThreads, LA == Layout::RowMajor, S::kAsStride, VEC>;
  using TileB = AsyncTile<S::BN, S::BK, S::kThreads, LB == Layout::ColMajor, S::kBsStride, VEC>;
  __shared__ __align__(16) float As[S::kStages][TileA::kFloats];
  __shared__ __align__(16) float Bs[S::kStages][TileB::kFloats];

  const BlockTile<S> blk(p);
  TileA tile_a(blk.template a_panel<LA>(p), p.a.ld, p.m - blk.m0);
  TileB tile_b(blk.template b_panel<LB>(p), p.b.ld, p.n - blk.n0);

  float acc[S::TM][S::TN];
  zero<S>(acc);
  if (blk.inside(p))
    async_mainloop<S, false>(tile_a, tile_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  else
    async_mainloop<S, true>(tile_a, tile_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  store_accumulators(p, blk, acc);
}

}  // namespace vecgemm
