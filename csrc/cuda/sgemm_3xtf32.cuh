// fp32 GEMM on the tensor cores with fp32 accuracy: 3xTF32 (mma.sync, sm_80 and later).
//
// Each fp32 value x is split into big = tf32(x) (round to nearest, ties away) and
// small = tf32(x - big); x - big is exact in fp32, so big + small carries 21 of x's 24
// significand bits and the dropped remainder is at most 2^-22 |x|. A product is taken as
//   a_small * b_big + a_big * b_small + a_big * b_big
// (a_small * b_small, at most 2^-22 of the product, is dropped), each term a TF32 MMA with
// fp32 accumulation, the two small terms before the big one of the same K step.
//
// Accuracy, as measured on the H200 (benchmarks/probes/tf32x3): the error grows linearly
// with K, ~10x cuBLAS fp32's at K = 1000 (relative Frobenius 7e-6 against 5.7e-7 on randn,
// 1e-5 against 4e-7 on uniform [0, 1)), because the MMA rounds its fp32 accumulator toward
// zero: three truncations per K step of 8, each up to an ulp of the whole running sum,
// biased one way. The fix (next step) is to keep the MMA accumulator short-lived: add it
// into a second fp32 accumulator (FADD, round to nearest) once per K tile and restart it
// from zero, which makes the truncations relative to a 32-K partial sum; that needs 64
// more registers a thread, so a 64 x 32 warp tile. Separate accumulators for the small
// terms alone would only divide the error by 3.
// What the kernel computes (Tf32x3Shape: block and warp tiles, stages) is apart from how
// (the loaders, the fragment loads and the passes below):
//  - block tile BM x BN, K tile 32, warps of 64 x 64, a kStages-deep cp.async pipeline;
//  - shared memory holds both operands K-contiguous, [x][32] floats per stage (x: the row
//    of A or the column of B), whatever their storage order: K-contiguous operands arrive
//    in 16-byte copies (or 4-byte ones when not 16-byte aligned), M- or N-contiguous ones
//    are transposed by the copy itself (4-byte cp.async, each element to its place), as the
//    fp32 kernels of this library do (async_tile.cuh);
//  - the rows are XOR-swizzled in 4-float units (swizzle()), so the fragment loads (one
//    LDS.64 per row and K step), the 16-byte copies and the transposing 4-byte copies are
//    all free of bank conflicts, with no padding;
//  - the K order inside an MMA and the row/column order inside a warp tile are free (any
//    permutation applied to both operands, or to the output, gives the same product); they
//    are chosen so that a thread's two K values of a fragment are adjacent (LDS.64) and its
//    16 output columns are contiguous (16-byte stores).
//
// Inf and NaN. Splitting Inf gives small = Inf - Inf = NaN, and even with small set to 0,
// Inf * b_small (b_small = 0 for an exactly representable b, or of either sign) makes NaN
// where torch.mm gives +-Inf. So the fast pass does not guard the split: a non-finite input
// makes its small part NaN, which turns every output it touches into NaN (NaN times
// anything, 0 included, is NaN). After the K loop the block checks its accumulators; if any
// is NaN (rare: an Inf or NaN input, or a value so close to FLT_MAX that rounding it to
// TF32 overflows) it computes its tile again in two guarded passes: first the small terms,
// with big and small of a non-finite value set to 0, then big * big alone, where Inf and
// NaN meet only each other and the big parts, as in an fp32 product. The result is then
// NaN or +-Inf exactly where the fp32 product's is (all special-value cases of the probe).
// Subnormals: the split itself is exact for them (TF32 has fp32's exponent range), but the
// probe measured 4x cuBLAS's relative error on products whose terms are subnormal (1.4e-3
// against 3.6e-4 where results sit near 2^-126), consistent with the MMA flushing subnormal
// inputs or products; no result came out 0 where fp32's is normal.
#pragma once
#include <cstdint>

#include "../gemm_params.h"
#include "async_tile.cuh"         // cp_async16, cp_async4, commit, wait
#include "block_tile.cuh"         // tile_origin: the raster order of the tiled kernels
#include "dependent_launch.cuh"   // allow_dependents
#include "epilogue.cuh"           // store_output4, store_partial4

