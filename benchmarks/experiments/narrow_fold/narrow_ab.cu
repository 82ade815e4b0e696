// Experiment (step 69, removed by the commit after this one): the narrow-side kernel alone at decode shapes, x @ W.T
// (A row-major m x k, B column-major), built with -DVECGEMM_NARROW_PREFETCH_CHUNKS=N.
// Prints per shape: median kernel us over 40 launches, L2 flushed before each, with the
// K slices added in clusters (fold) and as partials (pass, kernel only), and a checksum.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/tf32x3/sgemm_3xtf32_skinny.cuh"

using namespace vecgemm;
using namespace vecgemm::tf32x3_skinny;

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

template <int kQTiles, bool kFewRows, bool kPAlongK, bool kQAlongK>
const void* entry() {
  return (const void*)&sgemm_3xtf32_skinny<SkinnyShape<kQTiles, kFewRows, kPAlongK, kQAlongK, true>>;
}
template <bool kFewRows, bool kPAlongK, bool kQAlongK>
const void* entry(int q_rows) {
  return q_rows == 8    ? entry<1, kFewRows, kPAlongK, kQAlongK>()
         : q_rows == 16 ? entry<2, kFewRows, kPAlongK, kQAlongK>()
                        : entry<4, kFewRows, kPAlongK, kQAlongK>();
}
// Only the storages the shapes below use: few rows rc and rr, few columns rc and rr.
template <bool kFewRows>
const void* entry(int q_rows, bool p_along_k, bool q_along_k) {
  if (kFewRows && q_along_k) return p_along_k ? entry<true, true, true>(q_rows) : entry<true, false, true>(q_rows);
  if (!kFewRows && p_along_k) return q_along_k ? entry<false, true, true>(q_rows) : entry<false, true, false>(q_rows);
  std::printf("no instance here\n");
  std::exit(1);
}

int main() {
  struct Shape { int m, n, k, splits; const char* orders; };
  const Shape shapes[] = {{8, 4096, 4096, 4, "rc"},    {32, 4096, 4096, 4, "rc"},   {16, 11008, 4096, 3, "rc"},
                          {4, 4096, 4096, 4, "rc"},    {8, 4096, 11008, 8, "rc"},   {4096, 8, 4096, 4, "rc"},
                          {8, 4096, 4096, 4, "rr"},    {64, 4096, 4096, 4, "rc"},   {64, 4096, 4096, 4, "rr"},
                          {64, 4096, 4096, 2, "rr"},   {16384, 64, 4096, 1, "rr"}, {16384, 64, 4096, 2, "rr"}};
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  float* flush;
  const size_t flush_bytes = size_t(256) << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  std::mt19937 gen(7);
  std::normal_distribution<float> dist;
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.n) * s.k);
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    float *da, *db, *dd, *dw;
    CHECK(cudaMalloc(&da, a.size() * 4));
    CHECK(cudaMalloc(&db, b.size() * 4));
    CHECK(cudaMalloc(&dd, size_t(s.m) * s.n * 4));
    CHECK(cudaMalloc(&dw, size_t(s.splits) * s.m * s.n * 4));
    CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    GemmParams p{};
    p.m = s.m, p.n = s.n, p.k = s.k, p.batch = 1;
    const bool a_row = s.orders[0] == 'r', b_row = s.orders[1] == 'r';
    p.a = Operand{da, a_row ? s.k : s.m, 0};
    p.b = Operand{db, b_row ? s.n : s.k, 0};
    p.d = dd, p.d_ld = s.n, p.alpha = 1.0f, p.beta = 0.0f;
    p.k_splits = s.splits;
    p.k_slice = ((s.k + kSkinnyBlockK - 1) / kSkinnyBlockK + s.splits - 1) / s.splits * kSkinnyBlockK;
    p.c_vec4 = p.d_vec4 = true;
    const bool few_rows = s.m <= s.n;
    const int narrow = few_rows ? s.m : s.n, wide = few_rows ? s.n : s.m;
    const int q_rows = narrow <= 8 ? 8 : narrow <= 16 ? 16 : 32;
    const bool a_along_k = a_row, b_along_k = !b_row;
    const void* fn = few_rows ? entry<true>(q_rows, b_along_k, a_along_k) : entry<false>(q_rows, a_along_k, b_along_k);
    const dim3 grid((wide + 31) / 32 * ((narrow + q_rows - 1) / q_rows), 1, s.splits);
    cudaEvent_t c0, c1;
    CHECK(cudaEventCreate(&c0));
    CHECK(cudaEventCreate(&c1));
    {  // cuBLAS SGEMM on the same operands: D^T = B^T A^T in column-major terms
      std::vector<float> times;
      const float one = 1.0f, zero = 0.0f;
      for (int rep = 0; rep < 45; ++rep) {
        CHECK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
        CHECK(cudaEventRecord(c0));
        cublasSgemm(handle, b_row ? CUBLAS_OP_N : CUBLAS_OP_T, a_row ? CUBLAS_OP_N : CUBLAS_OP_T, s.n, s.m, s.k, &one,
                    db, int(p.b.ld), da, int(p.a.ld), &zero, dd, s.n);
        CHECK(cudaEventRecord(c1));
        CHECK(cudaEventSynchronize(c1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, c0, c1));
        if (rep >= 5) times.push_back(ms * 1000.0f);
      }
      std::sort(times.begin(), times.end());
      std::printf("prefetch %d %dx%dx%d %s cublas median %.2f us\n", VECGEMM_NARROW_PREFETCH_CHUNKS, s.m, s.n, s.k,
                  s.orders, times[times.size() / 2]);
    }
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int fold = s.splits > 1 ? 1 : 0; fold >= 0; --fold) {
      GemmParams q = p;
      q.workspace = fold ? nullptr : dw;
      void* args[] = {&q};
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = 1, attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = s.splits;
      cudaLaunchConfig_t config{};
      config.gridDim = grid;
      config.blockDim = dim3(128);
      config.attrs = &attribute;
      config.numAttrs = fold ? 1 : 0;
      std::vector<float> times;
      for (int rep = 0; rep < 45; ++rep) {
        CHECK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
        CHECK(cudaEventRecord(e0));
        CHECK(cudaLaunchKernelExC(&config, fn, args));
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 5) times.push_back(ms * 1000.0f);
      }
      std::sort(times.begin(), times.end());
      double checksum = 0;
      if (fold || s.splits == 1) {
        std::vector<float> d(size_t(s.m) * s.n);
        CHECK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
        uint32_t h = 0;
        for (float x : d) {
          uint32_t u;
          std::memcpy(&u, &x, 4);
          h = h * 16777619u ^ u;
        }
        checksum = h;
      }
      std::printf("prefetch %d %dx%dx%d %s split %d %s median %.2f us p10 %.2f%s%.0f\n",
                  VECGEMM_NARROW_PREFETCH_CHUNKS, s.m, s.n, s.k, s.orders, s.splits, fold ? "fold" : "pass",
                  times[times.size() / 2], times[times.size() / 10], (fold || s.splits == 1) ? " bits " : "", checksum);
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dd));
    CHECK(cudaFree(dw));
  }
  return 0;
}
