// fp32 GEMM on the tensor cores with fp32 accuracy: 3xTF32 (mma.sync, sm_80 and later).
//
// Each fp32 value x is split into big = tf32(x) (round to nearest, ties away) and
// small = tf32(x - big); x - big is exact in fp32, so big + small carries 21 of x's 24
// significand bits and the dropped remainder is at most 2^-22 |x|. A product is taken as
//   a_small * b_big + a_big * b_small + a_big * b_big
// (a_small * b_small, at most 2^-22 of the product, is dropped), each term a TF32 MMA with
// fp32 accumulation, the two small terms before the big one of the same K step.
//
// Accumulation. The tensor core rounds its fp32 accumulator toward zero (PTX leaves the
// rounding, order and subnormal handling of .tf32 mma unspecified; the probe measured the
// result). With one accumulator over all of K, every MMA truncates relative to the whole
// running sum, biased one way: the first kernel's error grew linearly with K, ~0.31 u per
// MMA (1000^3 randn 7e-6 = 117 u over 375 MMAs; 64x64x4096 2.9e-5 = 486 u over 1536). So
// the MMAs accumulate into a short-lived accumulator, started from zero each K tile and
// added into a second fp32 accumulator (round to nearest) at the tile's end:
//  - a truncation is then relative to a 32-K partial sum, and the tiles' truncation errors
//    follow their partial sums' signs, which vary, instead of accumulating one way: the
//    error of a tile's 12 MMAs is ~0.31 u x 12 ~ 3.7 u of the tile sum, and over K / 32
//    tiles of random sign that stays ~3.7 u of the result, independent of K;
//  - the chain of tile sums is K / 32 long: ~0.4 u sqrt(K / 64) (the model that gives 9 u for
//    cuBLAS's length-1000 FFMA chain, measured 9.5 u): 1.6 u at K = 1000, 3.2 u at 4096;
//  - once per tile rather than per K step (8): per step would cut the first term to ~1 u
//    but make the chain 4x as long (6.4 u at 4096) and cost 4x the adds (64 per 48 HMMA);
//    per 2 tiles doubles the first term for 1.6 u less chain at 4096. 32 is the minimum of
//    the sum over the K of interest, and its 64 adds a thread come once per 192 HMMA.
// Predicted relative Frobenius error, with the split's ~2 u: 1000^3 randn ~4.5 u (2.7e-7,
// cuBLAS 5.7e-7), 64x64x4096 ~5.3 u (3.2e-7, cuBLAS 2e-7: cuBLAS splits that K).
// The truncations' loss restored. A truncation drops the accumulator's bits below its ulp,
// about 0.8 u of its magnitude on average (beta: measured below), and always toward zero,
// so within a tile the losses add up in the direction of the tile sum: where the
// accumulator grows evenly, the MMA that leaves it at a fraction f of the tile sum loses
// ~beta f of it. In this kernel's order (below) the full-size truncations of a K step s = 1..4
// come at (s - 1) / 4, (s - 1) / 4 and s / 4 (two small MMAs, then the big one): 5.5 beta
// ~ 4.4 u of the tile sum; in the wgmma kernel's, its 4 big wgmma at 1/4 .. 1: 2.5 beta ~ 2 u.
// So the tile sum is added as acc (1 + 2^-22) here and acc (1 + 2^-23) there (add_tile:
// an FFMA where an FADD was, nothing more to issue), which gives back the loss on average.
// Measured on an H100, relative Frobenius error (docs/history.md, step 65): uniform [0, 1)
// inputs, whose losses all fall one way, 3.7 -> 1.0 u here (cuBLAS 1.1 u at 257x129x1000)
// and 2.2 -> 0.8 u on wgmma; randn 4.2 -> 3.0 u and 2.5 -> 2.1 u (cuBLAS 3.0 u); beta is
// what the uniform figures give, with the tile sums' losses 2.5 beta and the rest of the
// error fixed (4 K steps a sum: 2.2 u, 2 K steps: 1.4 u). The cost falls on sums that
// nothing truncated: the restoration is then an error of its own, up to 2^-22 of a tile
// sum, so results fp32 gives exactly (small integers: 256^3 in -8..8) are off by ~2-4 u
// (Frobenius) where they were exact, and a sum that one product dominates (exponents
// -60..60) by up to 3.7 u against 1.9 u; both within the representation bound the tests
// hold 3xTF32 to (3x cuBLAS's error + 5 u).
// The short accumulator doubles the accumulator registers, so a warp computes 64 x 32
// (64 + 64 registers, as many as one 64 x 64 accumulator took).
// Order of the products: each K step adds a_small b_big and a_big b_small before a_big
// b_big. A truncation costs up to an ulp of the accumulator whatever is added, so after
// the first step the order changes little; but in the first step of a tile the accumulator
// is zero, and the two small MMAs (products of 11 x 11 bits, 2^-11 of the big ones) are
// then truncated relative to their own size, ~2^-11 of the tile sum: 10 full-size
// truncations a tile instead of 12. All small terms of a tile first (4 instead of 12)
// would load every fragment twice and split A and B twice: +100% LDS, +40% split ALU
// (the wgmma kernel, which reads split parts from shared memory, orders them so).
//
// What the kernel computes (Tf32x3Shape: block and warp tiles, stages) is apart from how
// (the loaders, the fragment loads and the passes below):
//  - block tile BM x BN, K tile 32, warps of 64 x 32, a kStages-deep cp.async pipeline;
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
//    8 output columns are contiguous (16-byte stores).
//
// Inf and NaN. Splitting Inf gives small = Inf - Inf = NaN, and even with small set to 0,
// Inf * b_small (b_small = 0 for an exactly representable b, or of either sign) makes NaN
// where torch.mm gives +-Inf. So the fast pass does not guard the split: a non-finite input
// makes its small part NaN, which turns every output it touches into NaN (NaN times
// anything, 0 included, is NaN). After the K loop the block checks its accumulators; if any
// is NaN (rare: an Inf or NaN input, or a value so close to FLT_MAX that rounding it to
// TF32 overflows) it computes its tile again in two guarded passes: first the small terms,
// with big and small of a non-finite value set to 0, then big * big alone, where Inf and
// NaN meet only each other and the big parts, as in an fp32 product, each K step's MMA on
// its own and added to the sum in fp32 (big_step: a product that overflows is Inf before it
// meets the sum, as in an FMA chain). The result is then NaN or +-Inf exactly where the
// fp32 product's is (all special-value cases of the probe and of the tests), up to the
// order of the sum where huge terms of both signs meet.
// Subnormals. PTX: for .tf32 mma "the accumulation order, rounding, and handling of
// subnormal inputs are unspecified"; products are exact ("specified precision") and the
// accumulation at least single precision. What that leaves:
//  - a subnormal input: TF32 has fp32's exponent range, so its subnormals are spaced
//    2^-136 apart (10 stored bits below 2^-126). big and small of a subnormal x are both
//    subnormal TF32 values, and x is represented only to 2^-137 absolute (relative error up
//    to 1/2 for x near 2^-136), or is 0 where the hardware flushes subnormal inputs;
//  - normal inputs whose products are small: the small terms (2^-11 of the product) fall
//    below 2^-126 when |a b| < 2^-115, the big ones when |a b| < 2^-126; the accumulator
//    itself holds such sums, truncated, with 2^-149 (or, flushed, 2^-126) spacing.
// The probe's case (normal 2^-100 x 2^-30 inputs, products ~2^-130, results near 2^-126)
// measured 1.4e-3 relative where cuBLAS gives 3.6e-4: an absolute error of ~2^-135.5, the
// size of the small terms' contribution (2^-11 of the products, summed), as if the small
// products, subnormal at 2^-141, were lost; the big products survived (no result was 0).
// Whatever the exact rule, both effects are absolute errors below ~K 2^-126, so they
// matter only for results below ~2^-90 (K 2^-126 2^24 for K < 2^12). The fix is a scaled
// recomputation of such rows (rescale_rows()): a block whose fast pass gives any nonzero
// |D| < 2^-90 (and no NaN) runs its K loop again with each row of A multiplied by 2^k,
// k chosen per row from the fast pass so that the row's largest result becomes ~2^-40;
// products, small terms and partial sums are then normal, a subnormal A is normal, and
// the result is scaled back by one multiplication by 2^-k (one rounding, IEEE gradual
// underflow). It costs nothing outside those blocks (a compare per result after the loop)
// and nothing in the interior loop. A row whose rescaled pass overflows (partial sums
// 2^128 larger than the result: cancellation fp32 cannot resolve either) is recomputed
// unscaled. Not covered: subnormal B (the row scale cannot reach it; 2^-137 |a| per
// product), and a subnormal A times a value so large that the product is normal and the
// result above 2^-90 (such a row's result is not small); both need inputs 2^100 apart.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/dependent_launch.cuh"   // allow_dependents
#include "kernels/epilogue.cuh"           // store_result4
#include "kernels/gemm_params.h"
#include "kernels/simt/async_tile.cuh"         // cp_async16, cp_async4, commit, wait
#include "kernels/simt/block_tile.cuh"         // tile_origin: the raster order of the tiled kernels

