// Autotune mode and the cache of tuned choices (the controls Python sees are in
// tuning_controls.h). The planner looks choices up here; the runtime times candidates
// (runtime/autotune.h) and records the fastest.
#pragma once
#include <cstdint>
#include <optional>

#include "planner/cost_model.h"

namespace vecgemm {

// The choice tuned (or loaded, or added) for this problem, if any.
std::optional<TilingChoice> tuned_choice(const ProblemKey& key);

// Records the choice timed fastest for the problem (runtime/autotune.cpp).
void record_tuned_choice(const ProblemKey& key, TilingChoice choice);

// Counts the changes to the cache of tuned choices (an autotuned choice recorded, an entry
// added, the cache cleared): a plan made under another generation may be stale.
uint64_t tuning_generation();

}  // namespace vecgemm
