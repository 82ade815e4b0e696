// What the tiled kernels (sgemm_tiled.cuh, sgemm_async.cuh) share around their main loops:
// which output tile a block computes, where its operand panels start, the thread's place in
// its warp tile, the FFMA outer product and the write-back of the accumulators.
#pragma once
#include "kernels/epilogue.cuh"
#include "kernels/gemm_params.h"

namespace vecgemm {

// Tile rows visited together before moving along N (as in Triton's grouped ordering), so
// that blocks running at the same time share panels of A and B in L2.
constexpr int kRasterGroupM = 8;

// Where tile `pid` of the raster order starts, for bm x bn tiles of an m x n output. With
// edges_last, the tiles of the last row and column of tiles where those are partial (edge
// tiles, on the bounds-checked main loop) come after all the others: the stream-K plan's
// whole waves then hold none of them, where each would hold up its wave's end (the next
// launch waits for the slowest block), and its tail, shared evenly over every block, takes
// their extra cost (docs/performance.md). Only the stream-K plan's kernels use it,
// as a compile-time constant, so every other kernel's SASS stays as it was.
__host__ __device__ __forceinline__ void tile_origin(int m, int n, int bm, int bn, int pid, int& m0, int& n0,
                                                     bool edges_last = false) {
  int tiles_m = (m + bm - 1) / bm, tiles_n = (n + bn - 1) / bn;
  if (edges_last) {
    const int edge_m = m % bm != 0, edge_n = n % bn != 0;
    const int inner = (tiles_m - edge_m) * (tiles_n - edge_n);
    if (pid >= inner) {  // the last column of tiles down to the corner, then the last row
      const int e = pid - inner, column = edge_n ? tiles_m - edge_m : 0;
      m0 = (e < column ? e : tiles_m - 1) * bm;
      n0 = (e < column ? tiles_n - 1 : e - column) * bn;
      return;
    }
    tiles_m -= edge_m, tiles_n -= edge_n;
  }
  const int per_group = kRasterGroupM * tiles_n;
  const int first_m = (pid / per_group) * kRasterGroupM;
  const int rows = min(tiles_m - first_m, kRasterGroupM);
  m0 = (first_m + (pid % per_group) % rows) * bm;
  n0 = ((pid % per_group) / rows) * bn;
}

template <class S>
struct BlockTile {
  int m0, n0;          // the block's output tile
  int batch, split;    // blockIdx.z = batch * k_splits + split
  int k_begin, k_len;  // this split's K range
  // Fragment f of the thread covers rows a_row + f * kLanesM * 4 + [0, 4) of the block
  // tile, and columns b_col + f * kLanesN * 4 + [0, 4).
  int a_row, b_col;

  // The block's own tile: blockIdx.x in raster order, blockIdx.z the batch and K split.
  // edges_last, a constant where this is inlined, picks tile_origin's order.
  __device__ __forceinline__ explicit BlockTile(const GemmParams& p, bool edges_last = false) {
    place(p, blockIdx.x, edges_last);
    batch = blockIdx.z / p.k_splits;
    split = blockIdx.z % p.k_splits;
    k_begin = split * p.k_slice;
    k_len = min(p.k - k_begin, p.k_slice);
    place_thread();
  }

  // Tile `pid` (raster order, edge tiles last) over K range [k_begin, k_begin + k_len) of
  // batch 0: a piece of the stream-K tail (sgemm_stream_k.cuh).
  __device__ __forceinline__ BlockTile(const GemmParams& p, int pid, int k_begin_, int k_len_) {
    place(p, pid, true);
    batch = 0, split = 0;
    k_begin = k_begin_, k_len = k_len_;
    place_thread();
  }

  __device__ __forceinline__ void place(const GemmParams& p, int pid, bool edges_last) {
    tile_origin(p.m, p.n, S::BM, S::BN, pid, m0, n0, edges_last);
  }

  __device__ __forceinline__ void place_thread() {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    a_row = (warp / S::kWarpsN) * S::WM + (lane / S::kLanesN) * 4;
    b_col = (warp % S::kWarpsN) * S::WN + (lane % S::kLanesN) * 4;
  }

