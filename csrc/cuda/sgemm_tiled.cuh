// The general kernel: the seed's block tiling and transposed-A shared layout, plus what the
// seed lists under "What Could Be Improved" and what real inputs need:
//  - deliberate warp tiling (TileShape): a warp owns a compact WM x WN sub-tile and reads
//    a compact stretch of shared memory, instead of being smeared across the block;
//  - padded shared rows, so the transposing stores are free of bank conflicts;
//  - two shared-memory stages with register prefetch: the loads of tile t+1 are issued
//    before the arithmetic on tile t and one barrier per K tile suffices; optionally
//    (kPrefetchFragments) the fragments of each K step load during the previous step;
//  - any M, N, K (predicated, zero-filling loads and masked stores), both storage orders
//    of A and B (LA, LB), any alignment (VEC), batches and split-K (blockIdx.z), and
//    64-bit offsets throughout;
//  - grouped rasterization, so blocks running together share panels of A and B in L2.
#pragma once
#include <cstdint>

#include "../gemm_params.h"
#include "epilogue.cuh"
#include "tile_loader.cuh"
#include "tile_shape.h"

namespace vecgemm {

// Tile rows visited together before moving along N (as in Triton's grouped ordering).
constexpr int kRasterGroupM = 8;

__device__ __forceinline__ void tile_coords(int tiles_m, int tiles_n, int& tm, int& tn) {
  const int pid = blockIdx.x;
  const int per_group = kRasterGroupM * tiles_n;
  const int first_m = (pid / per_group) * kRasterGroupM;
  const int rows = min(tiles_m - first_m, kRasterGroupM);
  tm = first_m + (pid % per_group) % rows;
  tn = (pid % per_group) / rows;
}

// One K step's fragments from shared memory: each 4-wide fragment row is one LDS.128.
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
    rb[f * 4 + 0] = v.x; rb[f * 4 + 1] = v.y; rb[f * 4 + 2] = v.z; rb[f * 4 + 3] = v.w;
  }
}

template <class S>
__device__ __forceinline__ void outer_product(const float (&ra)[S::TM], const float (&rb)[S::TN],
                                              float (&acc)[S::TM][S::TN]) {
#pragma unroll
  for (int i = 0; i < S::TM; ++i)
#pragma unroll
    for (int j = 0; j < S::TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
}

// The K loop over one block's tiles: two shared-memory stages, the next tile's global
// loads in flight (in registers) while the current one is multiplied, one barrier a tile.
template <class S, bool kChecked, class LoaderA, class LoaderB>
__device__ __forceinline__ void mainloop(LoaderA& load_a, LoaderB& load_b, float (*As)[S::BK * S::kAsStride],
                                         float (*Bs)[S::BK * S::kBsStride], int k_len, int a_row, int b_col,
                                         float (&acc)[S::TM][S::TN]) {
  const int tiles = (k_len + S::BK - 1) / S::BK;
  load_a.template load<kChecked>(k_len);
  load_b.template load<kChecked>(k_len);
  load_a.store(As[0]);
  load_b.store(Bs[0]);
  __syncthreads();
  // With kPrefetchFragments, step kk computes on set kk & 1 while set (kk + 1) & 1 loads.
  float ra[2][S::TM], rb[2][S::TN];
  if (S::kPrefetchFragments) load_fragments<S>(As[0], Bs[0], 0, a_row, b_col, ra[0], rb[0]);

  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) {
      // Issued now, consumed at the end of the tile: global latency hides behind the FFMAs.
      load_a.advance();
      load_b.advance();
      load_a.template load<kChecked>(k_len - (t + 1) * S::BK);
      load_b.template load<kChecked>(k_len - (t + 1) * S::BK);
    }
#pragma unroll
    for (int kk = 0; kk < S::BK; ++kk) {
      if (!S::kPrefetchFragments) {
        load_fragments<S>(As[cur], Bs[cur], kk, a_row, b_col, ra[0], rb[0]);
        outer_product<S>(ra[0], rb[0], acc);
        continue;
      }
      if (kk + 1 < S::BK) {
        load_fragments<S>(As[cur], Bs[cur], kk + 1, a_row, b_col, ra[(kk + 1) & 1], rb[(kk + 1) & 1]);
      } else if (more) {
        // The other stage was last read before the previous tile's barrier. Storing and
        // synchronising before the last step lets the next tile's first fragments load
        // behind this step's FFMAs instead of stalling the next tile's first one.
        load_a.store(As[cur ^ 1]);
        load_b.store(Bs[cur ^ 1]);
        __syncthreads();
        load_fragments<S>(As[cur ^ 1], Bs[cur ^ 1], 0, a_row, b_col, ra[0], rb[0]);
      }
      outer_product<S>(ra[kk & 1], rb[kk & 1], acc);
    }
    if (!S::kPrefetchFragments && more) {
      load_a.store(As[cur ^ 1]);
      load_b.store(Bs[cur ^ 1]);
    }
    if (!S::kPrefetchFragments) __syncthreads();
  }
}

