// The ops at the Autograd dispatch key, in C++: the derivative of out = alpha * A @ B +
// beta * C for the out-of-place ops, and the in-place op's refusal under grad mode.
//
// A Python formula (torch.library.register_autograd) would run Python on every call, grad
// mode or not: several microseconds, as much as a small product's launch. Here a call
// whose inputs need no gradient goes straight below autograd, and one that does records a
// C++ node. AOTAutograd traces through both like through ATen's own formulas, so
// torch.compile sees the backward's products as ops too.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "op_handles.h"
#include "precision.h"
#include "rules.h"

namespace vecgemm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The product itself, below autograd: the strict op with its variant, or the lenient one.
at::Tensor product(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                   double beta, const std::optional<std::string>& variant, const std::string& precision) {
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return variant ? sgemm_op().call(A, B, C, alpha, beta, *variant, precision)
                 : gemm_op().call(A, B, C, alpha, beta, precision);
}

class GemmFunction : public torch::autograd::Function<GemmFunction> {
 public:
  // The backward calls ops only, so compiled autograd may trace it.
  static constexpr bool is_traceable = true;

  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& A, const at::Tensor& B,
                            const std::optional<at::Tensor>& C, double alpha, double beta,
                            const std::optional<std::string>& variant, const std::string& precision) {
    // dA needs B and dB needs A: keep only what a gradient asked for will read.
    ctx->save_for_backward({B.requires_grad() ? A : at::Tensor(), A.requires_grad() ? B : at::Tensor()});
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["beta"] = beta;
    if (C) ctx->saved_data["c_sizes"] = C->sym_sizes();
    // Resolved by the caller: the gradients are computed in the forward's precision even if
    // the switch changes before the backward runs.
    ctx->saved_data["precision"] = precision;
    return product(A, B, C, alpha, beta, variant, precision);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &A = saved[0], &B = saved[1], &grad = grads[0];
    const double alpha = ctx->saved_data["alpha"].toDouble(), beta = ctx->saved_data["beta"].toDouble();
    const std::string precision = ctx->saved_data["precision"].toStringRef();
    // Through the lenient op: the transposed operands are column-major views the kernels
    // read in place, and other dtypes (float64 gradcheck) fall back to ATen. Lenient in
    // precision too: where the forward ran 3xTF32 the backward can (same GPU).
    at::Tensor grad_a, grad_b, grad_c;
    if (ctx->needs_input_grad(0)) grad_a = gemm_op().call(grad, B.mT(), std::nullopt, alpha, 0.0, precision);
    if (ctx->needs_input_grad(1)) grad_b = gemm_op().call(A.mT(), grad, std::nullopt, alpha, 0.0, precision);
    // The node's inputs are the tensors given: C is the third only where there was one.
    const auto c_sizes = ctx->saved_data.find("c_sizes");
    if (c_sizes != ctx->saved_data.end() && ctx->needs_input_grad(2))
      grad_c = at::sum_to(grad * beta, c_sizes->second.toSymIntVector());
    // One gradient per argument of forward: none for alpha, beta, the variant and precision.
    return {grad_a, grad_b, grad_c, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool any_requires_grad(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C) {
  return at::GradMode::is_enabled() && (A.requires_grad() || B.requires_grad() || (C && C->requires_grad()));
}

// Without a gradient the precision goes down as given ("auto" resolved when the product
// runs); with one, "auto" is resolved here, once, for the forward and its backward alike.
at::Tensor gemm_autograd(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                         double beta, const std::optional<std::string>& variant, c10::string_view precision) {
  if (!any_requires_grad(A, B, C)) return product(A, B, C, alpha, beta, variant, std::string(precision));
  const Precision resolved = effective_precision(variant.value_or("auto"), parse_precision(precision));
  return GemmFunction::apply(A, B, C, alpha, beta, variant, std::string(precision_name(resolved)));
}

at::Tensor sgemm_autograd(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                          double beta, c10::string_view variant, c10::string_view precision) {
  return gemm_autograd(A, B, C, alpha, beta, std::string(variant), precision);
}

at::Tensor lenient_gemm_autograd(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                 double alpha, double beta, c10::string_view precision) {
  return gemm_autograd(A, B, C, alpha, beta, std::nullopt, precision);
}

// The in-place op has no derivative formula. Under grad mode, with a tensor that requires
// grad, it refuses, rather than let the gradient go missing; otherwise it runs below
// autograd as usual.
void sgemm_inplace_autograd(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha, double beta,
                            c10::string_view variant, c10::string_view precision) {
  TORCH_CHECK(!any_requires_grad(A, B, C),
              "vecgemm.sgemm_: the in-place op has no gradient. Use the out-of-place "
              "torch.ops.vecgemm.sgemm(A, B, C, alpha, beta), which autograd differentiates, or call sgemm_ "
              "under torch.no_grad()");
  const at::AutoDispatchBelowAutograd below_autograd;
  sgemm_inplace_op().call(C, A, B, alpha, beta, variant, precision);
}

}  // namespace

TORCH_LIBRARY_IMPL(vecgemm, Autograd, m) {
  m.impl("sgemm", &sgemm_autograd);
  m.impl("gemm", &lenient_gemm_autograd);
  m.impl("sgemm_", &sgemm_inplace_autograd);
}

}  // namespace vecgemm
