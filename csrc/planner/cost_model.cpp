#include "planner/cost_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include <c10/util/Exception.h>

#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "planner/device_profile.h"
#include "planner/kernel_rules.h"  // runs_on
#include "planner/tf32x3_rows.h"

namespace vecgemm {
namespace {

// Split-K factors tried, and the least K a slice may have (shorter slices are all prologue).
constexpr int kSplitCandidates[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, kMaxSplits};
constexpr int kMinSlice = 64;

const Tiling& tiling_of(int config) { return kKernelConfigs[config].tiling; }

TiledKernel kernel_for(const ProblemKey& key, int config) { return tiled_kernel(config, key.la, key.lb, key.vec4); }

// Whether every block of the (last) K slice runs the register-staged kernels' bounds-checked
// main loop because the slice ends inside a K tile (the cp.async ones check only the tile
// holding the remainder: sgemm_async.cuh).
bool ragged_k_checked(const ProblemKey& key, int config, int64_t real_splits, int slice) {
  const int64_t last_slice = key.k - (real_splits - 1) * int64_t(slice);
  return last_slice % tiling_of(config).bk != 0 &&
         kKernelConfigs[config].mainloop.family == MainloopFamily::RegisterStaged;
}

// The blocks on the last row or column of tiles where that is partial (edge tiles), which
// the register-staged kernels run on their bounds-checked main loop; none where every block
// runs it already (ragged_k_checked), or for the cp.async kernels, whose edge loops cost
// what their interior loops do (docs/history.md, step 39).
int64_t checked_edge_blocks(const ProblemKey& key, int config, int64_t real_splits, int slice) {
  if (kKernelConfigs[config].mainloop.family != MainloopFamily::RegisterStaged) return 0;
  if (real_splits == 1 && ragged_k_checked(key, config, real_splits, slice)) return 0;
  const Tiling& t = tiling_of(config);
  const int64_t tiles_m = ceil_div(key.m, t.bm), tiles_n = ceil_div(key.n, t.bn);
  const int64_t inner = (tiles_m - (key.m % t.bm != 0)) * (tiles_n - (key.n % t.bn != 0));
  return (tiles_m * tiles_n - inner) * key.batch * real_splits;
}

// The busiest SM's share of the tiles (edge tiles computed whole) in waves of as many blocks
// as fit on it, in one-block times: full waves, then a partial one of r blocks. A partial
// wave of r blocks of occ keeps the SM at 0.55 + 0.45 r / occ of its full-wave throughput
// where the r blocks keep two warps or more on each of its four schedulers; with one warp a
// scheduler nothing hides its latencies (the profile's one_warp_throughput). Each edge block
// on the checked loop the SM holds costs it checked_loop block times: the SMs holding one
// set a single wave's end (docs/history.md, step 40: ~1.25x the others at 739x5424x926).
double block_times(const ProblemKey& key, int config, int64_t real_splits, int slice) {
  const Tiling& t = tiling_of(config);
  const int64_t blocks = ceil_div(key.m, t.bm) * ceil_div(key.n, t.bn) * key.batch * real_splits;
  const TiledKernel kernel = kernel_for(key, config);
  const DeviceProfile& profile = profile_of(key.device);
  const int occ = blocks_per_sm(config, key.la, key.lb, key.vec4, key.device);
  const int64_t per_sm = ceil_div(blocks, sm_count(key.device));
  const int64_t full_waves = per_sm / occ, rest = per_sm % occ;
  const double throughput = rest * kernel.threads >= 8 * 32 ? 0.55 + 0.45 * double(rest) / occ
                                                            : profile.one_warp_throughput;
  const int64_t edge_per_sm =
      std::min(per_sm, ceil_div(checked_edge_blocks(key, config, real_splits, slice), sm_count(key.device)));
  return double(full_waves * occ) + (rest > 0 ? rest / throughput : 0.0) +
         double(edge_per_sm) * (profile.checked_loop - 1.0);
}

// block_times under the stream-K schedule: the whole waves, then the tail's work spread over
// every slot at the profile's stream_k_cost, its fixed cost (two launches more), and the
// fix-up's traffic: every block boundary splits a tile, so about tail + slots pieces, each a
// partial tile written and read back, and the tail's tiles of D written. The tail gets the
// edge tiles (sgemm_stream_k.cuh): where a register-staged kernel runs them on its checked
// loop, the blocks holding their pieces take checked_loop times as long as the others for
// the same K steps, and set the tail's end. stream_k_cost was fitted on tails after whole
// waves, 3001 x 2999 x 1531's edge tiles among them (docs/history.md, step 21); a partial
// wave alone is priced for them here (1075 x 2976 x 5376 cr, 32 edge tiles of 216: 0.74x
// torch.matmul on an H100 where the model said 0.9x; step 64).
double stream_k_block_times(const ProblemKey& key, int config, const StreamK& sk) {
  const Tiling& t = tiling_of(config);
  const DeviceProfile& profile = profile_of(key.device);
  const double occ = double(sk.blocks) / sm_count(key.device);
  const double fixup_ns = 4.0 * t.bm * t.bn * double(2 * (sk.tiles + sk.blocks) + sk.tiles) / profile.bytes_per_ns;
  const double block_ns = double(t.bm) * t.bn * key.k / profile.macs_per_ns_per_sm;
  const double fixed_ns = 4 * profile.launch_ns;
  const bool checked_edges = sk.first_tile == 0 &&
                             kKernelConfigs[config].mainloop.family == MainloopFamily::RegisterStaged &&
                             (key.m % t.bm != 0 || key.n % t.bn != 0);
  return double(sk.first_tile) / sk.blocks * occ +
         double(sk.tiles) / sk.blocks * occ * profile.stream_k_cost * (checked_edges ? profile.checked_loop : 1.0) +
         (fixup_ns + fixed_ns) / block_ns;
}

// K tiles whose loads are in flight while one is multiplied.
int tiles_in_flight(int config) {
  const MainloopConfig& m = kKernelConfigs[config].mainloop;
  return m.family == MainloopFamily::CpAsync ? m.stages - 1 : 1;
}

// The latency floor of the waves: each block's K steps run one after another, each waiting
// for its tile's loads unless the pipeline keeps the next ones in flight (stages - 1 tiles
// for cp.async, one for register staging), and an SM runs its blocks in rounds of occ.
// Small and deep-K problems, with few blocks a SM, are bound by this, not by throughput.
// Under a stream-K schedule the whole waves' blocks run every K step of a tile, one round a
// wave, and then each tail block its share of the tail's steps.
double latency_ns(const ProblemKey& key, int config, int64_t real_splits, int slice, const StreamK* sk) {
  const Tiling& t = tiling_of(config);
  double steps;
  if (sk != nullptr) {
    steps = double(sk->first_tile / sk->blocks) * sk->iters + double(ceil_div(int64_t(sk->tiles) * sk->iters, sk->blocks));
  } else {
    const int64_t blocks = ceil_div(key.m, t.bm) * ceil_div(key.n, t.bn) * key.batch * real_splits;
    const int64_t rounds =
        ceil_div(ceil_div(blocks, sm_count(key.device)), blocks_per_sm(config, key.la, key.lb, key.vec4, key.device));
    steps = double(rounds) * double(ceil_div(slice, t.bk));
  }
  return steps * profile_of(key.device).k_step_latency_ns / tiles_in_flight(config);
}

// Estimated nanoseconds: the waves of blocks (block_times, or stream_k_block_times under a
// stream-K schedule), never faster than moving every operand once; split-K adds the
// workspace round trip (partials written by the GEMM, read back by the reduction) and a
// second launch, dependent on the first (priced as such also where a user turned that off).
// The 4-byte-load instances take their 16-byte ones' figures here: the small problems'
// figures were fitted on the random sweep with them among the problems (step 34), and
// charging them again sent those to deeper splits that measured slower (step 44).
double model_ns(const ProblemKey& key, int config, int splits, const StreamK* sk = nullptr) {
  const Tiling& t = tiling_of(config);
  const DeviceProfile& profile = profile_of(key.device);
  const auto [slice, real_splits] = k_slices(key.k, splits, t.bk);
  const TiledKernel kernel = kernel_for(key, config);
  const int occ = blocks_per_sm(config, key.la, key.lb, key.vec4, key.device);
  const double waves =
      sk != nullptr ? stream_k_block_times(key, config, *sk) : block_times(key, config, real_splits, slice);
  const int order = order_index(key.la, key.lb);
  double eff = profile.kernel_percent[config][order] / 100.0 * (profile.order_percent[order] / 100.0);
  // The last slice (the only one, unsplit) may end inside a K tile: its blocks run checked.
  if (ragged_k_checked(key, config, real_splits, slice)) eff /= 1.0 + (profile.checked_loop - 1.0) / double(real_splits);
  if (!key.out_vec4 && occ * kernel.threads / 32 < profile.warps_to_hide_scalar_output)
    eff *= profile.scalar_output_few_warps;
  const double compute = waves * t.bm * t.bn * slice / (profile.macs_per_ns_per_sm * eff);
  const double mn = double(key.batch) * key.m * key.n;
  const double operands = 4.0 * (double(key.batch) * (double(key.m) * key.k + double(key.k) * key.n) + mn);
  double ns = std::max({compute, operands / profile.bytes_per_ns, latency_ns(key, config, real_splits, slice, sk)}) +
              profile.launch_ns;
  if (real_splits > 1) {
    // The reduction: its traffic, or, for a small output, the round trips of its reads.
    const double traffic = 4.0 * mn * (2.0 * real_splits + 1.0) / profile.bytes_per_ns;
    const double round_trips = double(ceil_div(real_splits, kSplitkReduceLoadsInFlight)) * profile.memory_latency_ns;
    ns += std::max(traffic, round_trips) + profile.dependent_launch_ns;
  }
  return ns;
}

std::mutex g_mutex;
// model_best_ns per key, device and profiles' generation: ranking every candidate costs
// tens of microseconds, as much as a small GEMM, so it happens once per problem shape.
std::unordered_map<std::string, double> g_best_ns;

}  // namespace

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

KSlices k_slices(int64_t k, int splits, int bk) {
  const int64_t length = ceil_div(ceil_div(k, splits), bk) * bk;
  return KSlices{int(length), int(ceil_div(k, length))};
}

std::string ProblemKey::str() const {
  return "b" + std::to_string(batch) + "_m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" +
         std::to_string(k) + "_" + (la == Layout::RowMajor ? "r" : "c") + (lb == Layout::RowMajor ? "r" : "c") +
         (vec4 ? "_v4" : "_v1") + (out_vec4 ? "_d4" : "_d1");
}

std::optional<ProblemKey> ProblemKey::parse(const std::string& text) {
  int batch = 0, m = 0, n = 0, k = 0, consumed = 0;
  char la = 0, lb = 0, vec = 0, out = 0;
  if (std::sscanf(text.c_str(), "b%d_m%d_n%d_k%d_%c%c_v%c_d%c%n", &batch, &m, &n, &k, &la, &lb, &vec, &out,
                  &consumed) != 8 ||
      consumed != int(text.size()))
    return std::nullopt;
  auto layout = [](char c) -> std::optional<Layout> {
    if (c == 'r') return Layout::RowMajor;
    if (c == 'c') return Layout::ColMajor;
    return std::nullopt;
  };
  const auto a = layout(la), b = layout(lb);
  if (batch < 1 || m < 1 || n < 1 || k < 1 || !a || !b || (vec != '1' && vec != '4') || (out != '1' && out != '4'))
    return std::nullopt;
  const ProblemKey key{batch, m, n, k, *a, *b, vec == '4', out == '4', -1};
  if (key.str() != text) return std::nullopt;  // no leading zeros or other spellings
  return key;
}

std::optional<StreamK> stream_k_schedule(const ProblemKey& key, int config) {
  const Tiling& t = tiling_of(config);
  const TiledKernel kernel = kernel_for(key, config);
  if (kernel.stream_k == nullptr || key.batch != 1) return std::nullopt;
  const int64_t tiles = ceil_div(key.m, t.bm) * ceil_div(key.n, t.bn);
  const int64_t slots = int64_t(sm_count(key.device)) * blocks_per_sm(config, key.la, key.lb, key.vec4, key.device);
  const int64_t whole = tiles / slots, tail = tiles % slots;
  if (tail == 0) return std::nullopt;
  return StreamK{int(whole * slots), int(tail), int(ceil_div(key.k, t.bk)), int(slots)};
}

std::vector<std::pair<double, TilingChoice>> ranked_choices(const ProblemKey& key, std::optional<int> only_config) {
  std::vector<std::pair<double, TilingChoice>> out;
  for (int c = 0; c < kNumKernelConfigs; ++c) {
    if (only_config && c != *only_config) continue;
    if (kernel_for(key, c).launch == nullptr || !runs_on(c, key.device)) continue;
    int last_splits = 0;
    for (int s : kSplitCandidates) {
      const auto [slice, real] = k_slices(key.k, s, tiling_of(c).bk);
      if (real == last_splits || (s > 1 && slice < kMinSlice)) continue;
      last_splits = real;
      out.push_back({model_ns(key, c, real), TilingChoice{c, real, false}});
      if (real > 1) continue;
      if (const auto sk = stream_k_schedule(key, c)) out.push_back({model_ns(key, c, 1, &*sk), TilingChoice{c, 1, true}});
    }
  }
  // Equal estimates mean the same bound decides (moving the operands, usually) and the model
  // cannot tell the candidates apart; the one with more tiles in flight then loses less to
  // the load latency and epilogue it does not price (docs/history.md, step 30: the
  // cp.async 64 x 64 tiling beat the register-staged one on 34 of the sweep's 40 weakest).
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    return tiles_in_flight(x.second.config) > tiles_in_flight(y.second.config);
  });
  return out;
}

