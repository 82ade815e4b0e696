// The launcher of the narrow-side 3xTF32 kernel (sgemm_3xtf32_skinny.cuh), whose instances
// compile in units of their own (sgemm_3xtf32_skinny_instances.cuh). Builds in the extension
// and standalone (no torch headers).
#include <algorithm>
#include <atomic>
#include <string>

#include "kernels/batch_launch.h"
#include "kernels/host_error.h"
#include "kernels/tf32x3/sgemm_3xtf32.h"
#include "kernels/tf32x3/sgemm_3xtf32_skinny_instances.cuh"

namespace vecgemm {
namespace {

using tf32x3_skinny::SkinnyShape;

[[noreturn]] void fail(const std::string& what) { fail_in("sgemm_3xtf32_skinny", what); }

// Rows of the narrow operand a block takes (8, 16 or 32); 0: the fewest that cover it.
std::atomic<int> g_block_rows{0};
// Whether a K split may add its slices in the kernel (set_tf32x3_skinny_splits_in_kernel).
std::atomic<bool> g_splits_in_kernel{true};

// The most slices a cluster holds: the portable cluster size, which every GPU with clusters
// schedules.
constexpr int kMaxClusterSlices = 8;

// The fewest MMA tiles of 8 that cover the narrow side (more than 32: several blocks along
// it), unless set_tf32x3_skinny_block_rows fixed them.
int q_rows_for(int narrow) {
  const int forced = g_block_rows.load();
  return forced != 0 ? forced : narrow <= 8 ? 8 : narrow <= 16 ? 16 : 32;
}

// The instance for the storage orders: the wide operand P is B's columns for few rows (its
// rows K-contiguous where B is column-major) and A's rows for few columns (where A is
// row-major); the narrow operand Q the other.
template <bool kFewRows>
const void* instance_for(int q_rows, Layout la, Layout lb, bool vec4) {
  const bool a_along_k = la == Layout::RowMajor, b_along_k = lb == Layout::ColMajor;
  const bool p_along_k = kFewRows ? b_along_k : a_along_k, q_along_k = kFewRows ? a_along_k : b_along_k;
  return p_along_k ? tf32x3_skinny::skinny_entry<kFewRows, true>(q_rows, q_along_k, vec4)
                   : tf32x3_skinny::skinny_entry<kFewRows, false>(q_rows, q_along_k, vec4);
}

// Whether the current device runs the kernel's clusters of `slices` blocks: clusters (sm_90
// and later) in the code this build runs there (an sm_80-only build runs its sm_80 code on a
// Hopper GPU, which has no cluster code), and an SM set that can hold such a cluster (a
// shared or partitioned GPU may not). Asked once per device and cluster size.
bool clusters_run(int slices) {
  constexpr int kCachedDevices = 64;
  static std::atomic<signed char> known[kCachedDevices][kMaxClusterSlices + 1];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (device < kCachedDevices) {
    const signed char v = known[device][slices].load(std::memory_order_relaxed);
    if (v != 0) return v == 2;
  }
  const void* fn = instance_for<true>(8, Layout::RowMajor, Layout::ColMajor, true);
  int cluster_launch = 0;
  cudaFuncAttributes attributes{};
  bool ok = cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
            cluster_launch != 0 && cudaFuncGetAttributes(&attributes, fn) == cudaSuccess &&
            attributes.binaryVersion >= 90;
  if (ok) {
    cudaLaunchAttribute attribute = clusters_along_z(slices);
    const cudaLaunchConfig_t config = launch_config(dim3(1, 1, static_cast<unsigned>(slices)),
                                                    dim3(SkinnyShape<1, true>::kThreads), 0, nullptr, attribute);
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, fn, &config) == cudaSuccess && clusters > 0;
  }
  (void)cudaGetLastError();  // a refused query leaves no error for the next launch's check
  if (device < kCachedDevices) known[device][slices].store(ok ? 2 : 1, std::memory_order_relaxed);
  return ok;
}

}  // namespace

bool tf32x3_skinny_adds_splits(const GemmParams& p) {
  return p.k_splits > 1 && p.k_splits <= kMaxClusterSlices && g_splits_in_kernel.load() && clusters_run(p.k_splits);
}

void set_tf32x3_skinny_splits_in_kernel(bool enabled) { g_splits_in_kernel = enabled; }

Tf32x3ConfigInfo tf32x3_skinny_config_info(int config) {
  using S = SkinnyShape<4, true>;
  if (config != kSkinnyFewRows && config != kSkinnyFewColumns) fail("no config " + std::to_string(config));
  // The block tile at its widest narrow side: 32 x 32 (rows of D by columns).
  return {config == kSkinnyFewRows ? S::kQRows : S::kPRows, config == kSkinnyFewRows ? S::kPRows : S::kQRows,
          S::kThreads, 0};
}

const void* tf32x3_skinny_kernel_entry(int config, Layout la, Layout lb, bool vec4) {
  if (config == kSkinnyFewRows) return instance_for<true>(8, la, lb, vec4);
  if (config == kSkinnyFewColumns) return instance_for<false>(8, la, lb, vec4);
  fail("no config " + std::to_string(config));
}

void set_tf32x3_skinny_block_rows(int rows) {
  if (rows != 0 && rows != 8 && rows != 16 && rows != 32) fail("block rows must be 0, 8, 16 or 32");
  g_block_rows = rows;
}

void launch_sgemm_3xtf32_skinny(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, cudaStream_t stream) {
  if (config != kSkinnyFewRows && config != kSkinnyFewColumns) fail("no config " + std::to_string(config));
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  const bool few_rows = config == kSkinnyFewRows;
  const int narrow = few_rows ? p.m : p.n, wide = few_rows ? p.n : p.m;
  const int q_rows = q_rows_for(narrow);
  const int64_t blocks = (int64_t(wide) + 31) / 32 * ((narrow + q_rows - 1) / q_rows);
  // A split without a workspace is one the caller asked the kernel to add
  // (tf32x3_skinny_adds_splits).
  const bool in_kernel = p.k_splits > 1 && p.workspace == nullptr;
  if (in_kernel && (p.k_splits > kMaxClusterSlices || !clusters_run(p.k_splits)))
    fail("a K split of " + std::to_string(p.k_splits) + " slices here needs the split-K workspace");
  launch_over_batch(few_rows ? instance_for<true>(q_rows, la, lb, vec4) : instance_for<false>(q_rows, la, lb, vec4), p,
                    blocks, SkinnyShape<1, true>::kThreads, 0, stream, "sgemm_3xtf32_skinny", in_kernel);
}

}  // namespace vecgemm
