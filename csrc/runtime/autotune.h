// Autotune's timing: the model's best candidates for a problem run on its own operands
// into a scratch output, and torch.matmul's product of the caller's operands, the fastest
// recorded in the planner's cache (planner/tuning_cache.h) for the plans that follow. What
// runs is the caller's (execute.cpp): this file only times it and records the outcome.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

#include "planner/cost_model.h"

namespace vecgemm {

// What autotune times, as the caller runs it: a candidate tiling on kernel parameters (the
// operands the kernel will read, D a scratch output), torch.matmul's product of the caller's
// operands (the lenient op's hand-off), and the plan's operand copies (empty where it makes
// none), whose time counts against the kernels.
struct AutotuneRuns {
  std::function<void(const GemmParams&, TilingChoice)> kernel;
  std::function<void()> torch_product;
  std::function<void()> copies;
};

// Times the model's best candidates for the problem of `params` into a scratch output, once,
// and records the fastest, with whether torch's product beat it and the copies together.
// Returns the fastest; where no scratch output can be allocated, the model's choice,
// unrecorded.
TilingChoice autotune(const ProblemKey& key, const GemmParams& params, const AutotuneRuns& runs, cudaStream_t stream);

// Whether the stream is capturing a CUDA graph (nothing is timed then).
bool capturing(cudaStream_t stream);

}  // namespace vecgemm
