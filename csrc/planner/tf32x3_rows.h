// The 3xTF32 kernels (precision "3xtf32"), as data: one row per kernel the planner may
// run. Of the rows that run on the device (tf32x3_violation: its instruction's compute
// capabilities, its shared memory, a kernel image in this build) and take the problem
// (the row's `refuses`), the planner takes the one it predicts fastest at its best K split
// (plan.cpp, with the device profile's K-tile time of each row), an earlier row on a tie,
// so older GPUs skip a kernel they cannot run. Each implementation keeps its own host interface (sgemm_3xtf32.h: a
// config index and launch / entry / info functions); a row names those functions, so a
// second implementation (a Hopper wgmma form, sm_90a only) is a row with its own
// functions and capability range, with no change to the planner, the ops or the API.
#pragma once
#include <optional>
#include <string>

#include "kernels/launchers.h"  // dependent_launch_enabled
#include "kernels/tf32x3/sgemm_3xtf32.h"
#include "planner/cost_model.h"
#include "rules.h"

namespace vecgemm {

struct Tf32x3Row {
  // The variant name: tf32x3_<BM>x<BN>_<instruction> ("mma": mma.sync, "wgmma"), or
  // tf32x3_few_<rows|cols>_<instruction> for the narrow-side kernel.
  const char* name;
  // The compute capabilities it runs on, 10 * major + minor: mma.sync's TF32 needs 80; code
  // for an arch-specific target (sm_90a's wgmma) runs on that one only, so max 90.
  int min_capability, max_capability;  // max 0: no upper limit
  int bk;                              // K tile: split-K slices are whole K tiles
  int config;                          // the implementation's own index of this tiling
  Tf32x3ConfigInfo (*info)(int config);
  const void* (*entry)(int config, Layout la, Layout lb, bool vec4);
  // p.workspace: the split-K partials when p.k_splits > 1; scratch: scratch_bytes(...)
  // bytes; kernel_splits: the plan's (kernel_can_split).
  void (*launch)(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, SplitOperands kernel_splits,
                 void* scratch, cudaStream_t stream);
  // Scratch the kernel needs besides the split-K partials (the wgmma form's TF32 parts of
  // A and B and its flags), or none.
  size_t (*scratch_bytes)(int config, const GemmParams& p, Layout la, Layout lb, SplitOperands kernel_splits);
  // A row with a split pass before its kernel (the wgmma form): the operands its kernel can
  // split itself instead, so that the planner chooses, per problem, which the pass takes.
  // None: no split pass.
  SplitOperands (*kernel_can_split)(const ProblemKey& key);
  // Whether the current device can run the kernel beyond what the capability range says
  // (the wgmma form: sm_90a code in this build), or none.
  bool (*available)();
  // Why the kernel does not take a problem (storage orders, alignment, extents), or none
  // where it takes every problem.
  Reason (*refuses)(const ProblemKey& key);
  // The shortest fp32 sum (products a chain of FFMAs) whose error the kernel's stays
  // within: its error has a floor whatever K is (the split's representation and the tensor
  // core's truncation, sgemm_3xtf32.cuh "Accumulation"), fp32's grows as ~0.3 u sqrt(sum),
  // and below this fp32 is the more accurate (plan.cpp, tf32x3_declined).
  int min_fp32_sum;
};

namespace tf32x3_mma_row {
inline void launch(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, SplitOperands, void*,
                   cudaStream_t stream) {
  launch_sgemm_3xtf32_config(config, p, la, lb, vec4, stream);
}
}  // namespace tf32x3_mma_row

namespace tf32x3_wgmma_row {
inline const void* entry(int config, Layout, Layout, bool) { return tf32x3_wgmma_kernel_entry(config); }
inline void launch(int config, const GemmParams& p, Layout la, Layout lb, bool, SplitOperands kernel_splits,
                   void* scratch, cudaStream_t stream) {
  launch_sgemm_3xtf32_wgmma(config, p, la, lb, kernel_splits, scratch, dependent_launch_enabled(), stream);
}
// When both operands are 16-byte aligned, TMA reads A as fp32 in either order (its parts
// are made in registers, from K-major or M-major tiles) and B where it is K-contiguous
// (column-major; its parts are made in shared memory, where wgmma reads them K-major). The
// launch's rule (read_as_fp32, sgemm_3xtf32_wgmma.cu) also looks at strides the key does
// not keep, and sends an operand it refuses through the pass.
inline SplitOperands kernel_can_split(const ProblemKey& key) {
  return {key.vec4, key.lb == Layout::ColMajor && key.vec4};
}
}  // namespace tf32x3_wgmma_row

namespace tf32x3_skinny_row {
inline void launch(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, SplitOperands, void*,
                   cudaStream_t stream) {
  launch_sgemm_3xtf32_skinny(config, p, la, lb, vec4, stream);
}
Reason refuses_few_rows(const ProblemKey& key);
Reason refuses_few_columns(const ProblemKey& key);
}  // namespace tf32x3_skinny_row

namespace tf32x3_wgmma_row {
// The 64-wide tiling is for N <= 64, the products the 128-wide one computes half of as
// padding; wider, the 128-wide one does the same work in half the tiles.
Reason refuses_wide(const ProblemKey& key);
}  // namespace tf32x3_wgmma_row

// The wgmma form where it runs: 2.1x cuBLAS fp32 at 4096^3 against the mma.sync form's
// 1.1x on the H200 (docs/history.md, step 31), but it pays a split pass over the
// operands it cannot split itself, which small-M problems do not earn back (step 32). Its
// 128 x 64 tiles only for N <= 64 (tall-skinny products), which 128 x 128 tiles compute half
// of as padding; the same K tile's sums in the same order, so the same floor. The mma.sync
// form's 128 x 64: two blocks of 4
// warps per SM measured faster than one of 8 at every size on the H200 with the kernel's
// earlier 64 x 64 warps, and with its 64 x 32 warps at 2048^3 and 4096^3 (not at 8192^3,
// 1.4% slower). 128 x 128 needs 128 KB of shared memory a block, which sm_86 and sm_89
// (99 KB) do not have. 64 x 128 after 128 x 64 (the same work and loads a block K tile:
// they tie on large problems), for M <= 64, where it computes half the padding. The
// narrow-side kernel last: only for M (few rows) or N (few columns) at most
// kSkinnyMaxNarrow, where it reads the wide operand once at memory's pace instead of
// computing 64- or 128-row tiles of padding.
// The floors (relative Frobenius, randn, u = 2^-24), and the fp32 sums each row serves from:
// the worst ratio of a row's error to torch.matmul's among the random sweeps' problems whose
// IEEE plan sums at least L products a chain, every row forced (benchmarks/probes/
// precision_choice.py, seeds 0 / 1, with the truncations' loss given back in the tile sums;
// docs/history.md, step 66). The wgmma kernel 0.75 / 0.80 from L = 128, 0.75 / 1.09 from 96,
// so 128 (its floor 1.7-2.3 u up to K = 1024: 4 of a K tile's 12 wgmma truncate at the tile
// sum's size, sgemm_3xtf32_wgmma.cuh). The narrow-side kernel 0.67 / 1.11 from 96 (its
// small terms in an accumulator of their own, step 59), so the wgmma's 128. The mma.sync
// kernels 0.85 / 0.80 from 256 (their floor 2.8-3.0 u: they order the terms by K step), but
// 512: from 256 the H200 planned two sweep problems on them (1515x129x5700 and
// 102x1569x8008 cc, split-k 7 and 10) that ran 0.980x and 0.975x torch.matmul, priced
// faster than it (docs/history.md, step 70).
inline constexpr Tf32x3Row kTf32x3Rows[] = {
    {"tf32x3_128x128_wgmma", 90, 90, 32, 0, &tf32x3_wgmma_config_info, &tf32x3_wgmma_row::entry,
     &tf32x3_wgmma_row::launch, &sgemm_3xtf32_wgmma_scratch_bytes, &tf32x3_wgmma_row::kernel_can_split,
     &sgemm_3xtf32_wgmma_available, nullptr, 128},
    {"tf32x3_128x64_wgmma", 90, 90, 32, 1, &tf32x3_wgmma_config_info, &tf32x3_wgmma_row::entry,
     &tf32x3_wgmma_row::launch, &sgemm_3xtf32_wgmma_scratch_bytes, &tf32x3_wgmma_row::kernel_can_split,
     &sgemm_3xtf32_wgmma_available, &tf32x3_wgmma_row::refuses_wide, 128},
    {"tf32x3_128x64_mma", 80, 0, 32, 1, &tf32x3_config_info, &tf32x3_kernel_entry, &tf32x3_mma_row::launch,
     nullptr, nullptr, nullptr, nullptr, 512},
    {"tf32x3_64x128_mma", 80, 0, 32, 2, &tf32x3_config_info, &tf32x3_kernel_entry, &tf32x3_mma_row::launch,
     nullptr, nullptr, nullptr, nullptr, 512},
    {"tf32x3_128x128_mma", 80, 0, 32, 0, &tf32x3_config_info, &tf32x3_kernel_entry, &tf32x3_mma_row::launch,
     nullptr, nullptr, nullptr, nullptr, 512},
    {"tf32x3_few_rows_mma", 80, 0, kSkinnyBlockK, kSkinnyFewRows, &tf32x3_skinny_config_info,
     &tf32x3_skinny_kernel_entry, &tf32x3_skinny_row::launch, nullptr, nullptr, nullptr,
     &tf32x3_skinny_row::refuses_few_rows, 128},
    {"tf32x3_few_cols_mma", 80, 0, kSkinnyBlockK, kSkinnyFewColumns, &tf32x3_skinny_config_info,
     &tf32x3_skinny_kernel_entry, &tf32x3_skinny_row::launch, nullptr, nullptr, nullptr,
     &tf32x3_skinny_row::refuses_few_columns, 128},
};
inline constexpr int kNumTf32x3Rows = sizeof(kTf32x3Rows) / sizeof(kTf32x3Rows[0]);

// The row of a variant name.
std::optional<int> tf32x3_row_of(const std::string& name);

// Whether a row's kernel runs on a device: tf32x3_violation (planner/kernel_rules.h).

// Blocks of the row's kernel resident on one SM of the device (with its dynamic shared
// memory), at least 1.
int tf32x3_blocks_per_sm(int row, int device);

}  // namespace vecgemm
