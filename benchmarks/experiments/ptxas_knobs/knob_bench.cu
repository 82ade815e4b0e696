// Experiment (docs/performance.md, step 17; not part of the build): the production tilings
// as setup.py builds them, timed against cublasSgemm in the same process, so that one
// binary per set of ptxas options (README.md) shows what the options do to the main loops.
//   ./knob_bench [SIZES...]     (default 2048 4096 8192; the errors are checked at 2048)
#include <cublas_v2.h>

#include <cstring>

#include "../harness.cuh"
#include "../rows.cuh"
#include "sgemm_async.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"

using namespace vecgemm;
constexpr Layout R = Layout::RowMajor, C = Layout::ColMajor;

using harness::row;
using harness::ShapeOf;

template <int I, Layout LA, Layout LB>
void run_row(const GemmParams& p) {
  using S = ShapeOf<I>;
  const int tiles = ((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  if constexpr (kTileConfigs[I].stages > 0)
    sgemm_async<AsyncShape<S, kTileConfigs[I].stages>, LA, LB><<<tiles, S::kThreads>>>(p);
  else
    sgemm_tiled<S, LA, LB, 4><<<tiles, S::kThreads>>>(p);
}

struct Case {
  const char* name;
  int la, lb;
  void (*run)(const GemmParams&);
};
#define ROW(NAME, LA, LB) {NAME " " #LA #LB, int(LA), int(LB), &run_row<row(NAME), LA, LB>}

// The best tilings of each storage order at 4096 (the efficiency table of tile_configs.h).
const Case kCases[] = {
    ROW("tiled_128x64x8b", R, R),      ROW("tiled_64x128x8", R, R),  ROW("tiled_128x128x8_t816", R, R),
    ROW("tiled_128x128x16", R, C),     ROW("tiled_128x128x8_t816", R, C),
    ROW("tiled_128x128x8_t816", C, R), ROW("async_128x128x8_s4", C, R),
    ROW("tiled_128x64x8b", C, C),      ROW("async_256x128x8_s3", C, C),
};

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(atoi(argv[i]));
  if (sizes.empty()) sizes = {2048, 4096, 8192};
  const int check = 2048;
  int64_t most = 0;
  for (int n : sizes) most = std::max(most, int64_t(n) * n);
  float *A, *B, *D;
  double* Ref[4];
  CK(cudaMalloc(&A, most * 4)); CK(cudaMalloc(&B, most * 4)); CK(cudaMalloc(&D, most * 4));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const int64_t cc = int64_t(check) * check;
  for (int i = 0; i < 4; ++i) {
    CK(cudaMalloc(&Ref[i], cc * 8));
    harness::fill<<<1024, 256>>>(A, cc, 1);
    harness::fill<<<1024, 256>>>(B, cc, 2);
    harness::reference<<<dim3(check / 16, check / 16), dim3(16, 16)>>>(A, B, Ref[i], check, i >> 1, i & 1);
  }
  CK(cudaDeviceSynchronize());
  for (int n : sizes) {
    const int64_t nn = int64_t(n) * n;
    harness::fill<<<1024, 256>>>(A, nn, 1);
    harness::fill<<<1024, 256>>>(B, nn, 2);
    GemmParams p{};
    p.m = p.n = p.k = n; p.batch = 1;
    p.a = Operand{A, n, 0}; p.b = Operand{B, n, 0};
    p.d = D; p.d_ld = n; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = n; p.d_vec4 = true;
    float cublas_ms[4];
    for (int o = 0; o < 4; ++o) {
      // D (row-major) = A @ B is D^T = B^T A^T in cuBLAS's column-major terms.
      const cublasOperation_t ta = (o >> 1) ? CUBLAS_OP_T : CUBLAS_OP_N, tb = (o & 1) ? CUBLAS_OP_T : CUBLAS_OP_N;
      const float one = 1.0f, zero = 0.0f;
      cublas_ms[o] = harness::median_ms([&] { cublasSgemm(handle, tb, ta, n, n, n, &one, B, n, A, n, &zero, D, n); });
    }
    for (const Case& c : kCases) {
      float err = 0;
      if (n == check) {
        CK(cudaMemset(D, 0xff, nn * 4));  // NaN poison: unwritten elements show
        c.run(p);
        CK(cudaGetLastError());
        err = harness::error_against(D, Ref[c.la * 2 + c.lb], nn);
      }
      const float ms = harness::median_ms([&] { c.run(p); });
      const float base = cublas_ms[c.la * 2 + c.lb];
      printf("%5d %-26s %8.3f ms  %5.1f TFLOP/s  cublas %8.3f ms  x %.3f", n, c.name, ms,
             2.0 * n * double(n) * n / ms / 1e9, base, base / ms);
      if (n == check) printf("  max abs err %.2e", err);
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
