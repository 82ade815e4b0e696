// The kernels of the tiled families, as data: one row each, what it computes (the tiling)
// apart from how its main loop runs (the family and its policies). Every row is compiled
// for each storage order of A and B (sgemm_tiled_instances.cuh) and becomes a variant
// selectable by a name derived from the row (kernel_config_name, plan.cpp); the planner
// chooses among them per problem. To add a tiling, add a row. What a GPU measured of each
// row is not here: it is that GPU's device profile (torch_vecgemm/profiles/).
#pragma once
#include <optional>
#include <string>

#include "kernels/gemm_params.h"

namespace vecgemm {

// The storage orders of A and B as one index, 0-3 for rr, rc, cr, cc (r: row-major): it
// numbers the bits of MainloopConfig::pin_loads and the device profile's per-order figures.
constexpr int order_index(Layout la, Layout lb) { return int(la) * 2 + int(lb); }
inline constexpr int kRR = 1 << order_index(Layout::RowMajor, Layout::RowMajor);
inline constexpr int kRC = 1 << order_index(Layout::RowMajor, Layout::ColMajor);
inline constexpr int kCR = 1 << order_index(Layout::ColMajor, Layout::RowMajor);
inline constexpr int kCC = 1 << order_index(Layout::ColMajor, Layout::ColMajor);
inline constexpr int kNumOrders = 4;

// What a kernel computes: a block tile of BM x BN over K steps of BK, warp tiles of
// WM x WN, thread tiles of TM x TN (tile_shape.h).
struct Tiling {
  int bm, bn, bk;
  int wm, wn;
  int tm, tn;
};

enum class MainloopFamily {
  RegisterStaged,  // sgemm_tiled.cuh: the next tile's loads staged in registers
  CpAsync,         // sgemm_async.cuh: a cp.async pipeline (sm_80 and newer)
};

// How its main loop runs (MainloopPolicy, tile_shape.h).
struct MainloopConfig {
  MainloopFamily family;
  int stages;      // shared-memory stages of the cp.async pipeline (2 for register staging)
  int min_blocks;  // blocks per SM the register allocation must allow (__launch_bounds__)
  bool prefetch;   // fragments of the next K step loaded during the current one's FFMAs
  bool steer;      // register banks steered for the FFMAs (register-staged only)
  int pin_loads;   // storage orders whose next-tile loads are held at the tile's start
};

struct KernelConfig {
  Tiling tiling;
  MainloopConfig mainloop;
  // Also build the scalar-load instance, for operands that are not 16-byte aligned.
  bool scalar;
  // Also build the stream-K tail (sgemm_stream_k.cuh; register-staged, 16-byte aligned
  // operands), for problems whose last wave of blocks is partial.
  bool stream_k;
};

inline constexpr MainloopFamily kStaged = MainloopFamily::RegisterStaged;
inline constexpr MainloopFamily kAsync = MainloopFamily::CpAsync;

// pin_loads per row and the register-bank steering are where they measured faster on the
// H200 (docs/performance.md); the stream-K tail is built for t816, where it paid. The small
// cp.async rows, with three tiles in flight, are for small and deep-K problems, whose time is
// the latency of their loads rather than throughput (cost_model.cpp, latency_ns); 32 x 32
// (two warps) for outputs of a few tiles, which then need fewer K splits to fill the GPU.
inline constexpr KernelConfig kKernelConfigs[] = {
    //  bm   bn  bk  wm  wn tm  tn   family  st minb pref   steer  pin                    scalar stream_k
    {{128, 128,  8, 32, 64, 8,  8}, {kStaged, 2, 2, true,  false, kCR},                   true,  false},
    {{128, 128, 16, 32, 64, 8,  8}, {kStaged, 2, 1, true,  false, kRR | kRC | kCR | kCC}, true,  false},
    {{128, 128,  8, 64, 64, 8, 16}, {kStaged, 2, 2, true,  false, kCR | kCC},             false, true},
    {{256, 128,  8, 64, 64, 8, 16}, {kStaged, 2, 1, true,  false, 0},                     false, false},
    {{128,  64,  8, 32, 64, 8,  8}, {kStaged, 2, 4, false, false, kRC | kCR},             false, false},
    {{128,  64,  8, 32, 64, 8,  8}, {kStaged, 2, 4, false, true,  kCC},                   false, false},
    {{ 64, 128,  8, 32, 64, 8,  8}, {kStaged, 2, 4, false, false, kRC | kCC},             false, false},
    {{ 64, 128,  8, 32, 64, 8,  8}, {kStaged, 2, 4, false, true,  kCC},                   false, false},
    {{ 64,  64,  8, 32, 32, 8,  4}, {kStaged, 2, 4, true,  false, 0},                     true,  false},
    {{ 32, 128, 16, 32, 32, 8,  4}, {kStaged, 2, 4, true,  false, 0},                     false, false},
    {{128,  64, 16, 32, 64, 8,  8}, {kAsync,  3, 4, false, false, 0},                     false, false},
    {{ 64,  64,  8, 32, 32, 8,  4}, {kAsync,  4, 4, true,  false, 0},                     true,  false},
    {{128, 128,  8, 64, 64, 8, 16}, {kAsync,  4, 2, true,  false, 0},                     false, false},
    {{256, 128,  8, 64, 64, 8, 16}, {kAsync,  3, 1, true,  false, 0},                     false, false},
    {{ 32,  32, 16, 32, 16, 4,  4}, {kAsync,  4, 8, true,  false, 0},                     true,  false},
};
inline constexpr int kNumKernelConfigs = sizeof(kKernelConfigs) / sizeof(kKernelConfigs[0]);

// The rules a row must keep; a row that breaks one does not compile.
constexpr bool valid(const KernelConfig& c) {
  const MainloopConfig& m = c.mainloop;
  if (m.family == kAsync)  // copies land in place (no swapped pairs), no staging registers
    return m.stages >= 2 && !m.steer && m.pin_loads == 0 && !c.stream_k;
  return m.stages == 2 && (!c.stream_k || !m.steer);  // the tail stores the accumulators themselves
}
constexpr bool all_valid() {
  for (const KernelConfig& c : kKernelConfigs)
    if (!valid(c)) return false;
  return true;
}
static_assert(all_valid(), "a row of kKernelConfigs breaks a rule of its family");

// The variant name of a row, derived from it: "tiled_" (register-staged) or "async_"
// (cp.async), the block tile BMxBNxBK, "_tTMTN" unless the thread tile is 8x8, "b" where the
// register banks are steered, "_sS" for S cp.async stages. E.g. tiled_128x128x8_t816,
// tiled_128x64x8b, async_128x64x16_s3 (kernel_configs.cpp).
std::string kernel_config_name(int config);
// The row of a variant name, or of a name an earlier release used for it.
std::optional<int> kernel_config_of(const std::string& name);

}  // namespace vecgemm