double model_best_ns(const ProblemKey& key) {
  const std::string name =
      key.str() + "/d" + std::to_string(key.device) + "/p" + std::to_string(profiles_generation());
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_best_ns.find(name);
    if (it != g_best_ns.end()) return it->second;
  }
  const auto candidates = ranked_choices(key);
  double ns = INFINITY;
  if (!candidates.empty()) {
    const auto& [best_ns, best] = candidates.front();
    const DeviceProfile& profile = profile_of(key.device);
    const double loads = key.vec4 ? 100.0 : profile.scalar_load_percent[best.config][order_index(key.la, key.lb)];
    ns = best_ns * 100.0 / loads;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_best_ns[name] = ns;
}

double tf32x3_weighed_ns(const Tf32x3Estimate& estimate, int device) {
  const DeviceProfile& profile = profile_of(device);
  return estimate.ns * profile.tf32x3_model_slack + profile.tf32x3_fixed_ns;
}

double copy_ns(int64_t elements, int device) {
  const DeviceProfile& profile = profile_of(device);
  return 8.0 * double(elements) / profile.bytes_per_ns + profile.launch_ns;
}

std::optional<double> torch_handoff_log_ratio(int device, const TilingChoice& tiling, double macs, bool copies,
                                              double predicted_ns) {
  const auto& rule = profile_of(device).torch_handoff;
  if (!rule || !rule->speaks_for[tiling.config] || !(predicted_ns > 0.0) || !(macs > 0.0)) return std::nullopt;
  return rule->config_term[tiling.config] + rule->log_predicted_ms * std::log(predicted_ns * 1e-6) +
         rule->log_macs * std::log(macs) + rule->log_splits * std::log(double(std::max(1, tiling.splits))) +
         rule->copies * double(copies);
}

