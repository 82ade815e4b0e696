#include "kernel_configs.h"

#include <utility>

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
  // Names of releases before the names were derived from the rows.
  static const std::pair<const char*, const char*> kFormerNames[] = {
      {"tiled_256x128x8", "tiled_256x128x8_t816"},   {"tiled_64x64x8", "tiled_64x64x8_t84"},
      {"tiled_32x128x16", "tiled_32x128x16_t84"},    {"async_128x128x8_s4", "async_128x128x8_t816_s4"},
      {"async_256x128x8_s3", "async_256x128x8_t816_s3"},
  };
  std::string current = name;
  for (const auto& [former, now] : kFormerNames)
    if (name == former) current = now;
  for (int c = 0; c < kNumKernelConfigs; ++c)
    if (kernel_config_name(c) == current) return c;
  return std::nullopt;
}

}  // namespace vecgemm