namespace vecgemm {
namespace tf32x3 {

// The block tile: BM x BN of D per block, warps of kWM x kWN, K tiles of kBK, kStages
// shared-memory stages (kStages - 1 tiles in flight while one is multiplied).
template <int BM_, int BN_, int STAGES_>
struct Tf32x3Shape {
  static constexpr int BM = BM_, BN = BN_, kStages = STAGES_;
  static constexpr int kBK = 32;
  static constexpr int kWM = 64, kWN = 64;
  static constexpr int kWarpsM = BM / kWM, kWarpsN = BN / kWN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kMTiles = kWM / 16, kNTiles = kWN / 8;  // MMA tiles of a warp
  static constexpr int kStageFloats = (BM + BN) * kBK;
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  static_assert(BM % kWM == 0 && BN % kWN == 0, "warps tile the block");
  static_assert(kStages >= 2, "a pipeline needs two stages");
};

// The XOR applied to the K index (0-31) of row x of a shared tile. It flips bits 2-4 only,
// so 16-byte units stay whole (the 16-byte copies) and 8-byte pairs stay pairs (LDS.64).
//  - Fragment loads: the 16 lanes of a half warp read rows {2j, 2j+1, 2j+16, 2j+17} (+32)
//    (warp_row below), each 4 pairs of one K quad; bits 3-4 of the XOR differ between those
//    rows, so they read 4 different 8-float quads: 32 banks.
//  - Transposing copies: a warp writes 8 consecutive rows x 4 consecutive K; bits 2-4 of
//    the XOR are a bijection of x & 7, so those land in 32 banks.
//  - Row copies (16 or 4 bytes): one row per 8 or 32 lanes, permuted within the row.
__device__ __forceinline__ int swizzle(int x) {
  return (((x >> 1) & 1) << 2) | ((x & 1) << 3) | ((((x >> 4) ^ (x >> 2)) & 1) << 4);
}

// The physical row (column) of the warp tile that holds logical row g + 8 j of its MMA
// tiles (g = lane / 4, j = 0..7). A bijection of 0..63; it makes the output columns of a
// thread contiguous (16t .. 16t + 15 for lane group t) and satisfies swizzle()'s rows.
__device__ __forceinline__ int warp_row(int g, int j) { return 16 * (g >> 1) + 2 * j + (g & 1); }

// One operand's copies into the [x][32] stage layout, for one thread. BX: the tile's rows
// (BM for A, BN for B). kKContiguous: the operand's K is its contiguous dimension (row-major
// A, column-major B). kVec4: 16-byte copies (K-contiguous and 16-byte aligned operands).
// Each copy's global address is the previous one's plus a step (pointer chasing rather than
// base + i * step) and each shared one a constant or a single XOR away from the thread's
// first: the 8-32 copies of a tile then hold no registers across the K loop.
template <int BX, int kThreads, bool kKContiguous, bool kVec4>
struct Loader {
  static constexpr int kBK = 32;
  static constexpr int kWarps = kThreads / 32;
  static constexpr bool kWide = kKContiguous && kVec4;
  // Wide: 8 lanes per row, a 16-byte unit each (a row's 128 bytes per 8 lanes), rows
  // kThreads / 8 apart per copy. Row copies: a warp per row, 4 bytes a lane, rows kWarps
  // apart. Transposing: a warp takes 8 consecutive x (one 32-byte sector of a K row) by 4
  // consecutive K, lanes along x first; x groups of the warps side by side (kXSteps of them
  // per K quad), then the next K quad.
  static constexpr int kXSteps = BX / 8 / kWarps;
  static constexpr int kIters = kWide ? BX * 8 / kThreads : kKContiguous ? BX / kWarps : 8 * kXSteps;
  static_assert(!kWide || BX * 8 % kThreads == 0, "whole 16-byte copies per thread");
  static_assert(kKContiguous || (BX / 8) % kWarps == 0, "transposing copies: whole x groups per warp");
  static_assert(kKContiguous || kWarps % 4 == 0 || kXSteps == 1,
                "transposing copies: x groups 32 rows apart share a swizzle");

  const float* src;  // the thread's first element of the current K tile
  int64_t ld;
  int x0, k0;        // the thread's first element's place in the tile
  int x_left;        // rows of the problem from the tile's origin

  __device__ __forceinline__ Loader(const float* panel, int64_t ld_, int x_left_) : ld(ld_), x_left(x_left_) {
    const int v = threadIdx.x;
    if (kWide) {
      x0 = v / 8, k0 = (v % 8) * 4;
    } else if (kKContiguous) {
      x0 = v / 32, k0 = v % 32;
    } else {
      x0 = (v / 32) * 8 + v % 8, k0 = (v / 8) % 4;
    }
    src = panel + (kKContiguous ? x0 * ld_ + k0 : k0 * ld_ + x0);
  }

