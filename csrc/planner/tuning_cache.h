// Autotune mode and the cache of tuned choices (the controls Python sees are in
// tuning_controls.h). The planner looks choices up here; the runtime times candidates
// (runtime/autotune.h) and records the fastest.
#pragma once
#include <cstdint>
#include <optional>

#include "planner/cost_model.h"

namespace vecgemm {

// A problem's tuned choice: the fastest of the library's kernels, and whether torch.matmul
// was timed faster than that kernel with the plan's operand copies (the lenient op then
// hands the problem to torch; the strict ops run the kernel).
struct TunedChoice {
  TilingChoice tiling;
  bool torch_faster = false;
};

// The choice tuned (or loaded, or added) for this problem, if any.
std::optional<TunedChoice> tuned_choice(const ProblemKey& key);

// Records the choice timed fastest for the problem (runtime/autotune.cpp).
void record_tuned_choice(const ProblemKey& key, TunedChoice choice);

// Counts the changes to the cache of tuned choices (an autotuned choice recorded, an entry
// added, the cache cleared): a plan made under another generation may be stale.
uint64_t tuning_generation();

}  // namespace vecgemm
