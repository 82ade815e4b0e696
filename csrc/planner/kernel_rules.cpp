// The rules of the CUDA build (rules.h, kernel_rules.h): which variant, kernel and precision
// can serve a problem on a device, and why not. The device-independent contract is
// rules.cpp's; a CPU-only build answers kernel_violation in cpu_only.cpp.
#include "planner/kernel_rules.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "plan_summary.h"
#include "planner/device_profile.h"
#include "planner/tf32x3_rows.h"
#include "tuning_controls.h"

namespace vecgemm {
namespace {

std::mutex g_mutex;

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
    // Its rows are dense (above): N and K, multiples of 4 below, keep them aligned.
    if (!lines_aligned16(t->data_ptr(), 0, t->dim() == 3 ? t->stride(0) : 0))
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

// The precision a variant computes in when `asked` is "auto": the switch's for the auto
// variant, else the named kernel's.
Precision precision_of(const Variant& variant, PrecisionRequest asked) {
  if (asked != PrecisionRequest::Auto) return resolve(asked);
  if (std::holds_alternative<AutoSelect>(variant)) return default_precision();
  return std::holds_alternative<FixedTf32x3>(variant) ? Precision::Tf32x3 : Precision::Ieee;
}

// The CUDA-side rules for a named variant; C_out: the in-place op's output (the seed's
// kernel writes it in place, so its rules apply to it too).
Reason variant_violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const Request& request) {
  const Variant& variant = request.variant;
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
  if (std::holds_alternative<SeedKernel>(variant)) return vectorized_violation(A, B, C_out);
  if (std::holds_alternative<MatrixVector>(variant)) {
    if (gemv_fits(int(s.m), int(s.n), storage_of(A)->layout, storage_of(B)->layout)) return std::nullopt;
    return std::string(
        "the gemv kernel takes M <= 4 with a column-major B (and a row-major A where M > 1), or N <= 4 with a "
        "row-major A (and a column-major B where N > 1)");
  }
  if (const auto* fixed = std::get_if<FixedTf32x3>(&variant)) {
    const Tf32x3Row& row = kTf32x3Rows[fixed->row];
    if (row.refuses)
      if (auto r = row.refuses(key_as_given(problem_of(A, B, false)))) return r;
  }
  if (const auto* fixed = std::get_if<FixedConfig>(&variant)) {
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
// runs on the GPU. Apart from variant_violation() because the lenient op answers them differently:
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

// Why a 3xTF32 row's kernel cannot run on the device, asked of the device itself.
Reason find_tf32x3_violation(int row, int device) {
  const Tf32x3Row& r = kTf32x3Rows[row];
  const int capability = compute_capability(device);
  if (capability < r.min_capability || (r.max_capability && capability > r.max_capability)) {
    std::string range = arch_name(r.min_capability) + (r.max_capability ? " to " + arch_name(r.max_capability) : " or newer");
    return std::string("precision '3xtf32' (") + r.name + ") needs a GPU of " + range + "; this one is " +
           arch_name(capability) + ". Use precision='ieee' (or leave 'auto' with the switch at 'ieee')";
  }
  const int needed = r.info(r.config).smem_bytes;
  int optin = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (optin < needed)
    return std::string("precision '3xtf32' (") + r.name + ") needs " + std::to_string(needed) +
           " bytes of shared memory a block; this GPU allows " + std::to_string(optin);
  const c10::cuda::CUDAGuard guard(device);
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, r.entry(r.config, Layout::RowMajor, Layout::RowMajor, true)) != cudaSuccess) {
    (void)cudaGetLastError();  // the query's error is the answer, not a sticky failure
    return std::string("this build has no ") + r.name + " kernel for " + arch_name(capability) +
           "; rebuild with TORCH_CUDA_ARCH_LIST naming this GPU's architecture (README, Build)";
  }
  if (r.available != nullptr && !r.available())
    return std::string("this build has no ") + r.name + " kernel for " + arch_name(capability) +
           " (it needs sm_90a code: TORCH_CUDA_ARCH_LIST with 9.0a, README, Build)";
  return std::nullopt;
}

}  // namespace

