// Standalone probe of the 3xTF32 kernel (csrc/kernels/tf32x3/sgemm_3xtf32.cu): is it correct on every
// shape, storage order, alignment, batch and epilogue, as accurate as cuBLAS's fp32 SGEMM,
// right about NaN, Inf and subnormals, and how fast is it against cuBLAS fp32? Build and run:
// see README.md here. Exits nonzero on any correctness failure. Needs no torch.
//
// Accuracy is measured against a float64 CPU reference on the same float inputs:
//   fro  = ||D - ref||_F / ||ref||_F
//   comp = max over elements of |D - ref| / (|alpha| sum_k |a_ik b_kj| + |beta c_ij|), in
//          units of fp32's unit roundoff u = 2^-24 (the componentwise bound a dot product of
//          length K meets with roughly K u in the worst case and sqrt(K) u typically).
// The same numbers for cublasSgemm (CUBLAS_DEFAULT_MATH: fp32 FFMA, no TF32) are printed
// beside them; a case fails when the kernel's error exceeds a small multiple of cuBLAS's
// (a 1xTF32 product, 2^-11 relative, fails every case by orders of magnitude).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/tf32x3/sgemm_3xtf32.h"

using vecgemm::GemmParams;
using vecgemm::Layout;

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      exit(2);                                                                                  \
    }                                                                                           \
  } while (0)
#define CB(x)                                                                        \
  do {                                                                               \
    cublasStatus_t s_ = (x);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", int(s_), __FILE__, __LINE__, #x); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

// The config index that stands for the wgmma kernel (launch_sgemm_3xtf32_wgmma), past the
// mma.sync configs; its cases run only where sgemm_3xtf32_wgmma_available().
static const int kWgmma = vecgemm::kNumTf32x3Configs;
// The wgmma form as this probe measures it: both operands through the split pass (the
// kernel splitting one itself is the library's choice per problem, tests/test_precision.py).
static const vecgemm::SplitOperands kPassSplitsBoth{false, false};
// Its 128 x 128 tiles (config 0 of launch_sgemm_3xtf32_wgmma).
static const int kWgmmaTiles = 0;
static bool g_wgmma = false;
static bool is_wgmma(int c) { return c == kWgmma; }
static const char* config_name(int c) {
  return c < 0 ? "3xtf32" : c == kWgmma ? "wgmma" : c == 0 ? "128x128" : c == 1 ? "128x64" : "64x128";
}

// One call of the kernel under test (config as in Case), with the wgmma form's scratch.
static void launch(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, void* scratch) {
  if (is_wgmma(config)) {
    vecgemm::launch_sgemm_3xtf32_wgmma(kWgmmaTiles, p, la, lb, kPassSplitsBoth, scratch, true, 0);
  } else if (config < 0) {
    vecgemm::launch_sgemm_3xtf32(p, la, lb, vec4, 0);
  } else {
    vecgemm::launch_sgemm_3xtf32_config(config, p, la, lb, vec4, 0);
  }
}

static int g_failures = 0;   // wrong results: exit 1
static int g_shortfalls = 0;  // right, but less accurate than 3x cuBLAS fp32: exit 3
static cublasHandle_t g_cublas;

enum class Dist { Randn, Uniform, Wide };
static const char* dist_name(Dist d) { return d == Dist::Randn ? "randn" : d == Dist::Uniform ? "unif" : "2^+-60"; }
enum class CMode { None, Full, RowBias, ColBias, BatchBroadcast };
static const char* cmode_name(CMode c) {
  switch (c) {
    case CMode::None: return "-";
    case CMode::Full: return "C";
    case CMode::RowBias: return "C[n]";
    case CMode::ColBias: return "C[m,1]";
    default: return "C[1,m,n]";
  }
}

struct Case {
  int m, n, k, batch;
  Layout la, lb;
  int pad_a = 0, pad_b = 0;  // extra leading-dimension floats
  bool unaligned = false;    // operands start one float past a 16-byte boundary
  bool bcast_a = false, bcast_b = false;
  CMode cmode = CMode::None;
  float alpha = 1.0f, beta = 0.0f;
  Dist dist = Dist::Randn;
  int k_splits = 1;  // K slices of whole 32-K tiles; the partials are summed here, in order
  int config = -1;   // -1: the launcher's choice; kWgmma: the sm_90a wgmma form
};

static float sample(std::mt19937_64& rng, Dist d) {
  if (d == Dist::Uniform) return std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
  float v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  if (d == Dist::Wide) {
    const int e = int(rng() % 121) - 60;
    v = std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(rng), e) * ((rng() & 1) ? 1.0f : -1.0f);
  }
  return v;
}