  // Whether the block's tile lies inside the problem (its rows of A and columns of B need
  // no bounds checks).
  __device__ __forceinline__ bool inside(const GemmParams& p) const { return m0 + S::BM <= p.m && n0 + S::BN <= p.n; }
  // Whether the register-staged kernel's loads need no bounds checks: the tile inside and
  // its K range whole K tiles (true of nearly all blocks of a large problem; a K that is not
  // a multiple of BK makes it false for all, which is why auto pads K: plan.cpp).
  __device__ __forceinline__ bool unchecked(const GemmParams& p) const {
    return m0 + S::BM <= p.m && n0 + S::BN <= p.n && k_len % S::BK == 0;
  }

  // Element (0, k_begin) of this block's rows of A, and (k_begin, 0) of its columns of B.
  template <Layout LA>
  __device__ __forceinline__ const float* a_panel(const GemmParams& p) const {
    return p.a.ptr + batch * p.a.batch_stride +
           (LA == Layout::RowMajor ? m0 * p.a.ld + k_begin : k_begin * p.a.ld + m0);
  }
  template <Layout LB>
  __device__ __forceinline__ const float* b_panel(const GemmParams& p) const {
    return p.b.ptr + batch * p.b.batch_stride +
           (LB == Layout::RowMajor ? k_begin * p.b.ld + n0 : n0 * p.b.ld + k_begin);
  }
};

// 0.0f and 1.0f, as values the compiler cannot see through (threadIdx.x < 1024).
__device__ __forceinline__ float opaque_zero() { return __int_as_float(threadIdx.x >> 10); }
__device__ __forceinline__ float opaque_one() { return __int_as_float(0x3f800000u | (threadIdx.x >> 10)); }

template <class S>
__device__ __forceinline__ void zero(float (&acc)[S::TM][S::TN]) {
  // A literal zero becomes 64-bit CS2R zeroing of register pairs (MainloopPolicy::kSteerBanks).
  const float z = S::kSteerBanks ? opaque_zero() : 0.0f;
#pragma unroll
  for (int i = 0; i < S::TM; ++i)
#pragma unroll
    for (int j = 0; j < S::TN; ++j) acc[i][j] = z;
}

// One K step's fragments from a shared tile stored [BK][BM + pad] (A) and [BK][BN + pad]
// (B): each 4-wide fragment row is one LDS.128 (B's swapped in pairs with kSteerBanks).
template <class S>
__device__ __forceinline__ void load_fragments(const float* as, const float* bs, int kk, int a_row, int b_col,
                                               float (&ra)[S::TM], float (&rb)[S::TN]) {
#pragma unroll
  for (int f = 0; f < S::kFragsM; ++f) {
    const float4 v = *reinterpret_cast<const float4*>(&as[kk * S::kAsStride + a_row + f * S::kLanesM * 4]);
    ra[f * 4 + 0] = v.x; ra[f * 4 + 1] = v.y; ra[f * 4 + 2] = v.z; ra[f * 4 + 3] = v.w;
  }
#pragma unroll
  for (int f = 0; f < S::kFragsN; ++f) {
    const float4 v = *reinterpret_cast<const float4*>(&bs[kk * S::kBsStride + b_col + f * S::kLanesN * 4]);
    if (S::kSteerBanks) {
      rb[f * 4 + 0] = v.y; rb[f * 4 + 1] = v.x; rb[f * 4 + 2] = v.w; rb[f * 4 + 3] = v.z;
    } else {
      rb[f * 4 + 0] = v.x; rb[f * 4 + 1] = v.y; rb[f * 4 + 2] = v.z; rb[f * 4 + 3] = v.w;
    }
  }
}

// acc += ra (x) rb. The order of the FFMAs shapes ptxas' register allocation, and with it
// how many FFMAs read two operands from the same register bank (dispatch stalls). Measured
// fastest on the H200 (docs/performance.md): for thread tiles longer one way than the other
// (8 x 16, 16 x 8) a serpentine along the longer side, so that consecutive FFMAs share an
// operand at both ends of a line; for square tiles the plain order (the serpentine was up
// to 6% slower there although it has fewer same-bank pairs).
template <class S>
__device__ __forceinline__ void outer_product(const float (&ra)[S::TM], const float (&rb)[S::TN],
                                              float (&acc)[S::TM][S::TN]) {
  if constexpr (S::TM > S::TN) {
#pragma unroll
    for (int j = 0; j < S::TN; ++j)
#pragma unroll
      for (int s = 0; s < S::TM; ++s) {
        const int i = j % 2 ? S::TM - 1 - s : s;
        acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
      }
  } else {
#pragma unroll
    for (int i = 0; i < S::TM; ++i)
#pragma unroll
      for (int s = 0; s < S::TN; ++s) {
        const int j = S::TN > S::TM && i % 2 ? S::TN - 1 - s : s;
        acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
      }
  }
}

// One K tile's steps, as both kernels' main loops run them (as, bs: the tile's shared
// A and B). Without kPrefetchFragments each step loads its fragments, then multiplies.
// With it, ra[0], rb[0] hold this tile's first fragments on entry, and step kk multiplies
// register set kk & 1 while the fragments of step kk + 1 load into the other; before the
// last step, if there is a next tile, next_tile() makes it readable (stores or copies,
// then the barrier) and returns its shared A and B, whose first fragments then load behind
// the last step's FFMAs instead of stalling the next tile's first one.
struct SharedTiles {
  const float* a;
  const float* b;
};

template <class S, class NextTile>
__device__ __forceinline__ void k_steps(const float* as, const float* bs, int a_row, int b_col, bool more,
                                        NextTile&& next_tile, float (&ra)[2][S::TM], float (&rb)[2][S::TN],
                                        float (&acc)[S::TM][S::TN]) {
  static_assert(!S::kPrefetchFragments || S::BK % 2 == 0,
                "the last step and the next tile's first use different register sets");
#pragma unroll
  for (int kk = 0; kk < S::BK; ++kk) {
    if (!S::kPrefetchFragments) {
      load_fragments<S>(as, bs, kk, a_row, b_col, ra[0], rb[0]);
      outer_product<S>(ra[0], rb[0], acc);
      continue;
    }
    if (kk + 1 < S::BK) {
      load_fragments<S>(as, bs, kk + 1, a_row, b_col, ra[(kk + 1) & 1], rb[(kk + 1) & 1]);
    } else if (more) {
      const SharedTiles next = next_tile();
      load_fragments<S>(next.a, next.b, 0, a_row, b_col, ra[0], rb[0]);
    }
    outer_product<S>(ra[kk & 1], rb[kk & 1], acc);
  }
}

// The thread's accumulators into a dense BM x BN partial tile (row-major), raw, for a later
// pass to add up: the stream-K tail's pieces (sgemm_stream_k.cuh, stream_k_fixup.cu).
template <class S>
__device__ __forceinline__ void store_partial_tile(float* tile, int a_row, int b_col,
                                                   const float (&acc)[S::TM][S::TN]) {
#pragma unroll
  for (int fm = 0; fm < S::kFragsM; ++fm)
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int fn = 0; fn < S::kFragsN; ++fn) {
        const int r = a_row + fm * S::kLanesM * 4 + i, c = b_col + fn * S::kLanesN * 4;
        const float* v = &acc[fm * 4 + i][fn * 4];
        *reinterpret_cast<float4*>(&tile[r * S::BN + c]) = make_float4(v[0], v[1], v[2], v[3]);
      }
}

