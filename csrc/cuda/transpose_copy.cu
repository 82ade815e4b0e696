// The copy behind the auto variant's reordered operands (dispatch.cpp, padded_copy): an
// operand copied into the other storage order, so that a problem runs on the storage orders
// whose kernels are fastest (docs/performance.md, step 17), padded as pad_copy.cu pads.
// Rows of the source become columns of the destination through a shared-memory tile, so
// that both the reads and the writes are whole 128-byte lines.
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "kernels.h"

namespace vecgemm {
namespace {

constexpr int kTile = 32;     // a kTile x kTile tile per block
constexpr int kRowsPerPass = 8;  // block of kTile x kRowsPerPass threads

// dst[b][r][q] = src[b][q][r] inside the source, 0 in the padding. blockIdx.x walks the
// destination's columns, blockIdx.y its rows, blockIdx.z the batch.
__global__ void __launch_bounds__(kTile * kRowsPerPass) transpose_copy(const PadCopy c) {
  // One column of padding: a warp reading a tile column touches 32 different banks.
  __shared__ float tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row_tiles = (c.dst_rows + kTile - 1) / kTile;
  for (int b = blockIdx.z; b < c.batch; b += gridDim.z) {
    const float* src = c.src + b * c.src_batch_stride;
    float* dst = c.dst + int64_t(b) * c.dst_rows * c.dst_ld;
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int r0 = rt * kTile, q0 = blockIdx.x * kTile;
#pragma unroll
      for (int i = ty; i < kTile; i += kRowsPerPass) {  // source row q0 + i, column r0 + tx
        const int q = q0 + i, r = r0 + tx;
        tile[i][tx] = q < c.rows && r < c.cols ? __ldg(src + int64_t(q) * c.src_ld + r) : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int i = ty; i < kTile; i += kRowsPerPass) {  // destination row r0 + i, column q0 + tx
        const int r = r0 + i, q = q0 + tx;
        if (r < c.dst_rows && q < c.dst_ld) dst[int64_t(r) * c.dst_ld + q] = tile[tx][i];
      }
      __syncthreads();  // the tile is refilled by the next pass
    }
  }
}

}  // namespace

void launch_transpose_copy(const PadCopy& c, cudaStream_t stream) {
  if (c.batch == 0 || c.dst_rows == 0 || c.dst_ld == 0) return;
  const dim3 grid((c.dst_ld + kTile - 1) / kTile, std::min((c.dst_rows + kTile - 1) / kTile, 65535),
                  std::min(c.batch, 65535));
  transpose_copy<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(c);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
