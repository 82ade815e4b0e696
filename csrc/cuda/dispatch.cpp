// CUDA implementations of the vecgemm ops: turn tensors into GemmParams, pick a kernel,
// launch it on the current stream under a device guard. The rules for what may reach a
// kernel are in problem.cpp (shared) and kernel_violation() below (per variant).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "../problem.h"
#include "../reference.h"
#include "kernels.h"
#include "selection.h"

namespace vecgemm {

// ---- the variant table -----------------------------------------------------------------

namespace {

std::atomic<bool> g_checked_loads_only{false};
std::atomic<bool> g_dependent_launch{[] {
  const char* v = std::getenv("VECGEMM_DEPENDENT_LAUNCH");
  return !(v && std::string(v) == "0");
}()};

TiledKernel (&kernel_table())[kNumTileConfigs][2][2][2] {
  static TiledKernel table[kNumTileConfigs][2][2][2] = {};
  return table;
}

constexpr int kNumConfigs = kNumTileConfigs;

constexpr const char* kAuto = "auto";
constexpr const char* kVectorized = "vectorized";  // the seed's kernel
constexpr const char* kGemv = "gemv";              // matrix-vector products
constexpr int kVectorizedIndex = kNumConfigs, kGemvIndex = kNumConfigs + 1;

// -1 for "auto", kVectorizedIndex, kGemvIndex, else a tiled configuration.
std::optional<int> variant_index(const std::string& variant) {
  if (variant == kAuto) return -1;
  if (variant == kVectorized) return kVectorizedIndex;
  if (variant == kGemv) return kGemvIndex;
  for (int c = 0; c < kNumConfigs; ++c)
    if (variant == kTileConfigs[c].name) return c;
  return std::nullopt;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Every K-or-MN vector of the operand is 16-byte aligned: pointer, leading dimension and
// batch stride all multiples of four floats.
bool vec4_ok(const at::Tensor& t, const MatrixStorage& s) {
  const int64_t batch_stride = t.dim() == 3 && t.size(0) > 1 ? t.stride(0) : 0;
  return aligned16(t.data_ptr()) && s.ld % 4 == 0 && batch_stride % 4 == 0;
}

// Dense row-major, as the seed's kernel indexes (lda = K, ldb = ldc = N).
bool row_major_dense(const at::Tensor& t) {
  return (t.size(-1) == 1 || t.stride(-1) == 1) && (t.size(-2) == 1 || t.stride(-2) == t.size(-1));
}

Reason vectorized_violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out) {
  const GemmShape s = shape_of(A, B);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"A", &A}, {"B", &B}, {"C", C_out}}) {
    if (t == nullptr) continue;
    if (!row_major_dense(*t))
      return std::string(name) + " is not row-major contiguous, which the vectorized kernel requires";
    if (!aligned16(t->data_ptr()) || (t->dim() == 3 && t->stride(0) % 4 != 0))
      return std::string(name) + "'s data pointer is not 16-byte aligned, which the vectorized kernel requires";
  }
  auto not_multiple = [](const char* dim, int64_t value, int of) -> Reason {
    if (value % of == 0) return std::nullopt;
    return std::string(dim) + " = " + std::to_string(value) + " is not a multiple of " + std::to_string(of) +
           " (vectorized kernel)";
  };
  if (auto r = not_multiple("M", s.m, VectorizedTile::BM)) return r;
  if (auto r = not_multiple("N", s.n, VectorizedTile::BN)) return r;
  return not_multiple("K", s.k, VectorizedTile::BK);
}

