// What the planner decided for a product, in plain terms, for Python
// (torch_vecgemm.plan()): the same in a CUDA build (runtime/dispatch.cpp, from the plan of
// planner/plan.h) and a CPU-only one (cpu_only.cpp: always the fallback).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace vecgemm {

struct PlanSummary {
  std::string family;       // "tiled", "async", "gemv", "vectorized", "tf32x3", "empty" or "fallback"
  std::optional<std::string> kernel;  // the kernel's variant name; none for "empty" and "fallback"
  int split_k = 1;
  bool stream_k = false;
  std::optional<std::string> copy_a, copy_b;  // the copy's storage order, "row-major" or "column-major"
  std::string orders;        // the storage orders the kernel reads, "rr" .. "cc"; "" on fallback
  // The kernel computes C^T = B^T A^T: its A is B^T and its B is A^T (orders are theirs).
  bool transposed = false;
  std::optional<std::string> fallback_reason;
  // What the kernel computes in, "ieee" or "3xtf32"; none on "fallback" (torch's own
  // settings decide there).
  std::optional<std::string> precision;
  // 3xTF32 was asked for (or the switch asks for it) and IEEE fp32 runs instead: why. Either
  // the GPU or the build cannot run it (the strict ops raise this), or, with the auto
  // variant, 3xTF32 would be less accurate or slower on this problem.
  std::optional<std::string> precision_fallback;
  bool autotune_pending = false;
  // The cost model's time for the plan, in microseconds; none where no model prices it.
  std::optional<double> predicted_us;
  std::string description;   // describe(): what selected_kernel returns
};

// The lenient op's plan for variant "auto", the strict op's for any other variant.
PlanSummary plan_summary(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                         const std::string& variant, const std::string& precision = "auto");

// plan_summary(...).description: a kernel name (with its split-K factor, tail, copies) or
// "fallback: <reason>".
std::string selected_kernel(const at::Tensor& A, const at::Tensor& B, const std::string& variant,
                            const std::string& precision = "auto");

// Resident blocks of a kernel config's kernel on the current CUDA device (SMs x blocks per
// SM): the slots a wave fills.
int resident_blocks(const std::string& config);

// The GPU architectures the kernels were compiled for, as nvcc numbers them (900 for sm_90);
// none in a CPU-only build.
std::vector<int> built_architectures();

}  // namespace vecgemm
