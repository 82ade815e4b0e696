// Experiment (docs/performance.md, step 19; not part of the build): row-major A without the
// transposing stores. The production kernels keep A's shared tile M-contiguous ([BK][BM + 4],
// fragments read with LDS.128 along M), so a row-major (K-contiguous) A is transposed on its
// way to shared memory with four scalar stores per float4, which is why auto copies it into
// column-major storage first (step 17). Here A's shared tile stays K-contiguous,
// [BM][BK + 4]: each float4 loaded from global memory is one STS.128, and a thread reads
// its A values with LDS.64 along K, two K steps at a time. For the 8 rows a thread owns to
// come from 8 distinct 2-bank groups in one LDS.64, they are strided by 8 (lane's row + 8 i)
// instead of the production kernels' four consecutive rows per fragment; the epilogue
// follows. B is as in production (row-major, [BK][BN + 4], LDS.128).
//
//   ./kc_bench [SIZES...]   times the kc kernel (loads held or not), production t816 on rr
//   and on cr (the copy auto makes), cublasSgemm rr and cr; errors checked at 2048.
#include <cublas_v2.h>

#include "../harness.cuh"
#include "../rows.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"

using namespace vecgemm;

namespace kc {

constexpr int BM = 128, BN = 128, BK = 8, kThreads = 128;
constexpr int WM = 64, WN = 64, TM = 8, TN = 16;
constexpr int kLanesM = WM / TM, kLanesN = WN / TN;  // 8 x 4
constexpr int kAStride = BK + 4, kBStride = BN + 4;  // floats; rows 16-byte aligned
constexpr int kAVectors = BM * BK / 4 / kThreads;    // float4 per thread per tile: 2
constexpr int kBVectors = BN * BK / 4 / kThreads;    // 2

template <bool kPin>
__global__ void __launch_bounds__(kThreads, 2) sgemm_kc(const float* __restrict__ A, const float* __restrict__ B,
                                                         float* __restrict__ D, int n) {
  // Square n x n, n a multiple of 128, row-major A, B and D (an experiment, not a product).
  __shared__ __align__(16) float As[2][BM * kAStride];
  __shared__ __align__(16) float Bs[2][BK * kBStride];
  const int tiles_n = n / BN, pid = blockIdx.x, per_group = 8 * tiles_n;
  const int first_m = (pid / per_group) * 8, rows = min(n / BM - first_m, 8);
  const int m0 = (first_m + (pid % per_group) % rows) * BM, n0 = ((pid % per_group) / rows) * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int a_row = (warp / (BN / WN)) * WM + lane / kLanesN;  // rows a_row + 8 i
  const int b_col = (warp % (BN / WN)) * WN + (lane % kLanesN) * 4;

  const float* a_ptr = A + int64_t(m0) * n;
  const float* b_ptr = B + n0;
  float4 sa[kAVectors], sb[kBVectors];
  auto load = [&](int k0) {
#pragma unroll
    for (int v = 0; v < kAVectors; ++v) {
      const int idx = v * kThreads + threadIdx.x, row = idx / (BK / 4), kq = idx % (BK / 4);
      sa[v] = __ldg(reinterpret_cast<const float4*>(a_ptr + int64_t(row) * n + k0 + kq * 4));
    }
#pragma unroll
    for (int v = 0; v < kBVectors; ++v) {
      const int idx = v * kThreads + threadIdx.x, k = idx / (BN / 4), x = (idx % (BN / 4)) * 4;
      sb[v] = __ldg(reinterpret_cast<const float4*>(b_ptr + int64_t(k0 + k) * n + x));
    }
  };
  auto store = [&](int s) {
#pragma unroll
    for (int v = 0; v < kAVectors; ++v) {
      const int idx = v * kThreads + threadIdx.x, row = idx / (BK / 4), kq = idx % (BK / 4);
      *reinterpret_cast<float4*>(&As[s][row * kAStride + kq * 4]) = sa[v];
    }
#pragma unroll
    for (int v = 0; v < kBVectors; ++v) {
      const int idx = v * kThreads + threadIdx.x, k = idx / (BN / 4), x = (idx % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[s][k * kBStride + x]) = sb[v];
    }
  };
  float ra[2][TM][2], rb[2][TN];  // A: one K pair per set; B: one K step per set
  auto load_a = [&](const float* as, int pair, float (&r)[TM][2]) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const float2 v = *reinterpret_cast<const float2*>(&as[(a_row + kLanesM * i) * kAStride + pair * 2]);
      r[i][0] = v.x, r[i][1] = v.y;
    }
  };
  auto load_b = [&](const float* bs, int k, float (&r)[TN]) {
#pragma unroll
    for (int f = 0; f < TN / 4; ++f) {
      const float4 v = *reinterpret_cast<const float4*>(&bs[k * kBStride + b_col + f * kLanesN * 4]);
      r[f * 4] = v.x, r[f * 4 + 1] = v.y, r[f * 4 + 2] = v.z, r[f * 4 + 3] = v.w;
    }
  };
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int tiles = n / BK;
  load(0);
  store(0);
  __syncthreads();
  load_a(As[0], 0, ra[0]);
  load_b(Bs[0], 0, rb[0]);
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) {
      load((t + 1) * BK);
      if (kPin) __syncwarp();
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk + 1 < BK) load_b(Bs[cur], kk + 1, rb[(kk + 1) & 1]);
      if (kk % 2 == 0 && kk + 2 < BK) load_a(As[cur], kk / 2 + 1, ra[(kk / 2 + 1) & 1]);
      if (kk == BK - 1 && more) {
        store(cur ^ 1);
        __syncthreads();
        load_b(Bs[cur ^ 1], 0, rb[0]);
        load_a(As[cur ^ 1], 0, ra[0]);
      }
      const int p = (kk / 2) & 1, h = kk & 1;
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int s = 0; s < TN; ++s) {
          const int j = i % 2 ? TN - 1 - s : s;
          acc[i][j] = fmaf(ra[p][i][h], rb[kk & 1][j], acc[i][j]);
        }
    }
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int f = 0; f < TN / 4; ++f) {
      float* d = D + int64_t(m0 + a_row + kLanesM * i) * n + n0 + b_col + f * kLanesN * 4;
      *reinterpret_cast<float4*>(d) = make_float4(acc[i][f * 4], acc[i][f * 4 + 1], acc[i][f * 4 + 2], acc[i][f * 4 + 3]);
    }
}

}  // namespace kc

