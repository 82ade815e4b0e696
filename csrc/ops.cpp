// The vecgemm operator library: schemas (the single source of truth for names, defaults
// and mutation), the ATen implementation used on every device without a CUDA kernel, and
// the Python module that exposes the eligibility rules and the tuning controls.
#include <ATen/ATen.h>
#include <torch/extension.h>
#include <torch/library.h>

#include "problem.h"
#include "reference.h"

namespace vecgemm {

at::Tensor gemm_reference(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                          double alpha, double beta) {
  const bool batched = A.dim() == 3;
  if (C.has_value() && beta != 0.0) {
    const auto out = batched ? std::vector<int64_t>{A.size(0), A.size(1), B.size(-1)}
                             : std::vector<int64_t>{A.size(0), B.size(-1)};
    const at::Tensor c = C->expand(out);
    return batched ? at::baddbmm(c, A, B, beta, alpha) : at::addmm(c, A, B, beta, alpha);
  }
  at::Tensor out = batched ? at::bmm(A, B) : at::mm(A, B);
  if (alpha != 1.0) out.mul_(alpha);
  return out;
}

namespace {

at::Tensor sgemm_aten(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                      double alpha, double beta, c10::string_view /*variant: CUDA only*/) {
  if (auto r = contract_violation(A, B, C)) TORCH_CHECK(false, "vecgemm.sgemm: ", *r);
  return gemm_reference(A, B, C, alpha, beta);
}

void sgemm_inplace_aten(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha,
                               double beta, c10::string_view /*variant: CUDA only*/) {
  Reason r = contract_violation(A, B, C);
  if (!r) r = inplace_violation(C, A, B);
  if (r) TORCH_CHECK(false, "vecgemm.sgemm_: ", *r);
  C.copy_(gemm_reference(A, B, C, alpha, beta));
}

at::Tensor gemm_aten(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                     double alpha, double beta) {
  return gemm_reference(A, B, C, alpha, beta);
}

}  // namespace

TORCH_LIBRARY(vecgemm, m) {
  // Strict: float32 operands the chosen kernel can take, else a RuntimeError naming the rule.
  m.def("sgemm(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0, "
        "str variant=\"auto\") -> Tensor");
  // In place, as BLAS: C = alpha * A @ B + beta * C. It returns nothing because
  // functionalization (torch.compile) cannot handle a custom op returning an alias of an
  // input.
  m.def("sgemm_(Tensor(a!) C, Tensor A, Tensor B, float alpha=1.0, float beta=0.0, "
        "str variant=\"auto\") -> ()");
  // Lenient: any input torch.addmm / torch.baddbmm accept; the kernel where it applies.
  m.def("gemm(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0) -> Tensor");
}

TORCH_LIBRARY_IMPL(vecgemm, CompositeExplicitAutograd, m) {
  m.impl("sgemm", &sgemm_aten);
  m.impl("sgemm_", &sgemm_inplace_aten);
  m.impl("gemm", &gemm_aten);
}

}  // namespace vecgemm
