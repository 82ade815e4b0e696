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
  // With C, torch.addmm's rules even at beta == 0: C must broadcast to the result (torch's
  // error otherwise), and its values are not read.
  if (C.has_value()) return batched ? at::baddbmm(*C, A, B, beta, alpha) : at::addmm(*C, A, B, beta, alpha);
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

// The in-place op has no derivative formula. Under grad mode, with a tensor that requires
// grad, it refuses, rather than let the gradient go missing; otherwise it runs below
// autograd as usual.
void sgemm_inplace_autograd(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha, double beta,
                            c10::string_view variant) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (C.requires_grad() || A.requires_grad() || B.requires_grad())),
              "vecgemm.sgemm_: the in-place op has no gradient. Use the out-of-place "
              "torch.ops.vecgemm.sgemm(A, B, C, alpha, beta), which autograd differentiates, or call sgemm_ "
              "under torch.no_grad()");
  const at::AutoDispatchBelowAutograd below_autograd;
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("vecgemm::sgemm_", "")
                             .typed<void(at::Tensor&, const at::Tensor&, const at::Tensor&, double, double,
                                         c10::string_view)>();
  op.call(C, A, B, alpha, beta, variant);
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

TORCH_LIBRARY_IMPL(vecgemm, Autograd, m) { m.impl("sgemm_", &sgemm_inplace_autograd); }

TORCH_LIBRARY_IMPL(vecgemm, CompositeExplicitAutograd, m) {
  m.impl("sgemm", &sgemm_aten);
  m.impl("sgemm_", &sgemm_inplace_aten);
  m.impl("gemm", &gemm_aten);
}

}  // namespace vecgemm
