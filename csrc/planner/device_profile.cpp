#include "planner/device_profile.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "planner/cost_model.h"  // runs_on
#include "planner/kernel_rules.h"  // tf32x3_violation

namespace vecgemm {
namespace {

// One kernel's measured efficiency, by its variant name (rr, rc, cr, cc).
struct KernelFigure {
  const char* kernel;
  int percent[kNumOrders];
};

// The H200 (132 SMs, 1980 MHz): each kernel at M = N = K = 4096, unsplit, against the best
// for the same storage orders; the storage orders against each other; the rates and costs
// of docs/performance.md, where each was measured.
constexpr KernelFigure kH200Kernels[] = {
    {"tiled_128x128x8", {95, 92, 91, 90}},       {"tiled_128x128x16", {97, 100, 98, 98}},
    {"tiled_128x128x8_t816", {96, 98, 100, 95}}, {"tiled_256x128x8_t816", {90, 92, 87, 92}},
    {"tiled_128x64x8", {94, 92, 94, 97}},        {"tiled_128x64x8b", {100, 91, 90, 100}},
    {"tiled_64x128x8", {99, 93, 96, 94}},        {"tiled_64x128x8b", {98, 93, 95, 98}},
    {"tiled_64x64x8_t84", {84, 80, 84, 85}},     {"tiled_32x128x16_t84", {85, 79, 83, 79}},
    {"async_128x64x16_s3", {83, 78, 97, 91}},    {"async_128x128x8_t816_s4", {96, 86, 98, 95}},
    {"async_256x128x8_t816_s3", {94, 91, 95, 98}},
    // Made for small problems, where the latency floor decides: unmeasured at 4096, given
    // the figures of the register-staged kernel of the same tiling.
    {"async_64x64x8_t84_s4", {84, 80, 84, 85}},
    // Made for outputs of a few tiles: not measured at 4096 but fitted to the random sweep
    // (seed 0), where 111 problems were timed on both it and async_64x64x8_t84_s4: at 45
    // the model's picks between the two are 1.9% slower than the faster of each pair
    // (geometric mean), at 60 (what its LDS-bound 4 x 4 thread tile suggests) 3.8%.
    {"async_32x32x16_t44_s4", {45, 45, 45, 45}},
};

// The H200's 4-byte-load instances: each config with one, on the same problem with every
// leading dimension one float longer, at 1024x3072x1024 and 2048^3 (the geometric mean of
// the two; docs/history.md, step 43). The register-staged rows load a misaligned row
// float by float into registers; the cp.async rows copy 4 bytes at a time, which costs
// them most in cr, where both operands' copies are 4-byte ones.
constexpr KernelFigure kH200ScalarLoads[] = {
    {"tiled_128x128x8", {82, 93, 100, 87}},     {"tiled_128x128x16", {96, 95, 96, 96}},
    {"tiled_64x64x8_t84", {83, 85, 80, 82}},    {"async_64x64x8_t84_s4", {98, 100, 91, 96}},
    {"async_32x32x16_t44_s4", {94, 96, 90, 94}},
};
// A GPU whose 4-byte-load instances were not measured: the H200's mean over its rows. The
// loads cost instructions on every GPU, so copying an operand into aligned storage is
// weighed against a price, never against nothing.
constexpr int kUnmeasuredScalarLoadPercent = 92;

// One 3xTF32 row's figures, by its variant name: one K tile (the row's bk) of one block with
// every SM running as many of its blocks as fit (the rate of a full wave, split pass aside),
// a block's fixed cost (pipeline fill, votes, epilogue) in its K tiles, and what a K tile
// costs more where the kernel splits an operand itself (rows that can, else 0).
struct Tf32x3Figure {
  const char* row;
  double k_tile_ns, block_overhead_tiles, kernel_split_ns;
};

// The H200 at 4096^3 rr (docs/history.md, steps 31-32): the wgmma row from the kernel
// time without the split pass over 8 waves of 128 K tiles; the mma.sync ones from 1.1x
// cuBLAS fp32 (56 TFLOP/s), 8 waves of 2 (128 x 64) or 1 (128 x 128) blocks a SM; 64 x 128
// given 128 x 64's (the same warps, MMAs and loads a block K tile; step 33). Their fixed
// cost is not measured: the 3-stage fill (a round trip to L2 or memory per stage,
// overlapped) and the 64 KB store of a 128 x 128 tile, about two K tiles' time. The
// narrow-side rows read 16 KB of the wide operand a block K tile (32 rows x 128 K), 64 KB an
// SM at 4 blocks, at 3.5 TB/s over 132 SMs; their fixed cost is a memory round trip before
// the first MMA and a 4-warp sum in shared memory. The wgmma kernel splitting A or B itself
// at 4096^3 rc: 1312 / 1277 us against 1145 on the split pass's parts, 8 waves of 128 K
// tiles (step 36).
constexpr Tf32x3Figure kH200Tf32x3[] = {
    {"tf32x3_128x128_wgmma", 1150.0, 2.0, 150.0}, {"tf32x3_128x64_mma", 2400.0, 2.0, 0.0},
    {"tf32x3_64x128_mma", 2400.0, 2.0, 0.0},      {"tf32x3_128x128_mma", 4800.0, 2.0, 0.0},
    {"tf32x3_few_rows_mma", 2400.0, 0.5, 0.0},    {"tf32x3_few_cols_mma", 2400.0, 0.5, 0.0},
};

// A GPU without a measured profile, taken to be A100-class like kNeutralRates: the mma.sync
// rows at the H200's time a K tile times the clocks' ratio (1.98 GHz against 1.41), on the
// assumption that an SM issues mma.sync's TF32 MMAs at the same rate a clock on both (the
// H200's own measured share of its peak is issue 40's item 4). That prices 3xTF32 at ~2.3x
// the SIMT kernels on such a GPU, where CUTLASS reports ~2.5x SGEMM on an A100. The
// narrow-side rows are memory-bound: 64 KB an SM a K tile over 108 SMs at 1490 B/ns. The
// wgmma row runs on sm_90a only, where the H200's figures serve.
constexpr Tf32x3Figure kNeutralTf32x3[] = {
    {"tf32x3_128x128_wgmma", 1150.0, 2.0, 150.0}, {"tf32x3_128x64_mma", 3370.0, 2.0, 0.0},
    {"tf32x3_64x128_mma", 3370.0, 2.0, 0.0},      {"tf32x3_128x128_mma", 6740.0, 2.0, 0.0},
    {"tf32x3_few_rows_mma", 4750.0, 0.5, 0.0},    {"tf32x3_few_cols_mma", 4750.0, 0.5, 0.0},
};

// Each figure's row in p's table (kernel_percent or scalar_load_percent), by variant name.
void fill_figures(const char* profile, const KernelFigure* figures, int count, int (&table)[kNumKernelConfigs][kNumOrders]) {
  for (int i = 0; i < count; ++i) {
    const auto config = kernel_config_of(figures[i].kernel);
    TORCH_INTERNAL_ASSERT(config.has_value(), "device profile ", profile, " names no kernel '", figures[i].kernel, "'");
    std::copy(figures[i].percent, figures[i].percent + kNumOrders, table[*config]);
  }
}

// What a profile's kernel figures leave to the GPU: its rates and costs.
struct Rates {
  double macs_per_ns_per_sm, bytes_per_ns, launch_ns, dependent_launch_ns, memory_latency_ns, k_step_latency_ns;
};

// The H200 (132 SMs, 1980 MHz), as measured there.
constexpr Rates kH200Rates{
    190.0,   // ~75% of 128 FP32 lanes at 1.98 GHz
    3500.0,  // sustained HBM3e bandwidth
    2500.0,
    // Launched dependent on the kernel before it (dependent_launch.cuh), a second pass's
    // launch overlaps that kernel's drain: 1.2-1.5 us of launch_ns saved at 128^3-256^3 (step 23).
    1200.0,
    800.0,
    // tiled_64x64x8_t84 with one block a SM: 32 K steps in 17.8 us at 27x63x8146 (split-K
    // 32), 13 in 8.2 us at 153x307x99, launch included.
    520.0,
};

// A GPU without a measured profile: an A100 SXM's datasheet rates (64 FP32 lanes an SM at
// 1.41 GHz, 2.0 TB/s of HBM2e), the most common GPU with none, at the fractions of its own
// peaks the H200 sustains (75% of the FMA rate, 73% of the bandwidth), and the H200's
// launch and latency costs. Only their ratios rank anything (compute against memory
// against launches), and those are nearer an A100's, an L40's or an RTX card's than the
// H200's own 54 multiply-adds a byte.
constexpr Rates kNeutralRates{68.0, 1490.0, 2500.0, 1200.0, 800.0, 520.0};

DeviceProfile make_profile(const char* name, const Rates& rates, const KernelFigure* figures, int count,
                           const KernelFigure* scalar_loads, int scalar_count, const int (&order_percent)[4],
                           const Tf32x3Figure (&tf32x3)[kNumTf32x3Rows]) {
  DeviceProfile p{};
  p.name = name;
  p.macs_per_ns_per_sm = rates.macs_per_ns_per_sm;
  p.bytes_per_ns = rates.bytes_per_ns;
  p.launch_ns = rates.launch_ns;
  p.dependent_launch_ns = rates.dependent_launch_ns;
  p.memory_latency_ns = rates.memory_latency_ns;
  p.k_step_latency_ns = rates.k_step_latency_ns;
  // A register-staged block's checked loop: 1.06-1.23x the unchecked one, by tiling.
  p.checked_loop = 1.15;
  // 0-16% lost (geometric mean 7%) at 768x4097x1024, 777x4097x1024 and 1024x50257x768 against
  // the same problems with N a multiple of 4.
  p.scalar_output_few_warps = 0.93;
  p.warps_to_hide_scalar_output = 16;
  // t816 at 3072-8192 and on four model shapes: 1.05 x the work + 4-6 us.
  p.stream_k_cost = 1.05;
  // t816's lone blocks (2 a SM) kept it at 0.52: a partial wave took 516 us against a full
  // one's 536 at 3072^3.
  p.one_warp_throughput = 0.52;
  for (const Tf32x3Figure& f : tf32x3) {
    const auto row = tf32x3_row_of(f.row);
    TORCH_INTERNAL_ASSERT(row.has_value(), "device profile ", name, " names no 3xTF32 row '", f.row, "'");
    p.tf32x3_k_tile_ns[*row] = f.k_tile_ns;
    p.tf32x3_block_overhead_tiles[*row] = f.block_overhead_tiles;
    p.tf32x3_kernel_split_ns[*row] = f.kernel_split_ns;
  }
  for (int r = 0; r < kNumTf32x3Rows; ++r)
    TORCH_INTERNAL_ASSERT(p.tf32x3_k_tile_ns[r] > 0.0, "device profile ", name, " has no figure for ", kTf32x3Rows[r].name);
  std::copy(order_percent, order_percent + kNumOrders, p.order_percent);
  for (int c = 0; c < kNumKernelConfigs; ++c) {
    std::fill(p.kernel_percent[c], p.kernel_percent[c] + kNumOrders, 100);
    std::fill(p.scalar_load_percent[c], p.scalar_load_percent[c] + kNumOrders, kUnmeasuredScalarLoadPercent);
  }
  fill_figures(name, figures, count, p.kernel_percent);
  fill_figures(name, scalar_loads, scalar_count, p.scalar_load_percent);
  return p;
}

const DeviceProfile& h200() {
  static const DeviceProfile p = make_profile("NVIDIA H200", kH200Rates, kH200Kernels, int(std::size(kH200Kernels)),
                                              kH200ScalarLoads, int(std::size(kH200ScalarLoads)), {96, 94, 100, 95},
                                              kH200Tf32x3);
  return p;
}

// Every kernel and storage order counts the same; 4-byte loads cost every kernel alike.
const DeviceProfile& neutral() {
  static const DeviceProfile p =
      make_profile("neutral", kNeutralRates, nullptr, 0, nullptr, 0, {100, 100, 100, 100}, kNeutralTf32x3);
  return p;
}

// The measured profiles, by the GPUs they serve: a profile's figures belong to an SM
// design and a count of SMs, not to a product name. The H100 SXM and GH200 are the H200's
// GH100 with 132 SMs too (their memory's rate differs: it prices copies and reductions).
struct ProfileFor {
  int capability, sms;
  const DeviceProfile& (*profile)();
};
constexpr ProfileFor kProfiles[] = {{90, 132, &h200}};

std::mutex g_mutex;
// Device kFirstRecordedDevice + i; reserved once, so that a record's address stays valid.
constexpr size_t kMaxRecordedDevices = 64;
std::vector<RecordedDevice> g_recorded;

// runs_on's rule, for a capability rather than a device: cp.async needs sm_80.
bool config_runs_at(int config, int capability) {
  return kKernelConfigs[config].mainloop.family != MainloopFamily::CpAsync || capability >= 80;
}

std::string orders_name(Layout la, Layout lb) {
  return std::string(la == Layout::RowMajor ? "r" : "c") + (lb == Layout::RowMajor ? "r" : "c");
}

}  // namespace

const RecordedDevice* recorded_device(int device) {
  if (device < kFirstRecordedDevice) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  const size_t i = size_t(device - kFirstRecordedDevice);
  TORCH_CHECK(i < g_recorded.size(), "vecgemm: no recorded device ", std::to_string(device));
  return &g_recorded[i];
}

int record_device(const DeviceFacts& facts) {
  TORCH_CHECK(facts.sms > 0 && facts.capability > 0, "vecgemm: a recorded device needs its SMs and capability");
  RecordedDevice r;
  r.name = facts.name, r.sms = facts.sms, r.capability = facts.capability;
  for (const auto& t : facts.tiled) {
    const auto config = kernel_config_of(t.config);
    TORCH_CHECK(config && (t.orders == "rr" || t.orders == "rc" || t.orders == "cr" || t.orders == "cc") && t.blocks > 0,
                "vecgemm: recorded device '", facts.name, "': no kernel config '", t.config, "' ", t.orders,
                " in this build, or no blocks");
    const Layout la = t.orders[0] == 'r' ? Layout::RowMajor : Layout::ColMajor;
    const Layout lb = t.orders[1] == 'r' ? Layout::RowMajor : Layout::ColMajor;
    r.tiled_blocks[{*config, la, lb, t.vec4}] = t.blocks;
  }
  for (int c = 0; c < kNumKernelConfigs; ++c)
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
        for (bool vec4 : {true, false})
          TORCH_CHECK(tiled_kernel(c, la, lb, vec4).launch == nullptr || !config_runs_at(c, r.capability) ||
                          r.tiled_blocks.count({c, la, lb, vec4}),
                      "vecgemm: recorded device '", facts.name, "' has no occupancy for ", kernel_config_name(c), " ",
                      orders_name(la, lb), vec4 ? " (16-byte loads)" : " (4-byte loads)",
                      ": record it with this build's kernels");
  bool seen[kNumTf32x3Rows] = {};
  for (const auto& f : facts.tf32x3) {
    const auto row = tf32x3_row_of(f.row);
    TORCH_CHECK(row, "vecgemm: recorded device '", facts.name, "': no 3xTF32 row '", f.row, "' in this build");
    seen[*row] = true;
    r.tf32x3_blocks[*row] = f.blocks;
    r.tf32x3_violations[*row] = f.violation;
    TORCH_CHECK(f.violation || f.blocks > 0, "vecgemm: recorded device '", facts.name, "': ", f.row,
                " runs there but has no blocks");
  }
  for (int row = 0; row < kNumTf32x3Rows; ++row)
    TORCH_CHECK(seen[row], "vecgemm: recorded device '", facts.name, "' has no facts for ", kTf32x3Rows[row].name);
  std::lock_guard<std::mutex> lock(g_mutex);
  TORCH_CHECK(g_recorded.size() < kMaxRecordedDevices, "vecgemm: at most 64 recorded devices");
  g_recorded.reserve(kMaxRecordedDevices);
  g_recorded.push_back(std::move(r));
  return kFirstRecordedDevice + int(g_recorded.size()) - 1;
}

const DeviceProfile& profile_of(int device) {
  const int capability = compute_capability(device), sms = sm_count(device);
  for (const ProfileFor& p : kProfiles)
    if (p.capability == capability && p.sms == sms) return p.profile();
  return neutral();
}

int sm_count(int device) {
  if (const RecordedDevice* r = recorded_device(device)) return r->sms;
  static std::map<int, int> counts;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = counts.find(device);
  if (it != counts.end()) return it->second;
  int v = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
  return counts[device] = v;
}

int compute_capability(int device) {
  if (const RecordedDevice* r = recorded_device(device)) return r->capability;
  static std::map<int, int> capabilities;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = capabilities.find(device);
  if (it != capabilities.end()) return it->second;
  int major = 0, minor = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return capabilities[device] = 10 * major + minor;
}

int blocks_per_sm(int config, Layout la, Layout lb, bool vec4, int device) {
  if (const RecordedDevice* r = recorded_device(device)) {
    auto it = r->tiled_blocks.find({config, la, lb, vec4});
    TORCH_CHECK(it != r->tiled_blocks.end(), "vecgemm: recorded device '", r->name, "' has no occupancy for ",
                kernel_config_name(config), " ", orders_name(la, lb));
    return it->second;
  }
  const TiledKernel kernel = tiled_kernel(config, la, lb, vec4);
  static std::map<std::pair<const void*, int>, int> occupancy;
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto key = std::make_pair(kernel.entry, device);
  auto it = occupancy.find(key);
  if (it != occupancy.end()) return it->second;
  int v = 0;
  // The occupancy query is for the current device; the planner runs under the caller's guard.
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel.entry, kernel.threads, 0));
  return occupancy[key] = std::max(v, 1);
}

DeviceFacts query_device_facts(int device) {
  TORCH_CHECK(device >= 0 && device < kFirstRecordedDevice, "vecgemm: query_device_facts takes a CUDA device");
  DeviceFacts out;
  cudaDeviceProp props{};
  C10_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  out.name = props.name;
  out.sms = sm_count(device);
  out.capability = compute_capability(device);
  const c10::cuda::CUDAGuard guard(device);
  for (int c = 0; c < kNumKernelConfigs; ++c)
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
        for (bool vec4 : {true, false})
          if (tiled_kernel(c, la, lb, vec4).launch != nullptr && runs_on(c, device))
            out.tiled.push_back({kernel_config_name(c), orders_name(la, lb), vec4, blocks_per_sm(c, la, lb, vec4, device)});
  for (int r = 0; r < kNumTf32x3Rows; ++r) {
    const Reason why = tf32x3_violation(r, device);
    out.tf32x3.push_back({kTf32x3Rows[r].name, why ? 0 : tf32x3_blocks_per_sm(r, device), why});
  }
  return out;
}

}  // namespace vecgemm
