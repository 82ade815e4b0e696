// The tilings the tiled kernels are built for, one row each, as data. Every row is compiled
// for each storage order of A and B (sgemm_tiled_instances.cuh) and becomes a variant
// selectable by its name; selection.cpp chooses among them per problem. To add a tiling,
// add a row.
#pragma once
#include "../gemm_params.h"

namespace vecgemm {

// The storage orders of A and B as one index, 0-3 for rr, rc, cr, cc (r: row-major): it
// indexes TileConfigRow::eff_percent and numbers the bits of pin_loads.
constexpr int order_index(Layout la, Layout lb) { return int(la) * 2 + int(lb); }
inline constexpr int kRR = 1 << order_index(Layout::RowMajor, Layout::RowMajor);
inline constexpr int kRC = 1 << order_index(Layout::RowMajor, Layout::ColMajor);
inline constexpr int kCR = 1 << order_index(Layout::ColMajor, Layout::RowMajor);
inline constexpr int kCC = 1 << order_index(Layout::ColMajor, Layout::ColMajor);

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
  // Storage orders whose next-tile loads are held at the start of the tile
  // (TileShape::kPinLoadsMask; register-staged only): those where it measured faster.
  int pin_loads;
  // 0: the register-staged kernel (sgemm_tiled.cuh); >= 2: the cp.async kernel
  // (sgemm_async.cuh) with that many shared-memory stages (16-byte aligned operands only).
  int stages;
  // Also build the scalar-load instance, for operands that are not 16-byte aligned.
  bool scalar;
  // Also build the stream-K tail (sgemm_stream_k.cuh; register-staged, 16-byte aligned
  // operands), for problems whose last wave of blocks is partial: where it measured faster
  // (docs/performance.md, step 20).
  bool stream_k;
  // Throughput relative to the best tiling for the same storage orders when the grid fills
  // the GPU, in percent, for A and B stored rr, rc, cr, cc (r: row-major): the H200 at
  // M = N = K = 4096, unsplit (docs/performance.md, steps 10 and 15). The cost model uses it.
  int eff_percent[4];
};

// Throughput of each storage order's best tiling relative to the fastest order's (cr), in
// percent, for rr, rc, cr, cc: the H200 at M = N = K = 4096 (docs/performance.md, step 17).
// The cost model compares orders with it when the auto variant may copy an operand into
// the other order.
inline constexpr int kOrderPercent[4] = {96, 94, 100, 95};

inline constexpr TileConfigRow kTileConfigs[] = {
    // name                   bm   bn  bk  wm  wn tm  tn minb pref   steer  pin                   st scalar sk     eff: rr rc cr cc
    {"tiled_128x128x8",      128, 128,  8, 32, 64, 8,  8, 2, true,  false, kCR,                   0, true,  false, {95, 92, 91, 90}},
    {"tiled_128x128x16",     128, 128, 16, 32, 64, 8,  8, 1, true,  false, kRR | kRC | kCR | kCC, 0, true,  false, {97, 100, 98, 98}},
    {"tiled_128x128x8_t816", 128, 128,  8, 64, 64, 8, 16, 2, true,  false, kCR | kCC,             0, false, true,  {96, 98, 100, 95}},
    {"tiled_256x128x8",      256, 128,  8, 64, 64, 8, 16, 1, true,  false, 0,                     0, false, false, {90, 92, 87, 92}},
    {"tiled_128x64x8",       128,  64,  8, 32, 64, 8,  8, 4, false, false, kRC | kCR,             0, false, false, {94, 92, 94, 97}},
    {"tiled_128x64x8b",      128,  64,  8, 32, 64, 8,  8, 4, false, true,  kCC,                   0, false, false, {100, 91, 90, 100}},
    {"tiled_64x128x8",        64, 128,  8, 32, 64, 8,  8, 4, false, false, kRC | kCC,             0, false, false, {99, 93, 96, 94}},
    {"tiled_64x128x8b",       64, 128,  8, 32, 64, 8,  8, 4, false, true,  kCC,                   0, false, false, {98, 93, 95, 98}},
    {"tiled_64x64x8",         64,  64,  8, 32, 32, 8,  4, 4, true,  false, 0,                     0, true,  false, {84, 80, 84, 85}},
    {"tiled_32x128x16",       32, 128, 16, 32, 32, 8,  4, 4, true,  false, 0,                     0, false, false, {85, 79, 83, 79}},
    {"async_128x64x16_s3",   128,  64, 16, 32, 64, 8,  8, 4, false, false, 0,                     3, false, false, {83, 78, 97, 91}},
    {"async_128x128x8_s4",   128, 128,  8, 64, 64, 8, 16, 2, true,  false, 0,                     4, false, false, {96, 86, 98, 95}},
    {"async_256x128x8_s3",   256, 128,  8, 64, 64, 8, 16, 1, true,  false, 0,                     3, false, false, {94, 91, 95, 98}},
};
inline constexpr int kNumTileConfigs = sizeof(kTileConfigs) / sizeof(kTileConfigs[0]);

}  // namespace vecgemm
