// How one product will run, decided before anything runs. plan() is pure: from the
// operands' shapes, storage and alignment, the tuning cache and the cost model, it picks the
// kernel family, the kernel config, the split-K factor, the stream-K tail and the operand
// copies. It allocates nothing, launches nothing and times nothing; execute() (execute.h)
// carries the plan out, and describe() puts it in words.
#pragma once
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "planner/cost_model.h"
#include "rules.h"

namespace vecgemm {

// What the `variant` argument of the strict ops asks for.
struct AutoSelect {};    // "auto": the planner's choice
struct SeedKernel {};    // "vectorized": the seed's kernel, on its own contract
struct MatrixVector {};  // "gemv"
struct FixedConfig {     // a kernel config by name: its kernel, the split still chosen
  int config;
};
struct FixedTf32x3 {     // a 3xTF32 kernel by name (a row of kTf32x3Rows): the split still chosen
  int row;
};
using Variant = std::variant<AutoSelect, SeedKernel, MatrixVector, FixedConfig, FixedTf32x3>;

std::optional<Variant> parse_variant(const std::string& name);
// "auto", "vectorized", "gemv", every kernel config's name, then every 3xTF32 row's.
std::vector<std::string> variant_names();

enum class Family {
  Empty,       // no kernel: M, N or the batch is 0 (nothing to write) or K is (D = beta * C)
  Vectorized,  // sgemm_vectorized.cuh
  Gemv,        // gemv.cu
  Tiled,       // sgemm_tiled.cuh (+ sgemm_stream_k.cuh)
  Async,       // sgemm_async.cuh
  Tf32x3,      // a row of kTf32x3Rows (tf32x3_rows.h): precision "3xtf32"
};

// The input as the planner sees it: shapes, storage orders, alignment; never the data.
struct Problem {
  GemmShape shape;
  MatrixStorage a, b;
  bool a_vec4, b_vec4;            // every row of the operand starts 16-byte aligned
  bool a_broadcast, b_broadcast;  // one matrix expanded over the batch (batch stride 0)
  bool d_vec4;                    // the output's rows start 16-byte aligned
  int device;
};
// The caller has checked the rules (storage_of is defined for A and B).
Problem problem_of(const at::Tensor& A, const at::Tensor& B, bool d_vec4);
// The problem as the kernels read it with no operand copies.
ProblemKey key_as_given(const Problem& p);

// A copy of an operand made before the kernel: into storage of `order`, every row 16-byte
// aligned, K zero-filled up to Plan::k.
struct OperandCopy {
  bool made = false;
  Layout order = Layout::RowMajor;
};

struct Plan {
  Family family = Family::Tiled;
  Layout given_a = Layout::RowMajor, given_b = Layout::RowMajor;  // the operands' own orders
  OperandCopy copy_a, copy_b;
  // The problem the kernel reads: after the copies (K padded where they pad it).
  ProblemKey key{};
  // Family::Tiled / Family::Async: the config, the split, the tail and its schedule.
  TilingChoice tiling{};
  std::optional<StreamK> stream_k;
  // Family::Gemv: K slices (gemv_k_splits), summed by the split-K reduction where above 1.
  int gemv_splits = 1;
  // Family::Tf32x3: the row, its split, the operands its kernel splits itself.
  Tf32x3Tiling tf32x3{};
  // Family::Tf32x3 on the transpose, C^T = B^T A^T: a product of few rows and many columns
  // run as one of many rows, which fills the wgmma row's tiles (key: the transposed problem,
  // B^T as the kernel's A, A^T as its B). Its K is always split: the kernel writes C^T's
  // partial sums and the reduction writes D in its own order (splitk_reduce_transposed).
  bool transposed = false;
  // Autotune mode and no tuned choice yet: `tiling` is the model's, and execution times the
  // model's best candidates first and runs the fastest.
  bool autotune_pending = false;
  // The cost model's time for the plan as made (copies, split passes and launches
  // included), in ns; NaN where no model prices it (vectorized, gemv, a named IEEE config).
  double predicted_ns = NAN;
  // Precision 3xTF32 with the auto variant, planned on the IEEE kernels instead: why
  // (tf32x3_declined, plan.cpp: less accurate than IEEE fp32 there, or predicted slower).
  Reason tf32x3_declined;
  // An auto IEEE plan torch.matmul is faster on: why. Untuned, the cost model predicts it
  // (cost_model.h: torch_matrix_vector_ns for a matrix-vector product, else the device
  // profile's hand-off rule, torch_handoff_log_ratio); tuned, autotune timed it
  // (runtime/autotune.h); never set on an autotune-pending plan. The lenient op then runs
  // torch's product (kernel_rules.h, hands_to_torch); the strict ops run this plan.
  Reason torch_faster;
  // A plan with operand copies carries the same product planned without them: what
  // execution runs where the copies cannot be allocated (execute.h). Null where no copy
  // is planned.
  std::shared_ptr<const Plan> without_copies;
  // A transposed plan carries the product planned as given: what execution runs where the
  // split's workspace cannot be allocated. Null on every other plan.
  std::shared_ptr<const Plan> untransposed;
};

// precision: what the call computes in, already resolved and checked against the variant
// and the device (planner/kernel_rules.h): Ieee plans the SIMT kernels; Tf32x3 with a named
// row plans that row, and with the auto variant the row predicted fastest wherever 3xTF32
// is as accurate as IEEE fp32 and predicted faster than the IEEE plan, the IEEE plan
// elsewhere (Plan::tf32x3_declined says why). Plans are kept per key (everything they
// depend on), so a repeated problem costs one lookup and shares the plan made first.
std::shared_ptr<const Plan> plan(const Problem& problem, const Variant& variant, Precision precision);

// "tiled_128x128x8_t816 split-k 3, copy of A (column-major) B", "tf32x3_128x64_mma
// split-k 8", "gemv", "vectorized", "empty product".
std::string describe(const Plan& plan);

}  // namespace vecgemm
