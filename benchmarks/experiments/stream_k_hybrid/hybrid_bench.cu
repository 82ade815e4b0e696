// Experiment (docs/performance.md, step 20; not part of the build): the stream-K hybrid
// around the kernel every large problem runs, tiled_128x128x8_t816 on cr. The tiles of the
// whole waves run as now (the production kernel, a shorter grid); the last, partial wave's
// R tiles are shared out evenly over one block per resident slot (stream-K: each block a
// contiguous range of their K iterations, so at most two pieces of two tiles), whose
// partial sums a fix-up pass adds in a fixed order (deterministic). Against the production
// launch on the same operands in the same process; every output checked against float64.
//   ./hybrid_bench [SIZES...]
#include <cublas_v2.h>

#include <functional>

#include "../harness.cuh"
#include "../rows.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"

using namespace vecgemm;
using S = harness::ShapeOf<harness::row("tiled_128x128x8_t816")>;
constexpr bool kPin = (S::kPinLoadsMask >> order_index(Layout::ColMajor, Layout::RowMajor)) & 1;

struct Split {
  int first_tile, tiles;  // the stream-K tiles: first_tile .. first_tile + tiles - 1 (raster order)
  int iters;              // K tiles (BK) per output tile
  int blocks;             // stream-K blocks
  __host__ __device__ int64_t start(int b) const { return int64_t(b) * tiles * iters / blocks; }
};

// K iterations [it0, it0 + its) of tile pid into a dense 128 x 128 partial.
__device__ __forceinline__ void piece(const GemmParams& p, int pid, int it0, int its, float* partial,
                                      float (*As)[S::BK * S::kAsStride], float (*Bs)[S::BK * S::kBsStride]) {
  using LoaderA = TileLoader<S::BM, S::BK, S::kThreads, 4, false, S::kAsStride>;  // column-major A
  using LoaderB = TileLoader<S::BN, S::BK, S::kThreads, 4, false, S::kBsStride>;  // row-major B
  int m0, n0;
  tile_origin(p.m, p.n, S::BM, S::BN, pid, m0, n0);
  const int64_t k0 = int64_t(it0) * S::BK;
  LoaderA load_a(p.a.ptr + k0 * p.a.ld + m0, p.a.ld, p.m - m0);
  LoaderB load_b(p.b.ptr + k0 * p.b.ld + n0, p.b.ld, p.n - n0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int a_row = (warp / S::kWarpsN) * S::WM + (lane / S::kLanesN) * 4;
  const int b_col = (warp % S::kWarpsN) * S::WN + (lane % S::kLanesN) * 4;
  float acc[S::TM][S::TN];
  zero<S>(acc);
  mainloop<S, false, kPin>(load_a, load_b, As, Bs, its * S::BK, a_row, b_col, acc);
  store_partial_tile<S>(partial, a_row, b_col, acc);
}

// Block b: iterations [start(b), start(b + 1)) of the stream-K tiles, at most two pieces
// (fewer iterations than a tile); the partial of piece j goes to workspace slot 2 b + j.
// kRolled: the two pieces as a loop (one copy of the main loop) or as two inlined calls.
template <bool kRolled>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) stream_k(const GemmParams p, Split s, float* ws) {
  __shared__ __align__(16) float As[2][S::BK * S::kAsStride];
  __shared__ __align__(16) float Bs[2][S::BK * S::kBsStride];
  const int b = blockIdx.x;
  const int64_t x0 = s.start(b), x1 = s.start(b + 1);
  const int t = int(x0 / s.iters), it0 = int(x0 % s.iters);
  const int64_t end0 = min(x1, int64_t(t + 1) * s.iters);
  float* slot = ws + int64_t(2 * b) * S::BM * S::BN;
  if constexpr (kRolled) {
#pragma unroll 1
    for (int j = 0; j < 2; ++j) {
      const int64_t from = j == 0 ? x0 : end0, to = j == 0 ? end0 : x1;
      if (from >= to) break;
      if (j == 1) __syncthreads();  // the first piece's last tile is read from shared memory
      piece(p, s.first_tile + t + j, j == 0 ? it0 : 0, int(to - from), slot + j * S::BM * S::BN, As, Bs);
    }
  } else {
    if (end0 > x0) piece(p, s.first_tile + t, it0, int(end0 - x0), slot, As, Bs);
    if (x1 > end0) {
      __syncthreads();
      piece(p, s.first_tile + t + 1, 0, int(x1 - end0), slot + S::BM * S::BN, As, Bs);
    }
  }
}

