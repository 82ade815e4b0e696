// What the cost model knows of the GPU it plans for, in two parts: the facts read off the
// device (SMs, compute capability, how many blocks of each kernel stay resident), and the
// figures measured on one kind of GPU (its profile: rates and each kernel's efficiency),
// chosen by its compute capability and SM count. Profiles are data, one file each under
// torch_vecgemm/profiles/, loaded at import (add_device_profile, device_facts.h); a GPU
// without a measured profile gets the neutral one, in which every kernel and storage order
// counts the same and the waves decide; autotuning measures such a GPU instead (README).
//
// The device a plan is for is a CUDA device index, or a recorded device: another GPU's
// facts given as data (device_facts.h), so that the planner runs, and its decisions can be
// tested, on a machine without that GPU or any.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "device_facts.h"
#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "planner/tf32x3_rows.h"

namespace vecgemm {

struct DeviceProfile {
  std::string name;
  int capability, sms;  // the GPUs it serves; 0, 0 for the neutral profile
  // Rates; for the ranking only their ratios matter.
  double macs_per_ns_per_sm;  // multiply-adds a full wave sustains
  double bytes_per_ns;        // device memory, sustained
  double launch_ns;           // one kernel launch and its tail
  double dependent_launch_ns; // the same for a second pass launched while the kernel before drains
  double memory_latency_ns;   // a load's round trip to device memory, under light load
  // One K step of a block whose loads nothing hides: the load's round trip, the shared
  // stores, the barrier and the step's FFMAs.
  double k_step_latency_ns;
  // The bounds-checked main loop's time against the unchecked one's.
  double checked_loop;
  // An output whose rows are not 16-byte aligned is stored element by element; kernels that
  // keep fewer than warps_to_hide_scalar_output warps on an SM run at this throughput then.
  double scalar_output_few_warps;
  int warps_to_hide_scalar_output;
  // The stream-K tail's blocks cost this much a unit of work against a whole wave's.
  double stream_k_cost;
  // The throughput of an SM running a partial wave whose blocks leave one warp a scheduler.
  double one_warp_throughput;
  // Each storage order's best kernel against the fastest order's, in percent (rr, rc, cr, cc).
  int order_percent[kNumOrders];
  // Each kernel's throughput against the best kernel for the same storage orders when the
  // grid fills the GPU, in percent (rr, rc, cr, cc), by kKernelConfigs row.
  int kernel_percent[kNumKernelConfigs][kNumOrders];
  // Each kernel's 4-byte-load instance (operand rows not 16-byte aligned) against its
  // 16-byte one on the same problem, in percent (rr, rc, cr, cc), by kKernelConfigs row.
  int scalar_load_percent[kNumKernelConfigs][kNumOrders];
  // 3xTF32, by kTf32x3Rows row: one K tile of one block, in ns, with every SM running as
  // many of its blocks as fit (the rate of a full wave, split pass aside), a block's fixed
  // cost (pipeline fill, votes, epilogue) in its K tiles, and a K tile's extra ns (or fewer,
  // below 0) where the kernel makes A's or B's parts itself instead of reading the split
  // pass's (the wgmma form: A's in registers, B's in shared memory), each apart; both at
  // once cost the sum.
  double tf32x3_k_tile_ns[kNumTf32x3Rows];
  double tf32x3_block_overhead_tiles[kNumTf32x3Rows];
  double tf32x3_a_split_ns[kNumTf32x3Rows];
  double tf32x3_b_split_ns[kNumTf32x3Rows];
  // a_split_ns for a column-major A, whose parts the kernel makes from M-major tiles; NaN
  // where the profile has not measured it (such an A then goes through the pass).
  double tf32x3_a_split_m_major_ns[kNumTf32x3Rows];
  // Each row's speed in each storage order (rr, rc, cr, cc), and with operands not 16-byte
  // aligned, against the storage its figures were fitted on, in percent; 0 where the
  // profile has not measured it: the row is not priced there, and auto does not plan it
  // (tf32x3_priced, cost_model.h), though the strict op still runs it.
  double tf32x3_order_percent[kNumTf32x3Rows][kNumOrders];
  double tf32x3_unaligned_percent[kNumTf32x3Rows];
  // The waves model prices full waves of long-K blocks well and the rest low (short K, one
  // wave, the split passes): 3xTF32 is taken only where the IEEE plan's time is above its
  // estimate times tf32x3_model_slack plus tf32x3_fixed_ns (tf32x3_weighed_ns, cost_model.h).
  double tf32x3_model_slack;
  double tf32x3_fixed_ns;
  // Where the lenient op's IEEE plan is handed to torch.matmul instead (cost_model.h,
  // torch_handoff_log_ratio): a least-squares fit of log(our time / torch.matmul's) on the
  // plan's own figures, measured on this kind of GPU (benchmarks/probes/torch_handoff_fit.py).
  // It speaks only for the configs it has a term for, those the fit saw enough of; every
  // other plan stays on our kernels. None: no plan is handed.
  struct TorchHandoff {
    double log_predicted_ms;  // per unit of ln(the cost model's time, in ms)
    double log_macs;          // ln(batch M N K)
    double log_splits;        // ln(K slices)
    double copies;            // operands copied before the kernel (0 or 1)
    bool speaks_for[kNumKernelConfigs];
    double config_term[kNumKernelConfigs];
  };
  std::optional<TorchHandoff> torch_handoff;
};

// The profile of the device: the measured one of its compute capability and SM count where
// one is loaded, else the neutral one. Valid for the life of the process.
const DeviceProfile& profile_of(int device);

// Counts the profiles added (add_device_profile): a plan made under another count may have
// been priced with a profile since retired.
uint64_t profiles_generation();

// Facts of the device, queried once and remembered for a CUDA device (thread-safe).
int sm_count(int device);
int compute_capability(int device);  // 10 * major + minor: 90 for sm_90
// Blocks of the tiled kernel config's instance for these storage orders and load width
// resident on one SM.
int blocks_per_sm(int config, Layout la, Layout lb, bool vec4, int device);

// Device indices from here on are recorded devices (device_facts.h): their facts come from
// data, and every query above answers from it.
inline constexpr int kFirstRecordedDevice = 1 << 20;
// A recorded device's facts by this build's table indices.
struct RecordedDevice {
  std::string name;
  int sms = 0, capability = 0;
  std::map<std::tuple<int, Layout, Layout, bool>, int> tiled_blocks;  // (config, orders, vec4)
  int tf32x3_blocks[kNumTf32x3Rows] = {};
  Reason tf32x3_violations[kNumTf32x3Rows];
};
// The facts behind a recorded device, checked against this build's tables (an error names
// what is missing or unknown); its index.
int record_device(const DeviceFacts& facts);
// The record of a recorded device; null for a CUDA device.
const RecordedDevice* recorded_device(int device);
// A CUDA device's facts, every instance of this build queried.
DeviceFacts query_device_facts(int device);

}  // namespace vecgemm
