// The vecgemm operator library: schemas (the single source of truth for names, defaults
// and mutation) and the ATen implementation used on every device without a CUDA kernel.
// Autograd's side is autograd.cpp; the CUDA kernels register in runtime/dispatch.cpp.
#include <ATen/ATen.h>
#include <torch/extension.h>
#include <torch/library.h>

#include "op_handles.h"
#include "precision.h"
#include "reference.h"
#include "rules.h"

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

const c10::TypedOperatorHandle<GemmSignature>& gemm_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("vecgemm::gemm", "").typed<GemmSignature>();
  return op;
}

const c10::TypedOperatorHandle<SgemmSignature>& sgemm_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("vecgemm::sgemm", "").typed<SgemmSignature>();
  return op;
}

const c10::TypedOperatorHandle<SgemmInplaceSignature>& sgemm_inplace_op() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("vecgemm::sgemm_", "").typed<SgemmInplaceSignature>();
  return op;
}

const c10::TypedOperatorHandle<LinearSignature>& linear_op() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("vecgemm::linear", "").typed<LinearSignature>();
  return op;
}

namespace {

// Off the GPU every precision computes as ATen does (IEEE); a misspelt one is still an error.
at::Tensor sgemm_aten(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                      double alpha, double beta, c10::string_view /*variant: CUDA only*/, c10::string_view precision) {
  parse_precision(precision);
  if (auto r = contract_violation(A, B, C)) TORCH_CHECK(false, "vecgemm.sgemm: ", *r);
  return gemm_reference(A, B, C, alpha, beta);
}

void sgemm_inplace_aten(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha,
                               double beta, c10::string_view /*variant: CUDA only*/, c10::string_view precision) {
  parse_precision(precision);
  Reason r = contract_violation(A, B, C);
  if (!r) r = inplace_violation(C, A, B);
  if (r) TORCH_CHECK(false, "vecgemm.sgemm_: ", *r);
  C.copy_(gemm_reference(A, B, C, alpha, beta));
}

// torch.nn.functional.linear over the lenient op: the input's leading dimensions flattened
// into rows, weight^T a column-major view the kernels read in place, the bias added in the
// epilogue as a broadcast C. Composite: autograd, torch.compile and DTensor see the
// reshapes, the transpose and the product, each with its own rules.
at::Tensor linear_composite(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            c10::string_view precision) {
  parse_precision(precision);  // before torch's own path, which would not read it
  if (input.dim() < 1 || weight.dim() != 2 || input.sym_size(-1) != weight.sym_size(-1))
    return at::linear(input, weight, bias);  // torch's result, or torch's error
  const bool with_bias = bias.has_value() && bias->defined();
  const std::optional<at::Tensor> c = with_bias ? bias : std::nullopt;
  const double beta = with_bias ? 1.0 : 0.0;
  if (input.dim() == 2) return gemm_op().call(input, weight.t(), c, 1.0, beta, precision);
  const c10::SymIntArrayRef sizes = input.sym_sizes();
  // The row count written out: reshape(-1, 0) cannot infer the -1 of an empty input.
  c10::SymInt rows = 1;
  for (size_t d = 0; d + 1 < sizes.size(); ++d) rows *= sizes[d];
  const at::Tensor out = gemm_op().call(input.reshape_symint({rows, sizes.back()}), weight.t(), c, 1.0, beta, precision);
  std::vector<c10::SymInt> out_sizes(sizes.begin(), sizes.end() - 1);
  out_sizes.push_back(weight.sym_size(0));
  return out.reshape_symint(out_sizes);
}

at::Tensor gemm_aten(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                     double alpha, double beta, c10::string_view precision) {
  parse_precision(precision);
  return gemm_reference(A, B, C, alpha, beta);
}

}  // namespace

TORCH_LIBRARY(vecgemm, m) {
  // Strict: float32 operands the chosen kernel can take, else a RuntimeError naming the rule.
  // precision: "auto" (the process-wide switch, read when the product runs), "ieee" or
  // "3xtf32" (precision.h); last, so that calls written before it keep their meaning.
  m.def("sgemm(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0, "
        "str variant=\"auto\", str precision=\"auto\") -> Tensor");
  // In place, as BLAS: C = alpha * A @ B + beta * C. It returns nothing because
  // functionalization (torch.compile) cannot handle a custom op returning an alias of an
  // input.
  m.def("sgemm_(Tensor(a!) C, Tensor A, Tensor B, float alpha=1.0, float beta=0.0, "
        "str variant=\"auto\", str precision=\"auto\") -> ()");
  // Lenient: any input torch.addmm / torch.baddbmm accept; the kernel where it applies.
  // A 3xTF32 request the GPU cannot serve runs in IEEE fp32 (plan() says why).
  m.def("gemm(Tensor A, Tensor B, Tensor? C=None, float alpha=1.0, float beta=0.0, "
        "str precision=\"auto\") -> Tensor");
  // torch.nn.functional.linear on the lenient op.
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None, str precision=\"auto\") -> Tensor");
}

TORCH_LIBRARY_IMPL(vecgemm, CompositeImplicitAutograd, m) { m.impl("linear", &linear_composite); }

TORCH_LIBRARY_IMPL(vecgemm, CompositeExplicitAutograd, m) {
  m.impl("sgemm", &sgemm_aten);
  m.impl("sgemm_", &sgemm_inplace_aten);
  m.impl("gemm", &gemm_aten);
}

}  // namespace vecgemm
