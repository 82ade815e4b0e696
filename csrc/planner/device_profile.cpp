#include "planner/device_profile.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "planner/kernel_rules.h"  // config_runs_at, runs_on, tf32x3_violation

namespace vecgemm {
namespace {

// The profiles added so far (add_device_profile), never erased, so that a profile a plan
// is being priced with stays valid when another takes its place; the later of two for the
// same GPUs or of the same name serves, the earlier is retired.
struct KeptProfile {
  DeviceProfile profile;
  bool retired = false;
};
std::mutex g_profiles_mutex;
std::deque<KeptProfile> g_profiles;
std::atomic<uint64_t> g_profiles_generation{0};

// The profile's scalars: rates and costs, by the names its file gives them.
struct ScalarField {
  const char* name;
  double DeviceProfile::*field;
};
constexpr ScalarField kScalarFields[] = {
    {"macs_per_ns_per_sm", &DeviceProfile::macs_per_ns_per_sm},
    {"bytes_per_ns", &DeviceProfile::bytes_per_ns},
    {"launch_ns", &DeviceProfile::launch_ns},
    {"dependent_launch_ns", &DeviceProfile::dependent_launch_ns},
    {"memory_latency_ns", &DeviceProfile::memory_latency_ns},
    {"k_step_latency_ns", &DeviceProfile::k_step_latency_ns},
    {"checked_loop", &DeviceProfile::checked_loop},
    {"scalar_output_few_warps", &DeviceProfile::scalar_output_few_warps},
    {"stream_k_cost", &DeviceProfile::stream_k_cost},
    {"one_warp_throughput", &DeviceProfile::one_warp_throughput},
    {"tf32x3_model_slack", &DeviceProfile::tf32x3_model_slack},
    {"tf32x3_fixed_ns", &DeviceProfile::tf32x3_fixed_ns},
};
constexpr const char* kIntegerScalars[] = {"warps_to_hide_scalar_output", "unmeasured_scalar_load_percent"};
constexpr const char* kTf32x3Fields[] = {"k_tile_ns", "block_overhead_tiles", "a_split_ns", "b_split_ns"};
constexpr int kNumTf32x3Fields = sizeof(kTf32x3Fields) / sizeof(kTf32x3Fields[0]);
// A 3xTF32 row's storage figures, each optional: one a storage order (by order_index), and
// the unaligned one. Left out: the row is not priced on that storage.
constexpr const char* kTf32x3OrderFields[kNumOrders] = {"rr_percent", "rc_percent", "cr_percent", "cc_percent"};
constexpr const char* kTf32x3UnalignedField = "unaligned_percent";
// Optional: a K tile's extra ns where the kernel makes a column-major (M-major) A's parts;
// left out, such an A goes through the split pass.
constexpr const char* kTf32x3MMajorAField = "a_split_m_major_ns";
// The hand-off rule's weights, by the names its file gives them.
struct HandoffField {
  const char* name;
  double DeviceProfile::TorchHandoff::*field;
};
constexpr HandoffField kHandoffFields[] = {
    {"log_predicted_ms", &DeviceProfile::TorchHandoff::log_predicted_ms},
    {"log_macs", &DeviceProfile::TorchHandoff::log_macs},
    {"log_splits", &DeviceProfile::TorchHandoff::log_splits},
    {"copies", &DeviceProfile::TorchHandoff::copies},
};

// Reads a profile's data against this build's tables. Every check returns its verdict
// rather than throwing, and the first problem found is what add_device_profile reports:
// one exception, raised at the boundary, whatever the check.
class ProfileReader {
 public:
  explicit ProfileReader(const ProfileData& d) : d_(d) {}

  // Why the data cannot be this build's profile, or nothing (then `out` holds it).
  std::optional<std::string> read(DeviceProfile& out) {
    if (d_.name.empty()) return "a device profile needs a name";
    if ((d_.capability == 0) != (d_.sms == 0) || d_.capability < 0 || d_.sms < 0)
      return "it serves GPUs of a compute capability and SM count (both positive), or none (both 0: the neutral one)";
    DeviceProfile& p = out;
    p.name = d_.name;
    p.capability = d_.capability;
    p.sms = d_.sms;
    for (const auto& [field, value] : d_.scalars) unread_.insert(field);
    for (const ScalarField& f : kScalarFields)
      if (!positive(f.name, p.*f.field)) return error_;
    int unmeasured_scalar_loads = 0;
    if (!whole_scalar(kIntegerScalars[0], 1, 64, p.warps_to_hide_scalar_output) ||
        !whole_scalar(kIntegerScalars[1], 1, 100, unmeasured_scalar_loads))
      return error_;
    if (!unread_.empty()) return "it has a figure '" + *unread_.begin() + "' that this build does not know";
    if (!percents("order_percent", d_.order_percent, p.order_percent)) return error_;
    for (int c = 0; c < kNumKernelConfigs; ++c) {
      std::fill(p.kernel_percent[c], p.kernel_percent[c] + kNumOrders, 100);
      std::fill(p.scalar_load_percent[c], p.scalar_load_percent[c] + kNumOrders, unmeasured_scalar_loads);
    }
    if (!kernel_percents("kernel_percent", d_.kernel_percent, p.kernel_percent) ||
        !kernel_percents("scalar_load_percent", d_.scalar_load_percent, p.scalar_load_percent) || !tf32x3_rows(p) ||
        !torch_handoff(p))
      return error_;
    return std::nullopt;
  }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  static std::string number(double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", v);
    return text;
  }