// A matrix operand in host and device memory, with the layout the kernel sees.
struct Operand {
  int rows, cols;  // logical (A: m x k, B: k x n)
  Layout layout;
  int64_t ld, batch_stride;
  int stored_batches;
  int offset;  // floats from the allocation to element 0
  std::vector<float> host;  // the allocation's contents
  float* dev = nullptr;
  float at(int b, int r, int c) const {
    const int64_t i = offset + (stored_batches == 1 ? 0 : b * batch_stride) +
                      (layout == Layout::RowMajor ? r * ld + c : c * ld + r);
    return host[i];
  }
  float& ref(int b, int r, int c) {
    const int64_t i = offset + (stored_batches == 1 ? 0 : b * batch_stride) +
                      (layout == Layout::RowMajor ? r * ld + c : c * ld + r);
    return host[i];
  }
};

static Operand make_operand(int rows, int cols, Layout l, int pad, int batch, bool bcast, bool unaligned) {
  Operand o;
  o.rows = rows, o.cols = cols, o.layout = l;
  o.ld = (l == Layout::RowMajor ? cols : rows) + pad;
  const int64_t mat = o.ld * (l == Layout::RowMajor ? rows : cols);
  o.stored_batches = bcast ? 1 : batch;
  o.batch_stride = bcast ? 0 : mat + (unaligned ? 1 : 0);  // odd strides when unaligned
  o.offset = unaligned ? 1 : 0;
  o.host.assign(o.offset + std::max<int64_t>(1, o.stored_batches) * (mat + 1) + 4, 0.0f);
  return o;
}
static void fill(Operand& o, std::mt19937_64& rng, Dist d) {
  for (int b = 0; b < o.stored_batches; ++b)
    for (int r = 0; r < o.rows; ++r)
      for (int c = 0; c < o.cols; ++c) o.ref(b, r, c) = sample(rng, d);
}
static void upload(Operand& o) {
  if (o.dev) CK(cudaFree(o.dev));
  CK(cudaMalloc(&o.dev, o.host.size() * 4));
  CK(cudaMemcpy(o.dev, o.host.data(), o.host.size() * 4, cudaMemcpyHostToDevice));
}
static bool aligned16(const Operand& o) {
  return o.offset % 4 == 0 && o.ld % 4 == 0 && o.batch_stride % 4 == 0;
}

struct CView {
  std::vector<float> host;
  float* dev = nullptr;
  int64_t row_stride = 0, col_stride = 0, batch_stride = 0;
  float at(int b, int r, int c) const { return host[b * batch_stride + r * row_stride + c * col_stride]; }
};

static CView make_c(CMode mode, int m, int n, int batch, std::mt19937_64& rng) {
  CView c;
  if (mode == CMode::None) return c;
  int64_t size = 0;
  switch (mode) {
    case CMode::Full: c.row_stride = n, c.col_stride = 1, c.batch_stride = int64_t(m) * n, size = int64_t(m) * n * batch; break;
    case CMode::RowBias: c.row_stride = 0, c.col_stride = 1, c.batch_stride = 0, size = n; break;
    case CMode::ColBias: c.row_stride = 1, c.col_stride = 0, c.batch_stride = 0, size = m; break;
    default: c.row_stride = n, c.col_stride = 1, c.batch_stride = 0, size = int64_t(m) * n; break;
  }
  c.host.resize(size);
  for (auto& v : c.host) v = sample(rng, Dist::Randn);
  CK(cudaMalloc(&c.dev, std::max<int64_t>(size, 1) * 4));
  CK(cudaMemcpy(c.dev, c.host.data(), size * 4, cudaMemcpyHostToDevice));
  return c;
}

template <class F>
static void parallel_for(int n, F f) {
  const int threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) f(i);
    });
  for (auto& th : pool) th.join();
}

struct Err {
  double fro = 0, comp = 0;  // comp in units of 2^-24
  long nan_mismatch = 0;     // elements whose NaN / +-Inf class differs from the reference's
};

// ref, denom: float64, [batch][m][n].
static void reference(const Case& cs, const Operand& A, const Operand& B, const CView& C, std::vector<double>& ref,
                      std::vector<double>& denom) {
  const int m = cs.m, n = cs.n, k = cs.k;
  ref.assign(size_t(cs.batch) * m * n, 0.0);
  denom.assign(ref.size(), 0.0);
  parallel_for(cs.batch * m, [&](int bi) {
    const int b = bi / m, i = bi % m;
    std::vector<double> a(k), s(n, 0.0), sa(n, 0.0);
    for (int q = 0; q < k; ++q) a[q] = A.at(b, i, q);
    for (int q = 0; q < k; ++q) {
      const double aq = a[q];
      for (int j = 0; j < n; ++j) {
        const double bv = B.at(b, q, j);
        s[j] += aq * bv;
        sa[j] += std::fabs(aq * bv);
      }
    }
    for (int j = 0; j < n; ++j) {
      double v = double(cs.alpha) * s[j], d = std::fabs(double(cs.alpha)) * sa[j];
      if (cs.beta != 0.0f && cs.cmode != CMode::None) {
        const double c = C.at(b, i, j);
        v += double(cs.beta) * c;
        d += std::fabs(double(cs.beta) * c);
      }
      ref[size_t(bi) * n + j] = v;
      denom[size_t(bi) * n + j] = d;
    }
  });
}

