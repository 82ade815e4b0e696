// Autotune's timing: the model's best candidates for a problem run on its own operands
// into a scratch output, the fastest recorded in the planner's cache (planner/tuning_cache.h)
// for the plans that follow.
#pragma once
#include <cuda_runtime_api.h>

#include "planner/cost_model.h"

namespace vecgemm {

// Times the model's best candidates for the problem of `params` (whose operands are the
// ones the kernel will read) into a scratch output, once, and records the fastest. Returns
// it; where no scratch output can be allocated, the model's choice, unrecorded.
TilingChoice autotune(const ProblemKey& key, const GemmParams& params, cudaStream_t stream);

// Whether the stream is capturing a CUDA graph (nothing is timed then).
bool capturing(cudaStream_t stream);

}  // namespace vecgemm