std::optional<double> torch_matrix_vector_ns(const ProblemKey& key) {
  if (key.batch != 1 || (key.m != 1 && key.n != 1)) return std::nullopt;
  const DeviceProfile& profile = profile_of(key.device);
  const double matrix_bytes = 4.0 * double(key.m) * double(key.n) * double(key.k);
  return matrix_bytes / profile.bytes_per_ns + profile.launch_ns;
}

namespace {

// The 3xTF32 rows' waves model (the SIMT model above has no figures for their kernels): a
// block takes its slice's K tiles plus a fixed cost (tf32x3_block_overhead_tiles), at the
// profile's K-tile time of the row; the grid takes that times its waves of resident
// blocks, plus its launch (the SIMT model's launch_ns, so that the two compare); a split
// adds the reduction's launch and the partials' round trip, written by the kernel and read
// back by the reduction (8 bytes an output element a slice). The
// split with the least predicted time wins, fewer splits on a tie, in slices of at least
// kTf32x3MinSlice (8 K tiles: several rounds of the pipeline after its fill) and at most
// kTf32x3MaxSplits of them. A row with a split pass (the wgmma form) also pays it: one
// launch for the operands the pass splits, which reads 4 and writes 8 bytes an element.
// Its kernel can make an aligned operand's parts itself instead (A in either order, B where
// K-contiguous), for the profile's a_split_ns (a_split_m_major_ns for a column-major A) or
// b_split_ns more (or less) a K tile: A's in registers as its consumers load them, B's in
// shared memory by the producer's idle warps (their traffic there is the cost).
// The choice is the cheapest of the four, the pass with neither operand on a tie.
constexpr int kTf32x3MinSlice = 256;
constexpr int kTf32x3MaxSplits = 32;
constexpr double kTf32x3SplitPassBytes = 12.0;

// The row's speed on the key's storage against the storage its figures were fitted on (1
// where the profile does not price it: the strict op's estimate).
double tf32x3_storage_share(const ProblemKey& key, int row) {
  const DeviceProfile& profile = profile_of(key.device);
  if (!tf32x3_priced(key, row)) return 1.0;
  const double order = profile.tf32x3_order_percent[row][order_index(key.la, key.lb)] / 100.0;
  return key.vec4 ? order : order * profile.tf32x3_unaligned_percent[row] / 100.0;
}

Tf32x3Estimate tf32x3_predicted(const ProblemKey& key, int row, int splits) {
  const DeviceProfile& profile = profile_of(key.device);
  const Tf32x3Row& r = kTf32x3Rows[row];
  const Tf32x3ConfigInfo info = r.info(r.config);
  const int64_t tiles = ceil_div(key.m, info.bm) * ceil_div(key.n, info.bn) * key.batch;
  const int64_t slots = int64_t(sm_count(key.device)) * tf32x3_blocks_per_sm(row, key.device);
  const int64_t slice_tiles = k_slices(key.k, splits, r.bk).length / r.bk;
  const double waves = double(ceil_div(tiles * splits, slots));
  const double wave_tiles =
      waves * (double(slice_tiles) + profile.tf32x3_block_overhead_tiles[row]) / tf32x3_storage_share(key, row);
  Tf32x3Estimate out{{row, splits, {false, false}}, wave_tiles * profile.tf32x3_k_tile_ns[row] + profile.launch_ns};
  if (splits > 1)
    out.ns += profile.dependent_launch_ns + 8.0 * splits * double(key.batch) * key.m * key.n / profile.bytes_per_ns;
  if (r.kernel_can_split == nullptr) return out;
  const auto pass_ns = [&](int64_t rows) {
    return profile.launch_ns + kTf32x3SplitPassBytes * double(key.batch) * rows * key.k / profile.bytes_per_ns;
  };
  SplitOperands can = r.kernel_can_split(key);
  // An M-major A's parts made in registers are priced apart, where the profile has measured them.
  const double a_split_ns = key.la == Layout::RowMajor ? profile.tf32x3_a_split_ns[row]
                                                       : profile.tf32x3_a_split_m_major_ns[row];
  can.a = can.a && !std::isnan(a_split_ns);
  double extra = pass_ns(key.m + key.n);  // one launch splits both
  SplitOperands chosen{false, false};
  for (const SplitOperands in_kernel : {SplitOperands{true, false}, SplitOperands{false, true}, SplitOperands{true, true}}) {
    if ((in_kernel.a && !can.a) || (in_kernel.b && !can.b)) continue;
    const int64_t passed_rows = (in_kernel.a ? 0 : key.m) + (in_kernel.b ? 0 : key.n);
    const double ns = wave_tiles * ((in_kernel.a ? a_split_ns : 0.0) +
                                    (in_kernel.b ? profile.tf32x3_b_split_ns[row] : 0.0)) +
                      (passed_rows > 0 ? pass_ns(passed_rows) : 0.0);
    if (ns < extra) extra = ns, chosen = in_kernel;
  }
  out.ns += extra;
  out.tiling.kernel_splits = chosen;
  return out;
}

}  // namespace

