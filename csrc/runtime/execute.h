// Execution of a plan (plan.h): the operand copies, the kernel launches, the second passes,
// their workspaces, on the current stream under the caller's device guard.
#pragma once
#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include <optional>

#include "planner/plan.h"

namespace vecgemm {

// D = alpha * A @ B + beta * C as `plan` says, with D row-major; C (any strides, broadcast
// allowed) is only read when beta != 0 and may be D itself. The plan is of (A, B) for this
// D (plan_of); the caller has checked the rules.
//
// Execution departs from the plan only for memory: the copies, the split-K workspace and
// the stream-K pieces are temporary tensors from PyTorch's caching allocator, for speed
// only, and where one cannot be had the product runs without it (the operands as they are,
// unsplit, no tail), with the same result; a plan run on its transpose runs its
// untransposed plan instead. In autotune mode a problem met for the first
// time has its candidates timed first, and torch.matmul's product of A and B beside them
// (runtime/autotune.h).
void execute(const Plan& plan, const at::Tensor& D, const at::Tensor& A, const at::Tensor& B,
             const std::optional<at::Tensor>& C, double alpha, double beta);

// alpha * A @ B + beta * C as the lenient op computes it where it hands a product to torch
// (gemm_reference's values), on torch's CUDA kernels directly: at::mm would come back to the
// library under the whole-program switch, and pass autograd's dispatch again. A, B (and C)
// on the current CUDA device, as the rules take them.
at::Tensor torch_product(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                         double beta);

}  // namespace vecgemm
