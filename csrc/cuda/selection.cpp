#include "selection.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kernels.h"

namespace vecgemm {
namespace {

// Cost-model constants for the H200; only their ratios matter for the ranking.
constexpr double kMacsPerNsPerSm = 190.0;  // ~75% of 128 FP32 lanes at 1.98 GHz
constexpr double kBytesPerNs = 3500.0;     // sustained HBM3e bandwidth
constexpr double kLaunchNs = 2500.0;       // one kernel launch and its tail
// Split-K factors tried, and the least K a slice may have (shorter slices are all prologue).
constexpr int kSplitCandidates[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
constexpr int kMinSlice = 64;
// An output whose rows are not 16-byte aligned is stored element by element (epilogue.cuh).
// Tilings that keep 8 warps on an SM hide those stores worse than those with 16: on the H200
// they lost 0-16% more (geometric mean 7%) at 768x4097x1024, 777x4097x1024 and
// 1024x50257x768 against the same problems with N a multiple of 4 (docs/performance.md,
// step 12).
constexpr double kScalarOutputFewWarps = 0.93;
constexpr int kWarpsToHideScalarOutput = 16;
// Blocks whose K range is not whole K tiles run the bounds-checked main loop, which costs
// 1.06-1.23x the unchecked one depending on the tiling (benchmarks/edge_overhead.py,
// docs/performance.md steps 2 and 15).
constexpr double kCheckedLoop = 1.15;
// The stream-K tail's blocks cost this much a unit of work against a whole wave's, and its
// kernel a fixed 2 kLaunchNs more, plus two more launches: t816 at 3072-8192 and on four
// model shapes measured 1.05 x the work + 4-6 us (docs/performance.md, step 21).
constexpr double kStreamKCost = 1.05;
constexpr double kStreamKFixedNs = 4 * kLaunchNs;
// A partial wave of r blocks of occ keeps the SM at 0.55 + 0.45 r / occ of its full-wave
// throughput where the r blocks keep two warps or more on each of its four schedulers (step
// 9). One warp a scheduler has nothing to hide its latencies behind: t816's lone blocks
// (occ 2) kept it at 0.52, a partial wave taking 516 us against a full one's 536 (3072^3,
// step 21).
constexpr double kOneWarpThroughput = 0.52;
// Autotune times this many of the model's best candidates.
constexpr int kAutotuneCandidates = 6;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::mutex g_mutex;
std::atomic<bool> g_autotune{[] {
  const char* v = std::getenv("VECGEMM_AUTOTUNE");
  return v != nullptr && std::string(v) == "1";
}()};
std::unordered_map<std::string, Choice> g_cache;  // autotuned or loaded choices
// The model's choices, so that ranking every candidate happens once per problem shape,
// not on every call (it costs tens of microseconds, as much as a small GEMM).
std::unordered_map<std::string, Choice> g_model_choices;
std::unordered_map<std::string, double> g_model_ns;  // model_best_ns, for the same reason

int sm_count(int device) {
  static std::map<int, int> counts;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = counts.find(device);
  if (it != counts.end()) return it->second;
  int v = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
  return counts[device] = v;
}

int blocks_per_sm(const TiledKernel& kernel, int device) {
  static std::map<std::pair<const void*, int>, int> occupancy;
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto key = std::make_pair(kernel.entry, device);
  auto it = occupancy.find(key);
  if (it != occupancy.end()) return it->second;
  int v = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel.entry, kernel.threads, 0));
  return occupancy[key] = std::max(v, 1);
}

int slice_for(int k, int splits, int bk) { return int(ceil_div(ceil_div(k, splits), bk) * bk); }

// The busiest SM's share of the tiles (edge tiles computed whole) in waves of as many blocks
// as fit on it, in one-block times: full waves, then a partial one of r blocks at the
// throughput above.
double block_times(const ProblemKey& key, int config, int64_t real_splits, int device) {
  const TileConfigRow& c = kTileConfigs[config];
  const int64_t blocks = ceil_div(key.m, c.bm) * ceil_div(key.n, c.bn) * key.batch * real_splits;
  const TiledKernel kernel = tiled_kernel(config, key.la, key.lb, key.vec4);
  const int occ = blocks_per_sm(kernel, device);
  const int64_t per_sm = ceil_div(blocks, sm_count(device));
  const int64_t full_waves = per_sm / occ, rest = per_sm % occ;
  const double throughput = rest * kernel.threads >= 8 * 32 ? 0.55 + 0.45 * double(rest) / occ : kOneWarpThroughput;
  return double(full_waves * occ) + (rest > 0 ? rest / throughput : 0.0);
}

// The stream-K tail's plan for an unsplit problem of one batch on a row that has it: the
// tiles of the whole waves of resident blocks, then the rest's K iterations shared over every
// slot. None where there is no whole wave or nothing left after them.
std::optional<StreamK> stream_k_plan(const ProblemKey& key, int config, int device) {
  const TileConfigRow& c = kTileConfigs[config];
  const TiledKernel kernel = tiled_kernel(config, key.la, key.lb, key.vec4);
  if (kernel.stream_k == nullptr || key.batch != 1) return std::nullopt;
  const int64_t tiles = ceil_div(key.m, c.bm) * ceil_div(key.n, c.bn);
  const int64_t slots = int64_t(sm_count(device)) * blocks_per_sm(kernel, device);
  const int64_t whole = tiles / slots, tail = tiles % slots;
  if (whole == 0 || tail == 0) return std::nullopt;
  return StreamK{int(whole * slots), int(tail), int(ceil_div(key.k, c.bk)), int(slots)};
}

// block_times under the stream-K plan: the whole waves, then the tail's work spread over
// every slot at kStreamKCost, its fixed cost, and the fix-up's traffic: every block
// boundary splits a tile, so about tail + slots pieces, each a partial tile written and read
// back (the fix-up ran at this rate with its launch hidden, step 21), and the tail's tiles
// of D written.
double stream_k_block_times(const ProblemKey& key, int config, const StreamK& sk, int device) {
  const TileConfigRow& c = kTileConfigs[config];
  const double occ = double(sk.blocks) / sm_count(device);
  const double fixup_ns = 4.0 * c.bm * c.bn * double(2 * (sk.tiles + sk.blocks) + sk.tiles) / kBytesPerNs;
  const double block_ns = double(c.bm) * c.bn * key.k / kMacsPerNsPerSm;
  return double(sk.first_tile) / sk.blocks * occ + double(sk.tiles) / sk.blocks * occ * kStreamKCost +
         (fixup_ns + kStreamKFixedNs) / block_ns;
}

// Estimated nanoseconds: the waves of blocks (block_times, or stream_k_block_times under a
// stream-K plan), never faster than moving every operand once; split-K adds the workspace
// round trip (partials written by the GEMM, read back by the reduction) and a second launch.
double model_ns(const ProblemKey& key, int config, int splits, int device, const StreamK* sk = nullptr) {
  const TileConfigRow& c = kTileConfigs[config];
  const int slice = slice_for(key.k, splits, c.bk);
  const int64_t real_splits = ceil_div(key.k, slice);
  const TiledKernel kernel = tiled_kernel(config, key.la, key.lb, key.vec4);
  const int occ = blocks_per_sm(kernel, device);
  const double waves = sk != nullptr ? stream_k_block_times(key, config, *sk, device)
                                     : block_times(key, config, real_splits, device);
  const int order = order_index(key.la, key.lb);
  double eff = c.eff_percent[order] / 100.0 * (kOrderPercent[order] / 100.0);
  // The last slice (the only one, unsplit) may end inside a K tile: its blocks run checked.
  const int64_t last_slice = key.k - (real_splits - 1) * int64_t(slice);
  if (last_slice % c.bk != 0) eff /= 1.0 + (kCheckedLoop - 1.0) / double(real_splits);
  if (!key.out_vec4 && occ * kernel.threads / 32 < kWarpsToHideScalarOutput) eff *= kScalarOutputFewWarps;
  const double compute = waves * c.bm * c.bn * slice / (kMacsPerNsPerSm * eff);
  const double mn = double(key.batch) * key.m * key.n;
  const double operands = 4.0 * (double(key.batch) * (double(key.m) * key.k + double(key.k) * key.n) + mn);
  double ns = std::max(compute, operands / kBytesPerNs) + kLaunchNs;
  if (real_splits > 1) ns += 4.0 * mn * (2.0 * real_splits + 1.0) / kBytesPerNs + kLaunchNs;
  return ns;
}

std::vector<std::pair<double, Choice>> ranked(const ProblemKey& key, int forced_config, int device) {
  std::vector<std::pair<double, Choice>> out;
  for (int c = 0; c < kNumTileConfigs; ++c) {
    if (forced_config >= 0 && c != forced_config) continue;
    if (tiled_kernel(c, key.la, key.lb, key.vec4).launch == nullptr) continue;
    int last_splits = 0;
    for (int s : kSplitCandidates) {
      const int slice = slice_for(key.k, s, kTileConfigs[c].bk);
      const int real = int(ceil_div(key.k, slice));
      if (real == last_splits || (s > 1 && slice < kMinSlice)) continue;
      last_splits = real;
      out.push_back({model_ns(key, c, real, device), Choice{c, real, false}});
      if (real > 1) continue;
      if (const auto sk = stream_k_plan(key, c, device))
        out.push_back({model_ns(key, c, 1, device, &*sk), Choice{c, 1, true}});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  return out;
}

}  // namespace

double model_best_ns(const ProblemKey& key) {
  const int device = c10::cuda::current_device();
  const std::string name = key.str() + "/d" + std::to_string(device);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_model_ns.find(name);
    if (it != g_model_ns.end()) return it->second;
  }
  const auto candidates = ranked(key, -1, device);
  const double ns = candidates.empty() ? INFINITY : candidates.front().first;
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_model_ns[name] = ns;
}

double copy_ns(int64_t elements) { return 8.0 * double(elements) / kBytesPerNs + kLaunchNs; }

namespace {

// Median of a few timed runs into a scratch output, so the caller's tensors are untouched.
float time_choice(GemmParams p, const ProblemKey& key, Choice choice, float* scratch, cudaStream_t stream) {
  p.d = scratch;
  p.d_ld = key.n;
  p.d_batch_stride = int64_t(key.m) * key.n;
  p.d_vec4 = key.n % 4 == 0;
  run_tiled(p, key, choice, stream);  // warm-up
  constexpr int kReps = 5;
  std::vector<float> ms(kReps);
  cudaEvent_t start, stop;
  C10_CUDA_CHECK(cudaEventCreate(&start));
  C10_CUDA_CHECK(cudaEventCreate(&stop));
  for (int r = 0; r < kReps; ++r) {
    C10_CUDA_CHECK(cudaEventRecord(start, stream));
    run_tiled(p, key, choice, stream);
    C10_CUDA_CHECK(cudaEventRecord(stop, stream));
    C10_CUDA_CHECK(cudaEventSynchronize(stop));
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
  }
  C10_CUDA_CHECK(cudaEventDestroy(start));
  C10_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + kReps / 2, ms.end());
  return ms[kReps / 2];
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

std::string ProblemKey::str() const {
  return "b" + std::to_string(batch) + "_m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" +
         std::to_string(k) + "_" + (la == Layout::RowMajor ? "r" : "c") +
         (lb == Layout::RowMajor ? "r" : "c") + (vec4 ? "_v4" : "_v1") + (out_vec4 ? "_d4" : "_d1");
}

Choice choose(const ProblemKey& key, int forced_config, const GemmParams& params, cudaStream_t stream) {
  const int device = c10::cuda::current_device();
  const std::string name = key.str();
  const bool tune = forced_config < 0 && g_autotune.load() && !capturing(stream);
  const std::string model_key = name + "/" + std::to_string(forced_config) + "/d" + std::to_string(device);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (forced_config < 0) {
      auto it = g_cache.find(name);
      if (it != g_cache.end()) return it->second;
    }
    if (!tune) {
      auto it = g_model_choices.find(model_key);
      if (it != g_model_choices.end()) return it->second;
    }
  }
  auto candidates = ranked(key, forced_config, device);
  TORCH_INTERNAL_ASSERT(!candidates.empty());
  if (!tune) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_model_choices[model_key] = candidates.front().second;
  }

