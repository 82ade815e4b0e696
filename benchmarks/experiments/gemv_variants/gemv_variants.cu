// An experiment on gemv.cu's kernel (M = 1 with a column-major B: one row of the matrix per
// output): how many loads a lane keeps in flight, how many rows a warp takes, the block's
// size and the cache policy of the matrix's loads, against the library's choice (8 warps a
// block, one row a warp, 4 16-byte loads a lane in flight, __ldg). Self-contained; build from
// the repository root and run on any sm_80+ GPU (about 20 s):
//   nvcc -std=c++17 -O3 -arch=native benchmarks/experiments/gemv_variants/gemv_variants.cu -o gemv_variants && ./gemv_variants
// Prints, per shape (rows x K, fp32, aligned) and variant, the kernel's median time over 50
// launches, the L2 flushed (a 256 MB write) before each, the matrix's bytes over that time,
// and the largest difference from the library's variant relative to the largest |result|.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(x)                                                             \
  do {                                                                       \
    cudaError_t e = (x);                                                     \
    if (e != cudaSuccess) {                                                  \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

enum class Policy { kLdg, kStream };

template <Policy P>
__device__ __forceinline__ float4 load_matrix(const float* p) {
  if constexpr (P == Policy::kLdg) return __ldg(reinterpret_cast<const float4*>(p));
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

// out[r] = sum_k mat[r * k_len + k] * vec[k]; each warp takes kRows rows, each lane kUnroll
// 16-byte chunks of each row in flight, K % (128 kUnroll) == 0 assumed by the shapes below.
template <int kWarps, int kRows, int kUnroll, Policy P>
__global__ void __launch_bounds__(kWarps * 32) gemv(const float* mat, const float* vec, float* out, int rows,
                                                    int k_len) {
  const int r0 = (blockIdx.x * kWarps + threadIdx.x / 32) * kRows;
  const int lane = threadIdx.x % 32;
  if (r0 >= rows) return;
  constexpr int kStep = 128;
  float sum[kRows][kUnroll] = {};
  for (int k = lane * 4; k < k_len; k += kUnroll * kStep) {
    float4 v[kUnroll], m[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        m[r][u] = load_matrix<P>(mat + int64_t(min(r0 + r, rows - 1)) * k_len + k + u * kStep);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(reinterpret_cast<const float4*>(vec + k + u * kStep));
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) sum[r][u] += dot4(m[r][u], v[u]);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float total = 0.f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) total += sum[r][u];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    if (lane == 0 && r0 + r < rows) out[r0 + r] = total;
  }
}

struct Variant {
  const char* name;
  int warps, rows;
  void (*launch)(const float*, const float*, float*, int, int);
};

template <int kWarps, int kRows, int kUnroll, Policy P>
void launch(const float* m, const float* v, float* o, int rows, int k) {
  const int per_block = kWarps * kRows;
  gemv<kWarps, kRows, kUnroll, P><<<(rows + per_block - 1) / per_block, kWarps * 32>>>(m, v, o, rows, k);
}

int main() {
  const Variant variants[] = {
      {"library: 8 warps, 1 row, 4 loads, ldg", 8, 1, launch<8, 1, 4, Policy::kLdg>},
      {"8 loads", 8, 1, launch<8, 1, 8, Policy::kLdg>},
      {"2 rows a warp", 8, 2, launch<8, 2, 4, Policy::kLdg>},
      {"4 rows a warp, 2 loads", 8, 4, launch<8, 4, 2, Policy::kLdg>},
      {"4 warps a block", 4, 1, launch<4, 1, 4, Policy::kLdg>},
      {"no L1 allocation", 8, 1, launch<8, 1, 4, Policy::kStream>},
      {"8 loads, no L1 allocation", 8, 1, launch<8, 1, 8, Policy::kStream>},
      {"2 rows, no L1 allocation", 8, 2, launch<8, 2, 4, Policy::kStream>},
      {"2 rows, 8 loads, no L1 allocation", 8, 2, launch<8, 2, 8, Policy::kStream>},
      {"16 warps, 8 loads, no L1 allocation", 16, 1, launch<16, 1, 8, Policy::kStream>},
  };
  const int shapes[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {50176, 768}, {4096, 1024}};
  float* flush = nullptr;
  const size_t flush_bytes = size_t(256) << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  for (const auto& shape : shapes) {
    const int rows = shape[0], k = shape[1];
    std::vector<float> hm(size_t(rows) * k), hv(k);
    for (auto& x : hm) x = normal(gen);
    for (auto& x : hv) x = normal(gen);
    float *m, *v, *o;
    CHECK(cudaMalloc(&m, hm.size() * 4));
    CHECK(cudaMalloc(&v, hv.size() * 4));
    CHECK(cudaMalloc(&o, rows * 4));
    CHECK(cudaMemcpy(m, hm.data(), hm.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(v, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
    std::vector<float> reference;
    for (const Variant& var : variants) {
      std::vector<float> times;
      for (int rep = 0; rep < 55; ++rep) {
        CHECK(cudaMemsetAsync(flush, rep, flush_bytes));
        CHECK(cudaMemsetAsync(o, 0xff, rows * 4));  // NaN: a row left unwritten shows
        CHECK(cudaEventRecord(start));
        var.launch(m, v, o, rows, k);
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        CHECK(cudaGetLastError());
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (rep >= 5) times.push_back(ms * 1e3f);
      }
      std::sort(times.begin(), times.end());
      const float us = times[times.size() / 2];
      std::vector<float> out(rows);
      CHECK(cudaMemcpy(out.data(), o, rows * 4, cudaMemcpyDeviceToHost));
      if (reference.empty()) reference = out;
      double diff = 0.0, top = 0.0;
      for (int r = 0; r < rows; ++r) {
        diff = std::max(diff, std::isnan(out[r]) ? INFINITY : std::fabs(double(out[r]) - reference[r]));
        top = std::max(top, std::fabs(double(reference[r])));
      }
      std::printf("%6d x %-6d %-40s %8.2f us %6.2f TB/s  diff %.1e\n", rows, k, var.name, us,
                  double(rows) * k * 4 / (us * 1e-6) / 1e12, diff / top);
    }
    CHECK(cudaFree(m));
    CHECK(cudaFree(v));
    CHECK(cudaFree(o));
  }
  return 0;
}
