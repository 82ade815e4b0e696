// Experiment (docs/performance.md, step 22; not part of the build): K-contiguous operands
// transposed in registers. The production kernels keep both shared tiles M- (N-)
// contiguous, so a row-major A (or column-major B) is transposed on its way there: a float4
// along K goes out as four scalar stores (TileLoader), and auto copies such an operand into
// the other storage order first (step 17), because t816 on rr runs ~9% behind t816 on cr.
// Here BlockLoader takes 4 rows x KB K values a unit (KB = 2: four float2 loads and two
// float4 stores; KB = 1: four scalar loads and one float4 store), so the transpose happens
// in registers and the stores are STS.128 as on cr; sgemm_bt is sgemm_tiled's interior path
// (BlockTile, mainloop, store_accumulators) with it.
//
//   ./bt_bench [SIZES...]   t816 as built (rr, rc, and cr on the copies auto makes, with and
//   without the copy's time), t816 with KB 1 and 2, next-tile loads held or free, and
//   cublasSgemm on the same operands; outputs checked against float64 at 2048.
#include <cublas_v2.h>

#include "../harness.cuh"
#include "../rows.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"

using namespace vecgemm;

// A K-contiguous BX x BK tile (row-major A, column-major B) to shared memory as [BK][BX + pad],
// through registers, in units of 4 rows x KB K values: the interface of TileLoader, interior
// tiles only (square problems, multiples of the tile).
template <int BX, int BK, int kThreads, int KB, int kSmemStride>
struct BlockLoader {
  static_assert(BX % 4 == 0 && BK % KB == 0 && (KB == 1 || KB == 2), "4 x KB units tile the tile");
  static constexpr int kUnitsPerRow = BK / KB;
  static constexpr int kIters = BX * BK / (4 * KB) / kThreads;
  static_assert(kIters * kThreads * 4 * KB == BX * BK, "whole units a thread");
  const float* ptr;
  int64_t ld;
  float regs[kIters][4 * KB];  // regs[i][r * KB + j] = element (x + r, kk + j)

  __device__ __forceinline__ BlockLoader(const float* panel, int64_t ld_, int) : ptr(panel), ld(ld_) {}
  __device__ __forceinline__ static void coords(int i, int& x, int& kk) {
    const int v = i * kThreads + threadIdx.x;
    x = (v / kUnitsPerRow) * 4;  // lanes along K first: a row's BK values in adjacent lanes
    kk = (v % kUnitsPerRow) * KB;
  }
  template <bool kChecked>
  __device__ __forceinline__ void load(int) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int x, kk;
      coords(i, x, kk);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float* q = ptr + (x + r) * ld + kk;
        if (KB == 2) {
          const float2 v = __ldg(reinterpret_cast<const float2*>(q));
          regs[i][r * 2] = v.x, regs[i][r * 2 + 1] = v.y;
        } else {
          regs[i][r] = __ldg(q);
        }
      }
    }
  }
  __device__ __forceinline__ void store(float* smem) const {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int x, kk;
      coords(i, x, kk);
      const float* r = regs[i];
#pragma unroll
      for (int j = 0; j < KB; ++j)
        *reinterpret_cast<float4*>(&smem[(kk + j) * kSmemStride + x]) = make_float4(r[j], r[KB + j], r[2 * KB + j], r[3 * KB + j]);
    }
  }
  __device__ __forceinline__ void advance() { ptr += BK; }
};

// sgemm_tiled's interior path with the K-contiguous operands through BlockLoader.
template <class S, Layout LA, Layout LB, int KB>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) sgemm_bt(const GemmParams p) {
  static_assert(!S::kSteerBanks, "BlockLoader does not swap pairs");
  __shared__ __align__(16) float As[2][S::BK * S::kAsStride];
  __shared__ __align__(16) float Bs[2][S::BK * S::kBsStride];
  const BlockTile<S> blk(p, false);
  using LoaderA = std::conditional_t<LA == Layout::RowMajor, BlockLoader<S::BM, S::BK, S::kThreads, KB, S::kAsStride>,
                                     TileLoader<S::BM, S::BK, S::kThreads, 4, false, S::kAsStride>>;
  using LoaderB = std::conditional_t<LB == Layout::ColMajor, BlockLoader<S::BN, S::BK, S::kThreads, KB, S::kBsStride>,
                                     TileLoader<S::BN, S::BK, S::kThreads, 4, false, S::kBsStride>>;
  LoaderA load_a(blk.template a_panel<LA>(p), p.a.ld, p.m - blk.m0);
  LoaderB load_b(blk.template b_panel<LB>(p), p.b.ld, p.n - blk.n0);
  float acc[S::TM][S::TN];
  zero<S>(acc);
  constexpr bool kPin = (S::kPinLoadsMask >> order_index(LA, LB)) & 1;
  mainloop<S, false, kPin>(load_a, load_b, As, Bs, blk.k_len, blk.a_row, blk.b_col, acc);
  store_accumulators(p, blk, acc);
}