static int fp_class(double v) { return std::isnan(v) ? 2 : std::isinf(v) ? (v > 0 ? 3 : 4) : 0; }

static Err compare(const std::vector<float>& d, const std::vector<double>& ref, const std::vector<double>& denom) {
  Err e;
  double num = 0, den = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const double r = double(float(ref[i]));  // what an exact fp32 result would hold
    const int cr = fp_class(r), cd = fp_class(d[i]);
    if (cr != cd) {
      ++e.nan_mismatch;
      continue;
    }
    if (cr != 0) continue;
    const double diff = double(d[i]) - ref[i];
    num += diff * diff;
    den += ref[i] * ref[i];
    if (denom[i] > 0) e.comp = std::max(e.comp, std::fabs(diff) / denom[i] * 16777216.0);
    else if (diff != 0) e.comp = INFINITY;
  }
  e.fro = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

static std::vector<float> run_kernel(const Case& cs, const Operand& A, const Operand& B, const CView& C) {
  const int64_t d_ld = cs.n;
  std::vector<float> out(size_t(cs.batch) * cs.m * cs.n, -12345.0f);
  float* d = nullptr;
  CK(cudaMalloc(&d, std::max<size_t>(out.size(), 1) * 4 + 16));
  CK(cudaMemcpy(d, out.data(), out.size() * 4, cudaMemcpyHostToDevice));
  GemmParams p{};
  p.m = cs.m, p.n = cs.n, p.k = cs.k, p.batch = cs.batch;
  p.a = {A.dev + A.offset, A.ld, A.batch_stride};
  p.b = {B.dev + B.offset, B.ld, B.batch_stride};
  p.c = C.dev;
  p.c_row_stride = C.row_stride, p.c_col_stride = C.col_stride, p.c_batch_stride = C.batch_stride;
  p.d = d, p.d_ld = d_ld, p.d_batch_stride = int64_t(cs.m) * cs.n;
  p.alpha = cs.alpha, p.beta = cs.cmode == CMode::None ? 0.0f : cs.beta;
  p.k_splits = cs.k_splits, p.k_slice = ((cs.k + cs.k_splits - 1) / cs.k_splits + 31) / 32 * 32;
  p.workspace = nullptr;
  p.c_vec4 = C.col_stride == 1 && C.row_stride % 4 == 0 && C.batch_stride % 4 == 0;
  p.d_vec4 = d_ld % 4 == 0;
  const bool vec4 = aligned16(A) && aligned16(B);
  void* ws = nullptr;
  const size_t partials = size_t(cs.k_splits) * out.size();
  if (cs.k_splits > 1) {
    std::vector<float> poison(partials, -12345.0f);
    CK(cudaMalloc(&p.workspace, partials * 4));
    CK(cudaMemcpy(p.workspace, poison.data(), partials * 4, cudaMemcpyHostToDevice));
  }
  if (is_wgmma(cs.config)) CK(cudaMalloc(&ws, std::max<size_t>(vecgemm::sgemm_3xtf32_wgmma_scratch_bytes(kWgmmaTiles, p, cs.la, cs.lb, kPassSplitsBoth), 256)));
  launch(cs.config, p, cs.la, cs.lb, vec4, ws);
  CK(cudaDeviceSynchronize());
  if (ws) CK(cudaFree(ws));
  if (cs.k_splits > 1) {
    // The reduction, as the extension's: alpha * (sum of the slices in order) + beta * C.
    std::vector<float> part(partials);
    CK(cudaMemcpy(part.data(), p.workspace, partials * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < cs.batch; ++b)
      for (int i = 0; i < cs.m; ++i)
        for (int j = 0; j < cs.n; ++j) {
          const size_t e = (size_t(b) * cs.m + i) * cs.n + j;
          float sum = 0.0f;
          for (int sl = 0; sl < cs.k_splits; ++sl) sum += part[size_t(sl) * out.size() + e];
          out[e] = p.alpha * sum + (p.beta != 0.0f ? p.beta * C.at(b, i, j) : 0.0f);
        }
    CK(cudaFree(p.workspace));
  } else {
    CK(cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost));
  }
  CK(cudaFree(d));
  return out;
}