  bool positive(const char* field, double& out) {
    const auto it = d_.scalars.find(field);
    if (it == d_.scalars.end()) return fail(std::string("it has no figure '") + field + "'");
    if (!(std::isfinite(it->second) && it->second > 0.0))
      return fail(std::string(field) + " must be a positive number, not " + number(it->second));
    unread_.erase(field);
    out = it->second;
    return true;
  }

  bool whole_number(const std::string& what, double v, int lo, int hi, int& out) {
    if (!(v == std::floor(v) && v >= lo && v <= hi))
      return fail(what + " must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                  ", not " + number(v));
    out = int(v);
    return true;
  }

  bool whole_scalar(const char* field, int lo, int hi, int& out) {
    double v = 0.0;
    return positive(field, v) && whole_number(field, v, lo, hi, out);
  }

  bool percents(const std::string& what, const std::vector<double>& values, int (&out)[kNumOrders]) {
    if (values.size() != kNumOrders)
      return fail(what + " needs one percentage for each storage order (rr, rc, cr, cc), not " +
                  std::to_string(values.size()));
    for (int o = 0; o < kNumOrders; ++o)
      if (!whole_number(what, values[o], 1, 100, out[o])) return false;
    return true;
  }

  bool kernel_percents(const char* table_name, const std::map<std::string, std::vector<double>>& figures,
                       int (&table)[kNumKernelConfigs][kNumOrders]) {
    for (const auto& [kernel, values] : figures) {
      const auto config = kernel_config_of(kernel);
      if (!config)
        return fail(std::string(table_name) + " names no kernel config '" + kernel +
                    "' of this build (torch_vecgemm.variants())");
      if (!percents(std::string(table_name) + " of " + kernel, values, table[*config])) return false;
    }
    return true;
  }

  bool tf32x3_rows(DeviceProfile& p) {
    bool seen[kNumTf32x3Rows] = {};
    for (const auto& [row_name, figures] : d_.tf32x3) {
      const auto row = tf32x3_row_of(row_name);
      if (!row) return fail("it names no 3xTF32 row '" + row_name + "' of this build (torch_vecgemm.variants())");
      seen[*row] = true;
      double v[kNumTf32x3Fields];
      for (int i = 0; i < kNumTf32x3Fields; ++i) {
        const auto it = figures.find(kTf32x3Fields[i]);
        if (it == figures.end() || !std::isfinite(it->second))
          return fail(row_name + " needs " + kTf32x3Fields[i] + ", a number");
        v[i] = it->second;
      }
      // The storage figures: percents above 0 and at most 1000 (a row ten times faster on
      // another storage than on the one it was fitted on is a mistake); 0 where left out.
      size_t optional_fields = 0;
      const auto storage_percent = [&](const char* field, double& out) {
        out = 0.0;
        const auto it = figures.find(field);
        if (it == figures.end()) return true;
        ++optional_fields;
        out = it->second;
        return std::isfinite(out) && out > 0.0 && out <= 1000.0;
      };
      bool storage_ok = storage_percent(kTf32x3UnalignedField, p.tf32x3_unaligned_percent[*row]);
      double m_major_a = std::nan("");
      if (const auto it = figures.find(kTf32x3MMajorAField); it != figures.end()) {
        ++optional_fields;
        m_major_a = it->second;
        if (!std::isfinite(m_major_a) || !(v[0] + std::min(m_major_a, 0.0) + std::min(v[3], 0.0) > 0.0))
          return fail(row_name + "'s " + kTf32x3MMajorAField +
                      " must be a number that leaves k_tile_ns plus it, and plus b_split_ns too, above 0");
      }
      for (int o = 0; o < kNumOrders; ++o)
        storage_ok = storage_percent(kTf32x3OrderFields[o], p.tf32x3_order_percent[*row][o]) && storage_ok;
      // The split figures are differences, and may be below 0 (an in-kernel split faster
      // than the pass's parts); a K tile's time may not be, whatever the kernel splits.
      const double fastest_k_tile = v[0] + std::min(v[2], 0.0) + std::min(v[3], 0.0);
      if (figures.size() != size_t(kNumTf32x3Fields) + optional_fields || !storage_ok || !(v[0] > 0.0) || v[1] < 0.0 ||
          !(fastest_k_tile > 0.0))
        return fail(row_name + " takes k_tile_ns (above 0), block_overhead_tiles (at least 0), a_split_ns and b_split_ns "
                    "(k_tile_ns plus either, or both, still above 0), and, for each storage it is priced on, "
                    "rr_percent, rc_percent, cr_percent, cc_percent, unaligned_percent (above 0, at most 1000), "
                    "optionally a_split_m_major_ns, and nothing else");
      p.tf32x3_k_tile_ns[*row] = v[0];
      p.tf32x3_block_overhead_tiles[*row] = v[1];
      p.tf32x3_a_split_ns[*row] = v[2];
      p.tf32x3_b_split_ns[*row] = v[3];
      p.tf32x3_a_split_m_major_ns[*row] = m_major_a;
    }
    for (int r = 0; r < kNumTf32x3Rows; ++r)
      if (!seen[r]) return fail(std::string("it has no figures for ") + kTf32x3Rows[r].name);
    return true;
  }

  bool torch_handoff(DeviceProfile& p) {
    if (!d_.torch_handoff) {
      if (!d_.torch_handoff_configs.empty()) return fail("torch_handoff names configs but has no weights");
      return true;
    }
    DeviceProfile::TorchHandoff rule{};
    std::set<std::string> unread;
    for (const auto& [field, value] : *d_.torch_handoff) unread.insert(field);
    for (const HandoffField& f : kHandoffFields) {
      const auto it = d_.torch_handoff->find(f.name);
      if (it == d_.torch_handoff->end() || !std::isfinite(it->second))
        return fail(std::string("torch_handoff needs ") + f.name + ", a finite number");
      rule.*f.field = it->second;
      unread.erase(f.name);
    }
    if (!unread.empty()) return fail("torch_handoff has a weight '" + *unread.begin() + "' that this build does not know");
    if (d_.torch_handoff_configs.empty())
      return fail("torch_handoff speaks for no config: name each config it was fitted on, with its term");
    for (const auto& [kernel, term] : d_.torch_handoff_configs) {
      const auto config = kernel_config_of(kernel);
      if (!config)
        return fail("torch_handoff names no kernel config '" + kernel + "' of this build (torch_vecgemm.variants())");
      if (!std::isfinite(term)) return fail("torch_handoff's term for " + kernel + " must be a finite number");
      rule.speaks_for[*config] = true;
      rule.config_term[*config] = term;
    }
    p.torch_handoff = rule;
    return true;
  }

  const ProfileData& d_;
  std::set<std::string> unread_;
  std::string error_;
};

std::mutex g_mutex;
// Device kFirstRecordedDevice + i; reserved once, so that a record's address stays valid.
constexpr size_t kMaxRecordedDevices = 64;
std::vector<RecordedDevice> g_recorded;

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
  // A 3xTF32 row the facts leave out was not in the build they were recorded with: there,
  // as on a GPU or build that cannot run it, the row does not run, so the plans of record
  // stay the plans made then. (A tiled config left out is an error above: every IEEE plan
  // ranks them all.)
  for (int row = 0; row < kNumTf32x3Rows; ++row)
    if (!seen[row])
      r.tf32x3_violations[row] = std::string("not in the recorded facts of '") + facts.name +
                                 "', which predate it (python -m benchmarks.records --only device records them)";
  std::lock_guard<std::mutex> lock(g_mutex);
  TORCH_CHECK(g_recorded.size() < kMaxRecordedDevices, "vecgemm: at most 64 recorded devices");
  g_recorded.reserve(kMaxRecordedDevices);
  g_recorded.push_back(std::move(r));
  return kFirstRecordedDevice + int(g_recorded.size()) - 1;
}

void add_device_profile(const ProfileData& data) {
  DeviceProfile p{};
  const std::optional<std::string> error = ProfileReader(data).read(p);
  TORCH_CHECK(!error, "vecgemm: device profile '", data.name, "' cannot be used: ", error.value_or(""));
  std::lock_guard<std::mutex> lock(g_profiles_mutex);
  for (KeptProfile& kept : g_profiles)
    if (kept.profile.name == p.name || (kept.profile.capability == p.capability && kept.profile.sms == p.sms))
      kept.retired = true;
  g_profiles.push_back({std::move(p), false});
  ++g_profiles_generation;
}

uint64_t profiles_generation() { return g_profiles_generation.load(); }

const DeviceProfile& profile_of(int device) {
  const int capability = compute_capability(device), sms = sm_count(device);
  std::lock_guard<std::mutex> lock(g_profiles_mutex);
  const DeviceProfile* neutral = nullptr;
  for (const KeptProfile& kept : g_profiles) {
    if (kept.retired) continue;
    if (kept.profile.capability == capability && kept.profile.sms == sms) return kept.profile;
    if (kept.profile.capability == 0) neutral = &kept.profile;
  }
  TORCH_CHECK(neutral != nullptr, "vecgemm: no device profile is loaded: the package loads them at import "
              "(torch_vecgemm/profiles/*.json), so import torch_vecgemm rather than its _C alone");
  return *neutral;
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
