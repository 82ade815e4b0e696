// The ops as typed dispatcher handles, for C++ that calls them through the dispatcher
// (autograd's formulas, the composite linear, the Python wrappers' direct calls): found
// once, then called without boxing the arguments.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Tensor.h>

#include <optional>

namespace vecgemm {

// The trailing string_view is the precision ("auto", "ieee", "3xtf32"); the strict op's
// variant comes before it.
using GemmSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, double,
                                 double, c10::string_view);
using SgemmSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, double,
                                  double, c10::string_view, c10::string_view);
using SgemmInplaceSignature = void(at::Tensor&, const at::Tensor&, const at::Tensor&, double, double,
                                   c10::string_view, c10::string_view);

using LinearSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                   c10::string_view);

const c10::TypedOperatorHandle<GemmSignature>& gemm_op();      // vecgemm::gemm, the lenient op
const c10::TypedOperatorHandle<SgemmSignature>& sgemm_op();    // vecgemm::sgemm, the strict op
const c10::TypedOperatorHandle<SgemmInplaceSignature>& sgemm_inplace_op();  // vecgemm::sgemm_
const c10::TypedOperatorHandle<LinearSignature>& linear_op();  // vecgemm::linear

}  // namespace vecgemm
