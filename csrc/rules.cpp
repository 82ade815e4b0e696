#include "rules.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>

#include <cstdint>


namespace vecgemm {
namespace {

std::string sizes_str(const at::Tensor& t) { return list_str(t.sizes()); }

// Elements of C that share an address, which has_internal_overlap cannot always tell (it
// answers "too hard" for most strided views): a row (or column) shorter than the stride
// between rows (columns), or matrices of a batch closer than one matrix's extent.
Reason self_overlap(const at::Tensor& C) {
  const MatrixStorage s = *storage_of(C);
  const int64_t rows = C.size(-2), cols = C.size(-1);
  const int64_t line = s.layout == Layout::RowMajor ? cols : rows;  // elements along the contiguous dimension
  const int64_t lines = s.layout == Layout::RowMajor ? rows : cols;
  if (lines > 1 && line > 1 && s.ld < line)
    return "C's " + std::string(s.layout == Layout::RowMajor ? "rows" : "columns") + " overlap (stride " +
           std::to_string(s.ld) + " between them, " + std::to_string(line) +
           " elements each); it cannot be written in place";
  if (C.dim() == 3 && C.size(0) > 1 && rows > 0 && cols > 0) {
    const int64_t extent = (rows - 1) * C.stride(-2) + (cols - 1) * C.stride(-1) + 1;
    if (C.stride(0) < extent)
      return "C's matrices overlap (batch stride " + std::to_string(C.stride(0)) + ", each spans " +
             std::to_string(extent) + " elements); it cannot be written in place";
  }
  return std::nullopt;
}

}  // namespace

bool spans_intersect(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.storage().is_alias_of(b.storage())) return false;
  auto span = [](const at::Tensor& t) {
    const auto first = reinterpret_cast<uintptr_t>(t.data_ptr());
    return std::make_pair(first, first + (last_offset(t) + 1) * t.element_size());
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

int64_t last_offset(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last;
}

std::string list_str(c10::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::optional<MatrixStorage> storage_of(const at::Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  // A dimension of size 1 has no meaningful stride: it never moves the pointer.
  if (cols == 1 || cs == 1) return MatrixStorage{Layout::RowMajor, rows == 1 ? 0 : rs};
  if (rows == 1 || rs == 1) return MatrixStorage{Layout::ColMajor, cols == 1 ? 0 : cs};
  return std::nullopt;
}

std::vector<int64_t> GemmShape::out_sizes() const {
  if (batched) return {batch, m, n};
  return {m, n};
}

GemmShape shape_of(const at::Tensor& A, const at::Tensor& B) {
  const bool batched = A.dim() == 3;
  return GemmShape{batched ? A.size(0) : 1, A.size(-2), B.size(-1), A.size(-1), batched};
}

Reason contract_violation(const at::Tensor& A, const at::Tensor& B,
                          const std::optional<at::Tensor>& C) {
  if (!(A.dim() == 2 || A.dim() == 3) || A.dim() != B.dim())
    return "A and B must both be matrices (2-D) or both batches of matrices (3-D); got A " +
           std::to_string(A.dim()) + "-D and B " + std::to_string(B.dim()) + "-D";
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"A", &A}, {"B", &B},
                                {"C", C ? &*C : nullptr}}) {
    if (t == nullptr) continue;
    if (t->scalar_type() != at::kFloat)
      return std::string(name) + " must be float32, got " + std::string(c10::toString(t->scalar_type()));
    if (t->device() != A.device())
      return std::string("tensors are on different devices: A on ") + A.device().str() + ", " +
             name + " on " + t->device().str();
  }
  if (A.size(-1) != B.size(-2))
    return "inner dimensions differ: A is " + sizes_str(A) + ", B is " + sizes_str(B);
  if (A.dim() == 3 && A.size(0) != B.size(0))
    return "batch sizes differ: A is " + sizes_str(A) + ", B is " + sizes_str(B) +
           " (expand B to broadcast it over the batch)";
  if (C) {
    const auto out = shape_of(A, B).out_sizes();
    if (!at::is_expandable_to(C->sizes(), out))
      return "C of shape " + sizes_str(*C) + " does not broadcast to the result's shape " +
             list_str(out);
  }
  return std::nullopt;
}

Reason inplace_violation(const at::Tensor& C, const at::Tensor& A, const at::Tensor& B) {
  if (C.sizes() != c10::IntArrayRef(shape_of(A, B).out_sizes()))
    return "C of shape " + sizes_str(C) + " must have exactly the result's shape for the in-place op";
  if (!storage_of(C))
    return "C is neither row- nor column-major (strides " + list_str(C.strides()) + ")";
  if (at::has_internal_overlap(C) == at::MemOverlap::Yes)
    return "C has elements that share memory (an expanded view); it cannot be written in place";
  if (auto r = self_overlap(C)) return r;
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"A", &A}, {"B", &B}}) {
    if (spans_intersect(C, *t))
      return std::string("C overlaps ") + name + " in memory; the in-place op would read what it writes";
  }
  return std::nullopt;
}

bool writable_output(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B,
                     const std::optional<at::Tensor>& C) {
  // The in-place op's rules for its output (the result's sizes, no element twice, apart from
  // A and B), row-major here, and apart from C too. Rows may be padded (inductor pads a
  // buffer's rows to 16 bytes and more): the kernels store through D's row stride.
  if (D.scalar_type() != at::kFloat || D.device() != A.device() || inplace_violation(D, A, B)) return false;
  return storage_of(D)->layout == Layout::RowMajor && !(C && spans_intersect(D, *C));
}

Reason fallback_reason(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                       const std::string& variant, const std::string& precision) {
  // First: a misspelt precision is the caller's error on every device, never a fallback.
  const PrecisionRequest request = parse_precision(precision);
  if (auto r = device_independent_violation(A, B, C)) return r;
  return kernel_violation(A, B, C, variant, request);
}

Reason device_independent_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C) {
  if (auto r = contract_violation(A, B, C)) return r;
  if (!A.is_cuda()) return "not on a CUDA device (" + A.device().str() + ")";
  return std::nullopt;
}

}  // namespace vecgemm