// Rows that are not 16-byte aligned (an output or split-K workspace whose row length is not
// a multiple of 4) are written element by element. Stored straight from the registers, a
// warp's element stores would fall 16 bytes apart, four per 32-byte sector, so each sector
// is written four times by four instructions. Instead each warp passes every fragment row
// through a 128-float shared buffer of its own and writes it back with consecutive lanes on
// consecutive columns: runs of 4 * kLanesN floats (32 for t84, 16 for t816), each sector
// written once. Only __syncwarp is needed: no other warp touches the buffer.
template <class S>
__device__ __forceinline__ void store_accumulators_staged(const GemmParams& p, const BlockTile<S>& blk,
                                                          const float (&acc)[S::TM][S::TN]) {
  constexpr int kRun = S::kLanesN * 4;  // contiguous columns of one fragment row in a warp
  __shared__ __align__(16) float staging[S::kThreads / 32][32 * 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* buf = staging[warp];
  // Partial sums are copies (alpha 1, no C) into the workspace's rows of n floats.
  const bool partial = p.k_splits > 1;
  float* const dst = partial ? partial_row(p, blk.split, blk.batch, 0) : p.d + blk.batch * p.d_batch_stride;
  const int64_t ld = partial ? int64_t(p.n) : p.d_ld;
  const float alpha = partial ? 1.0f : p.alpha;
  const float* const c =
      !partial && p.beta != 0.0f && p.c != nullptr ? p.c + blk.batch * p.c_batch_stride : nullptr;
  // As in the vector path: copies through an opaque 1 keep the accumulators out of aligned quads.
  const float one = S::kSteerBanks ? opaque_one() : 1.0f;
  // The warp's first row and column; lane row r of fragment row (fm, i) is row
  // warp_row + fm * kLanesM * 4 + r * 4 + i, as in place_thread.
  const int warp_row = blk.m0 + blk.a_row - (lane / S::kLanesN) * 4;
  const int warp_col = blk.n0 + blk.b_col - (lane % S::kLanesN) * 4;
#pragma unroll
  for (int fm = 0; fm < S::kFragsM; ++fm)
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int fn = 0; fn < S::kFragsN; ++fn) {
        const float* v = &acc[fm * 4 + i][fn * 4];
        *reinterpret_cast<float4*>(&buf[lane * 4]) = make_float4(one * v[0], one * v[1], one * v[2], one * v[3]);
        __syncwarp();
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int e = q * 32 + lane;  // lane l wrote elements 4l .. 4l + 3: lane row l / kLanesN
          const int row = warp_row + fm * S::kLanesM * 4 + (e / kRun) * 4 + i;
          const int col = warp_col + fn * kRun + e % kRun;
          if (row >= p.m || col >= p.n) continue;
          float out = alpha * buf[e];
          if (c != nullptr) out += p.beta * c[row * p.c_row_stride + col * p.c_col_stride];
          dst[row * ld + col] = out;
        }
        __syncwarp();
      }
}