  at::Tensor scratch;
  try {
    scratch = at::empty({int64_t(key.batch) * key.m * key.n}, at::device(at::kCUDA).dtype(at::kFloat));
  } catch (const c10::OutOfMemoryError&) {
    return candidates.front().second;  // no room to time candidates: the model's choice, not cached
  }
  Choice best = candidates.front().second;
  float best_ms = INFINITY;
  const int n = std::min<int>(kAutotuneCandidates, candidates.size());
  for (int i = 0; i < n; ++i) {
    const float ms = time_choice(params, key, candidates[i].second, scratch.data_ptr<float>(), stream);
    if (ms < best_ms) best_ms = ms, best = candidates[i].second;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cache[name] = best;
  return best;
}

bool stream_k_tail(const ProblemKey& key, Choice choice) {
  const int slice = slice_for(key.k, choice.splits, kTileConfigs[choice.config].bk);
  return choice.stream_k && slice >= key.k && stream_k_plan(key, choice.config, c10::cuda::current_device());
}

void run_tiled(GemmParams p, const ProblemKey& key, Choice choice, cudaStream_t stream) {
  const TiledKernel kernel = tiled_kernel(choice.config, key.la, key.lb, key.vec4);
  const TileConfigRow& c = kTileConfigs[choice.config];
  p.k_slice = slice_for(p.k, choice.splits, c.bk);
  p.k_splits = int(ceil_div(p.k, p.k_slice));
  if (choice.stream_k && p.k_splits == 1) {
    if (const auto sk = stream_k_plan(key, choice.config, c10::cuda::current_device())) {
      at::Tensor pieces;  // two partial tiles a block; for speed only, as the split-K workspace
      try {
        pieces = at::empty({2 * int64_t(sk->blocks) * c.bm * c.bn}, at::device(at::kCUDA).dtype(at::kFloat));
      } catch (const c10::OutOfMemoryError&) {
      }
      if (pieces.defined()) {
        p.workspace = pieces.data_ptr<float>();
        kernel.stream_k(p, *sk, stream);
        launch_stream_k_fixup(p, *sk, c.bm, c.bn, stream);
        return;
      }
    }
  }
  // grid.z carries batch x splits and may not exceed 65535.
  int max_batch = std::max(1, 65535 / p.k_splits);
  at::Tensor workspace;
  if (p.k_splits > 1) {
    // Sized for the largest batch chunk. A split is for speed only: where the caching
    // allocator cannot give its workspace, the kernel runs over the whole of K instead.
    try {
      workspace = at::empty({int64_t(p.k_splits) * std::min(max_batch, key.batch) * p.m * p.n},
                            at::device(at::kCUDA).dtype(at::kFloat));
      p.workspace = workspace.data_ptr<float>();
    } catch (const c10::OutOfMemoryError&) {
      p.k_slice = p.k, p.k_splits = 1;
      max_batch = 65535;
    }
  }
  for (int b0 = 0; b0 < key.batch; b0 += max_batch) {
    GemmParams q = p;
    q.batch = std::min(max_batch, key.batch - b0);
    q.a.ptr += b0 * p.a.batch_stride;
    q.b.ptr += b0 * p.b.batch_stride;
    if (q.c != nullptr) q.c += b0 * p.c_batch_stride;
    q.d += b0 * p.d_batch_stride;
    kernel.launch(q, stream);
    if (p.k_splits > 1) launch_splitk_reduce(q, stream);
  }
}

void set_autotune(bool enabled) { g_autotune = enabled; }
bool autotune_enabled() { return g_autotune.load(); }

std::vector<TuningEntry> tuning_entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<TuningEntry> out;
  for (const auto& [key, choice] : g_cache)
    out.emplace_back(key, kTileConfigs[choice.config].name, choice.splits, choice.stream_k);
  std::sort(out.begin(), out.end());
  return out;
}

void add_tuning_entry(const std::string& key, const std::string& config, int splits, bool stream_k) {
  TORCH_CHECK(splits >= 1, "vecgemm: split count must be at least 1, got ", splits);
  for (int c = 0; c < kNumTileConfigs; ++c) {
    if (config == kTileConfigs[c].name) {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_cache[key] = Choice{c, splits, stream_k};
      return;
    }
  }
  TORCH_CHECK(false, "vecgemm: unknown tiled configuration '", config, "'");
}

void clear_tuning_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cache.clear();
}

}  // namespace vecgemm