Reason violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out,
                 const std::string& variant) {
  const auto index = variant_index(variant);
  if (!index) {
    std::string names;
    for (const auto& v : available_variants()) names += (names.empty() ? "" : ", ") + v;
    return "unknown variant '" + variant + "' (available: " + names + ")";
  }
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"A", &A}, {"B", &B}})
    if (!storage_of(*t))
      return std::string(name) + " is neither row- nor column-major (strides " + list_str(t->strides()) + ")";
  const GemmShape s = shape_of(A, B);
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (std::max({s.batch, s.m, s.n, s.k}) > kIntMax)
    return "a dimension is 2^31 or larger; the kernels index dimensions with 32-bit integers";
  if (*index == kVectorizedIndex) return vectorized_violation(A, B, C_out);
  if (*index == kGemvIndex) {
    if (gemv_fits(int(s.m), int(s.n), storage_of(A)->layout, storage_of(B)->layout)) return std::nullopt;
    return std::string("the gemv kernel takes M = 1 with a column-major B, or N = 1 with a row-major A");
  }
  if (*index >= 0 && !kTileConfigs[*index].scalar && !(vec4_ok(A, *storage_of(A)) && vec4_ok(B, *storage_of(B))))
    return "variant " + variant + " is built for 16-byte aligned operands only (pointer, leading dimension "
           "and batch stride multiples of 4 floats)";
  return std::nullopt;
}

// ---- operands the kernels would take slowly ----------------------------------------------

// Two kinds of operands cost the kernels a good part of their speed: one whose rows do not
// start 16 bytes aligned sends the problem to the scalar-load kernels, and a K that is not a
// multiple of the K tile sends every block to the bounds-checked main loop (with 128
// registers a thread, the checked loop spills). For a large problem, one copy of the
// operand(s) into padded storage costs less: it moves 8 bytes per element (~2.3 ps each at
// the H200's bandwidth) and saves ~9 fs or more per multiply-add, so it pays when the
// operand is reused across more than ~250 columns (A) or rows (B) and the product is large
// enough to cover the extra launches (docs/performance.md, step 6). The storage orders run
// at different speeds too (A column-major and B row-major fastest, tile_configs.h), so a copy
// may also change an operand's order, and an operand may be copied for its order alone,
// where the cost model says the faster kernel pays for the copy (step 17).
constexpr int64_t kCopyMinReuse = 256;
constexpr int64_t kCopyMinMacs = int64_t(1) << 30;
// K is padded to a multiple of every tiling's BK.
constexpr int64_t kKPadding = 16;

// The same values in storage of the given order, rows starting 16-byte aligned, with the K
// dimension (k_dim: -1 for A, -2 for B) zero-filled up to k_padded; one pass (pad_copy.cu,
// or transpose_copy.cu when the order changes).
at::Tensor padded_copy(const at::Tensor& t, int k_dim, int64_t k_padded, Layout order) {
  if (t.dim() == 3 && t.size(0) > 1 && t.stride(0) == 0) {  // keep a broadcast batch broadcast
    const at::Tensor one = padded_copy(t.select(0, 0), k_dim, k_padded, order);
    return one.unsqueeze(0).expand({t.size(0), one.size(0), one.size(1)});
  }
  // Source and copy as views whose last dimension is the contiguous one.
  const bool src_row_major = storage_of(t)->layout == Layout::RowMajor;
  const bool dst_row_major = order == Layout::RowMajor;
  const at::Tensor rows = src_row_major ? t : t.transpose(-1, -2);
  std::vector<int64_t> sizes = t.sizes().vec();  // the copy's, in t's (logical) terms
  sizes[sizes.size() + k_dim] = k_padded;
  if (!dst_row_major) std::swap(sizes[sizes.size() - 1], sizes[sizes.size() - 2]);
  const int64_t width = sizes.back();
  sizes.back() = (width + 3) / 4 * 4;
  TORCH_CHECK(sizes.back() <= std::numeric_limits<int>::max(), "vecgemm: padded operand too large");
  const at::Tensor copy = at::empty(sizes, t.options());
  const bool batched = rows.dim() == 3;
  const PadCopy c{rows.data_ptr<float>(), rows.stride(-2), batched ? rows.stride(0) : 0,
                  int(rows.size(-2)), int(rows.size(-1)), copy.data_ptr<float>(),
                  int(copy.size(-2)), int(copy.size(-1)), batched ? int(rows.size(0)) : 1};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (src_row_major == dst_row_major)
    launch_pad_copy(c, stream);
  else
    launch_transpose_copy(c, stream);
  const at::Tensor view = copy.narrow(-1, 0, width);
  return dst_row_major ? view : view.transpose(-1, -2);
}

