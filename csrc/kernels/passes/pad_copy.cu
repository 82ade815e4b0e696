// The copy behind the auto variant's padded operands (execute.cpp, padded_copy): one pass
// that reads the operand once and writes every element of the padded storage once, values
// inside the operand and zeros outside. Its rows are the operand's contiguous lines; the
// padding adds zero rows, zero columns, or both. ATen's equivalent (zeros, then a strided
// copy_ into a narrowed view) writes the storage twice, plus two launches per operand.
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "kernels/launchers.h"

namespace vecgemm {
namespace {

// One thread writes four consecutive floats of a padded row (one 16-byte store, the rows
// being 16-byte aligned) from up to four scalar loads, the source rows having any
// alignment. blockIdx.y walks the batch's rows.
__global__ void pad_copy(const PadCopy c) {
  const int64_t lines = int64_t(c.batch) * c.dst_rows;
  const int quads = c.dst_ld / 4;
  for (int64_t line = blockIdx.y; line < lines; line += gridDim.y) {
    const int b = int(line / c.dst_rows), r = int(line % c.dst_rows);
    const float* src = c.src + b * c.src_batch_stride + r * c.src_ld;
    float4* dst = reinterpret_cast<float4*>(c.dst + line * c.dst_ld);
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = q * 4 + j;
        v[j] = r < c.rows && col < c.cols ? __ldg(src + col) : 0.0f;
      }
      dst[q] = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

}  // namespace

void launch_pad_copy(const PadCopy& c, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t lines = int64_t(c.batch) * c.dst_rows;
  if (lines == 0 || c.dst_ld == 0) return;
  const int quads = c.dst_ld / 4;
  const dim3 grid(std::min((quads + kThreads - 1) / kThreads, 64), static_cast<unsigned>(std::min<int64_t>(lines, kMaxGridYZ)));
  pad_copy<<<grid, kThreads, 0, stream>>>(c);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