namespace vecgemm {
namespace tf32x3 {

// The block tile: BM x BN of D per block, warps of kWM x kWN, K tiles of kBK, kStages
// shared-memory stages (kStages - 1 tiles in flight while one is multiplied). A thread
// holds two accumulators of kWM x kWN / 32 floats each (the MMA's and the tile sums'):
// 128 registers at 64 x 32, which leaves room at 255 for fragments of two K steps.
template <int BM_, int BN_, int STAGES_>
struct Tf32x3Shape {
  static constexpr int BM = BM_, BN = BN_, kStages = STAGES_;
  static constexpr int kBK = 32;
  static constexpr int kWM = 64, kWN = 32;
  static constexpr int kWarpsM = BM / kWM, kWarpsN = BN / kWN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kMTiles = kWM / 16, kNTiles = kWN / 8;  // MMA tiles of a warp
  static constexpr int kStageFloats = (BM + BN) * kBK;
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  // Blocks per SM the registers allow at 255 a thread: 2 blocks of 4 warps or 1 of 8.
  static constexpr int kMinBlocks = kThreads <= 128 ? 2 : 1;
  static_assert(BM % kWM == 0 && BN % kWN == 0, "warps tile the block");
  static_assert(kThreads <= 256, "255 registers a thread: at most 8 warps per SM");
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

// The physical row of A's 64-row warp tile that holds logical row g + 8 j of its MMA tiles
// (g = lane / 4, j = 0..7). A bijection of 0..63 that satisfies swizzle()'s rows: the half
// warp g = 0..3 reads rows 2j + {0, 1, 16, 17}, g = 4..7 the same + 32.
__device__ __forceinline__ int warp_row(int g, int j) { return 16 * (g >> 1) + 2 * j + (g & 1); }

// The physical column of B's 32-column warp tile that holds logical column g + 8 j
// (j = 0..3), and so the output column of MMA tile j's column g. Output column 2t + c of
// tile j lands on 16 (t & 1) + 8 (t >> 1) + 2 j + c: thread t's 8 columns are contiguous
// (two 16-byte stores a row). Half warp g = 0..3 reads columns 2j + {0, 1, 16, 17}, g = 4..7
// 2j + {8, 9, 24, 25}: bits 3 and 4 of their swizzles differ, so its 4 rows of 8 K values
// fall in 4 different 8-bank groups (with warp_row's 64-row order, the rows 2j and 2j + 8
// of a half warp would share a swizzle: a two-way conflict).
__device__ __forceinline__ int warp_col(int g, int j) { return 16 * ((g >> 1) & 1) + 8 * (g >> 2) + 2 * j + (g & 1); }

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

// sum + acc * (1 + kUlps 2^-23): a tile's short accumulator into the tile sums, with the
// loss of its truncations given back on average (the header's "The truncations' loss
// restored"). One FFMA, rounded once, as the FADD it replaces.
template <int kUlps>
__device__ __forceinline__ float add_tile(float sum, float acc) {
  static_assert(kUlps >= 0 && kUlps <= 4, "a restoration of a few ulps");
  return fmaf(acc, 1.0f + float(kUlps) * 0x1p-23f, sum);
}
// This kernel's: 5.5 full-size truncations a tile (the header), 2^-22.
constexpr int kMmaSyncRestoreUlps = 2;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// D = A * B + C for one m16n8k8 tile, or D = A * B (kZero: C is the zero register, so
// restarting the short accumulator costs no instruction). The MMA reads the top 19 bits
// of each fp32 register as TF32 (it truncates), so A and B are passed already rounded.
template <bool kZero>
__device__ __forceinline__ void mma_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2]) {
  if constexpr (kZero) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
          "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])), "f"(0.0f));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
          "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
  }
}
#else
// Below sm_80 there is no TF32 MMA: the planner never runs this kernel there.
template <bool kZero>
__device__ __forceinline__ void mma_tf32(float (&)[4], const float (&)[4], const float (&)[2]) { __trap(); }
#endif

