// Built instead of csrc/cuda/ when torch or the toolkit has no CUDA: no kernels, so every
// CUDA-side rule answers "fall back", and tuning has nothing to tune.
#include <c10/util/Exception.h>

#include "problem.h"
#include "tuning.h"

namespace vecgemm {

Reason kernel_violation(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                        const std::string&) {
  return "torch_vecgemm was built without CUDA kernels";
}

std::vector<std::string> available_variants() { return {"auto"}; }

void set_autotune(bool) {}
bool autotune_enabled() { return false; }
std::vector<TuningEntry> tuning_entries() { return {}; }
void add_tuning_entry(const std::string&, const std::string&, int, bool) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: nothing to tune");
}
std::string tuning_key(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "torch_vecgemm was built without CUDA kernels: nothing to tune");
}
void clear_tuning_cache() {}
void set_checked_loads_only(bool) {}
void set_dependent_launch(bool) {}

std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant) {
  return "fallback: " + *fallback_reason(A, B, std::nullopt, variant);
}

}  // namespace vecgemm
