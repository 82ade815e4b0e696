#include <atomic>
#include <cstdlib>
#include <string>

#include "../tuning.h"
#include "kernels.h"

namespace vecgemm {
namespace {

std::atomic<bool> g_dependent_launch{[] {
  const char* v = std::getenv("VECGEMM_DEPENDENT_LAUNCH");
  return !(v && std::string(v) == "0");
}()};

}  // namespace

bool dependent_launch_enabled() { return g_dependent_launch.load(); }
void set_dependent_launch(bool enabled) { g_dependent_launch = enabled; }

}  // namespace vecgemm