bool tf32x3_priced(const ProblemKey& key, int row) {
  const DeviceProfile& profile = profile_of(key.device);
  return profile.tf32x3_order_percent[row][order_index(key.la, key.lb)] > 0.0 &&
         (key.vec4 || profile.tf32x3_unaligned_percent[row] > 0.0);
}

namespace {
std::atomic<int> g_forced_splits{0};
}  // namespace

void set_tf32x3_forced_splits(int splits) { g_forced_splits = std::max(splits, 0); }

int tf32x3_forced_splits() { return g_forced_splits.load(); }

int tf32x3_most_splits(const ProblemKey& key) {
  return int(std::max<int64_t>(1, std::min<int64_t>(key.k / kTf32x3MinSlice, kTf32x3MaxSplits)));
}

Tf32x3Estimate tf32x3_cheapest_split(const ProblemKey& key, int row, int fewest_splits) {
  const int most = tf32x3_most_splits(key);
  TORCH_INTERNAL_ASSERT(fewest_splits <= most, "vecgemm: ", fewest_splits, " K slices asked of ", key.str());
  if (const int forced = tf32x3_forced_splits())
    return tf32x3_predicted(key, row, std::clamp(forced, fewest_splits, most));
  Tf32x3Estimate best = tf32x3_predicted(key, row, fewest_splits);
  for (int s = fewest_splits + 1; s <= most; ++s) {
    const Tf32x3Estimate c = tf32x3_predicted(key, row, s);
    if (c.ns < best.ns) best = c;
  }
  return best;
}

}  // namespace vecgemm