// The K loop's passes. Fast: the whole 3xTF32 product, splits unguarded (a non-finite
// input leaves NaN, which the block detects). Small and Big: the guarded recomputation,
// the two small terms with non-finite values zeroed, then big * big alone. Scaled: Fast
// with each row of A multiplied by its power of two first (rescale_rows()).
enum class Pass { Fast, Small, Big, Scaled };

// x's parts as the pass uses them: hi (big) and lo (small). small is rounded too (two
// more instructions) rather than left to the MMA's truncation: that halves the error of
// big + small, from 2^-21 |x| to 2^-22 |x|.
template <Pass P>
__device__ __forceinline__ void split(float x, float& hi, float& lo) {
  if constexpr (P == Pass::Fast || P == Pass::Scaled) {
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

// The Big pass's products of one K step: alone in the MMA, then added into the sum in fp32.
// A product past FLT_MAX leaves the MMA as +-Inf, as an fp32 FMA makes it, before it meets
// the running sum; added inside the MMA it would meet the sum at the MMA's wider range,
// where Inf + (-2^129) is Inf, and an Inf from an input and an overflow of the other sign
// would give Inf where torch.mm gives NaN.
__device__ __forceinline__ void big_step(const float (&a)[4], const float (&b)[2], float (&sum)[4]) {
  float step[4];
  mma_tf32<true>(step, a, b);
#pragma unroll
  for (int c = 0; c < 4; ++c) sum[c] += step[c];
}

// A thread's fragment-load offset into a stage for physical row x of a tile, K step 0;
// step s reads offset ^ (8 s) (the K of step s is 8 s + 2 t, and the swizzle's and the
// step's bits add by XOR).
__device__ __forceinline__ int fragment_offset(int x, int t) { return x * 32 + ((2 * t) ^ swizzle(x)); }

// One K tile of the warp's product: four K steps of 8, into a short accumulator that
// starts from zero (the tile's first MMA into each tile takes C = 0) and is added into
// `sum` at the end (the header: why once per tile). The thread's K values of step s are
// 8 s + 2 t and 8 s + 2 t + 1, standing for the MMA's K t and t + 4. row_scale: Scaled
// only, the power of two of each of the thread's 8 rows of A (row j = 2 i + h).
template <class S, Pass P>
__device__ __forceinline__ void k_tile(const float* as, const float* bs, const int (&a_off)[4], const int (&b_off)[4],
                                       const float (&row_scale)[8], float (&sum)[S::kMTiles][S::kNTiles][4]) {
  constexpr int kM = S::kMTiles, kN = S::kNTiles;
  static_assert(kM == 4 && kN == 4, "fragment registers laid out for 64 x 32 warps");
  float acc[kM][kN][4];
  // Two steps' fragments: step s + 1's loads are issued before step s's MMAs, so their
  // latency hides behind 48 HMMAs (64 x 64 warps had no registers for this).
  float2 ra[2][8], rb[2][4];
  auto load = [&](int s, float2(&fa)[8], float2(&fb)[4]) {
#pragma unroll
    for (int j = 0; j < 8; ++j)  // rows j and j + 4 share a swizzle; j + 4 lies 8 rows (256 floats) on
      fa[j] = *reinterpret_cast<const float2*>(as + ((a_off[j & 3] ^ (8 * s)) + (j >> 2) * 256));
#pragma unroll
    for (int j = 0; j < 4; ++j) fb[j] = *reinterpret_cast<const float2*>(bs + (b_off[j] ^ (8 * s)));
  };
  load(0, ra[0], rb[0]);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    if (s + 1 < 4) load(s + 1, ra[(s + 1) & 1], rb[(s + 1) & 1]);
    const float2(&a_raw)[8] = ra[s & 1];
    const float2(&b_raw)[4] = rb[s & 1];
    float b_hi[kN][2], b_lo[kN][2];
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      split<P>(b_raw[j].x, b_hi[j][0], b_lo[j][0]);
      split<P>(b_raw[j].y, b_hi[j][1], b_lo[j][1]);
    }
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      // MMA tile i's rows g and g + 8 are logical rows 2i and 2i + 1 of the thread's eight.
      float2 r0 = a_raw[2 * i], r1 = a_raw[2 * i + 1];
      if constexpr (P == Pass::Scaled) {
        r0.x *= row_scale[2 * i], r0.y *= row_scale[2 * i];
        r1.x *= row_scale[2 * i + 1], r1.y *= row_scale[2 * i + 1];
      }
      float a_hi[4], a_lo[4];
      split<P>(r0.x, a_hi[0], a_lo[0]);
      split<P>(r1.x, a_hi[1], a_lo[1]);
      split<P>(r0.y, a_hi[2], a_lo[2]);
      split<P>(r1.y, a_hi[3], a_lo[3]);
      // Small terms first (the header: into a zero accumulator they are nearly exact);
      // each accumulator's MMAs are 4 apart, not back to back.
      if constexpr (P != Pass::Big) {
#pragma unroll
        for (int j = 0; j < kN; ++j) {
          if (s == 0) mma_tf32<true>(acc[i][j], a_lo, b_hi[j]);
          else mma_tf32<false>(acc[i][j], a_lo, b_hi[j]);
        }
#pragma unroll
        for (int j = 0; j < kN; ++j) mma_tf32<false>(acc[i][j], a_hi, b_lo[j]);
      }
      if constexpr (P == Pass::Fast || P == Pass::Scaled) {
#pragma unroll
        for (int j = 0; j < kN; ++j) mma_tf32<false>(acc[i][j], a_hi, b_hi[j]);
      } else if constexpr (P == Pass::Big) {
#pragma unroll
        for (int j = 0; j < kN; ++j) big_step(a_hi, b_hi[j], sum[i][j]);
      }
    }
  }
  if constexpr (P != Pass::Big) {
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) sum[i][j][c] = add_tile<kMmaSyncRestoreUlps>(sum[i][j][c], acc[i][j][c]);
  }
}

