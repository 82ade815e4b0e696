// Shared by the experiment harnesses (not part of the build): the rows of tile_configs.h as
// the extension builds them (sgemm_tiled_instances.cuh), looked up by name at compile time.
#pragma once
#include "tile_configs.h"
#include "tile_shape.h"

namespace harness {

// The row of tile_configs.h with this name, at compile time (-1: none).
constexpr int row(const char* name) {
  for (int i = 0; i < vecgemm::kNumTileConfigs; ++i) {
    const char *a = vecgemm::kTileConfigs[i].name, *b = name;
    while (*a && *a == *b) ++a, ++b;
    if (*a == *b) return i;
  }
  return -1;
}

template <int I>
using ShapeOf = vecgemm::TileShape<vecgemm::kTileConfigs[I].bm, vecgemm::kTileConfigs[I].bn, vecgemm::kTileConfigs[I].bk,
                                   vecgemm::kTileConfigs[I].wm, vecgemm::kTileConfigs[I].wn, vecgemm::kTileConfigs[I].tm,
                                   vecgemm::kTileConfigs[I].tn, vecgemm::kTileConfigs[I].min_blocks,
                                   vecgemm::kTileConfigs[I].prefetch, vecgemm::kTileConfigs[I].steer,
                                   vecgemm::kTileConfigs[I].pin_loads>;

}  // namespace harness
