// The CUDA implementations of the vecgemm ops. Every call goes the same way: the rules
// (problem.cpp, and kernel_violation() below per variant), then a plan (plan.h: pure), then
// its execution (execute.h) on the current stream under a device guard.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "../planning.h"
#include "../problem.h"
#include "../reference.h"
#include "../tuning.h"
#include "device_profile.h"
#include "execute.h"
#include "kernel_configs.h"
#include "kernels.h"
#include "plan.h"

namespace vecgemm {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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

// The largest M, N, K or batch: tile ends (a block's first row plus BM, up to 256) and
// rounded-up K stay inside 32-bit arithmetic.
constexpr int64_t kMaxDimension = (int64_t(1) << 31) - 257;

// "sm_86" for compute capability 86 (10 * major + minor).
std::string arch_name(int capability) { return "sm_" + std::to_string(capability); }

// A GPU that none of this build's kernel images can run on (neither its own machine code
// nor PTX it can compile): every input falls back there instead of failing at launch.
Reason architecture_violation(int device) {
  static std::mutex mutex;
  static std::map<int, Reason> reasons;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = reasons.find(device);
  if (it != reasons.end()) return it->second;
  const c10::cuda::CUDAGuard guard(device);
  cudaFuncAttributes attributes{};
  const cudaError_t error = cudaFuncGetAttributes(&attributes, tiled_kernel(0, Layout::RowMajor, Layout::RowMajor, true).entry);
  Reason reason;
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // the query's error is the answer, not a sticky failure
    std::string built;
    for (const int arch : built_architectures()) built += (built.empty() ? "" : ", ") + arch_name(arch / 10);
    reason = "this build has no kernel for " + arch_name(compute_capability(device)) + " (built for " +
             (built.empty() ? std::string("other GPUs") : built) +
             "); rebuild with TORCH_CUDA_ARCH_LIST naming this GPU's architecture (README, Build)";
  }
  return reasons[device] = reason;
}

// The CUDA-side rules for a named variant; C_out: the in-place op's output (the seed's
// kernel writes it in place, so its rules apply to it too).
Reason violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const std::string& name) {
  const auto variant = parse_variant(name);
  if (!variant) {
    std::string names;
    for (const auto& v : variant_names()) names += (names.empty() ? "" : ", ") + v;
    return "unknown variant '" + name + "' (available: " + names + ")";
  }
  for (const auto& [label, t] : {std::pair<const char*, const at::Tensor*>{"A", &A}, {"B", &B}})
    if (!storage_of(*t))
      return std::string(label) + " is neither row- nor column-major (strides " + list_str(t->strides()) + ")";
  const GemmShape s = shape_of(A, B);
  if (std::max({s.batch, s.m, s.n, s.k}) > kMaxDimension)
    return "a dimension is larger than 2^31 - 257; the kernels index dimensions with 32-bit integers "
           "(a tile's end must fit too)";
  if (A.is_cuda()) {
    if (auto r = architecture_violation(A.get_device())) return r;
  }
  if (std::holds_alternative<SeedKernel>(*variant)) return vectorized_violation(A, B, C_out);
  if (std::holds_alternative<MatrixVector>(*variant)) {
    if (gemv_fits(int(s.m), int(s.n), storage_of(A)->layout, storage_of(B)->layout)) return std::nullopt;
    return std::string("the gemv kernel takes M = 1 with a column-major B, or N = 1 with a row-major A");
  }
  if (const auto* fixed = std::get_if<FixedConfig>(&*variant)) {
    if (A.is_cuda() && !runs_on(fixed->config, A.get_device()))
      return "variant " + name + " uses cp.async, which needs sm_80 or newer";
    const Problem problem = problem_of(A, B, false);
    if (!kKernelConfigs[fixed->config].scalar && !(problem.a_vec4 && problem.b_vec4))
      return "variant " + name + " is built for 16-byte aligned operands only (pointer, leading dimension "
             "and batch stride multiples of 4 floats)";
  }
  return std::nullopt;
}

// Whether D's rows start 16-byte aligned, so that the epilogue stores four floats at a time.
bool rows_aligned(const at::Tensor& D) {
  return aligned16(D.data_ptr()) && D.stride(-2) % 4 == 0 && (D.dim() == 2 || D.stride(0) % 4 == 0);
}