// The operands the auto variant multiplies: A and B themselves, or copies where the cost
// model says they pay (above). A variant asked for by name gets them as they are.
std::pair<at::Tensor, at::Tensor> operands_for(const at::Tensor& A, const at::Tensor& B, int variant, bool out_vec4) {
  if (variant >= 0) return {A, B};
  const GemmShape s = shape_of(A, B);
  if (s.batch * s.m * s.n * s.k < kCopyMinMacs || s.m < kCopyMinReuse || s.n < kCopyMinReuse) return {A, B};
  const Layout la = storage_of(A)->layout, lb = storage_of(B)->layout;
  const bool a_ok = vec4_ok(A, *storage_of(A)), b_ok = vec4_ok(B, *storage_of(B));
  const int64_t k = (s.k + kKPadding - 1) / kKPadding * kKPadding;
  // Operands that are copied whatever their order: both when K needs padding, else the
  // misaligned ones. A broadcast operand is copied once.
  const bool pad_k = k != s.k, must_a = pad_k || !a_ok, must_b = pad_k || !b_ok;
  const int64_t a_elements = (A.dim() == 3 && A.stride(0) != 0 ? s.batch : 1) * s.m * k;
  const int64_t b_elements = (B.dim() == 3 && B.stride(0) != 0 ? s.batch : 1) * k * s.n;
  double best_ns = INFINITY;
  Layout best_a = la, best_b = lb;
  // The operands' own orders first: a copy for its order alone must be predicted faster.
  for (const Layout oa : {la, la == Layout::RowMajor ? Layout::ColMajor : Layout::RowMajor}) {
    for (const Layout ob : {lb, lb == Layout::RowMajor ? Layout::ColMajor : Layout::RowMajor}) {
      const bool copy_a = must_a || oa != la, copy_b = must_b || ob != lb;
      // k differs from s.k only when K is padded, and then both operands are copied.
      const ProblemKey key{int(s.batch), int(s.m), int(s.n), int(k), oa, ob, (copy_a || a_ok) && (copy_b || b_ok),
                           out_vec4};
      const double ns = model_best_ns(key) + (copy_a ? copy_ns(a_elements) : 0.0) + (copy_b ? copy_ns(b_elements) : 0.0);
      if (ns < best_ns) best_ns = ns, best_a = oa, best_b = ob;
    }
  }
  const bool copy_a = must_a || best_a != la, copy_b = must_b || best_b != lb;
  // The copies are for speed only (the kernels take any alignment, K and order): where the
  // caching allocator cannot give them, the operands are used as they are. Both or neither,
  // since a padded K must be the same in A and B.
  try {
    return {copy_a ? padded_copy(A, -1, k, best_a) : A, copy_b ? padded_copy(B, -2, k, best_b) : B};
  } catch (const c10::OutOfMemoryError&) {
    return {A, B};
  }
}

// ---- launching ---------------------------------------------------------------------------

// out_vec4: whether the output D's rows are 16-byte aligned.
ProblemKey key_of(const at::Tensor& A, const at::Tensor& B, bool out_vec4) {
  const GemmShape s = shape_of(A, B);
  const MatrixStorage sa = *storage_of(A), sb = *storage_of(B);
  return ProblemKey{int(s.batch), int(s.m), int(s.n), int(s.k), sa.layout, sb.layout,
                    vec4_ok(A, sa) && vec4_ok(B, sb), out_vec4};
}

// The operands variant `index` multiplies for A @ B and their problem key, as the
// out-of-place ops run it: D freshly allocated, dense. The caller holds a device guard.
std::tuple<at::Tensor, at::Tensor, ProblemKey> planned_problem(const at::Tensor& A, const at::Tensor& B, int index) {
  const bool d_vec4 = shape_of(A, B).n % 4 == 0;
  auto [a, b] = operands_for(A, B, index, d_vec4);
  const ProblemKey key = key_of(a, b, d_vec4);
  return {std::move(a), std::move(b), key};
}

