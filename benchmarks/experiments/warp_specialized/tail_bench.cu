// Experiment (docs/performance.md, step 16; not part of the build): what the last, partial
// wave of blocks costs. tiled_128x64x8b rr (4 blocks of 128 threads per SM, 528 at once on
// 132 SMs) on problems whose tile count is just under, at, or over whole waves.
#include "../harness.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"
using namespace vecgemm;
using T64b = TileShape<128, 64, 8, 32, 64, 8, 8, 4, false, true, kCC>;
float time_it(int m, int n, int k, float* A, float* B, float* D) {
  GemmParams p{};
  p.m = m; p.n = n; p.k = k; p.batch = 1;
  p.a = Operand{A, k, 0}; p.b = Operand{B, n, 0};
  p.d = D; p.d_ld = n; p.alpha = 1.0f; p.k_splits = 1; p.k_slice = k; p.d_vec4 = true;
  const int tiles = ((m + 127) / 128) * ((n + 63) / 64);
  const float ms = harness::median_ms(
      [&] { sgemm_tiled<T64b, Layout::RowMajor, Layout::RowMajor, 4><<<tiles, T64b::kThreads>>>(p); }, 12, 3);
  printf("%5d x %5d x %5d: %5d tiles = %.3f waves of 528  %8.3f ms  %.2f us per tile-wave-slot\n", m, n, k, tiles,
         tiles / 528.0, ms, ms * 1000 / (tiles / 528.0));
  return ms;
}
int main() {
  const int64_t big = int64_t(8448) * 8448;
  float *A, *B, *D;
  cudaMalloc(&A, big * 4); cudaMalloc(&B, big * 4); cudaMalloc(&D, big * 4);
  harness::fill<<<1024, 256>>>(A, big, 1); harness::fill<<<1024, 256>>>(B, big, 2);
  int shapes[][3] = {{2048, 2048, 2048}, {2048, 2112, 2048}, {4096, 4096, 4096}, {4096, 4224, 4096},
                     {4096, 3840, 4096}, {8192, 8192, 8192}, {8192, 8448, 8192}, {8192, 7936, 8192}};
  for (auto& s : shapes) time_it(s[0], s[1], s[2], A, B, D);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
}
