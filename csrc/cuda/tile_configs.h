// The tilings the tiled kernels are built for, one row each, as data. Every row is compiled
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
  // Register banks steered for the FFMAs (TileShape::kSteerBanks; register-staged only).
  bool steer;
  // 0: the register-staged kernel (sgemm_tiled.cuh); >= 2: the cp.async kernel
  // (sgemm_async.cuh) with that many shared-memory stages (16-byte aligned operands only).
  int stages;
  // Also build the scalar-load instance, for operands that are not 16-byte aligned.
  bool scalar;
  // Throughput relative to the best tiling for the same storage orders when the grid fills
  // the GPU, in percent, for A and B stored rr, rc, cr, cc (r: row-major): the H200 at
  // M = N = K = 4096, unsplit (docs/performance.md, step 10). The cost model uses it.
  int eff_percent[4];
};

inline constexpr TileConfigRow kTileConfigs[] = {
    // name                 bm   bn  bk  wm  wn tm  tn minb pref steer st scalar eff: rr   rc   cr   cc
    {"tiled_128x128x8",     128, 128, 8, 32, 64, 8, 8, 2, true, false, 0, true, {96, 94, 92, 91}},
    {"tiled_128x128x16",    128, 128, 16, 32, 64, 8, 8, 1, true, false, 0, true, {92, 97, 75, 76}},
    {"tiled_128x128x8_t816", 128, 128, 8, 64, 64, 8, 16, 2, true, false, 0, false, {97, 100, 88, 87}},
    {"tiled_256x128x8",     256, 128, 8, 64, 64, 8, 16, 1, true, false, 0, false, {91, 94, 90, 93}},
    {"tiled_128x64x8",      128, 64, 8, 32, 64, 8, 8, 4, false, false, 0, false, {95, 93, 96, 98}},
    {"tiled_128x64x8b",     128, 64, 8, 32, 64, 8, 8, 4, false, true, 0, false, {94, 92, 95, 97}},
    {"tiled_64x128x8",      64, 128, 8, 32, 64, 8, 8, 4, false, false, 0, false, {100, 84, 98, 89}},
    {"tiled_64x128x8b",     64, 128, 8, 32, 64, 8, 8, 4, false, true, 0, false, {99, 83, 97, 88}},
    {"tiled_64x64x8",       64, 64, 8, 32, 32, 8, 4, 4, true, false, 0, true, {85, 82, 86, 87}},
    {"tiled_32x128x16",     32, 128, 16, 32, 32, 8, 4, 4, true, false, 0, false, {86, 81, 85, 81}},
    {"async_128x64x16_s3",  128, 64, 16, 32, 64, 8, 8, 4, false, false, 3, false, {84, 80, 99, 93}},
    {"async_128x128x8_s4",  128, 128, 8, 64, 64, 8, 16, 2, true, false, 4, false, {98, 87, 100, 97}},
    {"async_256x128x8_s3",  256, 128, 8, 64, 64, 8, 16, 1, true, false, 3, false, {95, 94, 97, 100}},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

}  // namespace vecgemm
