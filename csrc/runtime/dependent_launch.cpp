#include <atomic>

#include "env_flags.h"
#include "tuning_controls.h"
#include <c10/cuda/CUDAFunctions.h>

#include "kernels/launchers.h"
#include "planner/device_profile.h"

namespace vecgemm {
namespace {

std::atomic<bool> g_dependent_launch{env_flag("VECGEMM_DEPENDENT_LAUNCH", true)};

}  // namespace

// Programmatic dependent launch is a Hopper feature: elsewhere the second passes launch
// as usual (their griddepcontrol instructions are compiled out below sm_90).
bool dependent_launch_enabled() {
  return g_dependent_launch.load() && compute_capability(c10::cuda::current_device()) >= 90;
}
void set_dependent_launch(bool enabled) { g_dependent_launch = enabled; }

}  // namespace vecgemm