// D = alpha * acc + beta * C, or the raw partial sums of a K split, four columns at a time.
template <class S>
__device__ __forceinline__ void store_accumulators(const GemmParams& p, const BlockTile<S>& blk,
                                                   const float (&acc)[S::TM][S::TN]) {
  // Only the large 8 x 8 tilings (at most two blocks a SM): their many-block, few-K grids
  // are the output-bound ones (1.4x at 6245x4443x21). The four-block tilings run the small,
  // latency-bound problems, where the staging's round trips cost 1-2.5 us a call (8 -> 10
  // us at 2598x30x40), and ptxas spills inside the 64 x 128 x 8 main loop to fit it. The
  // 8 x 16 (t816) kernels keep ptxas' exact main loops, which the SASS rewrite recognises
  // by fingerprint: with the staging compiled in, 2 of its 3 loops no longer matched and
  // 4096^3 fell from 1.00x to 0.92x.
  if constexpr (S::kMinBlocks < 4 && S::TN < 16) {
    if (p.k_splits == 1 ? !p.d_vec4 : p.n % 4 != 0) {
      store_accumulators_staged(p, blk, acc);
      return;
    }
  }
  // Partial sums leave through 128-bit stores; scaled by an opaque 1 they are copies, so the
  // stores do not need the accumulators themselves in aligned quads (MainloopPolicy::kSteerBanks).
  const float one = S::kSteerBanks ? opaque_one() : 1.0f;
#pragma unroll
  for (int fm = 0; fm < S::kFragsM; ++fm)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = blk.m0 + blk.a_row + fm * S::kLanesM * 4 + i;
#pragma unroll
      for (int fn = 0; fn < S::kFragsN; ++fn) {
        const int col = blk.n0 + blk.b_col + fn * S::kLanesN * 4;
        const float v[4] = {acc[fm * 4 + i][fn * 4 + 0], acc[fm * 4 + i][fn * 4 + 1],
                            acc[fm * 4 + i][fn * 4 + 2], acc[fm * 4 + i][fn * 4 + 3]};
        if (p.k_splits == 1) {
          store_output4(p, blk.batch, row, col, v);
        } else {
          const float w[4] = {one * v[0], one * v[1], one * v[2], one * v[3]};
          store_partial4(p, blk.split, blk.batch, row, col, w);
        }
      }
    }
}

}  // namespace vecgemm
