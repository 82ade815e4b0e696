// The CUDA implementations of the vecgemm ops. Every call goes the same way: the rules
// (rules.h, planner/kernel_rules.h), then a plan (plan.h: pure), then its execution
// (execute.h) on the current stream under a device guard.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "device_facts.h"
#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "plan_summary.h"
#include "planner/device_profile.h"
#include "planner/kernel_rules.h"
#include "planner/plan.h"
#include "planner/tf32x3_rows.h"
#include "reference.h"
#include "rules.h"
#include "runtime/execute.h"
#include "runtime/lenient.h"
#include "tuning_controls.h"

namespace vecgemm {
namespace {

// D = alpha * A @ B + beta * C as requested (the rules checked by the caller).
void run(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
         double alpha, double beta, const Request& request) {
  const c10::cuda::CUDAGuard guard(A.device());
  const std::shared_ptr<const Plan> p = plan(problem_of(A, B, rows_aligned(D)), request.variant, request.precision);
  execute(*p, D, A, B, C, alpha, beta);
}

at::Tensor sgemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                      double beta, c10::string_view variant, c10::string_view precision) {
  const PrecisionRequest asked = parse_precision(precision);  // a misspelt one raises first
  Reason r = device_independent_violation(A, B, C);
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

// The plan of A @ B as the out-of-place ops make it: D freshly allocated, dense.
std::shared_ptr<const Plan> plan_of(const at::Tensor& A, const at::Tensor& B, const Variant& variant,
                                    Precision precision, std::optional<bool> d_rows_aligned = std::nullopt) {
  const c10::cuda::CUDAGuard guard(A.device());
  return plan(problem_of(A, B, d_rows_aligned.value_or(shape_of(A, B).n % 4 == 0)), variant, precision);
}

}  // namespace

bool rows_aligned(const at::Tensor& D) {
  return lines_aligned16(D.data_ptr(), D.stride(-2), D.dim() == 2 ? 0 : D.stride(0));
}

std::shared_ptr<const Plan> lenient_plan(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                         PrecisionRequest request, std::optional<bool> d_rows_aligned, bool* refused) {
  const bool violation = auto_ieee_violation(A, B, C).has_value();
  if (refused != nullptr) *refused = violation;
  if (violation) return nullptr;
  std::shared_ptr<const Plan> p = plan_of(A, B, AutoSelect{}, lenient_precision(A.get_device(), request), d_rows_aligned);
  if (hands_to_torch(*p)) return nullptr;
  return p;
}

namespace {

// The lenient op behind torch_vecgemm.sgemm/mm/bmm: the kernel when the rules allow,
// otherwise exactly what torch.addmm / torch.baddbmm compute. A product the rules refuse
// goes through the dispatcher, for torch's semantics and errors; one they take and torch
// serves faster, to torch's CUDA kernel directly, whose shorter dispatch is the hand-off's
// whole host cost.
at::Tensor gemm_cuda(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                     double beta, c10::string_view precision) {
  bool refused = false;
  const std::shared_ptr<const Plan> p = lenient_plan(A, B, C, parse_precision(precision), std::nullopt, &refused);
  if (refused) return gemm_reference(A, B, C, alpha, beta);
  const c10::cuda::CUDAGuard guard(A.device());
  if (!p) return torch_product(A, B, C, alpha, beta);
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
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
    // The reason that hands it: a declined 3xTF32, else the hand-off rule's prediction.
    out.description = "torch fp32 (" + p.tf32x3_declined.value_or(p.torch_faster.value_or("")) + ")";
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
      out.kernel = out.family;
      break;
    case Family::Gemv:
      out.kernel = out.family;
      out.split_k = p.gemv_splits;
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
      out.transposed = p.transposed;
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
  const Precision served =
      lenient ? lenient_precision(A.get_device(), request, &why_ieee) : effective_precision(variant, request);
  return summary_of(*plan_of(A, B, *parse_variant(variant), served), lenient, served, why_ieee);
}

DeviceFacts current_device_facts() { return query_device_facts(c10::cuda::current_device()); }

int add_recorded_device(const DeviceFacts& facts) { return record_device(facts); }

std::string profile_name(int device) { return profile_of(device).name; }

PlanSummary recorded_plan_summary(int device, int64_t batch, int64_t m, int64_t n, int64_t k, const std::string& orders,
                                  bool a_vec4, bool b_vec4, const std::string& precision, const std::string& variant) {
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
  if (variant != "auto") {
    Reason unknown;
    const std::optional<Request> request = parse_request(variant, parse_precision(precision), &unknown);
    TORCH_CHECK(request.has_value(), "vecgemm: ", unknown.value_or(""));
    if (const auto* row = std::get_if<FixedTf32x3>(&request->variant)) {
      Reason r = tf32x3_violation(row->row, device);
      if (!r && kTf32x3Rows[row->row].refuses != nullptr) r = kTf32x3Rows[row->row].refuses(key_as_given(problem));
      TORCH_CHECK(!r, "vecgemm: ", variant, ": ", r.value_or(""));
    }
    if (const auto* fixed = std::get_if<FixedConfig>(&request->variant))
      TORCH_CHECK(tiled_kernel(fixed->config, la, lb, a_vec4 && b_vec4).launch != nullptr, "vecgemm: ", variant,
                  " has no kernel for these orders and alignment");
    return summary_of(*plan(problem, request->variant, request->precision), false, request->precision, std::nullopt);
  }
  Reason why_ieee;
  const Precision served = lenient_precision(device, parse_precision(precision), &why_ieee);
  return summary_of(*plan(problem, AutoSelect{}, served), true, served, why_ieee);
}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant,
                            const std::string& precision) {
  return plan_summary(A, B, std::nullopt, variant, precision).description;
}

// The tuning cache holds the IEEE kernels' choices only; 3xTF32 is planned by rule.
std::string tuning_key(const at::Tensor& A, const at::Tensor& B) {
  const Reason reason = auto_ieee_violation(A, B, std::nullopt);
  TORCH_CHECK(!reason, "vecgemm: A @ B falls back (", reason.value_or(""), "), so it has no tuning key");
  return plan_of(A, B, AutoSelect{}, Precision::Ieee)->key.str();
}

void set_narrow_block_rows(int rows) { set_tf32x3_skinny_block_rows(rows); }  // refuses other heights

void set_tf32x3_splits(int splits) { set_tf32x3_forced_splits(splits); }

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
