// Step 72's experiment: the narrow-side kernel with more warps a block taking its K, so that
// decode needs no K split (and no reduction) to keep enough loads in flight. It times
// SkinnyShape's kWarps, which only this commit has. Build from the repository root and run
// on any Hopper GPU (about 30 s):
//   nvcc -std=c++20 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -cudart static \
//        benchmarks/experiments/narrow_warps/narrow_warps.cu -o narrow_warps && ./narrow_warps
// Prints, per shape (few rows, rc, aligned), warps a block and K split: the kernel's median
// time and the call's (kernel + a plain reduction of the slices), L2 flushed before each,
// and the largest difference from the 4-warp unsplit result, relative to its largest value.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/tf32x3/sgemm_3xtf32_skinny.cuh"

using namespace vecgemm;
using namespace vecgemm::tf32x3_skinny;

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));   \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// D = the sum of the slices' partials, in slice order (the library's reduction's order).
__global__ void reduce_slices(const float* w, float* d, int64_t elements, int splits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < elements; i += int64_t(gridDim.x) * blockDim.x) {
    float s = w[i];
    for (int k = 1; k < splits; ++k) s += w[k * elements + i];
    d[i] = s;
  }
}

struct Variant {
  int q_rows, warps;
  const void* fn;
};

template <int kQTiles, int kWarps>
Variant variant() {
  return {8 * kQTiles, kWarps, (const void*)&sgemm_3xtf32_skinny<SkinnyShape<kQTiles, true, true, true, true, kWarps>>};
}

int main() {
  const Variant variants[] = {variant<1, 4>(), variant<1, 8>(), variant<1, 16>(), variant<2, 4>(),
                              variant<2, 8>(), variant<2, 12>(), variant<4, 4>(), variant<4, 8>()};
  for (const Variant& v : variants) {
    cudaFuncAttributes at;
    CHECK(cudaFuncGetAttributes(&at, v.fn));
    int blocks = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.fn, 32 * v.warps, 0));
    std::printf("instance q_rows %d warps %d: %d registers, %zu bytes local, %zu B static smem, %d blocks an SM\n",
                v.q_rows, v.warps, at.numRegs, at.localSizeBytes, at.sharedSizeBytes, blocks);
  }
  const size_t flush_bytes = size_t(256) << 20;
  float* flush;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1, e2;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventCreate(&e2));
  std::mt19937 gen(11);
  std::normal_distribution<float> dist;
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{8, 4096, 4096}, Shape{16, 11008, 4096}, Shape{32, 4096, 4096}, Shape{32, 11008, 4096}}) {
    const int m = s.m, n = s.n, k = s.k;
    std::vector<float> a(size_t(m) * k), b(size_t(n) * k);
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    float *da, *db, *dd, *dw;
    CHECK(cudaMalloc(&da, a.size() * 4));
    CHECK(cudaMalloc(&db, b.size() * 4));
    CHECK(cudaMalloc(&dd, size_t(m) * n * 4));
    CHECK(cudaMalloc(&dw, size_t(8) * m * n * 4));
    CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    std::vector<float> reference, out(size_t(m) * n);
    for (const Variant& v : variants) {
      if (v.q_rows != (m <= 8 ? 8 : m <= 16 ? 16 : 32)) continue;  // the block height the launcher takes
      for (int splits : {1, 2, 3, 4}) {
        GemmParams p{};
        p.m = m, p.n = n, p.k = k, p.batch = 1;
        p.a = Operand{da, k, 0};
        p.b = Operand{db, k, 0};
        p.d = dd, p.d_ld = n, p.alpha = 1.0f, p.beta = 0.0f;
        p.k_splits = splits;
        p.k_slice = ((k + kSkinnyBlockK - 1) / kSkinnyBlockK + splits - 1) / splits * kSkinnyBlockK;
        p.c_vec4 = p.d_vec4 = true;
        p.workspace = dw;
        const dim3 grid((n + 31) / 32 * ((m + v.q_rows - 1) / v.q_rows), 1, splits);
        void* args[] = {&p};
        std::vector<float> kernel_us, call_us;
        for (int rep = 0; rep < 25; ++rep) {
          CHECK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
          CHECK(cudaEventRecord(e0));
          CHECK(cudaLaunchKernel(v.fn, grid, dim3(32 * v.warps), args, 0, 0));
          CHECK(cudaEventRecord(e1));
          if (splits > 1) reduce_slices<<<264, 256>>>(dw, dd, int64_t(m) * n, splits);
          CHECK(cudaEventRecord(e2));
          CHECK(cudaEventSynchronize(e2));
          float k_ms, c_ms;
          CHECK(cudaEventElapsedTime(&k_ms, e0, e1));
          CHECK(cudaEventElapsedTime(&c_ms, e0, e2));
          if (rep >= 5) kernel_us.push_back(k_ms * 1000.0f), call_us.push_back(c_ms * 1000.0f);
        }
        CHECK(cudaGetLastError());
        std::sort(kernel_us.begin(), kernel_us.end());
        std::sort(call_us.begin(), call_us.end());
        CHECK(cudaMemcpy(out.data(), dd, out.size() * 4, cudaMemcpyDeviceToHost));
        if (reference.empty()) reference = out;
        double diff = 0.0, top = 0.0;
        for (size_t i = 0; i < out.size(); ++i) {
          diff = std::max(diff, double(std::fabs(out[i] - reference[i])));
          top = std::max(top, double(std::fabs(reference[i])));
        }
        std::printf("%dx%dx%d rc  warps %2d  split %d  kernel %6.2f us  call %6.2f us  max diff %.2e\n", m, n, k,
                    v.warps, splits, kernel_us[kernel_us.size() / 2], call_us[call_us.size() / 2], diff / top);
      }
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dd));
    CHECK(cudaFree(dw));
  }
  return 0;
}