  // Issues the copies of the current K tile into `tile`; k_left: K left from its start.
  // kChecked: elements outside the problem read as zero (the tile's origin stands in as
  // the address of a zero-byte copy); without it the whole tile is inside.
  template <bool kChecked>
  __device__ __forceinline__ void copy(float* tile, int k_left) const {
    const float* origin = src - (kKContiguous ? x0 * ld + k0 : k0 * ld + x0);
    if constexpr (kKContiguous) {
      constexpr int kRowStep = kWide ? kThreads / 8 : kWarps;
      const float* p = src;
#pragma unroll
      for (int i = 0; i < kIters; ++i, p += kRowStep * ld) {
        const int x = x0 + i * kRowStep;
        float* d = tile + x * kBK + (k0 ^ swizzle(x));
        if (kWide) {
          int bytes = 16;
          if (kChecked) bytes = x < x_left ? max(0, min(4, k_left - k0)) * 4 : 0;
          cp_async16(d, kChecked && bytes == 0 ? origin : p, bytes);
        } else {
          const bool in = !kChecked || (x < x_left && k0 < k_left);
          cp_async4(d, in ? p : origin, in ? 4 : 0);
        }
      }
    } else {
      // x0 + 32 j keeps x0's swizzle; K quad q XORs into bits 2-4 with it.
      const int sw = swizzle(x0);
      const float* p = src;
#pragma unroll
      for (int q = 0; q < 8; ++q, p += 4 * ld) {
        const int k = 4 * q + k0;
#pragma unroll
        for (int j = 0; j < kXSteps; ++j) {
          const int x = x0 + j * kWarps * 8;
          const bool in = !kChecked || (x < x_left && k < k_left);
          cp_async4(tile + x * kBK + ((4 * q) ^ sw) + k0, in ? p + j * kWarps * 8 : origin, in ? 4 : 0);
        }
      }
    }
  }

