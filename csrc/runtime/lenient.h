// What the lenient op decides, for the other CUDA-side entry points that serve products the
// way it does (the whole-program switch, aten_override.cpp).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

#include "planner/plan.h"
#include "precision.h"

namespace vecgemm {

// The plan the lenient op runs alpha * A @ B + beta * C on, into a freshly allocated dense
// D (rows 16-byte aligned where N is a multiple of 4), or none where torch's own product
// serves it: a rule refuses the problem, or precision 3xTF32 is declined and torch's fp32
// product stands in (dispatch.cpp, hands_to_torch).
std::optional<Plan> lenient_plan(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                 PrecisionRequest request);

// Whether D is what lenient_plan plans for: float32, dense row-major with the product's
// sizes, its rows 16-byte aligned exactly where N is a multiple of 4, and overlapping none of
// the operands.
bool planned_output(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C);

}  // namespace vecgemm
