// Moves one BK x BX tile of an operand from global memory to shared memory, through
// registers so the next tile's loads can be in flight while the current one is used.
//
// Shared memory always holds the tile as [BK][BX + pad], the tile's M (or N) dimension
// contiguous, because that is the direction the compute loop reads with LDS.128.
// In global memory the contiguous dimension is either that same one (column-major A,
// row-major B: a straight vector copy) or K (row-major A, column-major B: the seed's
// transpose, a vector load scattered into VEC rows by scalar stores).
//
// In edge tiles every element is bounds-checked against the rows and K left in the
// problem and zero-filled outside it, so it contributes nothing; interior tiles load
// without checks (load<false>).
//
// kSwapPairs: element x of a shared row is stored at x ^ 1 (TileShape::kSteerBanks says why).
#pragma once
#include <cstdint>

namespace vecgemm {

template <int VEC>
struct VecLoad;
template <>
struct VecLoad<4> {
  static __device__ __forceinline__ void run(const float* p, float* r) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
  }
};
template <>
struct VecLoad<2> {
  static __device__ __forceinline__ void run(const float* p, float* r) {
    const float2 v = __ldg(reinterpret_cast<const float2*>(p));
    r[0] = v.x; r[1] = v.y;
  }
};
template <>
struct VecLoad<1> {
  static __device__ __forceinline__ void run(const float* p, float* r) { r[0] = __ldg(p); }
};

// BX: the tile's extent along M (for A) or N (for B). VEC: floats per global load, set by
// the alignment of the operand's pointer and leading dimension (4 when 16-byte aligned).
template <int BX, int BK, int kThreads, int VEC, bool kKContiguous, int kSmemStride, bool kSwapPairs = false>
struct TileLoader {
  static_assert(VEC == 1 || VEC == 2 || VEC == 4, "vector width");
  static_assert(kSmemStride % 4 == 0, "shared rows stay 16-byte aligned");
  static constexpr int kVectorsPerLine = kKContiguous ? BK / VEC : BX / VEC;
  static constexpr int kVectors = BX * BK / VEC;
  static constexpr int kIters = (kVectors + kThreads - 1) / kThreads;
  // Small tiles have fewer vectors than threads: the extra threads idle.
  static constexpr bool kPartial = kVectors % kThreads != 0;

  const float* ptr;  // element (x = 0, k = 0) of this block's panel at the current K tile
  int64_t ld;
  int64_t k_step;    // pointer advance per K tile: BK along the K stride
  int x_left;        // rows (A) or columns (B) of the problem from this panel's start
  float regs[kIters][VEC];

  __device__ __forceinline__ TileLoader(const float* panel, int64_t ld_, int x_left_)
      : ptr(panel), ld(ld_), k_step(kKContiguous ? BK : BK * ld_), x_left(x_left_) {}

  // Position of this thread's i-th vector inside the tile.
  __device__ __forceinline__ static void coords(int i, int& x, int& kk) {
    const int v = i * kThreads + threadIdx.x;
    if (kKContiguous) {
      x = v / kVectorsPerLine;
      kk = (v % kVectorsPerLine) * VEC;
    } else {
      kk = v / kVectorsPerLine;
      x = (v % kVectorsPerLine) * VEC;
    }
  }

  // k_left: K elements of the problem (this split) from the current tile's start.
  // kChecked = false: the caller guarantees the whole tile is inside the problem.
  template <bool kChecked>
  __device__ __forceinline__ void load(int k_left) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (kPartial && i * kThreads + int(threadIdx.x) >= kVectors) continue;
      int x, kk;
      coords(i, x, kk);
      const float* p = kKContiguous ? ptr + x * ld + kk : ptr + kk * ld + x;
      if (kChecked)
        load_checked(p, x, kk, k_left, regs[i]);
      else
        VecLoad<VEC>::run(p, regs[i]);
    }
  }

  // Along the contiguous dimension a vector is whole, partial, or absent; what is outside
  // the problem reads as zero.
  __device__ __forceinline__ void load_checked(const float* p, int x, int kk, int k_left, float (&r)[VEC]) const {
#pragma unroll
    for (int j = 0; j < VEC; ++j) r[j] = 0.0f;
    const int c = kKContiguous ? kk : x;  // contiguous coordinate
    const int c_left = kKContiguous ? k_left : x_left;
    const bool line_ok = kKContiguous ? x < x_left : kk < k_left;
    if (!line_ok || c >= c_left) return;
    if (c + VEC <= c_left) {
      VecLoad<VEC>::run(p, r);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (c + j < c_left) r[j] = __ldg(p + j);
    }
  }

  __device__ __forceinline__ void store(float* smem) const {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (kPartial && i * kThreads + int(threadIdx.x) >= kVectors) continue;
      int x, kk;
      coords(i, x, kk);
      if (kKContiguous) {
        // The transpose: VEC consecutive K values go to VEC shared rows. Scalar stores
        // are the only option; the row padding keeps a warp's stores in distinct banks.
#pragma unroll
        for (int j = 0; j < VEC; ++j) smem[(kk + j) * kSmemStride + (x ^ int(kSwapPairs))] = regs[i][j];
      } else if (VEC == 4) {
        *reinterpret_cast<float4*>(&smem[kk * kSmemStride + x]) =
            kSwapPairs ? make_float4(regs[i][1], regs[i][0], regs[i][3], regs[i][2])
                       : make_float4(regs[i][0], regs[i][1], regs[i][2], regs[i][3]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) smem[kk * kSmemStride + ((x + j) ^ int(kSwapPairs))] = regs[i][j];
      }
    }
  }

  __device__ __forceinline__ void advance() { ptr += k_step; }
};

}  // namespace vecgemm
