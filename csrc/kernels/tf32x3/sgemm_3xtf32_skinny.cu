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

}  // namespace

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
  launch_over_batch(few_rows ? instance_for<true>(q_rows, la, lb, vec4) : instance_for<false>(q_rows, la, lb, vec4), p,
                    blocks, SkinnyShape<1, true>::kThreads, 0, stream, "sgemm_3xtf32_skinny");
}

}  // namespace vecgemm
