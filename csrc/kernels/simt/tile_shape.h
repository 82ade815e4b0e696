// Compile-time description of one tiled kernel: what it computes (TileShape: the block,
// warp and thread tiles) apart from how its main loop runs (the policies), joined into the
// one type S the kernels read (KernelShape). Names follow the seed text: a block computes
// BM x BN of D, stepping K by BK; a warp owns WM x WN of that; a thread owns TM x TN, held
// as (TM/4) x (TN/4) fragments of 4x4 spread across the warp tile so that each fragment row
// is one LDS.128 and the 32 lanes of a warp read one compact, bank-conflict-free stretch of
// shared memory.
#pragma once

namespace vecgemm {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_>
struct TileShape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int WM = WM_, WN = WN_, TM = TM_, TN = TN_;

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
};

// How the main loop of the tiled kernels runs (kernel_configs.h says, per row, which).
template <int MIN_BLOCKS, bool PREFETCH, bool STEER, int PIN_LOADS>
struct MainloopPolicy {
  static constexpr int kMinBlocks = MIN_BLOCKS;  // per SM, for __launch_bounds__
  // Load the fragments of K step kk + 1 from shared memory while step kk's FFMAs run, and
  // the next tile's first fragments right after its barrier, before the tile's last FFMAs
  // (two register sets of fragments); otherwise each step loads its own fragments first.
  static constexpr bool kPrefetchFragments = PREFETCH;
  // Register banks steered for the FFMAs. An LDS.128 puts b[j] in a register of parity j,
  // and ptxas gives acc[i][j] parity j too, so an FFMA that takes a[i] from the reuse cache
  // reads two registers of one bank. With this, B's shared tile holds column x at x ^ 1
  // (b[j] lands in the other bank), and the accumulators are zeroed from a value ptxas
  // cannot see through and written to split-K partials through copies (zero,
  // store_accumulators), so that no 64-bit zeroing or 128-bit store ties them to aligned
  // register pairs or quads.
  static constexpr bool kSteerBanks = STEER;
  // The register-staged kernel's next-tile loads held at the start of the tile (mainloop,
  // sgemm_tiled.cuh), per storage order: bit order_index(LA, LB) (kernel_configs.h).
  static constexpr int kPinLoadsMask = PIN_LOADS;
};

template <class Tile, class Policy>
struct KernelShape : Tile, Policy {};

// The cp.async kernel's shape (sgemm_async.cuh): a kernel shape plus its pipeline depth.
template <class Shape, int STAGES>
struct AsyncShape : Shape {
  static constexpr int kStages = STAGES;  // shared-memory stages, kStages - 1 tiles in flight
};

}  // namespace vecgemm
