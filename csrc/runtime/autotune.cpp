#include "runtime/autotune.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/tuning_cache.h"
#include "runtime/execute.h"

namespace vecgemm {
namespace {

// Autotune times this many of the model's best candidates.
constexpr int kAutotuneCandidates = 6;

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
  record_tuned_choice(key, best);
  return best;
}

}  // namespace vecgemm