// D = alpha * A @ B + beta * C on the named variant (its rules checked by the caller).
void run(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
         double alpha, double beta, const std::string& variant) {
  const c10::cuda::CUDAGuard guard(A.device());
  const Plan p = plan(problem_of(A, B, rows_aligned(D)), *parse_variant(variant));
  execute(p, D, A, B, C, alpha, beta);
}

at::Tensor sgemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                      double beta, c10::string_view variant) {
  const std::string v(variant);
  if (auto r = fallback_reason(A, B, C, v)) TORCH_CHECK(false, "vecgemm.sgemm: ", *r);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  run(D, A, B, C, alpha, beta, v);
  return D;
}

void sgemm_inplace_cuda(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha, double beta,
                        c10::string_view variant) {
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
at::Tensor gemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                     double beta) {
  if (fallback_reason(A, B, C, "auto")) return gemm_reference(A, B, C, alpha, beta);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  run(D, A, B, C, alpha, beta, "auto");
  return D;
}

// The plan of A @ B as the out-of-place ops make it: D freshly allocated, dense.
Plan plan_of(const at::Tensor& A, const at::Tensor& B, const Variant& variant) {
  const c10::cuda::CUDAGuard guard(A.device());
  return plan(problem_of(A, B, shape_of(A, B).n % 4 == 0), variant);
}

const char* family_name(Family f) {
  switch (f) {
    case Family::Empty:
      return "empty";
    case Family::Vectorized:
      return "vectorized";
    case Family::Gemv:
      return "gemv";
    case Family::Tiled:
      return "tiled";
    case Family::Async:
      return "async";
  }
  return "";
}

const char* order_name(Layout l) { return l == Layout::RowMajor ? "row-major" : "column-major"; }

}  // namespace

// ---- what problem.h and tuning.h declare --------------------------------------------------

Reason kernel_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                        const std::string& variant) {
  // C is only read by the out-of-place ops, so it adds no rule of its own.
  (void)C;
  return violation(A, B, nullptr, variant);
}

std::vector<std::string> available_variants() { return variant_names(); }

PlanSummary plan_summary(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                         const std::string& variant) {
  PlanSummary out;
  if (auto r = fallback_reason(A, B, C, variant)) {
    out.family = "fallback";
    out.fallback_reason = *r;
    out.description = "fallback: " + *r;
    return out;
  }
  const Plan p = plan_of(A, B, *parse_variant(variant));
  out.family = family_name(p.family);
  out.description = describe(p);
  switch (p.family) {
    case Family::Empty:
      break;
    case Family::Vectorized:
    case Family::Gemv:
      out.kernel = out.family;
      break;
    case Family::Tiled:
    case Family::Async:
      out.kernel = kernel_config_name(p.tiling.config);
      out.split_k = p.tiling.splits;
      out.stream_k = p.stream_k.has_value();
      break;
  }
  if (p.copy_a.made) out.copy_a = order_name(p.copy_a.order);
  if (p.copy_b.made) out.copy_b = order_name(p.copy_b.order);
  out.orders = std::string(p.key.la == Layout::RowMajor ? "r" : "c") + (p.key.lb == Layout::RowMajor ? "r" : "c");
  out.autotune_pending = p.autotune_pending;
  return out;
}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant) {
  return plan_summary(A, B, std::nullopt, variant).description;
}

std::string tuning_key(const at::Tensor& A, const at::Tensor& B) {
  const Reason reason = fallback_reason(A, B, std::nullopt, "auto");
  TORCH_CHECK(!reason, "vecgemm: A @ B falls back (", reason.value_or(""), "), so it has no tuning key");
  return plan_of(A, B, AutoSelect{}).key.str();
}

int resident_blocks(const std::string& config) {
  const auto row = kernel_config_of(config);
  TORCH_CHECK(row.has_value(), "vecgemm: unknown kernel config '", config, "'");
  const int device = c10::cuda::current_device();
  const TiledKernel kernel = tiled_kernel(*row, Layout::ColMajor, Layout::RowMajor, true);
  return sm_count(device) * blocks_per_sm(kernel, device);
}

TORCH_LIBRARY_IMPL(vecgemm, CUDA, m) {
  m.impl("sgemm", &sgemm_cuda);
  m.impl("sgemm_", &sgemm_inplace_cuda);
  m.impl("gemm", &gemm_cuda);
}

}  // namespace vecgemm
