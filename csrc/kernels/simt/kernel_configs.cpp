#include "kernels/simt/kernel_configs.h"

#include <unordered_map>

namespace vecgemm {

std::string kernel_config_name(int config) {
  const KernelConfig& c = kKernelConfigs[config];
  const Tiling& t = c.tiling;
  const bool async = c.mainloop.family == MainloopFamily::CpAsync;
  std::string name = std::string(async ? "async_" : "tiled_") + std::to_string(t.bm) + "x" + std::to_string(t.bn) +
                     "x" + std::to_string(t.bk);
  if (t.tm != 8 || t.tn != 8) name += "_t" + std::to_string(t.tm) + std::to_string(t.tn);
  if (c.mainloop.steer) name += "b";
  if (async) name += "_s" + std::to_string(c.mainloop.stages);
  return name;
}

std::optional<int> kernel_config_of(const std::string& name) {
  // Every name, built once: a strict op looks its variant up on every call.
  static const std::unordered_map<std::string, int> configs = [] {
    std::unordered_map<std::string, int> out;
    for (int c = 0; c < kNumKernelConfigs; ++c) out.emplace(kernel_config_name(c), c);
    return out;
  }();
  const auto it = configs.find(name);
  if (it == configs.end()) return std::nullopt;
  return it->second;
}

}  // namespace vecgemm