  __device__ __forceinline__ void advance() { src += kKContiguous ? kBK : kBK * ld; }
};

// ---- the split and the MMA -----------------------------------------------------------

// x rounded to TF32, to nearest with ties away from zero (cvt.rna.tf32.f32's rounding),
// by adding half a TF32 ulp to the magnitude's bits and truncating: two integer
// instructions, where cvt.rna.tf32.f32 compiles to about four on sm_90 (a test and a
// select for NaN among them). Finite values round correctly, the carry into the exponent
// included; Inf stays Inf; a value within half an ulp of FLT_MAX becomes Inf and a NaN may
// become Inf or 0 (the fast pass's NaN check catches both: x - rounded(x) is then NaN or
// Inf).
__device__ __forceinline__ float round_tf32(float x) {
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// D += A * B for one m16n8k8 tile. The MMA reads the top 19 bits of each fp32 register as
// TF32 (it truncates), so A and B are passed already rounded.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
}
#else
// Below sm_80 there is no TF32 MMA: the planner never runs this kernel there.
__device__ __forceinline__ void mma_tf32(float (&)[4], const float (&)[4], const float (&)[2]) { __trap(); }
#endif

// The K loop's three passes. Fast: the whole 3xTF32 product, splits unguarded (a non-finite
// input leaves NaN, which the block detects). Small and Big: the guarded recomputation,
// the two small terms with non-finite values zeroed, then big * big alone.
enum class Pass { Fast, Small, Big };

// x's parts as the pass uses them: hi (big) and lo (small). small is rounded too (two
// more instructions) rather than left to the MMA's truncation: that halves the error of
// big + small, from 2^-21 |x| to 2^-22 |x|.
template <Pass P>
__device__ __forceinline__ void split(float x, float& hi, float& lo) {
  if constexpr (P == Pass::Fast) {
    hi = round_tf32(x);
    lo = round_tf32(x - hi);
  } else {
    const bool finite = isfinite(x);
    hi = round_tf32(x);
    // A finite x that rounds up past FLT_MAX keeps its truncation instead (finite, within
    // one TF32 ulp; its remainder goes to the small terms).
    if (finite && isinf(hi)) hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
    if constexpr (P == Pass::Small) {
      lo = finite ? round_tf32(x - hi) : 0.0f;
      hi = finite ? hi : 0.0f;
    } else {
      // Inf as it is; any NaN as one whose top 19 bits are a NaN too (the MMA truncates).
      hi = finite ? hi : isnan(x) ? __uint_as_float(0x7fffffffu) : x;
      lo = 0.0f;
    }
  }
}

// The per-thread constant part of a fragment load's offset into a stage, for the rows
// j = p, p + 4 (p = 0..3) of its warp tile, K step 0; step s reads offset ^ (8 s) (the K
// of step s is 8 s + 2 t, and the swizzle's and the step's bits add by XOR).
__device__ __forceinline__ int fragment_offset(int warp_x, int g, int t, int p) {
  const int x = warp_x + warp_row(g, p);
  return x * 32 + ((2 * t) ^ swizzle(x));
}

// One K tile of the warp's product: four K steps of 8. The thread's K values of step s are
// 8 s + 2 t and 8 s + 2 t + 1, standing for the MMA's K t and t + 4.
template <class S, Pass P>
__device__ __forceinline__ void k_tile(const float* as, const float* bs, const int (&a_off)[4], const int (&b_off)[4],
                                       float (&acc)[S::kMTiles][S::kNTiles][4]) {
  float2 ra[8], rb[8];
  auto load = [&](int s) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // Rows j and j + 4 share a swizzle pattern; j + 4 lies 8 rows (256 floats) further.
      ra[j] = *reinterpret_cast<const float2*>(as + ((a_off[j & 3] ^ (8 * s)) + (j >> 2) * 256));
      rb[j] = *reinterpret_cast<const float2*>(bs + ((b_off[j & 3] ^ (8 * s)) + (j >> 2) * 256));
    }
  };
  // Each step loads its own fragments: loading the next step's during this one's MMAs
  // (32 more registers) made ptxas spill; two warps per scheduler cover the wait instead.
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    load(s);
    float b_hi[S::kNTiles][2], b_lo[S::kNTiles][2];
#pragma unroll
    for (int j = 0; j < S::kNTiles; ++j) {
      split<P>(rb[j].x, b_hi[j][0], b_lo[j][0]);
      split<P>(rb[j].y, b_hi[j][1], b_lo[j][1]);
    }
    const float2 (&a_raw)[8] = ra;
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i) {
      // MMA tile i's rows g and g + 8 are logical rows 2i and 2i + 1 of the thread's eight.
      float a_hi[4], a_lo[4];
      split<P>(a_raw[2 * i].x, a_hi[0], a_lo[0]);
      split<P>(a_raw[2 * i + 1].x, a_hi[1], a_lo[1]);
      split<P>(a_raw[2 * i].y, a_hi[2], a_lo[2]);
      split<P>(a_raw[2 * i + 1].y, a_hi[3], a_lo[3]);
      // Each accumulator's three MMAs are 8 apart, not back to back.
      if constexpr (P != Pass::Big) {
#pragma unroll
        for (int j = 0; j < S::kNTiles; ++j) mma_tf32(acc[i][j], a_lo, b_hi[j]);
#pragma unroll
        for (int j = 0; j < S::kNTiles; ++j) mma_tf32(acc[i][j], a_hi, b_lo[j]);
      }
      if constexpr (P != Pass::Small) {
#pragma unroll
        for (int j = 0; j < S::kNTiles; ++j) mma_tf32(acc[i][j], a_hi, b_hi[j]);
      }
    }
  }
}

