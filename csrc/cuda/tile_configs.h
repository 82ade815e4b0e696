// The tilings the general kernel is built for, one row each, as data. Every row is compiled
// for each storage order of A and B (sgemm_tiled_instances.cuh) and becomes a variant
// selectable by its name; selection.cpp chooses among them per problem. To add a tiling,
// add a row.
#pragma once

namespace vecgemm {

struct TileConfigRow {
  const char* name;
  int bm, bn, bk;  // block tile
  int wm, wn;      // warp tile
  int tm, tn;      // thread tile
  // Blocks per SM the register allocation must allow (__launch_bounds__):
  // 65536 / (threads x min_blocks) registers per thread.
  int min_blocks;
  // Fragments of the next K step loaded during the current one's FFMAs (TileShape).
  bool prefetch;
  // Also build the scalar-load instance, for operands that are not 16-byte aligned.
  bool scalar;
  // Throughput relative to the best tiling when the grid fills the GPU, in percent: the
  // H200 at M = N = K = 4096, unsplit (docs/performance.md). The cost model uses it.
  int eff_percent;
};

inline constexpr TileConfigRow kTileConfigs[] = {
    // name                        bm   bn  bk  wm  wn tm  tn minb pref  scalar eff
    {"tiled_128x128x8",            128, 128, 8, 32, 64, 8, 8, 2, true, true, 91},
    {"tiled_128x128x8_occ1",       128, 128, 8, 32, 64, 8, 8, 1, true, false, 96},
    {"tiled_128x128x16",           128, 128, 16, 32, 64, 8, 8, 1, true, true, 98},
    {"tiled_128x128x8_t816",       128, 128, 8, 64, 64, 8, 16, 2, true, false, 93},
    {"tiled_256x128x8",            256, 128, 8, 64, 64, 8, 16, 1, true, false, 100},
    {"tiled_256x128x8_noprefetch", 256, 128, 8, 64, 64, 8, 16, 1, false, false, 97},
    {"tiled_128x64x8",             128, 64, 8, 32, 64, 8, 8, 4, false, false, 95},
    {"tiled_64x64x8",              64, 64, 8, 32, 32, 8, 4, 4, true, true, 84},
    {"tiled_32x128x16",            32, 128, 16, 32, 32, 8, 4, 4, true, false, 89},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

}  // namespace vecgemm
