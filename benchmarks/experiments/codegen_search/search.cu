// Experiment (docs/performance.md, step 18; not part of the build): the variants of one
// shard of the code-generation search (variants.py), each the register-staged kernel for
// column-major A and row-major B, timed against cublasSgemm on the same operands in the same
// process, every output checked against a float64 reference first.
//   ./search_<shard> SIZE [ONLY_IDS...]     prints: id name size ms cublas_ms ratio max_err
#include <cublas_v2.h>

#include "../harness.cuh"
#include "sgemm_tiled.cuh"

using namespace vecgemm;

struct Case {
  int id;
  const char* name;
  void (*run)(const GemmParams&);
};

template <class S>
void run_variant(const GemmParams& p) {
  const int tiles = ((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  sgemm_tiled<S, Layout::ColMajor, Layout::RowMajor, 4><<<tiles, S::kThreads>>>(p);
}

#define VARIANT(ID, NAME, ...) {ID, NAME, &run_variant<TileShape<__VA_ARGS__>>},
const Case kCases[] = {
#include VARIANTS_INC
};

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int n = atoi(argv[1]);
  std::vector<int> only;
  for (int i = 2; i < argc; ++i) only.push_back(atoi(argv[i]));
  const int64_t nn = int64_t(n) * n;
  const int check = std::min(n, 2048);  // the reference is checked on a check x check problem
  const int64_t cc = int64_t(check) * check;
  float *A, *B, *D;
  double* Ref;
  CK(cudaMalloc(&A, nn * 4)); CK(cudaMalloc(&B, nn * 4)); CK(cudaMalloc(&D, nn * 4));
  CK(cudaMalloc(&Ref, cc * 8));
  harness::fill<<<1024, 256>>>(A, cc, 11);
  harness::fill<<<1024, 256>>>(B, cc, 12);
  harness::reference<<<dim3(check / 16, check / 16), dim3(16, 16)>>>(A, B, Ref, check, 1, 0);
  CK(cudaDeviceSynchronize());
  auto params = [&](int size) {
    GemmParams p{};
    p.m = p.n = p.k = size; p.batch = 1;
    p.a = Operand{A, size, 0}; p.b = Operand{B, size, 0};
    p.d = D; p.d_ld = size; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = size; p.d_vec4 = true;
    return p;
  };
  std::vector<float> errs;
  for (const Case& c : kCases) {  // checked on the small problem first
    if (!only.empty() && std::find(only.begin(), only.end(), c.id) == only.end()) { errs.push_back(0); continue; }
    CK(cudaMemset(D, 0xff, cc * 4));  // NaN poison: unwritten elements show
    c.run(params(check));
    CK(cudaGetLastError());
    errs.push_back(harness::error_against(D, Ref, cc));
  }
  harness::fill<<<1024, 256>>>(A, nn, 1);
  harness::fill<<<1024, 256>>>(B, nn, 2);
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  // Row-major D = A @ B with A column-major: cuBLAS' column-major D^T = B^T A.
  auto cublas = [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, B, n, A, n, &zero, D, n); };
  const GemmParams p = params(n);
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    const Case& c = kCases[i];
    if (!only.empty() && std::find(only.begin(), only.end(), c.id) == only.end()) continue;
    // cuBLAS timed next to each variant: the ratio is immune to clock drift across the run.
    const float base = harness::median_ms(cublas);
    const float ms = harness::median_ms([&] { c.run(p); });
    CK(cudaGetLastError());
    printf("%d %s %d %.4f %.4f %.4f %.2e\n", c.id, c.name, n, ms, base, base / ms, errs[i]);
    fflush(stdout);
  }
  return 0;
}
