#include "planner/tf32x3_rows.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "planner/device_profile.h"

namespace vecgemm {
namespace {

std::mutex g_mutex;

}  // namespace

namespace tf32x3_skinny_row {

// The kernel reads any storage orders and alignment (sgemm_3xtf32_skinny.cuh): the narrow
// side is its one limit.
Reason refuses_few_rows(const ProblemKey& key) {
  if (key.m > kSkinnyMaxNarrow)
    return "tf32x3_few_rows_mma takes at most " + std::to_string(kSkinnyMaxNarrow) + " rows of A (M is " +
           std::to_string(key.m) + ")";
  return std::nullopt;
}

Reason refuses_few_columns(const ProblemKey& key) {
  if (key.n > kSkinnyMaxNarrow)
    return "tf32x3_few_cols_mma takes at most " + std::to_string(kSkinnyMaxNarrow) + " columns of B (N is " +
           std::to_string(key.n) + ")";
  return std::nullopt;
}
}  // namespace tf32x3_skinny_row

namespace tf32x3_wgmma_row {
Reason refuses_wide(const ProblemKey& key) {
  constexpr int kWidth = 64;
  if (key.n > kWidth)
    return "tf32x3_128x64_wgmma takes at most " + std::to_string(kWidth) + " columns of B (N is " +
           std::to_string(key.n) + "); tf32x3_128x128_wgmma takes wider products";
  return std::nullopt;
}
}  // namespace tf32x3_wgmma_row

std::optional<int> tf32x3_row_of(const std::string& name) {
  for (int r = 0; r < kNumTf32x3Rows; ++r)
    if (name == kTf32x3Rows[r].name) return r;
  return std::nullopt;
}

int tf32x3_blocks_per_sm(int row, int device) {
  if (const RecordedDevice* r = recorded_device(device)) return std::max(r->tf32x3_blocks[row], 1);
  static std::map<std::pair<int, int>, int> occupancy;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = occupancy.find({row, device});
    if (it != occupancy.end()) return it->second;
  }
  const Tf32x3Row& r = kTf32x3Rows[row];
  const Tf32x3ConfigInfo info = r.info(r.config);
  const void* entry = r.entry(r.config, Layout::RowMajor, Layout::RowMajor, true);
  const c10::cuda::CUDAGuard guard(device);
  // The occupancy query counts dynamic shared memory only up to what the function allows.
  C10_CUDA_CHECK(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, info.smem_bytes));
  int v = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, entry, info.threads, info.smem_bytes));
  std::lock_guard<std::mutex> lock(g_mutex);
  return occupancy[{row, device}] = std::max(v, 1);
}

}  // namespace vecgemm
