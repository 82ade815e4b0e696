// The rules of the CUDA build: which variant, kernel and precision can serve a problem on a
// device. With rules.h (the device-independent contract, the in-place rules, and
// fallback_reason, which ends here in kernel_violation) this is the one place a call's
// fallback or error is decided; a 3xTF32 row's own contract (`refuses`) is part of its row
// (tf32x3_rows.h) and evaluated here.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "planner/plan.h"
#include "precision.h"
#include "rules.h"

namespace vecgemm {

// The largest M, N, K or batch: tile ends (a block's first row plus BM, up to 256) and
// rounded-up K stay inside 32-bit arithmetic.
constexpr int64_t kMaxDimension = (int64_t(1) << 31) - 257;

// What a call asks the kernels for, parsed once where it enters: the variant (its name kept
// for messages) and the precision it computes in, the switch read once.
struct Request {
  std::string name;
  Variant variant;
  Precision precision;
};

// The request, or none with `unknown` set: the name is not one of variant_names().
std::optional<Request> parse_request(const std::string& name, PrecisionRequest asked, Reason* unknown);

// Every rule the lenient op applies before it plans: the contract, the device, and the
// CUDA-side rules of the auto variant in IEEE fp32 (no precision rule applies there). What
// fallback_reason(A, B, C, "auto", "ieee") says, without parsing the names on every call.
Reason auto_ieee_violation(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C);

// Every CUDA-side rule of a strict call, the contract and the device checked before: the
// operands' storage and extents, the GPU's kernel image, the named variant's own contract,
// and the precision (the one the named kernel computes in; 3xTF32 needs a row that runs).
// C_out: the in-place op's output (the seed's kernel writes it in place, so its rules apply).
Reason request_violation(const at::Tensor& A, const at::Tensor& B, const at::Tensor* C_out, const Request& request);

// The precision the lenient op runs a product in on a CUDA (or recorded) device, its other
// rules passed: the one asked for (the switch read once), or IEEE where 3xTF32 was asked for
// and the device cannot run it (`why` says so).
Precision lenient_precision(int device, PrecisionRequest asked, Reason* why = nullptr);

// Whether the lenient op hands a planned product to torch: where the planner declined
// 3xTF32 (tf32x3_declined) for a plan other than gemv, or where torch is faster
// (torch_faster), unless torch's product
// would lose fp32's accuracy (TF32 allowed) or raise (deterministic mode); kernel_rules.cpp
// says why each.
bool hands_to_torch(const Plan& plan);

// Whether SIMT kernel config `config` runs on GPUs of a compute capability (10 * major +
// minor): the cp.async family needs sm_80. runs_on asks it of a device (queried or recorded).
bool config_runs_at(int config, int capability);
bool runs_on(int config, int device);

// Why a 3xTF32 row's kernel cannot run on the device (capability, shared memory, no image in
// this build), or none; a recorded device answers from its record. Remembered per row and
// device.
Reason tf32x3_violation(int row, int device);
// The first row that runs on the device; else the reason the most widely usable row gives
// (why 3xTF32 cannot run at all: the planner's choice among runnable rows is plan.cpp's).
struct Tf32x3Pick {
  std::optional<int> row;
  Reason reason;
};
Tf32x3Pick tf32x3_row_for(int device);

}  // namespace vecgemm
