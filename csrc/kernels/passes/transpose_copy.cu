// The copy behind the auto variant's reordered operands (execute.cpp, padded_copy): an
// operand copied into the other storage order, so that a problem runs on the storage orders
// whose kernels are fastest (docs/performance.md), padded as pad_copy.cu pads.
// Rows of the source become columns of the destination through a shared-memory tile, so
// that both the reads and the writes are whole 128-byte lines.
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "kernels/launchers.h"

namespace vecgemm {
namespace {

constexpr int kTile = 64;                         // a kTile x kTile tile per block
constexpr int kThreads = 256;
constexpr int kQuadsPerRow = kTile / 4;           // 16 threads read a tile row, 16 bytes each
constexpr int kRowsPerPass = kThreads / kQuadsPerRow;

// dst[b][r][q] = src[b][q][r] inside the source, 0 in the padding. blockIdx.x walks the
// destination's columns (source rows), blockIdx.y its rows, blockIdx.z the batch. VEC4: the
// source rows start 16-byte aligned, so each thread reads a tile row's four floats at once;
// with four such loads in flight per thread the copy is bandwidth-bound, not latency-bound.
template <bool VEC4>
__global__ void __launch_bounds__(kThreads) transpose_copy(const PadCopy c) {
  // An odd row length: the column reads of the write phase hit 32 different banks.
  __shared__ float tile[kTile][kTile + 1];
  const int quad = threadIdx.x % kQuadsPerRow, row = threadIdx.x / kQuadsPerRow;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row_tiles = (c.dst_rows + kTile - 1) / kTile;
  for (int b = blockIdx.z; b < c.batch; b += gridDim.z) {
    const float* src = c.src + b * c.src_batch_stride;
    float* dst = c.dst + int64_t(b) * c.dst_rows * c.dst_ld;
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int r0 = rt * kTile, q0 = blockIdx.x * kTile;
      float v[kTile / kRowsPerPass][4];
#pragma unroll
      for (int i = 0; i < kTile / kRowsPerPass; ++i) {  // source row q0 + ..., columns r0 + 4 quad + 0..3
        const int q = q0 + row + i * kRowsPerPass, r = r0 + 4 * quad;
        const float* p = src + int64_t(q) * c.src_ld + r;
        if (VEC4 && q < c.rows && r + 3 < c.cols) {
          const float4 x = __ldg(reinterpret_cast<const float4*>(p));
          v[i][0] = x.x, v[i][1] = x.y, v[i][2] = x.z, v[i][3] = x.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) v[i][j] = q < c.rows && r + j < c.cols ? __ldg(p + j) : 0.0f;
        }
      }
#pragma unroll
      for (int i = 0; i < kTile / kRowsPerPass; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) tile[row + i * kRowsPerPass][4 * quad + j] = v[i][j];
      __syncthreads();
      // Each warp writes whole destination rows: row r0 + i, columns q0 + lane and + 32.
#pragma unroll
      for (int i = warp; i < kTile; i += kThreads / 32) {
        const int r = r0 + i;
        if (r >= c.dst_rows) break;
#pragma unroll
        for (int h = 0; h < kTile; h += 32) {
          const int q = q0 + h + lane;
          if (q < c.dst_ld) dst[int64_t(r) * c.dst_ld + q] = tile[h + lane][i];
        }
      }
      __syncthreads();  // the tile is refilled by the next pass
    }
  }
}

}  // namespace

void launch_transpose_copy(const PadCopy& c, cudaStream_t stream) {
  if (c.batch == 0 || c.dst_rows == 0 || c.dst_ld == 0) return;
  const dim3 grid((c.dst_ld + kTile - 1) / kTile, std::min((c.dst_rows + kTile - 1) / kTile, kMaxGridYZ),
                  std::min(c.batch, kMaxGridYZ));
  const bool vec4 = lines_aligned16(c.src, c.src_ld, c.src_batch_stride);
  if (vec4)
    transpose_copy<true><<<grid, kThreads, 0, stream>>>(c);
  else
    transpose_copy<false><<<grid, kThreads, 0, stream>>>(c);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
