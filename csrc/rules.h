// The rules that decide whether an input can take a CUDA kernel: the device-independent
// half here, the CUDA build's (variants, kernel images, precision) in
// planner/kernel_rules.h, which kernel_violation below enters. The strict ops raise with the
// returned text; the lenient op and torch_vecgemm.fallback_reason() fall back to ATen with
// it. Nothing here depends on CUDA, so a CPU-only build gives the same answers (every CUDA
// input then falls back with "built without CUDA").
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "kernels/gemm_params.h"
#include "precision.h"

namespace vecgemm {

using Reason = std::optional<std::string>;

// How the kernels can read one matrix (the last two dimensions of a 2-D or 3-D tensor).
struct MatrixStorage {
  Layout layout;
  int64_t ld;  // stride of the non-contiguous dimension (0 when that dimension has size 1)
};
std::optional<MatrixStorage> storage_of(const at::Tensor& t);

// Where a non-empty view's last element lies past its first, in elements (strides are
// non-negative for every view the rules let through).
int64_t last_offset(const at::Tensor& t);

// Whether the address ranges two views may touch intersect: conservative for interleaved
// views of one buffer, which is fine for a safety check, and unlike at::get_overlap_status
// it answers for expanded (broadcast) and padded views too.
bool spans_intersect(const at::Tensor& a, const at::Tensor& b);

// "[a, b, c]", for messages.
std::string list_str(c10::IntArrayRef values);

// The rules' view of a product: its extents, batch included (batch = 1 for matrices). The
// later stages' views are Problem (the planner's input, planner/plan.h), ProblemKey (what
// the kernels read after copies, planner/cost_model.h) and GemmParams (a launch's,
// kernels/gemm_params.h).
struct GemmShape {
  int64_t batch, m, n, k;
  bool batched;
  std::vector<int64_t> out_sizes() const;
};
GemmShape shape_of(const at::Tensor& A, const at::Tensor& B);

// Device-independent contract of the ops: float32, 2-D or 3-D, matching shapes, C
// broadcastable to the result, one device.
Reason contract_violation(const at::Tensor& A, const at::Tensor& B,
                          const std::optional<at::Tensor>& C);

// Extra rules of the in-place op for C: exactly the result's shape, a storage order the
// kernels can write, no element written twice, no overlap with A or B.
Reason inplace_violation(const at::Tensor& C, const at::Tensor& A, const at::Tensor& B);

// Whether a product may be written into D by the kernels (the out= forms the switch serves):
// float32 on A's device, row-major (rows may be padded) with the product's sizes, no element
// twice, and overlapping none of the operands: inplace_violation's rules, and apart from C.
bool writable_output(const at::Tensor& D, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C);

// Whether the named CUDA variant can run this problem ("auto": the default selection) in
// the precision asked for. Implemented with the kernels' rules (planner/kernel_rules.cpp), or by
// cpu_only.cpp.
Reason kernel_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                        const std::string& variant, PrecisionRequest precision);

// The precision a call computes in: the one asked for; for "auto", that of the kernel the
// variant names if it names one (a tf32x3_ row: 3xTF32; any other: IEEE), else the switch.
// Beside the kernels too (the names are theirs); a CPU-only build resolves the request.
Precision effective_precision(const std::string& variant, PrecisionRequest precision);

// The contract and the device: what every call's answer starts with.
Reason device_independent_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C);

// The full answer: contract, device, kernel. None means the kernel will run. Raises a
// ValueError for a precision that is not one of the accepted names.
Reason fallback_reason(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                       const std::string& variant, const std::string& precision = "auto");

std::vector<std::string> available_variants();

}  // namespace vecgemm