// The block's K loop, pass P: tile t is copied into stage t % kStages; every thread commits
// one group per tile (empty past the last), so waiting for all but the newest kStages - 2
// groups is waiting for tile t, and the barrier after it makes that so for the block and
// tells every thread that the stage refilled next (read in tile t - 1) is free.
template <class S, Pass P, bool kChecked, class LA, class LB>
__device__ __forceinline__ void mainloop(LA ld_a, LB ld_b, float* smem, int k_len, const int (&a_off)[4],
                                         const int (&b_off)[4], const float (&row_scale)[8],
                                         float (&sum)[S::kMTiles][S::kNTiles][4]) {
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
    k_tile<S, P>(stage_a(stage), stage_b(stage), a_off, b_off, row_scale, sum);
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

// Results below this may carry the MMA's underflow (the header: Subnormals), absolute
// errors up to ~K 2^-126; above it those are below fp32's rounding for K < 2^12.
constexpr float kTinyResult = 0x1p-90f;
// A rescaled row's largest result is brought to about this: products 2^-24 / K of it and
// their small terms stay normal for K < 2^40, and partial sums may exceed it 2^167-fold.
constexpr int kRescaledExponent = -40;

template <class S>
__device__ __forceinline__ bool any_tiny(const float (&acc)[S::kMTiles][S::kNTiles][4]) {
  bool tiny = false;
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) tiny |= acc[i][j][c] != 0.0f && fabsf(acc[i][j][c]) < kTinyResult;
  return tiny;
}

