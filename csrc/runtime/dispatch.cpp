// The CUDA implementations of the vecgemm ops. Every call goes the same way: the rules
// (rules.cpp, and kernel_violation() below per variant), then a plan (plan.h: pure), then
// its execution (execute.h) on the current stream under a device guard.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "device_facts.h"
#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "plan_summary.h"
#include "planner/device_profile.h"
#include "planner/plan.h"
#include "planner/tf32x3_rows.h"
#include "reference.h"
#include "rules.h"
#include "runtime/execute.h"
#include "runtime/lenient.h"
#include "tuning_controls.h"

namespace vecgemm {
namespace {


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

// What a call asks the kernels for, parsed once where it enters: the variant (its name kept
// for messages) and the precision it computes in, the switch read once.
struct Request {
  std::string name;
  Variant variant;
  Precision precision;
};

// The precision a variant computes in when `asked` is "auto": the switch's for the auto
// variant, else the named kernel's.
Precision precision_of(const Variant& variant, PrecisionRequest asked) {
  if (asked != PrecisionRequest::Auto) return resolve(asked);
  if (std::holds_alternative<AutoSelect>(variant)) return default_precision();
  return std::holds_alternative<FixedTf32x3>(variant) ? Precision::Tf32x3 : Precision::Ieee;
}

// The request, or why there is none: the variant's name is not one of variant_names().
std::optional<Request> parse_request(const std::string& name, PrecisionRequest asked, Reason* unknown) {
  const auto variant = parse_variant(name);
  if (variant) return Request{name, *variant, precision_of(*variant, asked)};
  std::string names;
  for (const auto& v : variant_names()) names += (names.empty() ? "" : ", ") + v;
  *unknown = "unknown variant '" + name + "' (available: " + names + ")";
  return std::nullopt;
}

// The CUDA-side rules for a named variant; C_out: the in-place op's output (the seed's
// kernel writes it in place, so its rules apply to it too).
Reason violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const Request& request) {
  const Variant* variant = &request.variant;
  const std::string& name = request.name;
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
  if (const auto* fixed = std::get_if<FixedTf32x3>(&*variant)) {
    const Tf32x3Row& row = kTf32x3Rows[fixed->row];
    if (row.refuses)
      if (auto r = row.refuses(key_as_given(problem_of(A, B, false)))) return r;
  }
  if (const auto* fixed = std::get_if<FixedConfig>(&*variant)) {
    if (A.is_cuda() && !runs_on(fixed->config, A.get_device()))
      return "variant " + name + " uses cp.async, which needs sm_80 or newer";
    const Problem problem = problem_of(A, B, false);
    if (!kKernelConfigs[fixed->config].scalar && !(problem.a_vec4 && problem.b_vec4))
      return "variant " + name + " is built for 16-byte aligned operands only (pointer, leading dimension "
             "and batch stride multiples of 4 floats, storage holding the last row's last 4 floats whole); "
             "use variant='auto'";
  }
  return std::nullopt;
}

// The precision rules of a request: the precision must be the one the named kernel computes
// in (a request whose precision was "auto" takes the kernel's), and 3xTF32 needs a row that
// runs on the GPU. Apart from violation() because the lenient op answers them differently:
// it runs IEEE fp32 instead (plan().precision_fallback says why), where the strict ops raise.
Reason precision_violation(const at::Tensor& A, const Request& request) {
  const bool names_tf32x3 = std::holds_alternative<FixedTf32x3>(request.variant);
  const bool names_ieee = !names_tf32x3 && !std::holds_alternative<AutoSelect>(request.variant);
  if (request.precision == Precision::Ieee && names_tf32x3)
    return "variant " + request.name + " computes in 3xTF32, but precision='ieee' was asked for; pass "
           "precision='3xtf32' or 'auto' with it, or an IEEE variant";
  if (request.precision == Precision::Tf32x3 && names_ieee)
    return "variant " + request.name + " computes in IEEE fp32, but precision='3xtf32' was asked for; pass "
           "variant='auto' or a tf32x3_ variant (torch_vecgemm.variants()) with it";
  if (request.precision != Precision::Tf32x3 || !A.is_cuda()) return std::nullopt;
  if (const auto* fixed = std::get_if<FixedTf32x3>(&request.variant)) return tf32x3_violation(fixed->row, A.get_device());
  return tf32x3_row_for(A.get_device()).reason;
}

// Every CUDA-side rule of a strict call (the contract and the device checked before).
Reason request_violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const Request& request) {
  if (auto r = violation(A, B, C_out, request)) return r;
  return precision_violation(A, request);
}

