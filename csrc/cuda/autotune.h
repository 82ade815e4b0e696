// Autotune mode and the cache of tuned choices (the controls Python sees are in
// ../tuning.h). The planner looks choices up here; only execution times candidates.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "cost_model.h"

namespace vecgemm {

// The choice tuned (or loaded, or added) for this problem, if any.
std::optional<TilingChoice> tuned_choice(const ProblemKey& key);

// Times the model's best candidates for the problem of `params` (whose operands are the
// ones the kernel will read) into a scratch output, once, and records the fastest. Returns
// it; where no scratch output can be allocated, the model's choice, unrecorded.
TilingChoice autotune(const ProblemKey& key, const GemmParams& params, cudaStream_t stream);

// Counts the changes to the cache of tuned choices (an autotuned choice recorded, an entry
// added, the cache cleared): a plan made under another generation may be stale.
uint64_t tuning_generation();

// Whether the stream is capturing a CUDA graph (nothing is timed then).
bool capturing(cudaStream_t stream);

}  // namespace vecgemm
