// The whole-program switch's state (aten_override.h); the kernels it registers are the
// build's (runtime/aten_kernels.cpp).
#include "aten_override.h"

#include <atomic>
#include <mutex>

namespace vecgemm {
namespace {

std::mutex g_mutex;                      // guards g_on and the registrations
std::optional<std::string> g_on;         // the precision's name while on
std::atomic<int> g_request{static_cast<int>(PrecisionRequest::Auto)};

}  // namespace

void set_aten_override(const std::optional<std::string>& precision) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (precision) {
    g_request.store(static_cast<int>(parse_precision(*precision)));  // a misspelt one raises here
    if (!g_on) register_aten_kernels(true);
    g_on = *precision;
  } else if (g_on) {
    register_aten_kernels(false);
    g_on.reset();
  }
}

std::optional<std::string> aten_override() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_on;
}

PrecisionRequest aten_override_request() {
  return static_cast<PrecisionRequest>(g_request.load(std::memory_order_relaxed));
}

}  // namespace vecgemm
