// 3xTF32 for products with a narrow side: a few rows of A (decode, x @ W.T with up to 32
// tokens) or a few columns of B. The output is then a few rows (or columns) of length N
// (or M), and the work is reading the wide operand once: 4096 x 4096 floats is 64 MB, 16 us
// at the H200's 4.2 TB/s. The tiled kernels compute 64- or 128-row tiles that are mostly
// padding there, at the tensor core's pace rather than memory's (50 us at 1x4096x4096).
//
// What it computes. Any storage orders and alignment (16-byte loads where both operands'
// rows are 16-byte aligned, 4-byte ones otherwise). The wide operand P (B's columns for
// few rows, A's rows for few columns) is the MMA's A side, 16 rows an MMA tile; the narrow
// one Q the MMA's B side, 8 rows an MMA tile. A block takes 32 rows of P by kQTiles x 8 rows
// of Q over its K range; its 4 warps take the K chunks of 32 in turn (warp w: chunks w,
// w + 4, ...), each into its own accumulators, and the block adds the four in shared memory
// at the end (always in the same order: results do not depend on timing).
//
// How. The K order inside an MMA is free (any permutation applied to both operands gives the
// same product), so lane (g, t) of a warp takes K 4t..4t+3 and 16+4t..16+4t+3 of a chunk,
// its eight K slots: K step j (0-3) uses slots (2j, 2j + 1) as the MMA's K t and t + 4, for
// P's rows and Q's alike. An operand whose rows are K-contiguous (A row-major, B
// column-major: nn.Linear's x @ W.T) is read two 16-byte loads a row, lane (g, t) taking P's
// rows g and g + 8 of each MMA tile and Q's row g: the lanes of a row read 64 contiguous
// bytes. One stored along its rows (B row-major, A column-major: x @ W with W stored (in,
// out)) is read one load a K slot across the lane's rows instead, which the row order of the
// MMA tiles leaves free too: the lane's four P rows are rows 4g..4g+3 of the block's (one
// 16-byte load), its Q rows kQTiles g..kQTiles g + kQTiles - 1 (one load of 4, 8 or 16
// bytes), and the lanes of a K slot read 128 contiguous bytes of P. Either way every sector
// fetched is used, and a lane's values are the same registers, so the arithmetic is the
// same. No shared memory in the K loop, no barrier: the next chunk's loads are issued before
// the current chunk's MMAs, and enough warps stream (4 blocks of 4 warps an SM for up to 16
// rows of Q) to keep memory busy.
//
// Accuracy and special values as the tiled 3xTF32 kernel (sgemm_3xtf32.cuh, whose split,
// MMA and passes this reuses): the split rounds both parts; the MMAs of one chunk accumulate
// into two short accumulators, small and big terms apart (chunk_product), started from zero
// and added into the sum with the big one's truncation given back (kNarrowRestoreUlps); a
// warp whose sums hold a NaN (an Inf or NaN input) recomputes its chunks in the two guarded
// passes, and one whose sums hold a nonzero result below 2^-90 recomputes them with P's
// rows scaled (rows of A for few columns, columns of B for few rows). Each warp decides for its own
// chunks, which is what a K split does for its slice: the partial sums meet in fp32 adds,
// where +-Inf and NaN combine as in the fp32 product.
#pragma once
#include <cstdint>

#include "kernels/dependent_launch.cuh"  // allow_dependents
#include "kernels/epilogue.cuh"          // store_result4
#include "kernels/gemm_params.h"
#include "kernels/tf32x3/sgemm_3xtf32.cuh"      // the split, the MMA, the passes and their checks
#include "kernels/tf32x3/sgemm_3xtf32.h"          // kSkinnyBlockK

