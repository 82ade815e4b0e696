#include "planner/tuning_cache.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "env_flags.h"
#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "planner/device_profile.h"  // recorded_device
#include "tuning_controls.h"

namespace vecgemm {
namespace {

std::mutex g_mutex;
std::atomic<bool> g_autotune{env_flag("VECGEMM_AUTOTUNE", false)};
std::unordered_map<std::string, TunedChoice> g_tuned;    // autotuned, loaded or added choices
std::atomic<uint64_t> g_generation{0};                  // changes to g_tuned

}  // namespace

std::optional<TunedChoice> tuned_choice(const ProblemKey& key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_tuned.find(key.str());
  if (it == g_tuned.end()) return std::nullopt;
  // A config with no kernel for this problem's storage orders and alignment (an entry added
  // for another build, say) is passed over: the model chooses.
  if (tiled_kernel(it->second.tiling.config, key.la, key.lb, key.vec4).launch == nullptr) return std::nullopt;
  return it->second;
}

void record_tuned_choice(const ProblemKey& key, TunedChoice choice) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tuned[key.str()] = choice;
  ++g_generation;
}

uint64_t tuning_generation() { return g_generation.load(); }

void set_autotune(bool enabled) { g_autotune = enabled; }
bool autotune_enabled() { return g_autotune.load(); }

std::vector<TuningEntry> tuning_entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<TuningEntry> out;
  for (const auto& [key, choice] : g_tuned)
    out.emplace_back(key, kernel_config_name(choice.tiling.config), choice.tiling.splits, choice.tiling.stream_k,
                     choice.torch_faster);
  std::sort(out.begin(), out.end());
  return out;
}

void add_tuning_entry(const std::string& key, const std::string& config, int splits, bool stream_k,
                      bool torch_faster) {
  const auto problem = ProblemKey::parse(key);
  TORCH_CHECK(problem.has_value(), "vecgemm: '", key, "' is not a tuning key (b<batch>_m<M>_n<N>_k<K>_<orders>_v<1|4>_d<1|4>, ",
              "as torch_vecgemm._C.tuning_key(A, B) gives)");
  const auto row = kernel_config_of(config);
  TORCH_CHECK(row.has_value(), "vecgemm: unknown kernel config '", config, "'");
  TORCH_CHECK(tiled_kernel(*row, problem->la, problem->lb, problem->vec4).launch != nullptr, "vecgemm: ", config,
              " has no kernel for ", key, " (", problem->vec4 ? "16-byte aligned" : "unaligned", " operands)");
  // Numbers go into the message as text: streaming an int from this library crashed on the
  // H200 machine (an ostream instantiation in the extension met another libstdc++ at run time).
  TORCH_CHECK(splits >= 1 && splits <= kMaxSplits, "vecgemm: split count must be between 1 and ",
              std::to_string(kMaxSplits), ", got ", std::to_string(splits));
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tuned[key] = TunedChoice{TilingChoice{*row, splits, stream_k}, torch_faster};
  ++g_generation;
}

void clear_tuning_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tuned.clear();
  ++g_generation;
}

std::vector<RankedChoice> model_ranking(const std::string& key, std::optional<int> device) {
  auto problem = ProblemKey::parse(key);
  TORCH_CHECK(problem.has_value(), "vecgemm: '", key, "' is not a tuning key (b<batch>_m<M>_n<N>_k<K>_<orders>_v<1|4>_d<1|4>, ",
              "as torch_vecgemm._C.tuning_key(A, B) gives)");
  TORCH_CHECK(!device || recorded_device(*device) != nullptr, "vecgemm: device ", std::to_string(device.value_or(-1)),
              " is not a recorded device (add_recorded_device gives one; leave it out for the current CUDA device)");
  problem->device = device ? *device : c10::cuda::current_device();
  std::vector<RankedChoice> out;
  for (const auto& [ns, choice] : ranked_choices(*problem))
    out.emplace_back(ns, kernel_config_name(choice.config), choice.splits, choice.stream_k);
  return out;
}

}  // namespace vecgemm