// tiled_128x128x8_t816 as the extension builds it.
using T816 = harness::ShapeOf<harness::row("tiled_128x128x8_t816")>;

int main(int argc, char** argv) {
  int64_t most;
  const std::vector<int> sizes = harness::sizes_from(argc, argv, most);
  float *A, *At, *B, *D;
  CK(cudaMalloc(&A, most * 4)); CK(cudaMalloc(&At, most * 4)); CK(cudaMalloc(&B, most * 4)); CK(cudaMalloc(&D, most * 4));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const int check = 2048;
  double* Ref;
  CK(cudaMalloc(&Ref, int64_t(check) * check * 8));
  for (int n : sizes) {
    const int64_t nn = int64_t(n) * n;
    harness::fill<<<1024, 256>>>(A, nn, 1);
    harness::fill<<<1024, 256>>>(B, nn, 2);
    // At: A in column-major storage (the values of A), as auto's copy makes it.
    const float one = 1.0f, zero = 0.0f;
    if (cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, &one, A, n, &zero, At, n, At, n) != CUBLAS_STATUS_SUCCESS)
      return 1;
    if (n == check) harness::reference<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, Ref, n, 0, 0);
    CK(cudaDeviceSynchronize());
    GemmParams p{};
    p.m = p.n = p.k = n; p.batch = 1;
    p.b = Operand{B, n, 0};
    p.d = D; p.d_ld = n; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = n; p.d_vec4 = true;
    GemmParams prr = p, pcr = p;
    prr.a = Operand{A, n, 0};
    pcr.a = Operand{At, n, 0};
    const int tiles = (n / 128) * (n / 128);
    // Row-major D = A @ B is D^T = B^T A^T in cuBLAS' column-major terms.
    harness::time_cases(n, check, D, {
        {"cublas rr", [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, D, n); }, Ref, true},
        {"cublas cr", [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, B, n, At, n, &zero, D, n); }, Ref, false},
        {"t816 rr", [&] { sgemm_tiled<T816, Layout::RowMajor, Layout::RowMajor, 4><<<tiles, 128>>>(prr); }, Ref, false},
        {"t816 cr (copied A)", [&] { sgemm_tiled<T816, Layout::ColMajor, Layout::RowMajor, 4><<<tiles, 128>>>(pcr); }, Ref, false},
        {"kc rr, loads held", [&] { kc::sgemm_kc<true><<<tiles, kc::kThreads>>>(A, B, D, n); }, Ref, false},
        {"kc rr, loads free", [&] { kc::sgemm_kc<false><<<tiles, kc::kThreads>>>(A, B, D, n); }, Ref, false},
    }, "cublas rr", 20);
  }
  return 0;
}
