// Shared-memory tiles filled with cp.async (global -> shared with no register round trip),
// for sgemm_async.cuh. The shared layout is the register-staged kernel's: [BK][BX + pad],
// X (M for A, N for B) contiguous, so that a K step's fragment row is one LDS.128 along X
// (load_fragments, block_tile.cuh):
//  - an X-contiguous operand (column-major A, row-major B) is copied in 16-byte chunks
//    (VEC = 4), or, where its rows do not start 16-byte aligned, element by element
//    (VEC = 1: 4-byte copies, any alignment, still coalesced across the warp);
//  - a K-contiguous operand (row-major A, column-major B) is transposed by the copy itself:
//    4-byte cp.async, each element written straight to its transposed place. The 8 lanes
//    of a warp that read 8 consecutive K of one row (32 bytes, one sector) write 8 shared
//    rows; with the row stride BX + 4 they fall in 8 banks 4 apart, the warp's 4 rows in
//    the 4 banks between, so both the reads and the writes are conflict-free. This is what
//    cuBLAS's fp32 kernels do (LDGSTS.E in their SASS, docs/performance.md); an
//    earlier version kept K-contiguous tiles in storage order and read fragments along K,
//    which put a K step's fragment in registers of one parity.
#pragma once
#include <cstdint>

namespace vecgemm {

// 16 or 4 bytes from global to shared memory; bytes past src_bytes read as zero, so edge
// tiles need no separate path. The 16-byte copies bypass L1 (.cg). The 4-byte ones go
// through it (.ca, the only choice for 4 bytes), so the 8 copies of one sector cost one
// L2 read; the L2::128B hint fetches the rest of each row's 128-byte line.
// cp.async exists from sm_80 on; the planner never runs these kernels on an older GPU, whose
// build compiles them to a trap.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async16(float* smem, const float* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(float* smem, const float* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
#else
__device__ __forceinline__ void cp_async16(float*, const float*, int) { __trap(); }
__device__ __forceinline__ void cp_async4(float*, const float*, int) { __trap(); }
__device__ __forceinline__ void cp_async_commit() {}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {}
#endif

// One operand's tiles, for one thread: which elements it copies and where they go.
// BX: the tile's extent along M (A) or N (B); kStride: floats per shared row (BX + pad).
// The copies are spread over the block's kThreads threads.
template <int BX, int BK, int kThreads, bool kKContiguous, int kStride, int VEC = 4>
struct AsyncTile {
  static constexpr int kFloats = BK * kStride;
  // A copy moves one element (K-contiguous, or unaligned) or a 4-float chunk along X.
  static constexpr int kWidth = kKContiguous ? 1 : VEC;
  static_assert(VEC == 1 || VEC == 4, "16- or 4-byte copies");
  static constexpr int kCopies = BX * BK / kWidth;
  static constexpr int kIters = (kCopies + kThreads - 1) / kThreads;
  static constexpr bool kPartial = kCopies % kThreads != 0;  // small tiles: threads idle
  // K-contiguous: lanes take 8 consecutive K of a row, then the next row; with X in the
  // middle (k = (v / 8 / BX) * 8 + v % 8, x = v / 8 % BX) a thread keeps its K offset and
  // its row moves by a constant per copy.
  static constexpr int kKRun = 8;
  static_assert(!kKContiguous || (BK % kKRun == 0 && kThreads % kKRun == 0 && BX % (kThreads / kKRun) == 0),
                "K-contiguous tiles: BK a multiple of 8, whole rows per pass");
  static_assert(kKContiguous || BX % kWidth == 0, "whole chunks along X");
  static_assert(kKContiguous || kThreads % (BX / kWidth) == 0, "an X-contiguous thread keeps its X");
  static_assert(kStride % 4 == 0, "shared rows stay 16-byte aligned");

  const float* src;  // element (x = 0, k = 0) of the current K tile
  int64_t ld;
  int x_left;        // rows (A) or columns (B) of the problem from the tile's origin

  // panel: element (x = 0, k = 0) of the first K tile.
  __device__ __forceinline__ AsyncTile(const float* panel, int64_t ld_, int x_left_)
      : src(panel), ld(ld_), x_left(x_left_) {}

  __device__ __forceinline__ static unsigned tid() { return threadIdx.x; }

  // Tile coordinates of the thread's i-th copy.
  __device__ __forceinline__ static void coords(int i, int& x, int& k) {
    const int v = i * kThreads + tid();
    if (kKContiguous) {
      x = (v / kKRun) % BX;
      k = (v / kKRun / BX) * kKRun + v % kKRun;
    } else {
      k = v / (BX / kWidth);
      x = (v % (BX / kWidth)) * kWidth;
    }
  }

  // Issues the copies of the current K tile into `tile`; k_left: K left in the problem from
  // the tile's start. Bounds left unchecked are the caller's guarantee.
  //  - kCheckX, for a tile on the problem's edge: nothing past x_left is read. The rows (A)
  //    or columns (B) past it reach only outputs that are never stored, so their shared rows
  //    need no zeros. An X-contiguous thread keeps one X in every copy: past x_left it
  //    copies nothing (one test a tile, outside the copies), and a 16-byte chunk that x_left
  //    cuts is copied whole, its floats past x_left lying in the row's padding to its
  //    leading dimension or, on the last row, in storage that vec4_ok (plan.cpp) requires.
  //    A K-contiguous thread's rows change from copy to copy: a row past x_left copies the
  //    last row instead (a few lanes of a warp on one sector). Neither costs the main loop
  //    a test per copy. Clamping the X-contiguous copies too put whole warps on one address,
  //    which made the 4-byte copies up to 1.5x slower (docs/history.md, step 39).
  //  - kCheckK, for the tile that holds the remainder of K: the K past k_left reads as zero,
  //    which every row needs.
  template <bool kCheckX, bool kCheckK>
  __device__ __forceinline__ void copy(float* tile, int k_left) const {
    if constexpr (kCheckX && !kKContiguous) {
      int x, k;
      coords(0, x, k);
      if (x >= x_left) return;
    }
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (kPartial && i * kThreads + int(tid()) >= kCopies) continue;
      int x, k;
      coords(i, x, k);
      float* d = tile + k * kStride + x;
      if (kCheckX && kKContiguous) x = min(x, x_left - 1);
      const float* p = kKContiguous ? src + x * ld + k : src + k * ld + x;
      int bytes = 4 * kWidth;
      if (kCheckK && k >= k_left) bytes = 0;
      // A zero-byte copy reads nothing but still names an address: the tile's origin,
      // which is inside the problem.
      if (kCheckK && bytes == 0) p = src;
      if (kWidth == 1)
        cp_async4(d, p, bytes);
      else
        cp_async16(d, p, bytes);
    }
  }

  // On to the next K tile, k_tile K further.
  __device__ __forceinline__ void advance(int k_tile) { src += kKContiguous ? k_tile : k_tile * ld; }
};

}  // namespace vecgemm
