// Experiment harness (docs/performance.md, step 16; not part of the build): times kernel
// instances directly at M = N = K = SIZE and checks each against a float64 reference.
//   ./ws_bench [SIZE] [NAME FILTER]     (build: see README.md)
#include <cstring>

#include "../harness.cuh"
#include "sgemm_async.cuh"
#include "sgemm_tiled.cuh"
#include "sgemm_ws.cuh"
#include "tile_configs.h"

using namespace vecgemm;
constexpr Layout R = Layout::RowMajor, C = Layout::ColMajor;

template <class S, class K>
void launch(K kernel, int threads, const GemmParams& p) {
  const int tiles = ((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  kernel<<<dim3(tiles, 1, 1), threads>>>(p);
}

struct Case {
  const char* name;
  int la, lb;
  void (*run)(const GemmParams&);
};

using T64b = TileShape<128, 64, 8, 32, 64, 8, 8, 4, false, true, kCC>;
using T816 = TileShape<128, 128, 8, 64, 64, 8, 16, 2, true, false, kCR | kCC>;
using A256 = AsyncShape<TileShape<256, 128, 8, 64, 64, 8, 16, 1, true>, 3>;
using W256 = x::ProducerShape<TileShape<256, 128, 8, 64, 64, 8, 16, 1, true>, 3>;
using W128 = x::ProducerShape<TileShape<128, 128, 8, 64, 64, 8, 16, 2, true>, 4>;
using W128s5 = x::ProducerShape<TileShape<128, 128, 8, 64, 64, 8, 16, 2, true>, 5>;
using W12864 = x::ProducerShape<TileShape<128, 64, 8, 32, 64, 8, 8, 3, true>, 4>;
using W128256 = x::ProducerShape<TileShape<128, 256, 8, 64, 64, 16, 8, 1, true>, 3>;

#define TILED(S, LA, LB) [](const GemmParams& p) { launch<S>(sgemm_tiled<S, LA, LB, 4>, S::kThreads, p); }
#define ASYNC(S, LA, LB) [](const GemmParams& p) { launch<S>(sgemm_async<S, LA, LB>, S::kThreads, p); }
#define WSX(S, LA, LB, PW, U, PR) [](const GemmParams& p) { launch<S>(x::sgemm_ws<S, LA, LB, PW, 0, U, PR>, S::kBlockThreads, p); }
#define WS(S, LA, LB, PW, NC) [](const GemmParams& p) { launch<S>(x::sgemm_ws<S, LA, LB, PW, NC>, S::kBlockThreads, p); }

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  const char* only = argc > 2 ? argv[2] : nullptr;  // substring filter
  // Producer knobs: WSX(shape, LA, LB, producer warps, unroll, producer registers).
  std::vector<Case> cases = {
      {"tiled_128x64x8b rr", 0, 0, TILED(T64b, R, R)},
      {"async_256x128x8_s3 rr", 0, 0, ASYNC(A256, R, R)},
      {"ws256 pw1 u1 p40 rr", 0, 0, WSX(W256, R, R, 1, 1, 40)},
      {"ws256 pw4 u1 p40 rr", 0, 0, WSX(W256, R, R, 4, 1, 40)},
      {"ws256 pw4 u2 p40 rr", 0, 0, WSX(W256, R, R, 4, 2, 40)},
      {"ws256 pw4 u4 p40 rr", 0, 0, WSX(W256, R, R, 4, 4, 40)},
      {"ws256 pw4 u4 p56 rr", 0, 0, WSX(W256, R, R, 4, 4, 56)},
      {"ws256 pw4 u18 p56 rr", 0, 0, WSX(W256, R, R, 4, 18, 56)},
      {"ws256 pw4 u18 p72 rr", 0, 0, WSX(W256, R, R, 4, 18, 72)},
      {"ws256 NOCOPY rr", 0, 0, WS(W256, R, R, 4, 1)},
      {"ws256 NOCOPY pw1 rr", 0, 0, WS(W256, R, R, 1, 1)},
      {"ws128 pw1 u1 p24 rr", 0, 0, WSX(W128, R, R, 1, 1, 24)},
      {"ws128 s5 pw1 u1 p24 rr", 0, 0, WSX(W128s5, R, R, 1, 1, 24)},
      {"ws128 pw4 u1 p24 rr", 0, 0, WSX(W128, R, R, 4, 1, 24)},
      {"ws128 pw4 u4 p40 rr", 0, 0, WSX(W128, R, R, 4, 4, 40)},
      {"ws128 pw4 u8 p56 rr", 0, 0, WSX(W128, R, R, 4, 8, 56)},
      {"ws128 NOCOPY rr", 0, 0, WS(W128, R, R, 4, 1)},
      {"ws128x64 pw1 u1 p24 rr", 0, 0, WSX(W12864, R, R, 1, 1, 24)},
      {"ws128x64 pw4 u1 p24 rr", 0, 0, WSX(W12864, R, R, 4, 1, 24)},
      {"ws128x256 pw1 u1 p40 rr", 0, 0, WSX(W128256, R, R, 1, 1, 40)},
      {"ws128x256 pw4 u4 p40 rr", 0, 0, WSX(W128256, R, R, 4, 4, 40)},
      {"ws128x256 pw4 u18 p56 rr", 0, 0, WSX(W128256, R, R, 4, 18, 56)},
      {"ws128x256 NOCOPY rr", 0, 0, WS(W128256, R, R, 4, 1)},
      {"t816 cr", 1, 0, TILED(T816, C, R)},
      {"async_256x128x8_s3 cr", 1, 0, ASYNC(A256, C, R)},
      {"ws256 pw1 u1 p40 cr", 1, 0, WSX(W256, C, R, 1, 1, 40)},
      {"ws256 pw4 u1 p40 cr", 1, 0, WSX(W256, C, R, 4, 1, 40)},
      {"ws256 pw4 u4 p40 cr", 1, 0, WSX(W256, C, R, 4, 4, 40)},
      {"ws256 pw4 u18 p56 cr", 1, 0, WSX(W256, C, R, 4, 18, 56)},
      {"ws256 NOCOPY cr", 1, 0, WS(W256, C, R, 4, 1)},
      {"ws128 pw1 u1 p24 cr", 1, 0, WSX(W128, C, R, 1, 1, 24)},
      {"ws128 pw4 u8 p56 cr", 1, 0, WSX(W128, C, R, 4, 8, 56)},
      {"tiled_128x64x8b cc", 1, 1, TILED(T64b, C, C)},
      {"ws256 pw4 u18 p56 cc", 1, 1, WSX(W256, C, C, 4, 18, 56)},
      {"ws256 NOCOPY cc", 1, 1, WS(W256, C, C, 4, 1)},
      {"async_256x128x8_s3 rc", 0, 1, ASYNC(A256, R, C)},
      {"ws256 pw4 u18 p56 rc", 0, 1, WSX(W256, R, C, 4, 18, 56)},
      {"ws256 NOCOPY rc", 0, 1, WS(W256, R, C, 4, 1)},
  };
  const int64_t nn = int64_t(n) * n;
  float *A, *B, *D;
  double* Ref[4];
  CK(cudaMalloc(&A, nn * 4)); CK(cudaMalloc(&B, nn * 4)); CK(cudaMalloc(&D, nn * 4));
  for (int i = 0; i < 4; ++i) CK(cudaMalloc(&Ref[i], nn * 8));
  harness::fill<<<1024, 256>>>(A, nn, 1); harness::fill<<<1024, 256>>>(B, nn, 2);
  for (int i = 0; i < 4; ++i)
    harness::reference<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, Ref[i], n, i >> 1, i & 1);
  CK(cudaDeviceSynchronize());
  for (const Case& c : cases) {
    if (only && !strstr(c.name, only)) continue;
    GemmParams p{};
    p.m = p.n = p.k = n; p.batch = 1;
    p.a = Operand{A, n, 0}; p.b = Operand{B, n, 0};
    p.d = D; p.d_ld = n; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = n; p.d_vec4 = true;
    CK(cudaMemset(D, 0xff, nn * 4));
    c.run(p);
    CK(cudaGetLastError());
    const float e = harness::error_against(D, Ref[c.la * 2 + c.lb], nn);
    const float ms = harness::median_ms([&] { c.run(p); });
    printf("%-28s %8.3f ms  %6.1f TFLOP/s  max abs err %.2e\n", c.name, ms, 2.0 * n * double(n) * n / ms / 1e9, e);
    fflush(stdout);
  }
  return 0;
}