// The power of two for each of the thread's 8 rows (j = 2 i + h: acc[i][*][2h], [2h + 1]):
// rows whose largest |result| in the warp tile is nonzero and below kTinyResult get
// 2^(kRescaledExponent - its exponent), the others 1 (an exact multiplication: those rows
// come out of the Scaled pass exactly as from the Fast one). The 4 lanes of a quad (t)
// share the rows and agree through two shuffles. Returns whether any row is scaled.
template <class S>
__device__ __forceinline__ bool rescale_rows(const float (&acc)[S::kMTiles][S::kNTiles][4], float (&scale)[8]) {
  bool any = false;
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < S::kNTiles; ++j) m = fmaxf(m, fmaxf(fabsf(acc[i][j][2 * h]), fabsf(acc[i][j][2 * h + 1])));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      int k = 0;
      if (m > 0.0f && m < kTinyResult) k = kRescaledExponent - ilogbf(m);  // 51 .. 109
      scale[2 * i + h] = __int_as_float((127 + k) << 23);
      any |= k != 0;
    }
  return any;
}

// 2^-k for scale = 2^k (|k| < 127): the exponent field negated about the bias, exact, where a
// division would bring IEEE division's slow path into the kernel.
__device__ __forceinline__ float unscale(float scale) { return __int_as_float(0x7f000000 - __float_as_int(scale)); }

