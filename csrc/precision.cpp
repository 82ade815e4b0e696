#include "precision.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace vecgemm {
namespace {

constexpr const char* kAccepted = "'auto' (the switch: torch_vecgemm.set_precision), 'ieee' or '3xtf32'";

// IEEE unless the user opts in: 3xTF32 changes the summation and so the rounding of the
// result (to the same accuracy, not bitwise the same).
std::atomic<Precision> g_default{Precision::Ieee};

}  // namespace

PrecisionRequest parse_precision(c10::string_view name) {
  if (name == "auto") return PrecisionRequest::Auto;
  if (name == "ieee") return PrecisionRequest::Ieee;
  if (name == "3xtf32") return PrecisionRequest::Tf32x3;
  TORCH_CHECK_VALUE(false, "vecgemm: unknown precision '", std::string(name), "'; accepted: ", kAccepted);
}

Precision parse_switch_precision(c10::string_view name) {
  if (name == "ieee") return Precision::Ieee;
  if (name == "3xtf32") return Precision::Tf32x3;
  TORCH_CHECK_VALUE(false, "vecgemm: the precision switch takes 'ieee' or '3xtf32' (it is what 'auto' means), got '",
                    std::string(name), "'");
}

const char* precision_name(Precision p) { return p == Precision::Tf32x3 ? "3xtf32" : "ieee"; }

void set_default_precision(Precision p) { g_default.store(p, std::memory_order_relaxed); }

Precision default_precision() { return g_default.load(std::memory_order_relaxed); }

Precision resolve(PrecisionRequest request) {
  switch (request) {
    case PrecisionRequest::Ieee:
      return Precision::Ieee;
    case PrecisionRequest::Tf32x3:
      return Precision::Tf32x3;
    case PrecisionRequest::Auto:
      break;
  }
  return default_precision();
}

}  // namespace vecgemm
