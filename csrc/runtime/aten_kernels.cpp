// The whole-program switch's kernels (../aten_override.h): aten's float32 CUDA products on the
// library's kernels where the lenient op would run them, torch's own CUDA kernels elsewhere.
// torch's are called directly (at::cuda::mm and the like, the kernels the CUDA key had), so
// a product the library does not take never comes back here.
#include "aten_override.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/baddbmm_cuda_dispatch.h>
#include <ATen/ops/bmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <memory>

#include "rules.h"
#include "runtime/execute.h"
#include "runtime/lenient.h"

namespace vecgemm {
namespace {

std::unique_ptr<torch::Library> g_library;  // the registrations while the switch is on (its mutex guards it)

// A real scalar as the kernels take alpha and beta; none for a complex one (torch's kernels
// give its error).
std::optional<double> real(const c10::Scalar& s) {
  if (s.isComplex()) return std::nullopt;
  return s.toDouble();
}

// alpha * A @ B + beta * C into a new tensor on the library's kernels, or none.
std::optional<at::Tensor> product(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                                  double alpha, double beta) {
  const std::shared_ptr<const Plan> p = lenient_plan(A, B, C, aten_override_request());
  if (!p) return std::nullopt;
  at::Tensor D = at::empty(shape_of(A, B).out_sizes(), A.options());
  const c10::cuda::CUDAGuard guard(A.device());
  execute(*p, D, A, B, C, alpha, beta);
  return D;
}

// The same into `out`, resized as torch resizes an out= argument; false leaves the product
// to torch (before anything is resized where a rule refuses it). out's matrices may have
// padded rows or columns (inductor pads its buffers' strides). A column-major out (inductor
// lays some gradients out so) is a row-major out^T = B^T A^T: the same kernels, operands
// swapped, C broadcast to the result first.
bool product_into(at::Tensor& out, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                  double alpha, double beta) {
  if (out.scalar_type() != at::kFloat || out.device() != A.device()) return false;
  const PrecisionRequest request = aten_override_request();  // the switch read once
  std::shared_ptr<const Plan> p = lenient_plan(A, B, C, request);
  if (!p) return false;
  const std::vector<int64_t> sizes = shape_of(A, B).out_sizes();
  at::native::resize_output(out, sizes);
  const std::optional<MatrixStorage> storage = storage_of(out);
  if (!storage) return false;
  const c10::cuda::CUDAGuard guard(A.device());
  if (storage->layout == Layout::RowMajor) {
    if (!writable_output(out, A, B, C)) return false;
    // The plan was made for a fresh D; an out whose rows start otherwise takes its own.
    if (rows_aligned(out) != p->key.out_vec4) p = lenient_plan(A, B, C, request, rows_aligned(out));
    if (!p) return false;
    execute(*p, out, A, B, C, alpha, beta);
    return true;
  }
  const at::Tensor Dt = out.transpose(-1, -2), At = B.transpose(-1, -2), Bt = A.transpose(-1, -2);
  std::optional<at::Tensor> Ct;
  if (C) Ct = C->expand(sizes).transpose(-1, -2);  // broadcastable: the rules above checked it
  if (!writable_output(Dt, At, Bt, C)) return false;
  const std::shared_ptr<const Plan> t = lenient_plan(At, Bt, Ct, request, rows_aligned(Dt));
  if (!t) return false;
  execute(*t, Dt, At, Bt, Ct, alpha, beta);
  return true;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (auto D = product(self, mat2, std::nullopt, 1.0, 0.0)) return *D;
  return at::cuda::mm(self, mat2);
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (product_into(out, self, mat2, std::nullopt, 1.0, 0.0)) return out;
  return at::cuda::mm_outf(self, mat2, out);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (auto D = product(self, mat2, std::nullopt, 1.0, 0.0)) return *D;
  return at::cuda::bmm(self, mat2);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (product_into(out, self, mat2, std::nullopt, 1.0, 0.0)) return out;
  return at::cuda::bmm_outf(self, mat2, out);
}

// addmm and baddbmm: self is C, broadcast to the result; at beta == 0 it is not read, as in
// torch.
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  const auto b = real(beta), a = real(alpha);
  if (a && b)
    if (auto D = product(mat1, mat2, self, *a, *b)) return *D;
  return at::cuda::addmm(self, mat1, mat2, beta, alpha);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  const auto b = real(beta), a = real(alpha);
  if (a && b && product_into(out, mat1, mat2, self, *a, *b)) return out;
  return at::cuda::addmm_outf(self, mat1, mat2, beta, alpha, out);
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  const auto b = real(beta), a = real(alpha);
  if (a && b)
    if (auto D = product(batch1, batch2, self, *a, *b)) return *D;
  return at::cuda::baddbmm(self, batch1, batch2, beta, alpha);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  const auto b = real(beta), a = real(alpha);
  if (a && b && product_into(out, batch1, batch2, self, *a, *b)) return out;
  return at::cuda::baddbmm_outf(self, batch1, batch2, beta, alpha, out);
}

std::unique_ptr<torch::Library> registrations() {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::CUDA, __FILE__,
                                              __LINE__);
  lib->impl("mm", TORCH_FN(mm));
  lib->impl("mm.out", TORCH_FN(mm_out));
  lib->impl("bmm", TORCH_FN(bmm));
  lib->impl("bmm.out", TORCH_FN(bmm_out));
  lib->impl("addmm", TORCH_FN(addmm));
  lib->impl("addmm.out", TORCH_FN(addmm_out));
  lib->impl("baddbmm", TORCH_FN(baddbmm));
  lib->impl("baddbmm.out", TORCH_FN(baddbmm_out));
  return lib;
}

}  // namespace

void register_aten_kernels(bool on) {
  if (on) g_library = registrations();
  else g_library.reset();  // the dispatcher takes torch's kernels back
}

}  // namespace vecgemm
