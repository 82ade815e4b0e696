#include "planner/tf32x3_rows.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

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

std::optional<int> tf32x3_row_of(const std::string& name) {
  for (int r = 0; r < kNumTf32x3Rows; ++r)
    if (name == kTf32x3Rows[r].name) return r;
  return std::nullopt;
}

std::optional<int> tf32x3_height_index(int block_rows) {
  if (block_rows == 0) return 0;
  for (int h = 0; h < kNumSkinnyBlockRows; ++h)
    if (kSkinnyBlockRows[h] == block_rows) return h;
  return std::nullopt;
}

int tf32x3_blocks_per_sm(int row, int device, int block_rows) {
  const Tf32x3Row& r = kTf32x3Rows[row];
  const std::optional<int> height = r.block_rows ? tf32x3_height_index(block_rows) : 0;
  TORCH_CHECK(height, "vecgemm: ", r.name, " has no instance ", block_rows, " rows high");
  if (const RecordedDevice* d = recorded_device(device)) return std::max(d->tf32x3_blocks[row][*height], 1);
  static std::map<std::tuple<int, int, int>, int> occupancy;
  const auto key = std::make_tuple(row, device, *height);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = occupancy.find(key);
    if (it != occupancy.end()) return it->second;
  }
  const Tf32x3ConfigInfo info = r.info(r.config);
  const void* entry =
      r.entry(r.config, Layout::RowMajor, Layout::RowMajor, true, r.block_rows ? kSkinnyBlockRows[*height] : 0);
  const c10::cuda::CUDAGuard guard(device);
  // The occupancy query counts dynamic shared memory only up to what the function allows.
  C10_CUDA_CHECK(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, info.smem_bytes));
  int v = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, entry, info.threads, info.smem_bytes));
  std::lock_guard<std::mutex> lock(g_mutex);
  return occupancy[key] = std::max(v, 1);
}

}  // namespace vecgemm
