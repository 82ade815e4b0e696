// A GPU as plain data, in two parts the planner reads (planner/device_profile.h):
//  - its facts, read off a device (its SMs, compute capability, how many blocks of each
//    kernel stay resident on an SM, which 3xTF32 rows run there), so that the planner can
//    plan for that GPU on a machine without it, and CI can test its decisions
//    (torch_vecgemm._C._testing; the records keep the H200's);
//  - its profile, the figures measured on one kind of GPU that the cost model prices it
//    with (torch_vecgemm/profiles/*.json, loaded at import by torch_vecgemm/_profiles.py).
// By names, so that either is read against whatever tables this build has.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan_summary.h"

namespace vecgemm {

struct DeviceFacts {
  std::string name;
  int sms = 0, capability = 0;
  struct TiledOccupancy {
    std::string config, orders;  // a kernel config's name; "rr" .. "cc"
    bool vec4;                   // the 16-byte-load instance, else the 4-byte one
    int blocks;                  // resident on one SM
  };
  std::vector<TiledOccupancy> tiled;
  struct Tf32x3Facts {
    std::string row;
    int blocks;                            // resident on one SM; 0 where the row cannot run
    std::optional<std::string> violation;  // why the row cannot run there; none: it runs
  };
  std::vector<Tf32x3Facts> tf32x3;
};

// A device profile as its file gives it. Which GPUs it serves: a compute capability and SM
// count, or 0 and 0 for the neutral profile (a GPU no other serves). scalars: the rates and
// costs by DeviceProfile's field names; the percentages by storage orders (rr, rc, cr, cc),
// each kernel config's by its name (a config not named counts 100, or for 4-byte loads
// unmeasured_scalar_load_percent); tf32x3 each 3xTF32 row's figures by name (kTf32x3Fields,
// planner/device_profile.cpp).
struct ProfileData {
  std::string name;
  int capability = 0, sms = 0;
  std::map<std::string, double> scalars;
  std::vector<double> order_percent;
  std::map<std::string, std::vector<double>> kernel_percent, scalar_load_percent;
  std::map<std::string, std::map<std::string, double>> tf32x3;
  // The hand-off of IEEE plans to torch.matmul (DeviceProfile::TorchHandoff), or none: its
  // weights by name, and the configs it speaks for with each one's own term.
  std::optional<std::map<std::string, double>> torch_handoff;
  std::map<std::string, double> torch_handoff_configs;
};

// The profile checked against this build's tables (an error names what is missing, unknown
// or out of range) and kept: from then on it prices the GPUs it serves (a later profile for
// the same GPUs, or of the same name, takes the place of an earlier one).
void add_device_profile(const ProfileData& data);

// The current CUDA device's facts, every instance of this build queried.
DeviceFacts current_device_facts();

// A recorded device: plans can be made for these facts from now on, under the returned
// device index. They must cover every instance this build has and every 3xTF32 row.
int add_recorded_device(const DeviceFacts& facts);

// The name of the measured profile the planner prices the device with ("neutral" where it
// has none): chosen by compute capability and SM count.
std::string profile_name(int device);

// The plan of a product given by its numbers (a fresh dense output) on a recorded device:
// orders "rr" .. "cc" (A's, B's), a_vec4 / b_vec4 whether every row of the operand starts
// 16-byte aligned. For variant "auto", the lenient op's: what torch_vecgemm.plan() says of
// such tensors on that GPU, decided without it; for a named one, the strict op's on it (the
// named kernel with the model's split: how the model prices a kernel it did not choose).
PlanSummary recorded_plan_summary(int device, int64_t batch, int64_t m, int64_t n, int64_t k, const std::string& orders,
                                  bool a_vec4, bool b_vec4, const std::string& precision, const std::string& variant);

}  // namespace vecgemm