template <class S, Layout LA, Layout LB, int VEC>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_tiled(const GemmParams p) {
  // Row-major A and column-major B are K-contiguous: their loader transposes.
  using LoaderA = TileLoader<S::BM, S::BK, S::kThreads, VEC, LA == Layout::RowMajor, S::kAsStride>;
  using LoaderB = TileLoader<S::BN, S::BK, S::kThreads, VEC, LB == Layout::ColMajor, S::kBsStride>;

  __shared__ __align__(16) float As[2][S::BK * S::kAsStride];
  __shared__ __align__(16) float Bs[2][S::BK * S::kBsStride];

  int tm, tn;
  tile_coords((p.m + S::BM - 1) / S::BM, (p.n + S::BN - 1) / S::BN, tm, tn);
  const int m0 = tm * S::BM, n0 = tn * S::BN;
  const int batch = blockIdx.z / p.k_splits;
  const int split = blockIdx.z % p.k_splits;
  const int k_begin = split * p.k_slice;
  const int k_len = min(p.k - k_begin, p.k_slice);

  const float* a = p.a.ptr + batch * p.a.batch_stride +
                   (LA == Layout::RowMajor ? m0 * p.a.ld + k_begin : k_begin * p.a.ld + m0);
  const float* b = p.b.ptr + batch * p.b.batch_stride +
                   (LB == Layout::RowMajor ? k_begin * p.b.ld + n0 : n0 * p.b.ld + k_begin);
  LoaderA load_a(a, p.a.ld, p.m - m0);
  LoaderB load_b(b, p.b.ld, p.n - n0);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm0 = (warp / S::kWarpsN) * S::WM, wn0 = (warp % S::kWarpsN) * S::WN;
  const int ty = lane / S::kLanesN, tx = lane % S::kLanesN;
  // Fragment f of this thread starts at row a_row + f * kLanesM * 4 (columns likewise).
  const int a_row = wm0 + ty * 4, b_col = wn0 + tx * 4;

  float acc[S::TM][S::TN];
#pragma unroll
  for (int i = 0; i < S::TM; ++i)
#pragma unroll
    for (int j = 0; j < S::TN; ++j) acc[i][j] = 0.0f;

  // Interior blocks with whole K tiles, nearly all of a large problem, take a copy of the
  // main loop whose loads carry no bounds checks; edge blocks take the checked copy.
  if (m0 + S::BM <= p.m && n0 + S::BN <= p.n && k_len % S::BK == 0 && !p.checked_loads_only)
    mainloop<S, false>(load_a, load_b, As, Bs, k_len, a_row, b_col, acc);
  else
    mainloop<S, true>(load_a, load_b, As, Bs, k_len, a_row, b_col, acc);

#pragma unroll
  for (int fm = 0; fm < S::kFragsM; ++fm)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = m0 + a_row + fm * S::kLanesM * 4 + i;
#pragma unroll
      for (int fn = 0; fn < S::kFragsN; ++fn) {
        const int col = n0 + b_col + fn * S::kLanesN * 4;
        const float v[4] = {acc[fm * 4 + i][fn * 4 + 0], acc[fm * 4 + i][fn * 4 + 1],
                            acc[fm * 4 + i][fn * 4 + 2], acc[fm * 4 + i][fn * 4 + 3]};
        if (p.k_splits == 1)
          store_output4(p, batch, row, col, v);
        else
          store_partial4(p, split, batch, row, col, v);
      }
    }
}

}  // namespace vecgemm