using T816 = harness::ShapeOf<harness::row("tiled_128x128x8_t816")>;
// t816 with the next-tile loads held in the orders of PIN (bit order_index).
template <int PIN>
using T816P = TileShape<128, 128, 8, 64, 64, 8, 16, 2, true, false, PIN>;

int main(int argc, char** argv) {
  int64_t most;
  const std::vector<int> sizes = harness::sizes_from(argc, argv, most);
  float *A, *At, *B, *Bt, *D;
  CK(cudaMalloc(&A, most * 4)); CK(cudaMalloc(&At, most * 4));
  CK(cudaMalloc(&B, most * 4)); CK(cudaMalloc(&Bt, most * 4)); CK(cudaMalloc(&D, most * 4));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const int check = 2048;
  double *RefRR, *RefRC;
  CK(cudaMalloc(&RefRR, int64_t(check) * check * 8));
  CK(cudaMalloc(&RefRC, int64_t(check) * check * 8));
  for (int n : sizes) {
    const int64_t nn = int64_t(n) * n;
    harness::fill<<<1024, 256>>>(A, nn, 1);
    harness::fill<<<1024, 256>>>(B, nn, 2);
    const float one = 1.0f, zero = 0.0f;
    // The copies auto makes: At holds A's values column-major, Bt holds B (n x n, read as
    // column-major in rc) row-major. cublasSgeam transposes like auto's copy kernel.
    auto copy_a = [&] { cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, &one, A, n, &zero, At, n, At, n); };
    auto copy_b = [&] { cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, &one, B, n, &zero, Bt, n, Bt, n); };
    copy_a();
    copy_b();
    if (n == check) {
      harness::reference<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, RefRR, n, 0, 0);
      harness::reference<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, RefRC, n, 0, 1);
    }
    CK(cudaDeviceSynchronize());
    GemmParams p{};
    p.m = p.n = p.k = n; p.batch = 1;
    p.d = D; p.d_ld = n; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = n; p.d_vec4 = true;
    GemmParams rr = p, cr = p, cr_copies = p;
    rr.a = Operand{A, n, 0}; rr.b = Operand{B, n, 0};   // rc reads B as column-major too
    cr.a = Operand{At, n, 0}; cr.b = Operand{B, n, 0};
    cr_copies.a = Operand{At, n, 0}; cr_copies.b = Operand{Bt, n, 0};  // rc's operands as auto copies them
    const int tiles = (n / 128) * (n / 128);
    constexpr Layout R = Layout::RowMajor, C = Layout::ColMajor;
    // Row-major D = A @ B is D^T = B^T A^T in cuBLAS' column-major terms. Each order's
    // cuBLAS is its cases' baseline; rc reads the same B as column-major (RefRC).
    harness::time_cases(n, check, D, {
        {"cublas rr", [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, D, n); }, RefRR, true},
        {"t816 cr, copy of A", [&] { copy_a(); sgemm_tiled<T816, C, R, 4><<<tiles, 128>>>(cr); }, RefRR, false},
        {"t816 cr (no copy)", [&] { sgemm_tiled<T816, C, R, 4><<<tiles, 128>>>(cr); }, RefRR, false},
        {"t816 rr", [&] { sgemm_tiled<T816, R, R, 4><<<tiles, 128>>>(rr); }, RefRR, false},
        {"kb2 rr free", [&] { sgemm_bt<T816P<0>, R, R, 2><<<tiles, 128>>>(rr); }, RefRR, false},
        {"kb2 rr held", [&] { sgemm_bt<T816P<1>, R, R, 2><<<tiles, 128>>>(rr); }, RefRR, false},
        {"kb1 rr free", [&] { sgemm_bt<T816P<0>, R, R, 1><<<tiles, 128>>>(rr); }, RefRR, false},
        {"kb1 rr held", [&] { sgemm_bt<T816P<1>, R, R, 1><<<tiles, 128>>>(rr); }, RefRR, false},
        {"cublas rc", [&] { cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, D, n); }, RefRC, true},
        {"t816 cr, copies A, B", [&] { copy_a(); copy_b(); sgemm_tiled<T816, C, R, 4><<<tiles, 128>>>(cr_copies); }, RefRC, false},
        {"t816 rc", [&] { sgemm_tiled<T816, R, C, 4><<<tiles, 128>>>(rr); }, RefRC, false},
        {"kb2 rc free", [&] { sgemm_bt<T816P<0>, R, C, 2><<<tiles, 128>>>(rr); }, RefRC, false},
        {"kb2 rc held", [&] { sgemm_bt<T816P<2>, R, C, 2><<<tiles, 128>>>(rr); }, RefRC, false},
        {"kb1 rc free", [&] { sgemm_bt<T816P<0>, R, C, 1><<<tiles, 128>>>(rr); }, RefRC, false},
        {"kb1 rc held", [&] { sgemm_bt<T816P<2>, R, C, 1><<<tiles, 128>>>(rr); }, RefRC, false},
    }, "cublas", 22);
  }
  return 0;
}
