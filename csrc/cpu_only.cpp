// Built instead of csrc/planner/, runtime/ and kernels/ when torch or the toolkit has no
// CUDA: no kernels, so every CUDA-side rule answers "fall back", and tuning has nothing to
// tune.
#include <c10/util/Exception.h>

#include "aten_override.h"
#include "device_facts.h"
#include "plan_summary.h"
#include "rules.h"
#include "tuning_controls.h"

namespace vecgemm {

Reason kernel_violation(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, const std::string&,
                        PrecisionRequest) {
  return "torch_vecgemm was built without CUDA kernels";
}

Precision effective_precision(const std::string&, PrecisionRequest precision) { return resolve(precision); }

std::vector<std::string> available_variants() { return {"auto"}; }

void set_autotune(bool) {}
bool autotune_enabled() { return false; }
std::vector<TuningEntry> tuning_entries() { return {}; }
void add_tuning_entry(const std::string&, const std::string&, int, bool, bool) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: nothing to tune");
}
std::string tuning_key(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: nothing to tune");
}
void clear_tuning_cache() {}
std::vector<RankedChoice> model_ranking(const std::string&, std::optional<int>) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no cost model");
}
void set_dependent_launch(bool) {}
void set_torch_handoff(bool) {}
void set_narrow_block_rows(int rows) {
  TORCH_CHECK(rows == 0 || rows == 8 || rows == 16 || rows == 32, "vecgemm: block rows must be 0, 8, 16 or 32, not ",
              rows);
}
bool torch_handoff_enabled() { return false; }
void set_tf32x3_splits(int) {}
void register_aten_kernels(bool) {}  // no kernels: every product stays torch's

PlanSummary plan_summary(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                         const std::string& variant, const std::string& precision) {
  PlanSummary out;
  out.family = "fallback";
  out.fallback_reason = *fallback_reason(A, B, C, variant, precision);
  out.description = "fallback: " + *out.fallback_reason;
  return out;
}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant,
                            const std::string& precision) {
  return plan_summary(A, B, std::nullopt, variant, precision).description;
}

std::vector<int> built_architectures() { return {}; }

DeviceFacts current_device_facts() {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no device facts");
}
int add_recorded_device(const DeviceFacts&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no planner to plan for a recorded device");
}
void add_device_profile(const ProfileData&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no planner to price with a device profile");
}
std::string profile_name(int) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no device profiles");
}
PlanSummary recorded_plan_summary(int, int64_t, int64_t, int64_t, int64_t, const std::string&, bool, bool,
                                  const std::string&, const std::string&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no planner");
}

int resident_blocks(const std::string&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: no kernel has resident blocks");
}

}  // namespace vecgemm
