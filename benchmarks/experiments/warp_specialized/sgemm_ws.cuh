// Experiment (docs/performance.md, step 16; not built by setup.py): the cp.async kernel with
// its work split by warpgroup. One producer warpgroup issues every copy, the consumer warps
// only load fragments and multiply; per stage a `full` mbarrier (completed by the producers'
// cp.async arrivals) and an `empty` one (completed when every consumer has loaded its last
// fragments from the stage) replace the block-wide barrier. setmaxnreg moves registers from
// the producers to the consumers (sm_90a). Knobs, for measuring:
//   PW      producer warps that copy (1-4; the others exit after giving back registers)
//   NOCOPY  copy only the first kStages tiles: what the consumers do when fed for free
//           (wrong results; the consumer side's ceiling)
//   UNROLL  copies unrolled per loop iteration in the producer
//   PREGS   producer registers after setmaxnreg (the consumers get what that frees)
// Shared layout, copies (async_tile.cuh), fragments, FFMA product, block and warp tiling and
// the epilogue are the production kernels' (block_tile.cuh).
#pragma once
#include <cstdint>

#include "gemm_params.h"
#include "async_tile.cuh"
#include "block_tile.cuh"
#include "mbarrier.cuh"
#include "tile_shape.h"

namespace vecgemm {
namespace x {

// The compute threads of a tiling plus one producer warpgroup; a block starts with
// kLaunchRegisters per thread (the cap __launch_bounds__ gives ptxas). setmaxnreg.inc takes
// only what the block's own decrements released (it waits otherwise), so the consumers get
// what the split affords, never more.
template <class Tile, int STAGES>
struct ProducerShape : AsyncShape<Tile, STAGES> {
  static constexpr int kBlockThreads = Tile::kThreads + 128;
  static constexpr int kLaunchRegisters = 65536 / (kBlockThreads * Tile::kMinBlocks) / 8 * 8;
  static constexpr int kProducerRegisters = Tile::kMinBlocks == 1 ? 40 : 24;
};

// A producer thread: tile t is copied into stage t % kStages once the consumers have
// released the tile that stage held before (t - kStages).
template <class S, bool kChecked, int NOCOPY, int UNROLL, class TileA, class TileB>
__device__ __forceinline__ void produce(TileA& tile_a, TileB& tile_b, float (*As)[TileA::kFloats],
                                        float (*Bs)[TileB::kFloats], uint64_t* full, uint64_t* empty, int k_len) {
  const int tiles = (k_len + S::BK - 1) / S::BK;
  int stage = 0;
  uint32_t phase = 0;  // parity of the stage's current round
  for (int t = 0; t < tiles; ++t) {
    if (t >= S::kStages) mbarrier_wait(&empty[stage], phase ^ 1);
    if (!NOCOPY || t < S::kStages) {
      tile_a.template copy<kChecked, UNROLL>(As[stage], k_len - t * S::BK);
      tile_b.template copy<kChecked, UNROLL>(Bs[stage], k_len - t * S::BK);
    }
    tile_a.advance();
    tile_b.advance();
    cp_async_arrive(&full[stage]);
    if (++stage == S::kStages) stage = 0, phase ^= 1;
  }
  // Nothing may still be landing in shared memory when the warp exits.
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// A consumer thread: the fragments of step kk + 1 load during step kk's FFMAs, and before a
// tile's last step the thread releases the tile's stage (its fragments are all loaded),
// waits for the next tile and loads its first fragments behind that step (k_steps).
template <class S>
__device__ __forceinline__ void consume(const float (*As)[S::BK * S::kAsStride],
                                        const float (*Bs)[S::BK * S::kBsStride], uint64_t* full, uint64_t* empty,
                                        int k_len, int a_row, int b_col, float (&acc)[S::TM][S::TN]) {
  const int tiles = (k_len + S::BK - 1) / S::BK;
  int stage = 0;
  uint32_t phase = 0;
  float ra[2][S::TM], rb[2][S::TN];  // k_steps' register sets
  mbarrier_wait(&full[0], 0);
  load_fragments<S>(As[0], Bs[0], 0, a_row, b_col, ra[0], rb[0]);
  for (int t = 0; t < tiles; ++t) {
    k_steps<S>(As[stage], Bs[stage], a_row, b_col, t + 1 < tiles, [&]() {
      mbarrier_arrive(&empty[stage]);
      if (++stage == S::kStages) stage = 0, phase ^= 1;
      mbarrier_wait(&full[stage], phase);
      return SharedTiles{As[stage], Bs[stage]};
    }, ra, rb, acc);
  }
}

template <class S, Layout LA, Layout LB, int PW, int NOCOPY, int UNROLL = 1, int PREGS = S::kProducerRegisters>
__global__ void __launch_bounds__(S::kBlockThreads, S::kMinBlocks) sgemm_ws(const GemmParams p) {
  static_assert(S::kStages >= 2, "a pipeline needs two stages");
  static_assert(S::kPrefetchFragments, "consumers release a stage before its tile's last step");
  static_assert(!S::kSteerBanks && S::kPinLoadsMask == 0, "register-staged options");
  static_assert(S::kThreads % 128 == 0, "registers are reassigned per warpgroup");
  static_assert(S::kLaunchRegisters <= 255 && S::kLaunchRegisters > PREGS, "register split");
  constexpr int kProducer = S::kThreads;  // the producer warpgroup's first thread
  constexpr int kL = S::kLaunchRegisters;
  constexpr int kCRegs0 = (kL + (kL - PREGS) * 128 / S::kThreads) / 8 * 8;
  constexpr int kCRegs = kCRegs0 > 240 ? 240 : kCRegs0;  // what the producers freed
  using TileA = AsyncTile<S::BM, S::BK, PW * 32, LA == Layout::RowMajor, S::kAsStride, kProducer>;
  using TileB = AsyncTile<S::BN, S::BK, PW * 32, LB == Layout::ColMajor, S::kBsStride, kProducer>;
  __shared__ __align__(16) float As[S::kStages][TileA::kFloats];
  __shared__ __align__(16) float Bs[S::kStages][TileB::kFloats];
  __shared__ uint64_t full[S::kStages], empty[S::kStages];

  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbarrier_init(&full[s], PW * 32);
      mbarrier_init(&empty[s], S::kThreads);
    }
  }
  __syncthreads();  // the only block-wide barrier: the mbarriers exist

  const BlockTile<S> blk(p);
  if (threadIdx.x >= kProducer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PREGS));
#endif
    if (threadIdx.x >= kProducer + PW * 32) return;
    TileA tile_a(blk.template a_panel<LA>(p), p.a.ld, p.m - blk.m0);
    TileB tile_b(blk.template b_panel<LB>(p), p.b.ld, p.n - blk.n0);
    // As in sgemm_tiled: interior blocks copy without bounds checks.
    if (blk.unchecked(p))
      produce<S, false, NOCOPY, UNROLL>(tile_a, tile_b, As, Bs, full, empty, blk.k_len);
    else
      produce<S, true, NOCOPY, UNROLL>(tile_a, tile_b, As, Bs, full, empty, blk.k_len);
    return;
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kCRegs));
#endif
  float acc[S::TM][S::TN];
  zero<S>(acc);
  consume<S>(As, Bs, full, empty, blk.k_len, blk.a_row, blk.b_col, acc);
  store_accumulators(p, blk, acc);
}

}  // namespace x
}  // namespace vecgemm
