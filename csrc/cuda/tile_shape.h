// Compile-time description of one tiling of the general kernel (sgemm_tiled.cuh).
// Names follow the seed text: a block computes BM x BN of D, stepping K by BK; a warp
// owns WM x WN of that; a thread owns TM x TN, held as (TM/4) x (TN/4) fragments of 4x4
// spread across the warp tile so that each fragment row is one LDS.128 and the 32 lanes
// of a warp read one compact, bank-conflict-free stretch of shared memory.
#pragma once

namespace vecgemm {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int MINB_, bool PREFETCH_,
          bool STEER_ = false, int PIN_ = 0, int ORDER_ = 0, int STORE_STEP_ = -1>
struct TileShape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int kMinBlocks = MINB_;  // per SM, for __launch_bounds__
  // Load the fragments of K step kk + 1 from shared memory while step kk's FFMAs run, and
  // the next tile's first fragments right after its barrier, before the tile's last FFMAs
  // (two register sets of fragments); otherwise each step loads its own fragments first.
  static constexpr bool kPrefetchFragments = PREFETCH_;
  // Register banks steered for the FFMAs (docs/performance.md, step 15). An LDS.128 puts
  // b[j] in a register of parity j, and ptxas gives acc[i][j] parity j too, so an FFMA that
  // takes a[i] from the reuse cache reads two registers of one bank. With this, B's shared
  // tile holds column x at x ^ 1 (b[j] lands in the other bank), and the accumulators are
  // zeroed from a value ptxas cannot see through and written to split-K partials through
  // copies (zero, store_accumulators), so that no 64-bit zeroing or 128-bit store ties
  // them to aligned register pairs or quads.
  static constexpr bool kSteerBanks = STEER_;
  // The register-staged kernel's next-tile loads held at the start of the tile (mainloop,
  // sgemm_tiled.cuh), per storage order: bit order_index(LA, LB) (tile_configs.h: kRR ...).
  static constexpr int kPinLoadsMask = PIN_;
  // The order of the outer product's FFMAs (outer_product, block_tile.cuh: FfmaOrder).
  static constexpr int kFfmaOrder = ORDER_;
  // The register-staged kernel with kPrefetchFragments: the K step of a tile before whose
  // FFMAs the next tile's staged loads go to shared memory (their registers then free for
  // the rest of the tile); -1: at the last step, just before the barrier.
  static constexpr int kStoreStep = STORE_STEP_;

  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  // The thread grid inside one warp.
  static constexpr int kLanesM = WM / TM, kLanesN = WN / TN;
  static constexpr int kFragsM = TM / 4, kFragsN = TN / 4;
  // Shared-memory rows are padded by one float4: the transposing stores of a K-contiguous
  // operand then fall in distinct banks (BM + 4 floats = 4 banks shift per K row), and
  // rows stay 16-byte aligned for LDS.128.
  static constexpr int kPad = 4;
  static constexpr int kAsStride = BM + kPad, kBsStride = BN + kPad;

  static_assert(BM % WM == 0 && BN % WN == 0, "warps must tile the block");
  static_assert(WM % TM == 0 && WN % TN == 0, "threads must tile the warp");
  static_assert(kLanesM * kLanesN == 32, "a warp is 32 threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are 4 wide (one LDS.128)");
  static_assert(BK % 4 == 0, "K-contiguous tiles load float4 along K");
  static_assert(kStoreStep < BK - 1, "the last step's stores come with the barrier (kStoreStep = -1)");
};

// The cp.async kernel's shape (sgemm_async.cuh): a block tiling plus its pipeline depth.
template <class Tile, int STAGES>
struct AsyncShape : Tile {
  static constexpr int kStages = STAGES;  // shared-memory stages, kStages - 1 tiles in flight
};

}  // namespace vecgemm