namespace vecgemm {
namespace tf32x3_skinny {

using tf32x3::Pass;

// The big terms' accumulator of a chunk truncates 4 times, at 1/4 .. 1 of its sum, as the
// wgmma kernel's (sgemm_3xtf32.cuh, "The truncations' loss restored"): 2.5 beta ~ 2 u of
// it, given back as big (1 + 2^-23). The small terms' accumulator holds ~2^-11 of the sum
// and truncates relative to that: nothing to give back.
constexpr int kNarrowRestoreUlps = 1;

// kQTiles: MMA tiles of 8 narrow rows (Q) a block; kFewRows: Q is A (few rows of the
// output), else B's columns (few columns); kPAlongK, kQAlongK: P's and Q's rows are
// K-contiguous in memory (else their K slots are: the header's "How"); kVec4: both operands
// 16-byte aligned (pointer, leading dimension, batch stride), else read 4 bytes at a time.
template <int kQTiles_, bool kFewRows_, bool kPAlongK_ = true, bool kQAlongK_ = true, bool kVec4_ = true>
struct SkinnyShape {
  static constexpr int kQTiles = kQTiles_;
  static constexpr bool kFewRows = kFewRows_;
  static constexpr bool kPAlongK = kPAlongK_, kQAlongK = kQAlongK_;
  static constexpr bool kVec4 = kVec4_;
  // The names tf32x3's helpers (any_nan, rescale_rows, ...) read the accumulators by.
  static constexpr int kMTiles = 2, kNTiles = kQTiles;
  static constexpr int kPRows = 16 * kMTiles, kQRows = 8 * kQTiles;
  static constexpr int kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int kChunk = 32;              // K a warp takes at a time
  static constexpr int kBK = kChunk * kWarps;    // K the block takes at a time
  static_assert(kBK == kSkinnyBlockK, "the planner splits K in slices of kSkinnyBlockK");
  // Registers: 8 rows of Q fit 128 a thread (4 blocks an SM), 16 fit 168 (3), 32 take 255 (2).
  static constexpr int kMinBlocks = kQTiles == 1 ? 4 : kQTiles == 2 ? 3 : 2;
  static_assert(kQTiles == 1 || kQTiles == 2 || kQTiles == 4, "8, 16 or 32 rows of Q");
  static_assert(kMTiles == 2, "a lane's P rows across the tiles are one 16-byte load");
};

// The K offset in a chunk of a lane's K slot (0-7), t = lane % 4.
__device__ __forceinline__ int slot_k(int slot, int t) { return 16 * (slot / 4) + 4 * t + slot % 4; }

// Which row of the block's P rows (0..kPRows - 1) is the lane's P row h of MMA tile i (the
// MMA's row g + 8 h), and which of its Q rows is row n of Q's MMA tile j (n = g where Q is
// loaded, n = the accumulator's column where the sums are stored): the header's "How".
template <class S>
__device__ __forceinline__ int p_row(int i, int h, int g) {
  return S::kPAlongK ? 16 * i + 8 * h + g : 4 * g + 2 * i + h;
}
template <class S>
__device__ __forceinline__ int q_row(int j, int n) {
  return S::kQAlongK ? 8 * j + n : S::kQTiles * n + j;
}

__device__ __forceinline__ float element(const float4& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// One chunk's operands as a lane loaded them, read back by (row, K slot): P's rows (i, h)
// and Q's rows j (the MMA tiles' rows g, g + 8 and g).
template <class S, bool kAlongK = S::kPAlongK>
struct PValues {  // per row, K slots 0-3 and 4-7
  float4 v[S::kMTiles][2][2];
  __device__ __forceinline__ float at(int i, int h, int slot) const { return element(v[i][h][slot / 4], slot % 4); }
};
template <class S>
struct PValues<S, false> {  // per K slot, the lane's four rows (i, h) at 2 i + h
  float4 v[8];
  __device__ __forceinline__ float at(int i, int h, int slot) const { return element(v[slot], 2 * i + h); }
};
template <class S, bool kAlongK = S::kQAlongK>
struct QValues {
  float4 v[S::kQTiles][2];
  __device__ __forceinline__ float at(int j, int slot) const { return element(v[j][slot / 4], slot % 4); }
};
template <class S>
struct QValues<S, false> {
  float v[8][S::kQTiles];
  __device__ __forceinline__ float at(int j, int slot) const { return v[slot][j]; }
};
template <class S>
struct Chunk {
  PValues<S> p;
  QValues<S> q;
};

// Where a lane reads, at the start of its K range. Along K: the first element of each of its
// rows (null: outside the operand, read as zeros). Across: the first of its rows (null where
// none is inside), how many of them are (`count`), and the stride between K slots (`ld`).
template <int kRows, bool kAlongK>
struct Lines {
  const float* row[kRows];
};
template <int kRows>
struct Lines<kRows, false> {
  const float* first;
  int count;
  int64_t ld;
};
template <class S>
struct Rows {
  Lines<2 * S::kMTiles, S::kPAlongK> p;  // along K: row 2 i + h
  Lines<S::kQTiles, S::kQAlongK> q;
};

// The 16-byte unit at row + k, the K range ending at k_len: whole, partly (element by
// element) or not at all inside it. A missing row reads as zeros. Without kVec4, element
// by element always (the lanes of a row still read 64 contiguous bytes, from L1 after the
// first of the four loads).
template <bool kWhole, bool kVec4>
__device__ __forceinline__ float4 load4(const float* row, int k, int k_len) {
  if (row == nullptr) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if constexpr (!kWhole || !kVec4) {
    if (!kVec4 || k + 4 > k_len) {
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = kWhole || k + e < k_len ? __ldg(row + k + e) : 0.0f;
      return make_float4(v[0], v[1], v[2], v[3]);
    }
  }
  return __ldg(reinterpret_cast<const float4*>(row + k));
}

// kN consecutive floats (kN = 1, 2, 4) of the lines at K `k` into v: whole where `count`
// >= kN and kVec4 (a 4 kN-byte load; the operand's alignment and the lines' first index, a
// multiple of kN, align it), element by element otherwise, zeros outside the K range or
// the operand.
template <int kN, bool kWhole, bool kVec4>
__device__ __forceinline__ void load_across(const Lines<kN, false>& lines, int k, int k_len, float (&v)[kN]) {
  if (lines.first == nullptr || (!kWhole && k >= k_len)) {
#pragma unroll
    for (int e = 0; e < kN; ++e) v[e] = 0.0f;
    return;
  }
  const float* at = lines.first + k * lines.ld;
  if (kVec4 && lines.count >= kN) {
    if constexpr (kN == 4) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(at));
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else if constexpr (kN == 2) {
      const float2 x = __ldg(reinterpret_cast<const float2*>(at));
      v[0] = x.x, v[1] = x.y;
    } else {
      v[0] = __ldg(at);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < kN; ++e) v[e] = e < lines.count ? __ldg(at + e) : 0.0f;
}

// The lane's part of the chunk starting at k (kWhole: all 32 of its K inside the range).
template <class S, bool kWhole>
__device__ __forceinline__ void load_chunk(const Rows<S>& rows, int k, int k_len, int t, Chunk<S>& c) {
  if constexpr (S::kPAlongK) {
    const int k0 = k + 4 * t, k1 = k + 16 + 4 * t;
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        c.p.v[i][h][0] = load4<kWhole, S::kVec4>(rows.p.row[2 * i + h], k0, k_len);
        c.p.v[i][h][1] = load4<kWhole, S::kVec4>(rows.p.row[2 * i + h], k1, k_len);
      }
  } else {
#pragma unroll
    for (int slot = 0; slot < 8; ++slot) {
      float v[4];
      load_across<4, kWhole, S::kVec4>(rows.p, k + slot_k(slot, t), k_len, v);
      c.p.v[slot] = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
  if constexpr (S::kQAlongK) {
    const int k0 = k + 4 * t, k1 = k + 16 + 4 * t;
#pragma unroll
    for (int j = 0; j < S::kQTiles; ++j) {
      c.q.v[j][0] = load4<kWhole, S::kVec4>(rows.q.row[j], k0, k_len);
      c.q.v[j][1] = load4<kWhole, S::kVec4>(rows.q.row[j], k1, k_len);
    }
  } else {
#pragma unroll
    for (int slot = 0; slot < 8; ++slot) load_across<S::kQTiles, kWhole, S::kVec4>(rows.q, k + slot_k(slot, t), k_len, c.q.v[slot]);
  }
}

template <class S>
__device__ __forceinline__ void load_chunk(const Rows<S>& rows, int k, int k_len, int t, Chunk<S>& c) {
  if (k + S::kChunk <= k_len) load_chunk<S, true>(rows, k, k_len, t, c);
  else load_chunk<S, false>(rows, k, k_len, t, c);
}

// One chunk's product, pass P, into `sum` (the Big pass: each step's products added on
// their own, tf32x3::big_step). The small terms (products of 11 x 11 bits, ~2^-11 of the big
// ones) go into a short accumulator of their own and the big terms into another, both
// started from zero and added into the sum at the chunk's end: the MMA truncates relative
// to the accumulator it adds to, so the 8 small-term MMAs of a tile truncate at their own
// size and only the 4 big ones at the chunk sum's, where one accumulator for all 12
// truncated 10 at full size (what the wgmma kernel gets by issuing its small terms first,
// docs/history.md, step 57; issued in that order here, the chunk's values stay live across
// both halves and ptxas spills). The second accumulator costs 8 registers a tile of Q.
// row_scale: Scaled only, the power of two of each of the lane's P rows (row 2 i + h: tile
// i, g + 8 h).
template <class S, Pass P>
__device__ __forceinline__ void chunk_product(const Chunk<S>& c, const float (&row_scale)[8],
                                              float (&sum)[S::kMTiles][S::kNTiles][4]) {
  constexpr bool kBigTerms = P == Pass::Fast || P == Pass::Scaled;  // Small: the small terms alone
  float small[S::kMTiles][S::kNTiles][4], big[S::kMTiles][S::kNTiles][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int slot = 2 * s;  // the step's K t and t + 4: the lane's slots 2 s and 2 s + 1
    float q_hi[S::kQTiles][2], q_lo[S::kQTiles][2];
#pragma unroll
    for (int j = 0; j < S::kQTiles; ++j) {
      tf32x3::split<P>(c.q.at(j, slot), q_hi[j][0], q_lo[j][0]);
      tf32x3::split<P>(c.q.at(j, slot + 1), q_hi[j][1], q_lo[j][1]);
    }
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i) {
      // MMA A fragment: (g, K t), (g + 8, K t), (g, K t + 4), (g + 8, K t + 4).
      float x[4] = {c.p.at(i, 0, slot), c.p.at(i, 1, slot), c.p.at(i, 0, slot + 1), c.p.at(i, 1, slot + 1)};
      if constexpr (P == Pass::Scaled) {
        x[0] *= row_scale[2 * i], x[2] *= row_scale[2 * i];
        x[1] *= row_scale[2 * i + 1], x[3] *= row_scale[2 * i + 1];
      }
      float p_hi[4], p_lo[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) tf32x3::split<P>(x[r], p_hi[r], p_lo[r]);
#pragma unroll
      for (int j = 0; j < S::kQTiles; ++j) {
        if constexpr (P != Pass::Big) {
          if (s == 0) tf32x3::mma_tf32<true>(small[i][j], p_lo, q_hi[j]);
          else tf32x3::mma_tf32<false>(small[i][j], p_lo, q_hi[j]);
          tf32x3::mma_tf32<false>(small[i][j], p_hi, q_lo[j]);
        }
        if constexpr (kBigTerms) {
          if (s == 0) tf32x3::mma_tf32<true>(big[i][j], p_hi, q_hi[j]);
          else tf32x3::mma_tf32<false>(big[i][j], p_hi, q_hi[j]);
        } else if constexpr (P == Pass::Big) {
          tf32x3::big_step(p_hi, q_hi[j], sum[i][j]);
        }
      }
    }
  }
  if constexpr (P != Pass::Big) {
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
      for (int j = 0; j < S::kNTiles; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          sum[i][j][r] += kBigTerms ? tf32x3::add_tile<kNarrowRestoreUlps>(small[i][j][r], big[i][j][r]) : small[i][j][r];
  }
}

// The warp's chunks (warp, warp + kWarps, ...) of the K range, pass P, into `sum`; the next
// chunk's loads are in flight during each chunk's MMAs.
template <class S, Pass P>
__device__ __forceinline__ void warp_product(const Rows<S>& rows, int k_len, int warp, int t,
                                             const float (&row_scale)[8], float (&sum)[S::kMTiles][S::kNTiles][4]) {
  const int chunks = (k_len + S::kChunk - 1) / S::kChunk;
  int chunk = warp;
  if (chunk >= chunks) return;
  Chunk<S> current;
  load_chunk<S>(rows, chunk * S::kChunk, k_len, t, current);
  for (; chunk < chunks; chunk += S::kWarps) {
    Chunk<S> next;
    if (chunk + S::kWarps < chunks) load_chunk<S>(rows, (chunk + S::kWarps) * S::kChunk, k_len, t, next);
    chunk_product<S, P>(current, row_scale, sum);
    current = next;
  }
}

// The warp's sums over its chunks, with sgemm_3xtf32.cuh's recomputations for NaN and tiny
// results (the votes are the warp's: its chunks are its own).
template <class S>
__device__ __forceinline__ void warp_sums(const Rows<S>& rows, int k_len, int warp, int t,
                                          float (&sum)[S::kMTiles][S::kNTiles][4]) {
  float scale[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) scale[j] = 1.0f;
  tf32x3::zero<S>(sum);
  warp_product<S, Pass::Fast>(rows, k_len, warp, t, scale, sum);
  tf32x3::recompute_where_needed<S>(
      sum, scale, [&](auto pass) { warp_product<S, decltype(pass)::value>(rows, k_len, warp, t, scale, sum); },
      [](bool b) { return __any_sync(0xffffffffu, b) != 0; }, [] {});
}

// grid.x: P tiles x Q tiles, Q's fastest (the blocks sharing a tile of P run together, so
// a second Q tile reads it from L2); grid.z: batch * k_splits. D = alpha * A @ B + beta * C,
// or split-K partials when p.k_splits > 1.
template <class S>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_3xtf32_skinny(const GemmParams p) {
  allow_dependents();  // a split-K reduction after it may launch now
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  __shared__ float partial[S::kWarps][S::kPRows][S::kQRows + 1];
  const int p_extent = S::kFewRows ? p.n : p.m, q_extent = S::kFewRows ? p.m : p.n;
  const int q_tiles = (q_extent + S::kQRows - 1) / S::kQRows;
  const int p0 = int(blockIdx.x / q_tiles) * S::kPRows, q0 = int(blockIdx.x % q_tiles) * S::kQRows;
  const int batch = blockIdx.z / p.k_splits, split_id = blockIdx.z % p.k_splits;
  const int k_begin = split_id * p.k_slice;
  const int k_len = max(0, min(p.k - k_begin, p.k_slice));
  const Operand& wide = S::kFewRows ? p.b : p.a;
  const Operand& narrow = S::kFewRows ? p.a : p.b;
  // Each operand's first element of the K range: K is its rows' contiguous dimension, or the
  // one ld apart.
  const float* p_base = wide.ptr + batch * wide.batch_stride + (S::kPAlongK ? int64_t(k_begin) : k_begin * wide.ld);
  const float* q_base =
      narrow.ptr + batch * narrow.batch_stride + (S::kQAlongK ? int64_t(k_begin) : k_begin * narrow.ld);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  Rows<S> rows;
  if constexpr (S::kPAlongK) {
#pragma unroll
    for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = p0 + p_row<S>(i, h, g);
        rows.p.row[2 * i + h] = r < p_extent ? p_base + int64_t(r) * wide.ld : nullptr;
      }
  } else {
    const int r = p0 + p_row<S>(0, 0, g);  // the first of the lane's four consecutive rows
    rows.p = {r < p_extent ? p_base + r : nullptr, min(p_extent - r, 4), wide.ld};
  }
  if constexpr (S::kQAlongK) {
#pragma unroll
    for (int j = 0; j < S::kQTiles; ++j) {
      const int r = q0 + q_row<S>(j, g);
      rows.q.row[j] = r < q_extent ? q_base + int64_t(r) * narrow.ld : nullptr;
    }
  } else {
    const int r = q0 + q_row<S>(0, g);  // the first of the lane's kQTiles consecutive rows
    rows.q = {r < q_extent ? q_base + r : nullptr, min(q_extent - r, S::kQTiles), narrow.ld};
  }

  float sum[S::kMTiles][S::kNTiles][4];
  warp_sums<S>(rows, k_len, warp, t, sum);

  // C fragment: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of each MMA tile, at the
  // block's P and Q rows those MMA rows were loaded from.
#pragma unroll
  for (int i = 0; i < S::kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < S::kQTiles; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) partial[warp][p_row<S>(i, r / 2, g)][q_row<S>(j, 2 * t + r % 2)] = sum[i][j][r];
  __syncthreads();

  // Four consecutive output elements a thread at a time, along D's rows: P's rows for few
  // rows (D[q][p]), Q's for few columns (D[p][q]).
  constexpr int kRun = S::kFewRows ? S::kPRows : S::kQRows;
  constexpr int kGroups = S::kPRows * S::kQRows / 4;
  for (int item = threadIdx.x; item < kGroups; item += S::kThreads) {
    const int line = item / (kRun / 4), first = item % (kRun / 4) * 4;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pr = S::kFewRows ? first + e : line, qr = S::kFewRows ? line : first + e;
      float total = partial[0][pr][qr];
#pragma unroll
      for (int w = 1; w < S::kWarps; ++w) total += partial[w][pr][qr];
      v[e] = total;
    }
    const int row = S::kFewRows ? q0 + line : p0 + line;
    const int col = S::kFewRows ? p0 + first : q0 + first;
    store_result4(p, split_id, batch, row, col, v);
  }
#else
  __trap();  // no TF32 MMA before sm_80; never launched there
#endif
}

}  // namespace tf32x3_skinny
}  // namespace vecgemm