// D of stream-K tile t: its pieces' partials summed in block order.
__global__ void __launch_bounds__(256) fixup(const GemmParams p, Split s, const float* ws) {
  const int t = blockIdx.x;
  const int64_t lo = int64_t(t) * s.iters, hi = lo + s.iters;
  int b = int(lo * s.blocks / (int64_t(s.tiles) * s.iters));
  while (b > 0 && s.start(b) > lo) --b;
  while (s.start(b + 1) <= lo) ++b;
  int m0, n0;
  tile_origin(p.m, p.n, S::BM, S::BN, s.first_tile + t, m0, n0);
  for (int e = threadIdx.x * 4; e < S::BM * S::BN; e += 256 * 4) {
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int c = b; c < s.blocks && s.start(c) < hi; ++c) {
      if (s.start(c + 1) <= s.start(c)) continue;  // a block with no iterations
      const int j = s.start(c) / s.iters == t ? 0 : 1;
      const float4 v = *reinterpret_cast<const float4*>(ws + (int64_t(2 * c + j) * S::BM * S::BN + e));
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const int r = e / S::BN, col = e % S::BN;
    *reinterpret_cast<float4*>(p.d + int64_t(m0 + r) * p.d_ld + n0 + col) = sum;
  }
}

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(atoi(argv[i]));
  if (sizes.empty()) sizes = {2048, 4096, 6144, 8192};
  int64_t most = 0;
  for (int n : sizes) most = std::max(most, int64_t(n) * n);
  int sms = 0, per_sm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sgemm_tiled<S, Layout::ColMajor, Layout::RowMajor, 4>,
                                                   S::kThreads, 0));
  const int slots = sms * per_sm;
  float *A, *B, *D, *ws;
  double* Ref;
  CK(cudaMalloc(&A, most * 4)); CK(cudaMalloc(&B, most * 4)); CK(cudaMalloc(&D, most * 4));
  CK(cudaMalloc(&ws, int64_t(2) * slots * S::BM * S::BN * 4));
  const int check = 2048;
  CK(cudaMalloc(&Ref, int64_t(check) * check * 8));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  for (int n : sizes) {
    const int64_t nn = int64_t(n) * n;
    harness::fill<<<1024, 256>>>(A, nn, 1);
    harness::fill<<<1024, 256>>>(B, nn, 2);
    if (n == check) harness::reference<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, Ref, n, 1, 0);
    CK(cudaDeviceSynchronize());
    GemmParams p{};
    p.m = p.n = p.k = n; p.batch = 1;
    p.a = Operand{A, n, 0}; p.b = Operand{B, n, 0};
    p.d = D; p.d_ld = n; p.alpha = 1.0f; p.beta = 0.0f;
    p.k_splits = 1; p.k_slice = n; p.d_vec4 = true;
    const int tiles = (n / S::BM) * (n / S::BN);
    const int waves = tiles / slots, rest = tiles - waves * slots;
    const Split split{waves * slots, rest, n / S::BK, slots};
    const float one = 1.0f, zero = 0.0f;
    auto hybrid = [&](bool rolled) {
      if (waves > 0) sgemm_tiled<S, Layout::ColMajor, Layout::RowMajor, 4><<<waves * slots, S::kThreads>>>(p);
      if (rest > 0) {
        if (rolled)
          stream_k<true><<<slots, S::kThreads>>>(p, split, ws);
        else
          stream_k<false><<<slots, S::kThreads>>>(p, split, ws);
        fixup<<<rest, 256>>>(p, split, ws);
      }
    };
    struct Case {
      const char* name;
      std::function<void()> run;
    };
    const Case cases[] = {
        {"cublas cr", [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, B, n, A, n, &zero, D, n); }},
        {"t816 cr, one launch", [&] { sgemm_tiled<S, Layout::ColMajor, Layout::RowMajor, 4><<<tiles, S::kThreads>>>(p); }},
        {"hybrid, pieces unrolled", [&] { hybrid(false); }},
        {"hybrid, pieces rolled", [&] { hybrid(true); }},
    };
    printf("%d: %d tiles on %d slots: %d whole waves + %d tiles stream-K (%.3f tiles a block)\n", n, tiles, slots,
           waves, rest, double(rest) / slots);
    float base = 0;
    for (int round = 0; round < 3; ++round)
      for (const Case& c : cases) {
        if (n == check && round == 0) {
          CK(cudaMemset(D, 0xff, nn * 4));  // NaN poison: unwritten elements show
          c.run();
          CK(cudaGetLastError());
          printf("  max abs err %-24s %.2e\n", c.name, harness::error_against(D, Ref, nn));
        }
        const float ms = harness::median_ms([&] { c.run(); });
        CK(cudaGetLastError());
        if (c.name == cases[1].name) base = ms;
        printf("%5d round %d %-24s %9.4f ms  x t816 one launch %.4f\n", n, round, c.name, ms, base / ms);
        fflush(stdout);
      }
  }
  return 0;
}
