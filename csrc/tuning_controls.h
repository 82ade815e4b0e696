// Controls of the planner's autotune mode and its cache (planner/tuning_cache.cpp;
// no-ops in a CPU-only build). Python saves and restores the cache as JSON.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace vecgemm {

void set_autotune(bool enabled);
bool autotune_enabled();
// (problem key, configuration name, split-K factor, stream-K tail, torch.matmul timed
// faster), sorted by key.
using TuningEntry = std::tuple<std::string, std::string, int, bool, bool>;
std::vector<TuningEntry> tuning_entries();
// stream_k asks for the stream-K tail (unsplit only); where the problem has none, the
// tiling runs without it. torch_faster: the lenient op hands the problem to torch.matmul.
void add_tuning_entry(const std::string& key, const std::string& config, int splits, bool stream_k,
                      bool torch_faster);
// The key under which the auto variant caches the choice for A @ B (of the operands it
// multiplies, after its copies; D freshly allocated).
std::string tuning_key(const at::Tensor& A, const at::Tensor& B);
void clear_tuning_cache();
// The cost model's view of a tuning key: every candidate (predicted ns, configuration name,
// split-K factor, stream-K tail), fastest first, as the planner ranks them on `device`, a
// recorded device (none: the current CUDA device). For probes that set the model's
// predictions beside measured times, and for tests on recorded facts.
using RankedChoice = std::tuple<double, std::string, int, bool>;
std::vector<RankedChoice> model_ranking(const std::string& key, std::optional<int> device);

// Measurement knob: whether the second passes (split-K reduction, stream-K fix-up) may
// overlap the end of the kernel before them (programmatic dependent launch; on unless
// VECGEMM_DEPENDENT_LAUNCH=0).
void set_dependent_launch(bool enabled);

// Measurement knob: whether the lenient op hands IEEE plans to torch.matmul where the device
// profile's rule predicts torch faster (Plan::torch_faster; on by default). Off, those plans
// run on the kernels: for the tests that read the kernels' choices and for the sweeps, which
// time a handed problem on the kernels too (the data the rule is fitted on).
void set_torch_handoff(bool enabled);
bool torch_handoff_enabled();

// Measurement knob: the rows of the narrow operand a block of the narrow-side 3xTF32 kernel
// takes, 8, 16 or 32, or 0 (the default) for the fewest that cover the narrow side: fewer
// rows a block keep more warps resident (fewer registers), at the price of reading the
// wide operand's tile once a block (kernels/tf32x3/sgemm_3xtf32.h).
void set_narrow_block_rows(int rows);

// Measurement knob: the K split every 3xTF32 row is priced and run at (at most the most the
// row takes for the problem), or 0 (the default; any value below 1) for the waves model's
// cheapest: what the model's prices at other splits are checked against
// (benchmarks/probes/narrow_orders.py).
void set_tf32x3_splits(int splits);

}  // namespace vecgemm