// Whether D's rows start 16-byte aligned, so that the epilogue stores four floats at a time.
bool rows_aligned(const at::Tensor& D) {
  return aligned16(D.data_ptr()) && D.stride(-2) % 4 == 0 && (D.dim() == 2 || D.stride(0) % 4 == 0);
}

// D = alpha * A @ B + beta * C as requested (the rules checked by the caller).
void run(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
         double alpha, double beta, const Request& request) {
  const c10::cuda::CUDAGuard guard(A.device());
  const Plan p = plan(problem_of(A, B, rows_aligned(D)), request.variant, request.precision);
  execute(p, D, A, B, C, alpha, beta);
}

at::Tensor sgemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                      double beta, c10::string_view variant, c10::string_view precision) {
  const PrecisionRequest asked = parse_precision(precision);  // a misspelt one raises first
  Reason r = contract_violation(A, B, C);
  if (!r && !A.is_cuda()) r = "not on a CUDA device (" + A.device().str() + ")";
  Reason unknown;
  const std::optional<Request> request = parse_request(std::string(variant), asked, &unknown);
  if (!r) r = request ? request_violation(A, B, nullptr, *request) : unknown;
  if (r) TORCH_CHECK(false, "vecgemm.sgemm: ", *r);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  run(D, A, B, C, alpha, beta, *request);
  return D;
}

void sgemm_inplace_cuda(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha, double beta,
                        c10::string_view variant, c10::string_view precision) {
  const PrecisionRequest asked = parse_precision(precision);  // a misspelt one raises first
  Reason r = contract_violation(A, B, C);
  if (!r) r = inplace_violation(C, A, B);
  Reason unknown;
  const std::optional<Request> request = parse_request(std::string(variant), asked, &unknown);
  if (!r) r = request ? request_violation(A, B, &C, *request) : unknown;
  if (r) TORCH_CHECK(false, "vecgemm.sgemm_: ", *r);
  if (storage_of(C)->layout == Layout::RowMajor) {
    run(C, A, B, C, alpha, beta, *request);
  } else {
    // A column-major C is a row-major C^T = B^T A^T: the same kernels, operands swapped.
    const at::Tensor Ct = C.transpose(-1, -2);
    run(Ct, B.transpose(-1, -2), A.transpose(-1, -2), Ct, alpha, beta, *request);
  }
}

// The precision the lenient op runs A @ B in: the one asked for, or IEEE where 3xTF32 was
// asked for and the GPU cannot run it (`why` says so). The other rules passed.
Precision lenient_precision(const at::Tensor& A, PrecisionRequest asked, Reason* why = nullptr) {
  const Request request{"auto", AutoSelect{}, precision_of(AutoSelect{}, asked)};  // the switch read once
  if (request.precision == Precision::Ieee) return Precision::Ieee;
  Reason r = precision_violation(A, request);
  if (!r) return request.precision;
  if (why) *why = r;
  return Precision::Ieee;
}

// The plan of A @ B as the out-of-place ops make it: D freshly allocated, dense.
Plan plan_of(const at::Tensor& A, const at::Tensor& B, const Variant& variant, Precision precision) {
  const c10::cuda::CUDAGuard guard(A.device());
  return plan(problem_of(A, B, shape_of(A, B).n % 4 == 0), variant, precision);
}

// Where the planner declines 3xTF32 (plan.cpp, tf32x3_declined), the lenient op hands the
// product to torch, whose product is then cuBLAS SGEMM: as fast as the IEEE kernels or
// faster on most such problems (small ones), and more accurate on short sums (cuBLAS splits
// them finer; docs/performance.md). With TF32 allowed in torch's matmuls its product would
// lose fp32's accuracy, which precision 3xTF32 promises to keep: the IEEE kernels run. Under
// torch.use_deterministic_algorithms(True) torch's cuBLAS product raises unless
// CUBLAS_WORKSPACE_CONFIG is set, and the IEEE kernels are deterministic: they run.
bool hands_to_torch(const Plan& plan) {
  const auto& context = at::globalContext();
  return plan.tf32x3_declined.has_value() && !context.allowTF32CuBLAS() && !context.deterministicAlgorithms();
}

}  // namespace