// cuBLAS (column-major) computes the row-major D as D^T = B^T A^T; C is expanded into D first.
static std::vector<float> run_cublas(const Case& cs, const Operand& A, const Operand& B, const CView& C) {
  std::vector<float> out(size_t(cs.batch) * cs.m * cs.n, 0.0f);
  const bool has_c = cs.cmode != CMode::None && cs.beta != 0.0f;
  if (has_c)
    for (int b = 0; b < cs.batch; ++b)
      for (int i = 0; i < cs.m; ++i)
        for (int j = 0; j < cs.n; ++j) out[(size_t(b) * cs.m + i) * cs.n + j] = C.at(b, i, j);
  float* d = nullptr;
  CK(cudaMalloc(&d, std::max<size_t>(out.size(), 1) * 4));
  CK(cudaMemcpy(d, out.data(), out.size() * 4, cudaMemcpyHostToDevice));
  const cublasOperation_t opa = cs.la == Layout::RowMajor ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = cs.lb == Layout::RowMajor ? CUBLAS_OP_N : CUBLAS_OP_T;
  const float alpha = cs.alpha, beta = has_c ? cs.beta : 0.0f;
  CB(cublasSgemmStridedBatched(g_cublas, opb, opa, cs.n, cs.m, cs.k, &alpha, B.dev + B.offset, int(B.ld),
                               B.batch_stride, A.dev + A.offset, int(A.ld), A.batch_stride, &beta, d, cs.n,
                               int64_t(cs.m) * cs.n, cs.batch));
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return out;
}

static std::string describe(const Case& cs) {
  char buf[200];
  snprintf(buf, sizeof buf, "%dx%dx%d b%d %c%c%s%s%s%s %s a%.3g b%.3g %s%s%s", cs.m, cs.n, cs.k, cs.batch,
           cs.la == Layout::RowMajor ? 'r' : 'c', cs.lb == Layout::RowMajor ? 'r' : 'c',
           cs.pad_a || cs.pad_b ? " ld+" : "", cs.unaligned ? " unal" : "", cs.bcast_a ? " A*" : "",
           cs.bcast_b ? " B*" : "", cmode_name(cs.cmode), cs.alpha, cs.beta, dist_name(cs.dist),
           is_wgmma(cs.config) ? (std::string(" ") + config_name(cs.config)).c_str()
           : cs.config >= 0    ? (" cfg" + std::to_string(cs.config)).c_str()
                               : "",
           cs.k_splits > 1 ? (" split " + std::to_string(cs.k_splits)).c_str() : "");
  return buf;
}

// Accurate: the kernel's error within 3x cuBLAS's plus a floor (the floor covers cases where
// cuBLAS is exact or nearly so, K of a few, and 3xTF32's 2^-22-per-product representation
// error dominates). Correct: no NaN/Inf class mismatch and a componentwise error within
// what 3 MMAs per K step that truncate the accumulator (round toward zero, as the tensor
// cores do) can make, 2 u per K step plus 64 u: a 1xTF32 product (2^-11 = 8192 u) or a
// wrong element fails it by far.
static bool acceptable(const Err& ours, const Err& cub) {
  return ours.nan_mismatch == 0 && ours.fro <= 3.0 * cub.fro + 3e-7 && ours.comp <= 3.0 * cub.comp + 16.0;
}
static bool correct(const Err& ours, int k) { return ours.nan_mismatch == 0 && ours.comp <= 2.0 * (k + 7) / 8 * 3 + 64.0; }
static const char* verdict(bool correct_, bool accurate) {
  if (!correct_) return (++g_failures, "FAIL");
  if (!accurate) return (++g_shortfalls, "acc?");
  return "ok";
}

static void check_case(const Case& cs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Operand A = make_operand(cs.m, cs.k, cs.la, cs.pad_a, cs.batch, cs.bcast_a, cs.unaligned);
  Operand B = make_operand(cs.k, cs.n, cs.lb, cs.pad_b, cs.batch, cs.bcast_b, cs.unaligned);
  fill(A, rng, cs.dist);
  fill(B, rng, cs.dist);
  upload(A);
  upload(B);
  CView C = make_c(cs.cmode, cs.m, cs.n, cs.batch, rng);
  std::vector<double> ref, denom;
  reference(cs, A, B, C, ref, denom);
  const Err ours = compare(run_kernel(cs, A, B, C), ref, denom);
  const Err cub = compare(run_cublas(cs, A, B, C), ref, denom);
  const char* v = verdict(correct(ours, cs.k), acceptable(ours, cub));
  printf("%-4s %-52s fro %.2e (cuBLAS %.2e)  comp %6.2fu (cuBLAS %6.2fu)%s\n", v,
         describe(cs).c_str(), ours.fro, cub.fro, ours.comp, cub.comp,
         ours.nan_mismatch ? (" NaN/Inf class mismatches: " + std::to_string(ours.nan_mismatch)).c_str() : "");
  cudaFree(A.dev), cudaFree(B.dev), cudaFree(C.dev);
}

