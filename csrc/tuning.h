// Controls of the kernel selection's autotune mode and its cache (cuda/selection.cpp;
// no-ops in a CPU-only build). Python saves and restores the cache as JSON.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>
#include <vector>

namespace vecgemm {

void set_autotune(bool enabled);
bool autotune_enabled();
// (problem key, configuration name, split-K factor), sorted by key.
std::vector<std::tuple<std::string, std::string, int>> tuning_entries();
void add_tuning_entry(const std::string& key, const std::string& config, int splits);
void clear_tuning_cache();

// Measurement knob: make every block of the tiled kernel take its bounds-checked loads.
void set_checked_loads_only(bool enabled);

// What A @ B would run on: a kernel name (with its split-K factor) or "fallback: <reason>".
std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant);

}  // namespace vecgemm
