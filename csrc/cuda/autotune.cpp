#include "autotune.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "../env_flags.h"
#include "../tuning.h"
#include "execute.h"
#include "kernel_configs.h"
#include "kernels.h"

namespace vecgemm {
namespace {

// Autotune times this many of the model's best candidates.
constexpr int kAutotuneCandidates = 6;

std::mutex g_mutex;
std::atomic<bool> g_autotune{env_flag("VECGEMM_AUTOTUNE", false)};
std::unordered_map<std::string, TilingChoice> g_tuned;  // autotuned, loaded or added choices
std::atomic<uint64_t> g_generation{0};                  // changes to g_tuned

// Median of a few timed runs into a scratch output, so the caller's tensors are untouched.
float time_choice(GemmParams p, const ProblemKey& key, TilingChoice choice, float* scratch, cudaStream_t stream) {
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

}  // namespace

std::optional<TilingChoice> tuned_choice(const ProblemKey& key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_tuned.find(key.str());
  if (it == g_tuned.end()) return std::nullopt;
  // A config with no kernel for this problem's storage orders and alignment (an entry added
  // for another build, say) is passed over: the model chooses.
  if (tiled_kernel(it->second.config, key.la, key.lb, key.vec4).launch == nullptr) return std::nullopt;
  return it->second;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

TilingChoice autotune(const ProblemKey& key, const GemmParams& params, cudaStream_t stream) {
  const auto candidates = ranked_choices(key);
  TORCH_INTERNAL_ASSERT(!candidates.empty(), "vecgemm: no kernel config for ", key.str());
  at::Tensor scratch;
  try {
    scratch = at::empty({int64_t(key.batch) * key.m * key.n}, at::device(at::kCUDA).dtype(at::kFloat));
  } catch (const c10::OutOfMemoryError&) {
    return candidates.front().second;  // no room to time candidates: the model's choice, not recorded
  }
  TilingChoice best = candidates.front().second;
  float best_ms = INFINITY;
  const int n = std::min<int>(kAutotuneCandidates, candidates.size());
  for (int i = 0; i < n; ++i) {
    const float ms = time_choice(params, key, candidates[i].second, scratch.data_ptr<float>(), stream);
    if (ms < best_ms) best_ms = ms, best = candidates[i].second;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tuned[key.str()] = best;
  ++g_generation;
  return best;
}

uint64_t tuning_generation() { return g_generation.load(); }

void set_autotune(bool enabled) { g_autotune = enabled; }
bool autotune_enabled() { return g_autotune.load(); }

std::vector<TuningEntry> tuning_entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<TuningEntry> out;
  for (const auto& [key, choice] : g_tuned)
    out.emplace_back(key, kernel_config_name(choice.config), choice.splits, choice.stream_k);
  std::sort(out.begin(), out.end());
  return out;
}

void add_tuning_entry(const std::string& key, const std::string& config, int splits, bool stream_k) {
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
  g_tuned[key] = TilingChoice{*row, splits, stream_k};
  ++g_generation;
}

void clear_tuning_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tuned.clear();
  ++g_generation;
}

std::vector<RankedChoice> model_ranking(const std::string& key) {
  auto problem = ProblemKey::parse(key);
  TORCH_CHECK(problem.has_value(), "vecgemm: '", key, "' is not a tuning key (b<batch>_m<M>_n<N>_k<K>_<orders>_v<1|4>_d<1|4>, ",
              "as torch_vecgemm._C.tuning_key(A, B) gives)");
  problem->device = c10::cuda::current_device();
  std::vector<RankedChoice> out;
  for (const auto& [ns, choice] : ranked_choices(*problem))
    out.emplace_back(ns, kernel_config_name(choice.config), choice.splits, choice.stream_k);
  return out;
}

}  // namespace vecgemm