// Non-finite and extreme inputs: the class (finite, NaN, +Inf, -Inf) of every element must be
// the fp32 product's, and finite elements as accurate as elsewhere.
static void check_special(Layout la, Layout lb, int config) {
  Case cs{77, 150, 70, 2, la, lb};
  cs.cmode = CMode::Full;
  cs.beta = 1.0f;
  cs.config = config;
  std::mt19937_64 rng(99);
  Operand A = make_operand(cs.m, cs.k, la, 0, cs.batch, false, false);
  Operand B = make_operand(cs.k, cs.n, lb, 0, cs.batch, false, false);
  fill(A, rng, Dist::Randn);
  fill(B, rng, Dist::Randn);
  const float inf = INFINITY;
  uint32_t payload_nan_bits = 0x7f800001u;  // a NaN that truncation to TF32 would make Inf
  float payload_nan;
  memcpy(&payload_nan, &payload_nan_bits, 4);
  const float fmax = 3.4028234663852886e38f;
  // batch 0: Inf in A against exact (1, 0, -2) and inexact values of B
  A.ref(0, 3, 5) = inf;
  B.ref(0, 5, 0) = 1.0f, B.ref(0, 5, 1) = 0.0f, B.ref(0, 5, 2) = -2.0f, B.ref(0, 5, 3) = 0.1f;
  // a NaN in B, and a NaN with only low payload bits in A
  B.ref(0, 9, 17) = NAN;
  A.ref(0, 40, 11) = payload_nan;
  // Inf times Inf, and +Inf - Inf in one dot product
  A.ref(0, 60, 20) = -inf, B.ref(0, 20, 30) = inf;
  A.ref(0, 61, 21) = inf, A.ref(0, 61, 22) = -inf;
  // batch 1: FLT_MAX (rounds past the largest TF32) times 0.25: finite; subnormal operands
  for (int q = 0; q < cs.k; ++q) A.ref(1, 10, q) = q % 2 ? fmax : -fmax;
  for (int j = 0; j < cs.n; ++j)
    for (int q = 0; q < cs.k; ++q) B.ref(1, q, j) = q < 2 ? 0.25f : 0.0f;  // only the first two K
  for (int q = 0; q < cs.k; ++q) {
    A.ref(1, 20, q) = std::ldexp(1.0f + 0.37f * (q % 7), -140);  // subnormal
    A.ref(1, 21, q) = std::ldexp(1.0f + 0.11f * (q % 5), -100);  // normal, products subnormal
  }
  upload(A), upload(B);
  CView C = make_c(cs.cmode, cs.m, cs.n, cs.batch, rng);
  C.host[size_t(70) * cs.n + 70] = inf;  // Inf in C with beta = 1
  CK(cudaMemcpy(C.dev, C.host.data(), C.host.size() * 4, cudaMemcpyHostToDevice));
  std::vector<double> ref, denom;
  reference(cs, A, B, C, ref, denom);
  const std::vector<float> d = run_kernel(cs, A, B, C), dc = run_cublas(cs, A, B, C);
  const Err ours = compare(d, ref, denom), cub = compare(dc, ref, denom);
  const bool ok = correct(ours, cs.k);
  const char* v = verdict(ok, acceptable(ours, cub));
  printf("%-4s special values %c%c %s: class mismatches %ld (cuBLAS %ld), finite fro %.2e (cuBLAS %.2e) comp %.2fu "
         "(cuBLAS %.2fu)\n",
         v, la == Layout::RowMajor ? 'r' : 'c', lb == Layout::RowMajor ? 'r' : 'c', config_name(config),
         ours.nan_mismatch, cub.nan_mismatch, ours.fro, cub.fro, ours.comp, cub.comp);
  if (!ok || ours.nan_mismatch) {
    const int probes[][3] = {{0, 3, 0}, {0, 3, 1}, {0, 3, 2}, {0, 3, 3}, {0, 9, 17}, {0, 40, 0}, {0, 60, 30},
                             {0, 61, 0}, {1, 10, 0}, {1, 10, 5}};
    for (auto& pr : probes) {
      const size_t i = (size_t(pr[0]) * cs.m + pr[1]) * cs.n + pr[2];
      printf("      D[%d][%d][%d] = %g (ref %g, cuBLAS %g)\n", pr[0], pr[1], pr[2], d[i], ref[i], dc[i]);
    }
  }
  cudaFree(A.dev), cudaFree(B.dev), cudaFree(C.dev);
  // Subnormals without C: a separate small product, so C does not swamp them.
  Case sc{32, 40, 64, 1, la, lb};
  sc.config = config;
  Operand SA = make_operand(sc.m, sc.k, la, 0, 1, false, false), SB = make_operand(sc.k, sc.n, lb, 0, 1, false, false);
  std::mt19937_64 r2(5);
  for (int i = 0; i < sc.m; ++i)
    for (int q = 0; q < sc.k; ++q)
      SA.ref(0, i, q) = std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(r2), i < 16 ? -135 : -100) *
                        ((r2() & 1) ? 1.0f : -1.0f);
  for (int q = 0; q < sc.k; ++q)
    for (int j = 0; j < sc.n; ++j)
      SB.ref(0, q, j) = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(r2), j < 20 ? 0 : -30);
  // Row 31: K 0 and 1 cancel exactly (2^77 b - 2^77 b) and K 63 leaves 2^-100 b: a tiny
  // result the kernel recomputes with its row scaled by 2^60, where the cancelling pair
  // overflows; the block must then fall back to its unscaled result (exact here).
  for (int q = 0; q < sc.k; ++q) SA.ref(0, 31, q) = 0.0f;
  SA.ref(0, 31, 0) = std::ldexp(1.0f, 77), SA.ref(0, 31, 1) = -std::ldexp(1.0f, 77);
  SA.ref(0, 31, 63) = std::ldexp(1.0f, -100);
  for (int j = 0; j < sc.n; ++j) SB.ref(0, 1, j) = SB.ref(0, 0, j);
  upload(SA), upload(SB);
  CView none;
  reference(sc, SA, SB, none, ref, denom);
  const std::vector<float> sd = run_kernel(sc, SA, SB, none), sdc = run_cublas(sc, SA, SB, none);
  // Rows < 16 of A are subnormal (2^-135), the others 2^-100; columns >= 20 of B are 2^-30
  // (products 2^-130, subnormal), the others ~1. Relative error where the fp32 result is
  // normal, and how many such results came out 0. Every result here is below 2^-90, so
  // this measures the kernel's scaled recomputation (sgemm_3xtf32.cuh, Subnormals).
  double sub_ours = 0, sub_cub = 0;
  long zeros = 0, zeros_cub = 0;
  for (size_t i = 0; i < sd.size(); ++i) {
    const float r = float(ref[i]);
    if (!(std::fabs(r) >= 1.1754944e-38f)) continue;
    sub_ours = std::max(sub_ours, std::fabs(double(sd[i]) - ref[i]) / std::fabs(ref[i]));
    sub_cub = std::max(sub_cub, std::fabs(double(sdc[i]) - ref[i]) / std::fabs(ref[i]));
    zeros += sd[i] == 0.0f;
    zeros_cub += sdc[i] == 0.0f;
  }
  const bool sok = zeros == 0 && sub_ours <= 3.0 * sub_cub + 1e-5;
  if (!sok) ++g_failures;
  printf("%-4s subnormal operands %c%c %s: max rel error of normal results %.2e (cuBLAS %.2e), results flushed "
         "to 0: %ld (cuBLAS %ld)\n",
         sok ? "ok" : "FAIL", la == Layout::RowMajor ? 'r' : 'c', lb == Layout::RowMajor ? 'r' : 'c', config_name(config),
         sub_ours,
         sub_cub, zeros, zeros_cub);
  cudaFree(SA.dev), cudaFree(SB.dev);
}