template <Pass P>
using PassTag = std::integral_constant<Pass, P>;

// After the fast pass, the recomputations the header describes (Inf and NaN; Subnormals),
// where its sums call for them. run(PassTag<P>{}) adds pass P's K loop into `sum` with the
// row scales in `scale`; vote(b) is whether b holds for any thread sharing the K loop (a
// block's, which is also a barrier, or a warp's); sync() orders two passes over the same
// staging (a block's barrier; nothing for a warp, which stages nothing).
template <class S, class Run, class Vote, class Sync>
__device__ __forceinline__ void recompute_where_needed(float (&sum)[S::kMTiles][S::kNTiles][4], float (&scale)[8],
                                                       const Run& run, const Vote& vote, const Sync& sync) {
  if (vote(any_nan<S>(sum))) {
    zero<S>(sum);
    run(PassTag<Pass::Small>{});
    sync();
    run(PassTag<Pass::Big>{});
  } else if (vote(any_tiny<S>(sum))) {
    const bool scaled = rescale_rows<S>(sum, scale);
    zero<S>(sum);
    run(PassTag<Pass::Scaled>{});
    // A scaled row whose results left the range around 2^-40 overflowed somewhere (Inf,
    // NaN, or a truncating MMA's FLT_MAX): the K loop runs unscaled again.
    bool overflow = false;
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
      for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) overflow |= scale[2 * i + c / 2] != 1.0f && !(fabsf(sum[i][j][c]) < 0x1p24f);
    if (vote(scaled && overflow)) {
#pragma unroll
      for (int j = 0; j < 8; ++j) scale[j] = 1.0f;
      zero<S>(sum);
      run(PassTag<Pass::Fast>{});
    } else {
      // Back to the problem's scale: one rounding, with IEEE gradual underflow.
#pragma unroll
      for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
        for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) sum[i][j][c] *= unscale(scale[2 * i + c / 2]);
    }
  }
}

// The tile's results through shared memory: each thread's sums into the idle stages as a
// [BM][BN + 4] tile, then the block stores it in 16-byte pieces along rows, one
// store_result4 a loop iteration. Stored straight from the registers, each of a thread's 32
// pieces would inline its own alpha, beta, C and edge code: ~3,000 instructions run once
// a block, whose fetch was most of a small problem's block time (docs/performance.md,
// question 00); through shared memory the stores are also whole rows of a warp. The +4
// keeps both phases free of bank conflicts: a quarter warp writes rows r, r + 1 at columns
// 0, 8, 16, 24 (+ 4 q), 4 banks apart, and reads 8 consecutive pieces of one row.
template <class S>
__device__ __forceinline__ void store_tile(const GemmParams& p, const float (&sum)[S::kMTiles][S::kNTiles][4],
                                           float* smem, int m0, int n0, int warp_m, int warp_n, int g, int t,
                                           int split_id, int batch) {
  constexpr int kLd = S::BN + 4;
  static_assert(S::BM * kLd <= S::kStages * S::kStageFloats, "the tile fits in the stages");
  __syncthreads();  // every warp is done reading the stages
  // Thread (g, t) holds rows warp_row(g, 2i + h) (h = c / 2) and columns 16 (t & 1) +
  // 8 (t >> 1) + 0..7 of the warp tile: MMA tile j's columns 2t, 2t + 1 are the 2j-th and
  // (2j + 1)-th of those (warp_col).
  const int col_t = 16 * (t & 1) + 8 * (t >> 1);
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* row = smem + (warp_m + warp_row(g, 2 * i + h)) * kLd + warp_n + col_t;
#pragma unroll
      for (int q = 0; q < S::kNTiles / 2; ++q)
        *reinterpret_cast<float4*>(row + 4 * q) = make_float4(sum[i][2 * q][2 * h], sum[i][2 * q][2 * h + 1],
                                                              sum[i][2 * q + 1][2 * h], sum[i][2 * q + 1][2 * h + 1]);
    }
  __syncthreads();
  constexpr int kPiecesPerRow = S::BN / 4;
