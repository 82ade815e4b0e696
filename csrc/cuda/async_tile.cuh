// Shared-memory tiles filled with cp.async (global -> shared with no register round trip),
// for sgemm_async.cuh. A tile keeps the operand's own storage order, so no thread ever
// transposes anything:
//  - an M- or N-contiguous operand (column-major A, row-major B) is stored [BK][BX]: a
//    K step's fragment row is one LDS.128 along X, as in the register-staged kernel;
//  - a K-contiguous operand (row-major A, column-major B) is stored [BX][BK]: one vector
//    load along K gives a row's values for kKGroup consecutive K steps.
// In the K-contiguous layout every fourth row is followed by 4 floats of padding. The lanes
// of a warp that read different rows in one instruction read rows 4 apart (each lane's
// fragment is 4 consecutive rows); without the padding those rows start in the same banks
// (BK = 8 or 16 floats per row), with it they start 16 bytes apart and the read, like the
// cp.async writes, is conflict-free.
#pragma once
#include <cstdint>

namespace vecgemm {

// 16 bytes from global to shared memory, bypassing L1 (.cg); bytes past src_bytes read as
// zero, so edge tiles need no separate path.
__device__ __forceinline__ void cp_async16(float* smem, const float* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// One operand's tiles, for one thread: which 16-byte chunks it copies and where they go.
// BX: the tile's extent along M (A) or N (B).
template <int BX, int BK, int kThreads, bool kKContiguous>
struct AsyncTile {
  static_assert(BK % 4 == 0 && BX % 4 == 0, "16-byte chunks");
  // Lines are rows of the shared tile: X values (K-contiguous) or K steps (otherwise).
  static constexpr int kChunksPerLine = kKContiguous ? BK / 4 : BX / 4;
  static constexpr int kLines = kKContiguous ? BX : BK;
  static_assert(kThreads % kChunksPerLine == 0, "a thread's chunks share their column");
  static constexpr int kLinesPerPass = kThreads / kChunksPerLine;
  static constexpr int kPasses = (kLines + kLinesPerPass - 1) / kLinesPerPass;
  static_assert(!kKContiguous || kLinesPerPass % 4 == 0, "passes keep the 4-row padding pattern");
  static constexpr int kFloats = kKContiguous ? BX * BK + BX : BK * BX;

  // Shared-memory offset of (x, k); x4 a multiple of 4 (padding after every 4th row).
  __device__ __forceinline__ static int offset(int x4, int q, int k) {
    return kKContiguous ? x4 * (BK + 1) + q * BK + k : k * BX + x4 + q;
  }

  const float* src;  // the thread's first chunk in the current K tile
  int64_t ld, step;
  int dst;           // shared-memory offset of the thread's first chunk
  int line, c;       // the first chunk's line and its coordinate along the line
  int x_left;        // rows (A) or columns (B) of the problem from the tile's origin

  // panel: element (x = 0, k = 0) of the first K tile.
  __device__ __forceinline__ AsyncTile(const float* panel, int64_t ld_, int x_left_)
      : ld(ld_), step(kKContiguous ? BK : BK * ld_), x_left(x_left_) {
    const int v = threadIdx.x;
    line = v / kChunksPerLine;
    c = (v % kChunksPerLine) * 4;
    src = kKContiguous ? panel + line * ld + c : panel + line * ld + c;
    dst = kKContiguous ? offset(line & ~3, line & 3, c) : offset(c, 0, line);
  }

  // Issues the copies of the current K tile into `tile`; k_left: K left in the problem from
  // the tile's start. kChecked: what lies outside the problem reads as zero; without it the
  // caller guarantees the whole tile is inside.
  template <bool kChecked>
  __device__ __forceinline__ void copy(float* tile, int k_left) const {
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int ln = line + i * kLinesPerPass;
      if (kLines % kLinesPerPass != 0 && ln >= kLines) break;
      const float* p = src + i * kLinesPerPass * ld;
      float* d = tile + dst + i * kLinesPerPass * (kKContiguous ? BK + 1 : BX);
      if (!kChecked) {
        cp_async16(d, p, 16);
        continue;
      }
      const int line_left = kKContiguous ? x_left : k_left;
      const int c_left = kKContiguous ? k_left : x_left;
      const int bytes = ln < line_left ? max(0, min(4, c_left - c)) * 4 : 0;
      // A zero-byte copy reads nothing but still names an address: the tile's origin,
      // which is inside the problem.
      cp_async16(d, bytes > 0 ? p : src - (line * ld + c), bytes);
    }
  }

  __device__ __forceinline__ void advance() { src += step; }

  // The fragments of kKGroup consecutive K steps from kk0: r[g][f * 4 + q] is row (column)
  // base + f * kLanes * 4 + q at K step kk0 + g; base is a multiple of 4.
  template <int kFrags, int kLanes, int kKGroup>
  __device__ __forceinline__ static void read(const float* tile, int base, int kk0,
                                              float (&r)[kKGroup][kFrags * 4]) {
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const int x4 = base + f * kLanes * 4;
      if (kKContiguous) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float* s = tile + offset(x4, q, kk0);
          if constexpr (kKGroup == 4) {
            const float4 v = *reinterpret_cast<const float4*>(s);
            r[0][f * 4 + q] = v.x; r[1][f * 4 + q] = v.y; r[2][f * 4 + q] = v.z; r[3][f * 4 + q] = v.w;
          } else if constexpr (kKGroup == 2) {
            const float2 v = *reinterpret_cast<const float2*>(s);
            r[0][f * 4 + q] = v.x; r[1][f * 4 + q] = v.y;
          } else {
            static_assert(kKGroup == 1, "K group of 1, 2 or 4 steps");
            r[0][f * 4 + q] = *s;
          }
        }
      } else {
#pragma unroll
        for (int g = 0; g < kKGroup; ++g) {
          const float4 v = *reinterpret_cast<const float4*>(tile + offset(x4, 0, kk0 + g));
          r[g][f * 4 + 0] = v.x; r[g][f * 4 + 1] = v.y; r[g][f * 4 + 2] = v.z; r[g][f * 4 + 3] = v.w;
        }
      }
    }
  }
};

}  // namespace vecgemm
