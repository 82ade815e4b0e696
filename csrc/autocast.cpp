// The ops under torch.autocast: fp32 ops, in autocast's fp32 list. Inside an autocast
// region autocast casts the inputs of aten's products to float16 or bfloat16; left alone
// (its default for an op it does not know, a fallthrough), it would still reach the
// products a vecgemm op runs inside itself: the lenient op's hand-off to torch and every
// fallback would come out in half precision while the kernels' results are float32, the
// dtype depending on the problem's shape. Here each op runs as autocast runs an op of its
// fp32 list: its floating-point inputs (float16, bfloat16) cast to float32, autocast off
// for what runs beneath, so the result is float32 on every path. The in-place op is not
// cast (autocast casts no in-place op): it computes in its operands' own dtypes, as outside
// autocast. The composite linear is not registered: it runs the lenient op, which is.
#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <optional>

#include "op_handles.h"

namespace vecgemm {
namespace {

// Autocast's fp32 cast: float16 and bfloat16 up, every other dtype (float64, integers) as it is.
at::Tensor up(const at::Tensor& t) {
  const auto dtype = t.scalar_type();
  return dtype == at::kHalf || dtype == at::kBFloat16 ? t.to(at::kFloat) : t;
}
std::optional<at::Tensor> up(const std::optional<at::Tensor>& t) {
  if (!t) return std::nullopt;
  return up(*t);
}

template <c10::DispatchKey kAutocast>
at::Tensor gemm_fp32(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                     double beta, c10::string_view precision) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocast);
  return gemm_op().call(up(A), up(B), up(C), alpha, beta, precision);
}

template <c10::DispatchKey kAutocast>
at::Tensor sgemm_fp32(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                      double beta, c10::string_view variant, c10::string_view precision) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocast);
  return sgemm_op().call(up(A), up(B), up(C), alpha, beta, variant, precision);
}

template <c10::DispatchKey kAutocast>
void sgemm_inplace_uncast(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double alpha, double beta,
                          c10::string_view variant, c10::string_view precision) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocast);
  sgemm_inplace_op().call(C, A, B, alpha, beta, variant, precision);
}

}  // namespace

TORCH_LIBRARY_IMPL(vecgemm, AutocastCUDA, m) {
  m.impl("gemm", &gemm_fp32<c10::DispatchKey::AutocastCUDA>);
  m.impl("sgemm", &sgemm_fp32<c10::DispatchKey::AutocastCUDA>);
  m.impl("sgemm_", &sgemm_inplace_uncast<c10::DispatchKey::AutocastCUDA>);
}

TORCH_LIBRARY_IMPL(vecgemm, AutocastCPU, m) {
  m.impl("gemm", &gemm_fp32<c10::DispatchKey::AutocastCPU>);
  m.impl("sgemm", &sgemm_fp32<c10::DispatchKey::AutocastCPU>);
  m.impl("sgemm_", &sgemm_inplace_uncast<c10::DispatchKey::AutocastCPU>);
}

}  // namespace vecgemm