// The operands' part of the kernel parameters; the caller fills in D and C.
GemmParams operand_params(const at::Tensor& A, const at::Tensor& B, double alpha) {
  const GemmShape s = shape_of(A, B);
  GemmParams p{};
  p.m = int(s.m), p.n = int(s.n), p.k = int(s.k), p.batch = int(s.batch);
  p.a = Operand{A.data_ptr<float>(), storage_of(A)->ld, A.dim() == 3 ? A.stride(0) : 0};
  p.b = Operand{B.data_ptr<float>(), storage_of(B)->ld, B.dim() == 3 ? B.stride(0) : 0};
  p.alpha = float(alpha);
  p.k_splits = 1, p.k_slice = p.k;
  p.checked_loads_only = g_checked_loads_only.load();
  return p;
}

// D = alpha * A @ B + beta * C with D row-major; C (any strides, broadcast allowed) is only
// read when beta != 0 and may be D itself. The caller has checked violation().
void run(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B,
         const std::optional<at::Tensor>& C, double alpha, double beta, const std::string& variant) {
  const GemmShape s = shape_of(A, B);
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  const bool use_c = C.has_value() && beta != 0.0;
  const auto out_sizes = s.out_sizes();
  if (s.k == 0) {  // an empty sum: D = beta * C
    if (!use_c) {
      D.zero_();
    } else {
      if (!D.is_same(*C)) D.copy_(C->expand(out_sizes));
      D.mul_(beta);
    }
    return;
  }

  const c10::cuda::CUDAGuard guard(A.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int index = *variant_index(variant);
  const bool d_vec4 = aligned16(D.data_ptr()) && D.stride(-2) % 4 == 0 && (D.dim() == 2 || D.stride(0) % 4 == 0);
  const auto [a, b] = operands_for(A, B, index, d_vec4);
  GemmParams p = operand_params(a, b, alpha);
  p.d = D.data_ptr<float>();
  p.d_ld = D.stride(-2);
  p.d_batch_stride = D.dim() == 3 ? D.stride(0) : 0;
  p.d_vec4 = d_vec4;
  p.beta = use_c ? float(beta) : 0.0f;

  if (index == kVectorizedIndex) {
    // The seed's kernel reads beta * C from D itself.
    if (use_c && !D.is_same(*C)) D.copy_(C->expand(out_sizes));
    launch_vectorized(p, stream);
    return;
  }
  if (use_c) {
    const at::Tensor c = C->expand(out_sizes);
    p.c = c.data_ptr<float>();
    p.c_row_stride = c.stride(-2), p.c_col_stride = c.stride(-1);
    p.c_batch_stride = c.dim() == 3 ? c.stride(0) : 0;
    p.c_vec4 = aligned16(p.c) && p.c_col_stride == 1 && p.c_row_stride % 4 == 0 &&
               p.c_batch_stride % 4 == 0;
  }
  const ProblemKey key = key_of(a, b, p.d_vec4);
  if (index == kGemvIndex || (index < 0 && gemv_fits(key.m, key.n, key.la, key.lb)))
    launch_gemv(p, key.la, key.lb, stream);
  else
    run_tiled(p, key, choose(key, index, p, stream), stream);
}

// ---- the ops -------------------------------------------------------------------------------

at::Tensor sgemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                      double alpha, double beta, c10::string_view variant) {
  const std::string v(variant);
  if (auto r = fallback_reason(A, B, C, v)) TORCH_CHECK(false, "vecgemm.sgemm: ", *r);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  run(D, A, B, C, alpha, beta, v);
  return D;
}

