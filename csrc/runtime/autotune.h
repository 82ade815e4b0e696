// Autotune's timing: the model's best candidates for a problem run on its own operands
// into a scratch output, and torch.matmul's product of the caller's operands, the fastest
// recorded in the planner's cache (planner/tuning_cache.h) for the plans that follow.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

#include "planner/cost_model.h"

namespace vecgemm {

// What autotune weighs the kernels against: torch.matmul's product of the caller's operands
// (the lenient op's hand-off), and the plan's operand copies (empty where it makes none),
// whose time counts against the kernels.
struct TorchRival {
  std::function<void()> torch_product;
  std::function<void()> copies;
};

// Times the model's best candidates for the problem of `params` (whose operands are the
// ones the kernel will read) into a scratch output, once, and records the fastest, with
// whether `rival`'s torch product beat it and the copies together. Returns the fastest
// kernel; where no scratch output can be allocated, the model's choice, unrecorded.
TilingChoice autotune(const ProblemKey& key, const GemmParams& params, const TorchRival& rival, cudaStream_t stream);

// Whether the stream is capturing a CUDA graph (nothing is timed then).
bool capturing(cudaStream_t stream);

}  // namespace vecgemm