std::optional<Plan> lenient_plan(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                 PrecisionRequest request) {
  // With variant "auto" and IEEE asked for, no precision rule applies: the rest decide.
  if (fallback_reason(A, B, C, "auto", "ieee")) return std::nullopt;
  Plan p = plan_of(A, B, AutoSelect{}, lenient_precision(A, request));
  if (hands_to_torch(p)) return std::nullopt;
  return p;
}

bool planned_output(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B,
                    const std::optional<at::Tensor>& C) {
  const GemmShape s = shape_of(A, B);
  const std::vector<int64_t> sizes = s.out_sizes();
  if (D.scalar_type() != at::kFloat || D.device() != A.device() || D.sizes() != at::IntArrayRef(sizes) ||
      !D.is_contiguous() || rows_aligned(D) != (s.n % 4 == 0) || at::has_internal_overlap(D) != at::MemOverlap::No)
    return false;
  for (const at::Tensor* t : {&A, &B, C ? &*C : nullptr})
    if (t != nullptr && at::get_overlap_status(D, *t) != at::MemOverlapStatus::No) return false;
  return true;
}

namespace {

// The lenient op behind torch_vecgemm.sgemm/mm/bmm: the kernel when the rules allow,
// otherwise exactly what torch.addmm / torch.baddbmm compute.
at::Tensor gemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                     double beta, c10::string_view precision) {
  const std::optional<Plan> p = lenient_plan(A, B, C, parse_precision(precision));
  if (!p) return gemm_reference(A, B, C, alpha, beta);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  const c10::cuda::CUDAGuard guard(A.device());
  execute(*p, D, A, B, C, alpha, beta);
  return D;
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
    case Family::Tf32x3:
      return "tf32x3";
  }
  return "";
}

const char* order_name(Layout l) { return l == Layout::RowMajor ? "row-major" : "column-major"; }

// What plan_summary says of a plan made in the precision `served`; why_ieee: why IEEE runs
// where 3xTF32 was asked for and the device cannot run it.
PlanSummary summary_of(const Plan& p, bool lenient, Precision served, Reason why_ieee) {
  PlanSummary out;
  if (!why_ieee) why_ieee = p.tf32x3_declined;
  out.precision = precision_name(why_ieee ? Precision::Ieee : served);
  out.precision_fallback = why_ieee;
  if (lenient && hands_to_torch(p)) {
    out.family = "torch";
    out.description = "torch fp32 (" + *why_ieee + ")";
    return out;
  }
  out.family = family_name(p.family);
  out.description = describe(p);
  if (why_ieee) out.description += " (IEEE fp32: " + *why_ieee + ")";
  if (!std::isnan(p.predicted_ns)) out.predicted_us = p.predicted_ns / 1000.0;
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
    case Family::Tf32x3:
      out.kernel = kTf32x3Rows[p.tf32x3.row].name;
      out.split_k = p.tf32x3.splits;
      break;
  }
  if (p.copy_a.made) out.copy_a = order_name(p.copy_a.order);
  if (p.copy_b.made) out.copy_b = order_name(p.copy_b.order);
  out.orders = std::string(p.key.la == Layout::RowMajor ? "r" : "c") + (p.key.lb == Layout::RowMajor ? "r" : "c");
  out.autotune_pending = p.autotune_pending;
  return out;
}

}  // namespace

// ---- what rules.h and tuning_controls.h declare --------------------------------------------------

Reason kernel_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                        const std::string& variant, PrecisionRequest precision) {
  // C is only read by the out-of-place ops, so it adds no rule of its own.
  (void)C;
  Reason unknown;
  const std::optional<Request> request = parse_request(variant, precision, &unknown);
  return request ? request_violation(A, B, nullptr, *request) : unknown;
}

Precision effective_precision(const std::string& variant, PrecisionRequest precision) {
  const auto parsed = parse_variant(variant);
  // An unknown name is the rules' error; until then it computes as the auto variant would.
  return precision_of(parsed.value_or(AutoSelect{}), precision);
}