// ---- timing ----------------------------------------------------------------------------

static float* g_flush = nullptr;
static const size_t kFlushBytes = 256u << 20;

template <class F>
static double median_ms(F f, int reps = 20) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaMemsetAsync(g_flush, i & 0xff, kFlushBytes));  // L2 (50 MB) emptied of the operands
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return t[t.size() / 2];
}

static void time_square(int s, Layout la, Layout lb, const std::vector<int>& configs) {
  const size_t count = size_t(s) * s;
  float *a, *b, *d;
  CK(cudaMalloc(&a, count * 4));
  CK(cudaMalloc(&b, count * 4));
  CK(cudaMalloc(&d, count * 4));
  std::vector<float> h(count);
  std::mt19937_64 rng(s);
  for (auto& v : h) v = sample(rng, Dist::Randn);
  CK(cudaMemcpy(a, h.data(), count * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, h.data(), count * 4, cudaMemcpyHostToDevice));
  GemmParams p{};
  p.m = p.n = p.k = s, p.batch = 1;
  p.a = {a, s, 0}, p.b = {b, s, 0};
  p.d = d, p.d_ld = s, p.alpha = 1.0f, p.beta = 0.0f, p.k_splits = 1, p.k_slice = s, p.d_vec4 = true;
  void* ws = nullptr;
  if (g_wgmma) CK(cudaMalloc(&ws, vecgemm::sgemm_3xtf32_wgmma_scratch_bytes(kWgmmaTiles, p, la, lb, kPassSplitsBoth)));
  const double flop = 2.0 * s * s * double(s);
  const float one = 1.0f, zero = 0.0f;
  const cublasOperation_t opa = la == Layout::RowMajor ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = lb == Layout::RowMajor ? CUBLAS_OP_N : CUBLAS_OP_T;
  const double t_cub = median_ms([&] { CB(cublasSgemm(g_cublas, opb, opa, s, s, s, &one, b, s, a, s, &zero, d, s)); });
  printf("time %5d^3 %c%c  cuBLAS fp32 %7.3f ms %6.1f TFLOP/s", s, la == Layout::RowMajor ? 'r' : 'c',
         lb == Layout::RowMajor ? 'r' : 'c', t_cub, flop / t_cub / 1e9);
  for (int c : configs) {
    if (is_wgmma(c) && !g_wgmma) continue;
    const double t = median_ms([&] { launch(c, p, la, lb, true, ws); });
    printf(" | %s %7.3f ms %6.1f TFLOP/s x%.2f", config_name(c), t, flop / t / 1e9, t_cub / t);
    if (is_wgmma(c)) {
      // The split pass alone, and the rest (wgmma kernel + fix-up launch) by difference.
      const double ts = median_ms([&] { vecgemm::launch_sgemm_3xtf32_wgmma_split(kWgmmaTiles, p, la, lb, kPassSplitsBoth, ws, 0); });
      printf(" (split %.3f ms, kernel %.1f TFLOP/s)", ts, flop / (t - ts) / 1e9);
    }
  }
  printf("\n");
  fflush(stdout);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(ws);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  const bool time_only = argc > 1 && strcmp(argv[1], "--time") == 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  CB(cublasCreate(&g_cublas));
  CB(cublasSetMathMode(g_cublas, CUBLAS_DEFAULT_MATH));  // fp32 FFMA; NVIDIA_TF32_OVERRIDE=1 would change it
  if (getenv("NVIDIA_TF32_OVERRIDE")) printf("warning: NVIDIA_TF32_OVERRIDE is set\n");

  // Registers, spills (local memory) and shared memory of every instance.
  const Layout L[2] = {Layout::RowMajor, Layout::ColMajor};
  for (int c = 0; c < vecgemm::kNumTf32x3Configs; ++c) {
    const auto info = vecgemm::tf32x3_config_info(c);
    for (Layout la : L)
      for (Layout lb : L)
        for (int v = 1; v >= 0; --v) {
          cudaFuncAttributes at;
          CK(cudaFuncGetAttributes(&at, vecgemm::tf32x3_kernel_entry(c, la, lb, v)));
          int blocks = 0;
          CK(cudaFuncSetAttribute(vecgemm::tf32x3_kernel_entry(c, la, lb, v),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, info.smem_bytes));
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vecgemm::tf32x3_kernel_entry(c, la, lb, v),
                                                           info.threads, info.smem_bytes));
          printf("kernel %dx%d %c%c %s: %d registers, %zu bytes local (spills), %d B dynamic smem, %d threads, "
                 "%d blocks/SM\n",
                 info.bm, info.bn, la == Layout::RowMajor ? 'r' : 'c', lb == Layout::RowMajor ? 'r' : 'c',
                 v ? "vec4" : "scalar", at.numRegs, at.localSizeBytes, info.smem_bytes, info.threads, blocks);
        }
  }

  g_wgmma = vecgemm::sgemm_3xtf32_wgmma_available();
  if (g_wgmma) {
    const auto info = vecgemm::tf32x3_wgmma_config_info(kWgmmaTiles);
    const void* fn = vecgemm::tf32x3_wgmma_kernel_entry(kWgmmaTiles);
    cudaFuncAttributes at;
    CK(cudaFuncGetAttributes(&at, fn));
    CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, info.smem_bytes));
    int blocks = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, info.threads, info.smem_bytes));
    printf("kernel wgmma %dx%d (all orders): %d registers, %zu bytes local (spills), %d B dynamic smem, %d threads, "
           "%d blocks/SM\n",
           info.bm, info.bn, at.numRegs, at.localSizeBytes, info.smem_bytes, info.threads, blocks);
  } else {
    printf("kernel wgmma: not available on this device/build (needs sm_90 and -arch=sm_90a)\n");
  }

  if (!time_only) {
    std::vector<Case> cases;
    for (Layout la : L)
      for (Layout lb : L) {
        cases.push_back({1, 1, 1, 1, la, lb});
        cases.push_back({17, 33, 65, 1, la, lb});
        cases.push_back({127, 129, 257, 1, la, lb});
        Case u{127, 129, 257, 1, la, lb};
        u.unaligned = true, u.pad_a = 3, u.pad_b = 1;
        cases.push_back(u);
        Case bt{100, 70, 300, 3, la, lb};
        bt.cmode = CMode::Full, bt.alpha = 0.5f, bt.beta = -1.5f;
        cases.push_back(bt);
        Case w{256, 256, 512, 1, la, lb};
        w.dist = Dist::Wide;
        cases.push_back(w);
        Case un{200, 264, 1000, 1, la, lb};
        un.dist = Dist::Uniform;
        cases.push_back(un);
        for (int c = 0; c < vecgemm::kNumTf32x3Configs; ++c) {
          Case full{256, 512, 96, 2, la, lb};  // whole tiles: the unchecked loop
          full.config = c;
          cases.push_back(full);
        }
      }
    // Sizes, epilogues, broadcasts and distributions on the default order (row-major A and B).
    const Layout R = Layout::RowMajor, Cm = Layout::ColMajor;
    cases.push_back({1000, 1000, 1000, 1, R, R});
    {
      Case c{1000, 1000, 1000, 1, Cm, Cm};
      c.dist = Dist::Uniform;
      cases.push_back(c);
      c = Case{1000, 1000, 1000, 1, R, Cm};
      c.dist = Dist::Wide;
      cases.push_back(c);
      c = Case{130, 260, 2048, 3, R, R};
      c.bcast_b = true, c.cmode = CMode::RowBias, c.beta = 1.0f;
      cases.push_back(c);
      c = Case{130, 260, 64, 3, Cm, R};
      c.bcast_a = true, c.cmode = CMode::ColBias, c.beta = 2.0f, c.alpha = -1.0f;
      cases.push_back(c);
      c = Case{129, 257, 33, 3, R, Cm};
      c.cmode = CMode::BatchBroadcast, c.beta = 0.25f, c.unaligned = true;
      cases.push_back(c);
      c = Case{64, 64, 4096, 1, R, R};
      cases.push_back(c);
      c = Case{5, 3000, 7, 2, Cm, Cm};
      c.cmode = CMode::Full, c.beta = 1.0f;
      cases.push_back(c);
      for (int cfg = 0; cfg < vecgemm::kNumTf32x3Configs; ++cfg) {
        c = Case{300, 600, 333, 1, R, R};
        c.config = cfg, c.unaligned = true, c.pad_a = 1, c.pad_b = 2;
        cases.push_back(c);
      }
    }
    // Every case again on the wgmma form (the mma.sync configs' unchecked-loop cases once),
    // and split-K there: slices of 1-4 K tiles, ragged last slices, a batch with C.
    if (g_wgmma) {
      const size_t n = cases.size();
      for (size_t i = 0; i < n; ++i)
        if (cases[i].config <= 0) {
          Case c = cases[i];
          c.config = kWgmma;
          cases.push_back(c);
        }
      Case c{300, 260, 1000, 2, R, Cm};
      c.config = kWgmma, c.k_splits = 9, c.cmode = CMode::Full, c.beta = -0.5f;
      cases.push_back(c);
      c = Case{129, 130, 100, 1, Cm, R};
      c.config = kWgmma, c.k_splits = 3, c.unaligned = true;
      cases.push_back(c);
      c = Case{64, 64, 4096, 1, R, R};
      c.config = kWgmma, c.k_splits = 16, c.dist = Dist::Uniform;
      cases.push_back(c);
    }
    uint64_t seed = 1;
    for (const Case& cs : cases) {
      if (quick && int64_t(cs.m) * cs.n * cs.k * cs.batch > 100000000) continue;
      check_case(cs, seed++);
      fflush(stdout);
    }
    for (Layout la : L)
      for (Layout lb : L)
        for (int c = 0; c <= kWgmma; ++c)
          if (!is_wgmma(c) || g_wgmma) check_special(la, lb, c);
  }

  if (!quick) {
    CK(cudaMalloc(&g_flush, kFlushBytes));
    const std::vector<int> configs = {0, 1, 2, kWgmma};
    for (int s : {2048, 4096, 8192}) time_square(s, Layout::RowMajor, Layout::RowMajor, configs);
    time_square(4096, Layout::RowMajor, Layout::ColMajor, configs);
    time_square(4096, Layout::ColMajor, Layout::RowMajor, configs);
    time_square(4096, Layout::ColMajor, Layout::ColMajor, configs);
    cudaFree(g_flush);
  }
  printf("%s: %d correctness failure(s), %d case(s) less accurate than 3x cuBLAS fp32 (acc?)\n",
         g_failures ? "FAIL" : g_shortfalls ? "ACCURACY" : "PASS", g_failures, g_shortfalls);
  cublasDestroy(g_cublas);
  return g_failures ? 1 : g_shortfalls ? 3 : 0;
}