#pragma unroll 1
  for (int piece = threadIdx.x; piece < S::BM * kPiecesPerRow; piece += S::kThreads) {
    const int r = piece / kPiecesPerRow, c = 4 * (piece % kPiecesPerRow);
    const float4 v4 = *reinterpret_cast<const float4*>(smem + r * kLd + c);
    const float v[4] = {v4.x, v4.y, v4.z, v4.w};
    store_result4(p, split_id, batch, m0 + r, n0 + c, v);
  }
}

// D = alpha * A @ B + beta * C, or split-K partial sums, for GemmParams' problem: grid.x the
// output tiles in tile_origin's raster order, grid.z = batch * k_splits. LA, LB: storage
// orders; kVec4: A and B 16-byte aligned (pointer, leading dimension, batch stride).
// One output tile: pid in tile_origin's order, z = batch * k_splits + split.
template <class S, Layout LA, Layout LB, bool kVec4>
__device__ __forceinline__ void tile_product(const GemmParams& p, int pid, int z) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) float smem[];
  constexpr bool kAK = LA == Layout::RowMajor, kBK = LB == Layout::ColMajor;  // K-contiguous
  using LoadA = Loader<S::BM, S::kThreads, kAK, kVec4>;
  using LoadB = Loader<S::BN, S::kThreads, kBK, kVec4>;

  int m0, n0;
  tile_origin(p.m, p.n, S::BM, S::BN, pid, m0, n0);
  const int batch = z / p.k_splits, split_id = z % p.k_splits;
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
    a_off[q] = fragment_offset(warp_m + warp_row(g, q), t);
    b_off[q] = fragment_offset(warp_n + warp_col(g, q), t);
  }

  float scale[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) scale[j] = 1.0f;
  float sum[S::kMTiles][S::kNTiles][4];
  zero<S>(sum);
  // Interior blocks (whole tiles, K a multiple of 32) copy without bounds checks.
  if (m0 + S::BM <= p.m && n0 + S::BN <= p.n && k_len % S::kBK == 0)
    mainloop<S, Pass::Fast, false>(ld_a, ld_b, smem, k_len, a_off, b_off, scale, sum);
  else
    mainloop<S, Pass::Fast, true>(ld_a, ld_b, smem, k_len, a_off, b_off, scale, sum);
  // Each vote is also the barrier a recomputation needs before its copies overwrite the
  // stages; both conditions are block-uniform, so every thread reaches the same votes.
  recompute_where_needed<S>(
      sum, scale,
      [&](auto pass) {
        mainloop<S, decltype(pass)::value, true>(ld_a, ld_b, smem, k_len, a_off, b_off, scale, sum);
      },
      [](bool b) { return __syncthreads_or(b) != 0; }, [] { __syncthreads(); });

  store_tile<S>(p, sum, smem, m0, n0, warp_m, warp_n, g, t, split_id, batch);
#else
  __trap();  // no TF32 MMA before sm_80; never launched there
#endif
}

template <class S, Layout LA, Layout LB, bool kVec4>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_3xtf32(const GemmParams p) {
  allow_dependents();  // a split-K reduction after it may launch now
  tile_product<S, LA, LB, kVec4>(p, blockIdx.x, blockIdx.z);
}

// The wgmma kernel's fix-up (sgemm_3xtf32_wgmma.cuh, pass 3): the tiles whose flag is set,
// flags[z * tiles + pid], recomputed exactly as sgemm_3xtf32 computes them. A grid of about
// one block per SM walks all flags (a few per block), so the usual call, with none set, costs
// one small launch rather than a grid of blocks that each take 128 KB of shared memory to exit;
// launched to overlap the wgmma kernel, it takes the SMs that kernel leaves idle and waits.
template <class S, Layout LA, Layout LB, bool kVec4>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    sgemm_3xtf32_fixup(const GemmParams p, const int* flags, int tiles) {
  wait_for_predecessor();  // the wgmma kernel's flags (launched to overlap it, or a no-op)
  const int64_t total = int64_t(tiles) * p.batch * p.k_splits;
  for (int64_t i = blockIdx.x; i < total; i += gridDim.x) {
    if (flags[i] == 0) continue;  // the same for every thread of the block
    __syncthreads();              // the previous tile's last reads of the stages are done
    tile_product<S, LA, LB, kVec4>(p, int(i % tiles), int(i / tiles));
  }
}

}  // namespace tf32x3
}  // namespace vecgemm
