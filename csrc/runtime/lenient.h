// What the lenient op decides, for the other CUDA-side entry points that serve products the
// way it does (the whole-program switch, aten_override.cpp).
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

#include "planner/plan.h"
#include "precision.h"

namespace vecgemm {

// The plan the lenient op runs alpha * A @ B + beta * C on, into a dense row-major D whose
// rows start 16-byte aligned or not as d_rows_aligned says (by default a freshly allocated
// D's: where N is a multiple of 4), or none where torch's own product serves it: a rule
// refuses the problem, or torch's fp32 product stands in for a declined 3xTF32 or a plan
// predicted slower than torch's (kernel_rules.h, hands_to_torch). Where none, `refused`
// (if given) says which: a rule (torch's semantics then stand, errors included) or the plan.
std::shared_ptr<const Plan> lenient_plan(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                         PrecisionRequest request, std::optional<bool> d_rows_aligned = std::nullopt,
                                         bool* refused = nullptr);

// Whether D's rows start 16-byte aligned, so that the epilogue stores four floats at a time.
bool rows_aligned(const at::Tensor& D);

}  // namespace vecgemm