std::vector<std::string> available_variants() { return variant_names(); }

PlanSummary plan_summary(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                         const std::string& variant, const std::string& precision) {
  PlanSummary out;
  const PrecisionRequest request = parse_precision(precision);
  // Variant "auto" is the lenient op's plan: a 3xTF32 request it cannot serve runs IEEE.
  const bool lenient = variant == "auto";
  if (auto r = fallback_reason(A, B, C, variant, lenient ? "ieee" : precision)) {
    out.family = "fallback";
    out.fallback_reason = *r;
    out.description = "fallback: " + *r;
    return out;
  }
  Reason why_ieee;
  // For a named variant the rules above read the switch; a thread setting it meanwhile
  // changes only what this summary says, never what a call runs.
  const Precision served = lenient ? lenient_precision(A, request, &why_ieee) : effective_precision(variant, request);
  return summary_of(plan_of(A, B, *parse_variant(variant), served), lenient, served, why_ieee);
}

DeviceFacts current_device_facts() { return query_device_facts(c10::cuda::current_device()); }

int add_recorded_device(const DeviceFacts& facts) { return record_device(facts); }

std::string profile_name(int device) { return profile_of(device).name; }

PlanSummary recorded_plan_summary(int device, int64_t batch, int64_t m, int64_t n, int64_t k, const std::string& orders,
                                  bool a_vec4, bool b_vec4, const std::string& precision) {
  TORCH_CHECK(recorded_device(device) != nullptr, "vecgemm: device ", std::to_string(device),
              " is not a recorded device (add_recorded_device gives one)");
  TORCH_CHECK(orders.size() == 2 && (orders[0] == 'r' || orders[0] == 'c') && (orders[1] == 'r' || orders[1] == 'c'),
              "vecgemm: orders must be one of rr, rc, cr, cc, not '", orders, "'");
  TORCH_CHECK(std::min({batch, m, n, k}) >= 1 && std::max({batch, m, n, k}) <= kMaxDimension,
              "vecgemm: a recorded plan's batch, M, N and K must be between 1 and 2^31 - 257");
  const Layout la = orders[0] == 'r' ? Layout::RowMajor : Layout::ColMajor;
  const Layout lb = orders[1] == 'r' ? Layout::RowMajor : Layout::ColMajor;
  // Dense operands, each row starting where the alignment flags say; a fresh output.
  const Problem problem{GemmShape{batch, m, n, k, batch > 1},
                        MatrixStorage{la, la == Layout::RowMajor ? k : m},
                        MatrixStorage{lb, lb == Layout::RowMajor ? n : k},
                        a_vec4, b_vec4, false, false, n % 4 == 0, device};
  Reason why_ieee;
  Precision served = effective_precision("auto", parse_precision(precision));
  if (served == Precision::Tf32x3) {
    if ((why_ieee = tf32x3_row_for(device).reason)) served = Precision::Ieee;
  }
  return summary_of(plan(problem, AutoSelect{}, served), true, served, why_ieee);
}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant,
                            const std::string& precision) {
  return plan_summary(A, B, std::nullopt, variant, precision).description;
}

// The tuning cache holds the IEEE kernels' choices only; 3xTF32 is planned by rule.
std::string tuning_key(const at::Tensor& A, const at::Tensor& B) {
  const Reason reason = fallback_reason(A, B, std::nullopt, "auto", "ieee");
  TORCH_CHECK(!reason, "vecgemm: A @ B falls back (", reason.value_or(""), "), so it has no tuning key");
  return plan_of(A, B, AutoSelect{}, Precision::Ieee).key.str();
}

int resident_blocks(const std::string& config) {
  const auto row = kernel_config_of(config);
  TORCH_CHECK(row.has_value(), "vecgemm: unknown kernel config '", config, "'");
  const int device = c10::cuda::current_device();
  return sm_count(device) * blocks_per_sm(*row, Layout::ColMajor, Layout::RowMajor, true, device);
}

TORCH_LIBRARY_IMPL(vecgemm, CUDA, m) {
  m.impl("sgemm", &sgemm_cuda);
  m.impl("sgemm_", &sgemm_inplace_cuda);
  m.impl("gemm", &gemm_cuda);
}

}  // namespace vecgemm