std::optional<Request> parse_request(const std::string& name, PrecisionRequest asked, Reason* unknown) {
  const auto variant = parse_variant(name);
  if (variant) return Request{name, *variant, precision_of(*variant, asked)};
  std::string names;
  for (const auto& v : variant_names()) names += (names.empty() ? "" : ", ") + v;
  *unknown = "unknown variant '" + name + "' (available: " + names + ")";
  return std::nullopt;
}

Reason request_violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const Request& request) {
  if (auto r = variant_violation(A, B, C_out, request)) return r;
  return precision_violation(A, request);
}

Reason auto_ieee_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C) {
  static const Request kAutoIeee{"auto", AutoSelect{}, Precision::Ieee};
  if (auto r = device_independent_violation(A, B, C)) return r;
  return request_violation(A, B, nullptr, kAutoIeee);
}

Precision lenient_precision(int device, PrecisionRequest asked, Reason* why) {
  const Precision precision = precision_of(AutoSelect{}, asked);  // the switch read once
  if (precision == Precision::Ieee) return Precision::Ieee;
  Reason r = tf32x3_row_for(device).reason;
  if (!r) return precision;
  if (why) *why = r;
  return Precision::Ieee;
}

Reason tf32x3_violation(int row, int device) {
  if (const RecordedDevice* r = recorded_device(device)) return r->tf32x3_violations[row];
  static std::map<std::pair<int, int>, Reason> reasons;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = reasons.find({row, device});
    if (it != reasons.end()) return it->second;
  }
  const Reason reason = find_tf32x3_violation(row, device);
  std::lock_guard<std::mutex> lock(g_mutex);
  return reasons[{row, device}] = reason;
}

Tf32x3Pick tf32x3_row_for(int device) {
  Tf32x3Pick out;
  for (int r = 0; r < kNumTf32x3Rows; ++r) {
    Reason why = tf32x3_violation(r, device);
    if (!why) return Tf32x3Pick{r, std::nullopt};
    // The rows needing least (lowest capability, least shared memory) say the most useful
    // thing; they come last in preference order, so the last reason is kept.
    out.reason = why;
  }
  return out;
}

bool config_runs_at(int config, int capability) {
  return kKernelConfigs[config].mainloop.family != MainloopFamily::CpAsync || capability >= 80;
}

bool runs_on(int config, int device) { return config_runs_at(config, compute_capability(device)); }

namespace {
std::atomic<bool> g_torch_handoff{true};
}  // namespace

void set_torch_handoff(bool enabled) { g_torch_handoff = enabled; }
bool torch_handoff_enabled() { return g_torch_handoff.load(); }

// The lenient op hands a product to torch, whose product is then cuBLAS SGEMM, in two cases:
//  - the planner declined 3xTF32 (plan.cpp, tf32x3_declined): cuBLAS is as fast as the IEEE
//    kernels or faster on most such problems (small ones), and more accurate on short sums
//    (cuBLAS splits them finer; docs/performance.md). Not where the IEEE plan is gemv: its
//    128 chains an output and shuffle tree sum a matrix-vector product more accurately
//    than cuBLAS (0.25-0.82x its error on nine shapes of K 64 to 11008) and faster;
//  - the cost model predicts torch faster than the IEEE plan (Plan::torch_faster): a
//    matrix-vector product gemv does not serve, or the device profile's hand-off rule.
// With TF32 allowed in torch's matmuls its product would lose fp32's accuracy, which both
// precisions promise to keep: the kernels run. Under torch.use_deterministic_algorithms(True)
// torch's cuBLAS product raises unless CUBLAS_WORKSPACE_CONFIG is set, and the kernels are
// deterministic: they run.
bool hands_to_torch(const Plan& plan) {
  const auto& context = at::globalContext();
  const bool torch_faster = plan.torch_faster.has_value() && g_torch_handoff.load(std::memory_order_relaxed);
  const bool declined = plan.tf32x3_declined.has_value() && plan.family != Family::Gemv;
  return (declined || torch_faster) && !context.allowTF32CuBLAS() && !context.deterministicAlgorithms();
}

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

}  // namespace vecgemm
