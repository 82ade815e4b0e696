#include "runtime/autotune.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "planner/tuning_cache.h"

namespace vecgemm {
namespace {

// Autotune times this many of the model's best candidates.
constexpr int kAutotuneCandidates = 6;

// Median milliseconds of a few timed runs of `work` on the stream, after one to warm up.
float median_ms(const std::function<void()>& work, cudaStream_t stream) {
  work();
  constexpr int kReps = 5;
  std::vector<float> ms(kReps);
  cudaEvent_t start, stop;
  C10_CUDA_CHECK(cudaEventCreate(&start));
  C10_CUDA_CHECK(cudaEventCreate(&stop));
  for (int r = 0; r < kReps; ++r) {
    C10_CUDA_CHECK(cudaEventRecord(start, stream));
    work();
    C10_CUDA_CHECK(cudaEventRecord(stop, stream));
    C10_CUDA_CHECK(cudaEventSynchronize(stop));
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
  }
  C10_CUDA_CHECK(cudaEventDestroy(start));
  C10_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + kReps / 2, ms.end());
  return ms[kReps / 2];
}

// Whether torch.matmul's product beat `kernel_ms` plus the copies; false where its output
// (or a copy) cannot be allocated: the kernels keep the problem.
bool torch_timed_faster(const AutotuneRuns& runs, float kernel_ms, cudaStream_t stream) {
  try {
    const float copies_ms = runs.copies ? median_ms(runs.copies, stream) : 0.0f;
    return median_ms(runs.torch_product, stream) < kernel_ms + copies_ms;
  } catch (const c10::OutOfMemoryError&) {
    return false;
  }
}

}  // namespace

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

TilingChoice autotune(const ProblemKey& key, const GemmParams& params, const AutotuneRuns& runs, cudaStream_t stream) {
  const auto candidates = ranked_choices(key);
  TORCH_INTERNAL_ASSERT(!candidates.empty(), "vecgemm: no kernel config for ", key.str());
  at::Tensor scratch;
  try {
    scratch = at::empty({int64_t(key.batch) * key.m * key.n}, at::device(at::kCUDA).dtype(at::kFloat));
  } catch (const c10::OutOfMemoryError&) {
    return candidates.front().second;  // no room to time candidates: the model's choice, not recorded
  }
  // The candidates write a scratch output, so the caller's tensors are untouched.
  GemmParams p = params;
  p.d = scratch.data_ptr<float>();
  p.d_ld = key.n;
  p.d_batch_stride = int64_t(key.m) * key.n;
  p.d_vec4 = key.n % 4 == 0;
  TilingChoice best = candidates.front().second;
  float best_ms = INFINITY;
  const int n = std::min<int>(kAutotuneCandidates, candidates.size());
  for (int i = 0; i < n; ++i) {
    const TilingChoice choice = candidates[i].second;
    const float ms = median_ms([&] { runs.kernel(p, choice); }, stream);
    if (ms < best_ms) best_ms = ms, best = choice;
  }
  record_tuned_choice(key, TunedChoice{best, torch_timed_faster(runs, best_ms, stream)});
  return best;
}

}  // namespace vecgemm