void sgemm_inplace_cuda(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha,
                               double beta, c10::string_view variant) {
  const std::string v(variant);
  Reason r = contract_violation(A, B, C);
  if (!r) r = inplace_violation(C, A, B);
  if (!r) r = violation(A, B, &C, v);
  if (r) TORCH_CHECK(false, "vecgemm.sgemm_: ", *r);
  if (storage_of(C)->layout == Layout::RowMajor) {
    run(C, A, B, C, alpha, beta, v);
  } else {
    // A column-major C is a row-major C^T = B^T A^T: the same kernels, operands swapped.
    const at::Tensor Ct = C.transpose(-1, -2);
    run(Ct, B.transpose(-1, -2), A.transpose(-1, -2), Ct, alpha, beta, v);
  }
}

// The lenient op behind torch_vecgemm.sgemm/mm/bmm: the kernel when the rules allow,
// otherwise exactly what torch.addmm / torch.baddbmm compute.
at::Tensor gemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                     double alpha, double beta) {
  if (fallback_reason(A, B, C, kAuto)) return gemm_reference(A, B, C, alpha, beta);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  run(D, A, B, C, alpha, beta, kAuto);
  return D;
}

}  // namespace

// ---- what problem.h declares ---------------------------------------------------------------

Reason kernel_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                        const std::string& variant) {
  // C is only read by the out-of-place ops, so it adds no rule of its own.
  (void)C;
  return violation(A, B, nullptr, variant);
}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant) {
  if (auto r = fallback_reason(A, B, std::nullopt, variant)) return "fallback: " + *r;
  const int index = *variant_index(variant);
  if (index == kVectorizedIndex) return kVectorized;
  const c10::cuda::CUDAGuard guard(A.device());
  const auto [a, b, key] = planned_problem(A, B, index);
  if (index == kGemvIndex || (index < 0 && gemv_fits(key.m, key.n, key.la, key.lb))) return kGemv;
  const Choice c = choose(key, index, operand_params(a, b, 1.0), c10::cuda::getCurrentCUDAStream());
  // "copy of A (column-major) B": the operands copied, with the order where it changed.
  std::string copied;
  for (const auto& [name, given, used] : {std::tuple{"A", &A, &a}, {"B", &B, &b}}) {
    if (used->is_same(*given)) continue;
    copied += std::string(" ") + name;
    const Layout order = storage_of(*used)->layout;
    if (order != storage_of(*given)->layout) copied += order == Layout::RowMajor ? " (row-major)" : " (column-major)";
  }
  return std::string(kTileConfigs[c.config].name) + (c.splits > 1 ? " split-k " + std::to_string(c.splits) : "") +
         (stream_k_tail(key, c) ? " stream-K tail" : "") + (copied.empty() ? "" : ", copy of" + copied);
}

std::string tuning_key(const at::Tensor& A, const at::Tensor& B) {
  const Reason reason = fallback_reason(A, B, std::nullopt, kAuto);
  TORCH_CHECK(!reason, "vecgemm: A @ B falls back (", reason.value_or(""), "), so it has no tuning key");
  const c10::cuda::CUDAGuard guard(A.device());
  return std::get<2>(planned_problem(A, B, -1)).str();
}

std::vector<std::string> available_variants() {
  std::vector<std::string> names{kAuto, kVectorized, kGemv};
  for (const auto& c : kTileConfigs) names.emplace_back(c.name);
  return names;
}

void set_checked_loads_only(bool enabled) { g_checked_loads_only = enabled; }
void set_dependent_launch(bool enabled) { g_dependent_launch = enabled; }
bool dependent_launch_enabled() { return g_dependent_launch.load(); }

void register_tiled_kernel(int config, Layout la, Layout lb, bool vec4, TiledKernel kernel) {
  kernel_table()[config][int(la)][int(lb)][vec4] = kernel;
}

TiledKernel tiled_kernel(int config, Layout la, Layout lb, bool vec4) {
  return kernel_table()[config][int(la)][int(lb)][vec4];
}

TORCH_LIBRARY_IMPL(vecgemm, CUDA, m) {
  m.impl("sgemm", &sgemm_cuda);
  m.impl("sgemm_", &sgemm_inplace_cuda);
  m.impl("gemm", &gemm_cuda);
}

}  // namespace vecgemm
