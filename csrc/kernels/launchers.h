// Host-side entry points of the CUDA kernels: what the planner and the executor may
// call. Each launcher runs on the given stream and checks its launch.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/gemm_params.h"

namespace vecgemm {

// Whether the second passes (split-K reduction, stream-K fix-up, the 3xTF32 wgmma kernel
// and its fix-up) may overlap the end of the kernel before them (dependent_launch.cuh): on,
// unless VECGEMM_DEPENDENT_LAUNCH=0 or set_dependent_launch(false).
bool dependent_launch_enabled();

using LaunchFn = void (*)(const GemmParams&, cudaStream_t);
// The stream-K tail's launch: sk.first_tile tiles by the tiled kernel (whole waves), then
// the tail's pieces into p.workspace (sgemm_stream_k.cuh); launch_stream_k_fixup follows.
using StreamKFn = void (*)(const GemmParams&, const StreamK&, cudaStream_t);

// One compiled instance of the tiled kernel.
struct TiledKernel {
  LaunchFn launch;
  const void* entry;  // the __global__ function, for occupancy queries
  int threads;
  StreamKFn stream_k;  // null where the row has no stream-K tail (kernel_configs.h)
};

// The instances of the tiled kernel, filled at load time by the generated translation
// units of sgemm_tiled_instances.cuh. config indexes kKernelConfigs; vec4: every load of A
// and B may be 16 bytes wide, otherwise scalar loads. An instance that was not built
// (scalar loads for a row without `scalar`) has a null launch.
void register_tiled_kernel(int config, Layout la, Layout lb, bool vec4, TiledKernel kernel);
TiledKernel tiled_kernel(int config, Layout la, Layout lb, bool vec4);

// The seed's kernel: C = alpha * A @ B + beta * C with C = p.d, row-major dense operands.
// Its tile, as the seed configures it: M and N must be multiples of the block tile and K of BK.
struct VectorizedTile {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
};
void launch_vectorized(const GemmParams& p, cudaStream_t stream);

// Matrix-vector products and products with a few vectors (gemv.cu): M <= kGemvMaxVectors
// with B column-major (and A row-major where M > 1), or N <= kGemvMaxVectors with A
// row-major (and B column-major where N > 1): the vectors contiguous. Up to 4, where a
// tiling's 32-row tiles spend the most on nothing (M = 2 with a column-major B ran 0.85x
// torch.matmul on split-K on an H100, M = 8 1.13x; docs/history.md, step 77).
constexpr int kGemvMaxVectors = 4;
// A warp's round of loads along its row: 32 lanes, 4 floats, 4 loads in flight. K slices of
// a split gemv are whole rounds.
constexpr int kGemvKRound = 512;
bool gemv_fits(int m, int n, Layout la, Layout lb);
// With p.k_splits > 1, each K slice's sums go to p.workspace for launch_splitk_reduce.
void launch_gemv(const GemmParams& p, Layout la, Layout lb, cudaStream_t stream);

// A batch of row-major matrices (rows x cols, row stride src_ld, any alignment) copied
// into contiguous storage of dst_rows x dst_ld (dst_rows >= rows, dst_ld >= cols and a
// multiple of 4, dst 16-byte aligned), zeros outside the source (pad_copy.cu).
struct PadCopy {
  const float* src;
  int64_t src_ld, src_batch_stride;
  int rows, cols;
  float* dst;
  int dst_rows, dst_ld;
  int batch;
};
void launch_pad_copy(const PadCopy& c, cudaStream_t stream);
// The same with the source transposed (transpose_copy.cu): dst_rows >= cols, dst_ld >= rows,
// and dst[r][q] = src[q][r] inside the source, zeros outside.
void launch_transpose_copy(const PadCopy& c, cudaStream_t stream);

// Split-K: D = alpha * (sum of the p.k_splits partial products) + beta * C.
// Partials each thread of the reduction loads at once (its round trips: splits / this).
inline constexpr int kSplitkReduceLoadsInFlight = 16;
void launch_splitk_reduce(const GemmParams& p, cudaStream_t stream);
// The same for a product run on its transpose: p is D's problem (m x n) and its workspace
// holds C^T's partials, [k_splits][batch][n][m] (splitk_reduce_transposed.cu).
void launch_splitk_reduce_transposed(const GemmParams& p, cudaStream_t stream);

// The stream-K tail's second pass: D of the tail's bm x bn tiles from their pieces.
void launch_stream_k_fixup(const GemmParams& p, const StreamK& sk, int bm, int bn, cudaStream_t stream);

}  // namespace vecgemm
