// Shared by the experiment harnesses (not part of the build): inputs, a float64 reference,
// the largest absolute error against it, and a median time over repeated launches.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

namespace harness {

// Values in [-1, 1), hashed from the index and a seed: never zeros, never a pattern the
// kernel's tiling could hide an error in.
__global__ void fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = (h & 0xffffff) / float(0x800000) - 1.0f;
  }
}

// D = A @ B in float64 for square n x n operands; la, lb: 0 row-major, 1 column-major.
__global__ void reference(const float* A, const float* B, double* D, int n, int la, int lb) {
  int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
  double s = 0;
  for (int k = 0; k < n; ++k) {
    float a = la == 0 ? A[int64_t(i) * n + k] : A[int64_t(k) * n + i];
    float b = lb == 0 ? B[int64_t(k) * n + j] : B[int64_t(j) * n + k];
    s += double(a) * b;
  }
  D[int64_t(i) * n + j] = s;
}

__global__ void max_abs_error(const float* D, const double* Ref, int64_t count, unsigned* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float e = float(fabs(double(D[i]) - Ref[i]));
    if (!(e <= 1e30f)) e = 1e30f;  // NaN and unwritten (poisoned) elements count as huge
    atomicMax(out, __float_as_uint(e));
  }
}

// The largest |D - Ref| over count elements.
inline float error_against(const float* D, const double* Ref, int64_t count) {
  unsigned* err;
  CK(cudaMalloc(&err, 4));
  CK(cudaMemset(err, 0, 4));
  max_abs_error<<<1024, 256>>>(D, Ref, count, err);
  CK(cudaGetLastError());
  unsigned bits;
  CK(cudaMemcpy(&bits, err, 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(err));
  float e;
  memcpy(&e, &bits, 4);
  return e;
}

// The square sizes named on the command line (default 2048, 4096, 8192), and the most
// elements any of them needs.
inline std::vector<int> sizes_from(int argc, char** argv, int64_t& most) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(atoi(argv[i]));
  if (sizes.empty()) sizes = {2048, 4096, 8192};
  most = 0;
  for (int n : sizes) most = std::max(most, int64_t(n) * n);
  return sizes;
}

// Median milliseconds of `reps` timed launches (CUDA events) after `warmup` untimed ones.
template <class F>
float median_ms(F&& run, int reps = 10, int warmup = 2) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < warmup + reps; ++r) {
    CK(cudaEventRecord(e0));
    run();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= warmup) ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One timed case of an experiment: its launches, the float64 reference its output (D) is
// checked against, and whether it is the baseline the cases after it are timed against.
struct Case {
  const char* name;
  std::function<void()> run;
  const double* ref;
  bool baseline;
};

// Two rounds over the cases at size n (square, output D): in the first, where n == check,
// each output is NaN-poisoned, then checked against its reference; every case's median
// time is printed with the latest baseline's time over it ("x <vs>"), names `width` wide.
inline void time_cases(int n, int check, float* D, const std::vector<Case>& cases, const char* vs, int width) {
  const int64_t nn = int64_t(n) * n;
  float base = 0;
  for (int round = 0; round < 2; ++round)
    for (const Case& c : cases) {
      float err = 0;
      if (n == check && round == 0) {
        CK(cudaMemset(D, 0xff, nn * 4));  // NaN poison: unwritten elements show
        c.run();
        CK(cudaGetLastError());
        err = error_against(D, c.ref, nn);
      }
      const float ms = median_ms([&] { c.run(); });
      CK(cudaGetLastError());
      if (c.baseline) base = ms;
      printf("%5d round %d %-*s %8.4f ms  x %s %.4f", n, round, width, c.name, ms, vs, base / ms);
      if (n == check && round == 0) printf("  max abs err %.2e", err);
      printf("\n");
      fflush(stdout);
    }
}

}  // namespace harness
