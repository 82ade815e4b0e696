// The cost model: an estimate, from the device's facts and profile, of what each kernel
// config and split-K factor would take on a problem, used to rank them: the SIMT configs'
// model and the 3xTF32 rows' waves model, the one place the planner's prices come from. Pure: it reads the
// tensors' shapes and the device's cached attributes, never memory, and launches nothing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm_params.h"
#include "kernels/tf32x3/sgemm_3xtf32.h"  // SplitOperands

namespace vecgemm {

// A problem as the kernels see it, after any operand copies: what the cost model prices and
// the tuning cache is keyed by (str()).
struct ProblemKey {
  int batch, m, n, k;
  Layout la, lb;
  bool vec4;      // every row of A and B starts 16-byte aligned: the 16-byte-load instances
  bool out_vec4;  // D's rows are 16-byte aligned: the epilogue stores 4 floats at a time
  int device;
  // "b1_m4096_n4096_k4096_cr_v4_d4": the tuning cache's key (the device is not part of it).
  std::string str() const;
  // The key of str()'s text (device -1), or none for any other text.
  static std::optional<ProblemKey> parse(const std::string& text);
};

// A kernel config of kKernelConfigs and how the problem is spread over it.
struct TilingChoice {
  int config;
  int splits;     // K slices; 1 = no split
  bool stream_k;  // unsplit, with the last partial wave as the stream-K tail
};

// A 3xTF32 row (of kTf32x3Rows) and how the problem is spread over it: K slices, and for a
// row with a split pass, the operands its kernel splits itself instead.
struct Tf32x3Tiling {
  int row;
  int splits;
  SplitOperands kernel_splits;
};
// A 3xTF32 tiling with the waves model's time for it, in ns (split passes and launches included).
struct Tf32x3Estimate {
  Tf32x3Tiling tiling;
  double ns;
};

int64_t ceil_div(int64_t a, int64_t b);
// K split `splits` ways as it runs: slices of whole K tiles of bk, each non-empty, so there
// may be fewer than asked (K = 100 asked in 8 with K tiles of 16 runs 7 slices of 16).
struct KSlices {
  int length;
  int count;
};
KSlices k_slices(int64_t k, int splits, int bk);

// The stream-K tail's schedule for this config (sgemm_stream_k.cuh), or none: the config
// has no tail, the problem is batched, or its tiles leave no partial last wave (after whole
// waves or alone: a lone partial wave is all tail).
std::optional<StreamK> stream_k_schedule(const ProblemKey& key, int config);

// The split-K factors the model considers; a tuned choice must be one of its range.
inline constexpr int kMaxSplits = 64;

// Every config with a kernel for the key (or only `only_config`) and its split-K factors
// and stream-K tail, with the model's nanoseconds, fastest first.
std::vector<std::pair<double, TilingChoice>> ranked_choices(const ProblemKey& key,
                                                            std::optional<int> only_config = std::nullopt);

// The model's time for its best choice, remembered per key, with the throughput that
// choice's 4-byte loads lose where the rows are not 16-byte aligned (the profile's
// scalar_load_percent, measured where the blocks fill the GPU): what a large problem's
// copies are weighed against.
double model_best_ns(const ProblemKey& key);
// Whether the device profile prices 3xTF32 row `row` on the key's storage orders and
// alignment (its tf32x3 storage figures): where not, auto does not plan the row.
bool tf32x3_priced(const ProblemKey& key, int row);
// The waves model's best split of a 3xTF32 row for the key (fewer splits on a tie), at the
// profile's figure for the key's storage (the fitted one's time where it has none). The
// caller has checked that the row runs on the device and takes the problem, and that the
// key's K has room for `fewest_splits` slices (tf32x3_most_splits).
Tf32x3Estimate tf32x3_cheapest_split(const ProblemKey& key, int row, int fewest_splits = 1);
// The most K slices a 3xTF32 plan of the key may have (at least 1).
int tf32x3_most_splits(const ProblemKey& key);
// For probes (set_tf32x3_splits, tuning_controls.h): the split tf32x3_cheapest_split takes
// instead of the cheapest (within its fewest and the problem's most), or 0 (any value below
// 1) for the cheapest; part of every plan's key, so that a plan made under another split
// is not reused.
void set_tf32x3_forced_splits(int splits);
int tf32x3_forced_splits();
// A 3xTF32 estimate as the planner weighs it against the SIMT model's time for the IEEE
// plan: the waves model's ns with the device profile's slack for what it underprices.
double tf32x3_weighed_ns(const Tf32x3Estimate& estimate, int device);
// The model's time for one pass copying `elements` floats into new storage.
double copy_ns(int64_t elements, int device);

// log(our time / torch.matmul's) for an IEEE plan, as the device profile's hand-off rule
// predicts it from the plan's figures: its config and K slices, `macs` (batch M N K),
// whether operands are copied, and `predicted_ns`, the model's time for it. None where the
// rule does not speak: the profile has none, or none for this config. Above 0: torch is
// predicted faster.
std::optional<double> torch_handoff_log_ratio(int device, const TilingChoice& tiling, double macs, bool copies,
                                              double predicted_ns);

// torch.matmul's time for a matrix-vector product (batch 1, M or N of 1), or none for any
// other product: cuBLAS runs a matrix-vector kernel on it, which reads the matrix once at
// the memory's rate, after its launch. What a tiled plan of such a product is weighed
// against instead of the rule above, which was fitted on no such product: a tiling spends
// all but one row (or column) of each tile on nothing, and gemv.cu serves only the
// orientation whose outputs are dot products of contiguous rows (gemv_fits).
std::optional<double> torch_matrix_vector_ns(const ProblemKey& key);

}  // namespace vecgemm