// The block's K loop, pass P: tile t is copied into stage t % kStages; every thread commits
// one group per tile (empty past the last), so waiting for all but the newest kStages - 2
// groups is waiting for tile t, and the barrier after it makes that so for the block and
// tells every thread that the stage refilled next (read in tile t - 1) is free.
template <class S, Pass P, bool kChecked, class LA, class LB>
__device__ __forceinline__ void mainloop(LA ld_a, LB ld_b, float* smem, int k_len, const int (&a_off)[4],
                                         const int (&b_off)[4], float (&acc)[S::kMTiles][S::kNTiles][4]) {
  const int tiles = (k_len + S::kBK - 1) / S::kBK;
  auto stage_a = [&](int st) { return smem + st * S::kStageFloats; };
  auto stage_b = [&](int st) { return smem + st * S::kStageFloats + S::BM * S::kBK; };
  int next = 0, next_stage = 0;
  auto copy_next = [&]() {
    if (next < tiles) {
      ld_a.template copy<kChecked>(stage_a(next_stage), k_len - next * S::kBK);
      ld_b.template copy<kChecked>(stage_b(next_stage), k_len - next * S::kBK);
      ld_a.advance();
      ld_b.advance();
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
    k_tile<S, P>(stage_a(stage), stage_b(stage), a_off, b_off, acc);
    stage = stage + 1 == S::kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // nothing may land in shared memory after the loop
}

template <class S>
__device__ __forceinline__ void zero(float (&acc)[S::kMTiles][S::kNTiles][4]) {
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
}

template <class S>
__device__ __forceinline__ bool any_nan(const float (&acc)[S::kMTiles][S::kNTiles][4]) {
  bool nan = false;
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) nan |= acc[i][j][c] != acc[i][j][c];
  return nan;
}

// D = alpha * A @ B + beta * C, or split-K partial sums, for GemmParams' problem: grid.x the
// output tiles in tile_origin's raster order, grid.z = batch * k_splits. LA, LB: storage
// orders; kVec4: A and B 16-byte aligned (pointer, leading dimension, batch stride).
template <class S, Layout LA, Layout LB, bool kVec4>
__global__ void __launch_bounds__(S::kThreads, 1) sgemm_3xtf32(const GemmParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  allow_dependents();  // a split-K reduction after it may launch now
  extern __shared__ __align__(16) float smem[];
  constexpr bool kAK = LA == Layout::RowMajor, kBK = LB == Layout::ColMajor;  // K-contiguous
  using LoadA = Loader<S::BM, S::kThreads, kAK, kVec4>;
  using LoadB = Loader<S::BN, S::kThreads, kBK, kVec4>;

  int m0, n0;
  tile_origin(p.m, p.n, S::BM, S::BN, blockIdx.x, m0, n0);
  const int batch = blockIdx.z / p.k_splits, split_id = blockIdx.z % p.k_splits;
  const int k_begin = split_id * p.k_slice;
  const int k_len = max(0, min(p.k - k_begin, p.k_slice));
  const float* a_panel = p.a.ptr + batch * p.a.batch_stride + (kAK ? m0 * p.a.ld + k_begin : k_begin * p.a.ld + m0);
  const float* b_panel = p.b.ptr + batch * p.b.batch_stride + (kBK ? n0 * p.b.ld + k_begin : k_begin * p.b.ld + n0);
  const LoadA ld_a(a_panel, p.a.ld, p.m - m0);
  const LoadB ld_b(b_panel, p.b.ld, p.n - n0);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_m = (warp / S::kWarpsN) * S::kWM, warp_n = (warp % S::kWarpsN) * S::kWN;
  int a_off[4], b_off[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    a_off[q] = fragment_offset(warp_m, g, t, q);
    b_off[q] = fragment_offset(warp_n, g, t, q);
  }

  float acc[S::kMTiles][S::kNTiles][4];
  zero<S>(acc);
  // Interior blocks (whole tiles, K a multiple of 32) copy without bounds checks.
  if (m0 + S::BM <= p.m && n0 + S::BN <= p.n && k_len % S::kBK == 0)
    mainloop<S, Pass::Fast, false>(ld_a, ld_b, smem, k_len, a_off, b_off, acc);
  else
    mainloop<S, Pass::Fast, true>(ld_a, ld_b, smem, k_len, a_off, b_off, acc);
  // Also the barrier the guarded passes need before their copies overwrite the stages.
  if (__syncthreads_or(any_nan<S>(acc))) {
    zero<S>(acc);
    mainloop<S, Pass::Small, true>(ld_a, ld_b, smem, k_len, a_off, b_off, acc);
    __syncthreads();
    mainloop<S, Pass::Big, true>(ld_a, ld_b, smem, k_len, a_off, b_off, acc);
  }

  // Thread (g, t) holds rows warp_row(g, 2i + h) (h = c / 2) and columns 16 t .. 16 t + 15
  // of the warp tile: MMA tile j's columns 2t, 2t + 1 are columns 16 t + 2 j, + 1.
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + warp_m + warp_row(g, 2 * i + h);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int col = n0 + warp_n + 16 * t + 4 * q;
        const float v[4] = {acc[i][2 * q][2 * h], acc[i][2 * q][2 * h + 1], acc[i][2 * q + 1][2 * h],
                            acc[i][2 * q + 1][2 * h + 1]};
        if (p.k_splits == 1)
          store_output4(p, batch, row, col, v);
        else
          store_partial4(p, split_id, batch, row, col, v);
      }
    }
#else
  __trap();  // no TF32 MMA before sm_80; never launched there
#endif
}

}  // namespace tf32x3
}  // namespace vecgemm
