#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace vecgemm {

// alpha * A @ B + beta * C through ATen (torch.addmm / torch.baddbmm), with beta == 0
// ignoring C. The non-CUDA implementation of every op and the lenient op's fallback.
at::Tensor gemm_reference(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                          double alpha, double beta);

}  // namespace vecgemm
