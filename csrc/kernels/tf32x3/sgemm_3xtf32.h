// Host entry points of the 3xTF32 kernel (sgemm_3xtf32.cuh): fp32 GEMM with fp32 accuracy
// on the tensor cores, for sm_80 and later; the planner's rows are tf32x3_rows.h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/gemm_params.h"

namespace vecgemm {

// D = alpha * A @ B + beta * C (or split-K partials into p.workspace when p.k_splits > 1,
// as the tiled kernels do) for any M, N, K, batch and storage orders. vec4: A and B are
// 16-byte aligned (pointer, leading dimension and batch stride multiples of 4 floats), so
// their K-contiguous tiles move in 16-byte copies; otherwise 4-byte ones. Needs sm_80 or
// later; throws (c10::Error in the extension, std::runtime_error standalone) on a launch
// error or a GPU without it.
void launch_sgemm_3xtf32(const GemmParams& p, Layout la, Layout lb, bool vec4, cudaStream_t stream);

// The block tilings it is compiled for, by index, for probes and tuning:
// 0: 128 x 128 (8 warps of 64 x 32, one block per SM), 1: 128 x 64 (4 warps, two blocks
// per SM), 2: 64 x 128 (4 warps along N, two blocks per SM: few rows).
inline constexpr int kNumTf32x3Configs = 3;
struct Tf32x3ConfigInfo {
  int bm, bn, threads, smem_bytes;
};
Tf32x3ConfigInfo tf32x3_config_info(int config);
// The config launch_sgemm_3xtf32 picks for a problem on the current device.
int tf32x3_default_config(const GemmParams& p);
void launch_sgemm_3xtf32_config(int config, const GemmParams& p, Layout la, Layout lb, bool vec4,
                                cudaStream_t stream);
// The __global__ function of one instance, for cudaFuncGetAttributes and occupancy queries.
const void* tf32x3_kernel_entry(int config, Layout la, Layout lb, bool vec4);

// Recomputes, as config 0 (128 x 128) or 1 (128 x 64) computes them, the tiles whose flag
// is nonzero: flags[z * tiles + pid], z = batch * k_splits + split, pid in the kernels'
// raster order. The wgmma kernel's pass for NaN, Inf and tiny results
// (sgemm_3xtf32_wgmma.cuh); overlap: launched to overlap that kernel's end (programmatic
// dependent launch, sm_90).
void launch_sgemm_3xtf32_fixup(int config, const GemmParams& p, Layout la, Layout lb, const int* flags, bool overlap,
                               cudaStream_t stream);

// ---- the Hopper form (sgemm_3xtf32_wgmma.cuh): wgmma, sm_90a only ----
// A choice per operand, A's and B's.
struct SplitOperands {
  bool a, b;
};
// Same problem and results as launch_sgemm_3xtf32 (split-K partials into p.workspace when
// p.k_splits > 1, slices of whole K tiles of 32), in up to three launches: a split of A and
// B into their TF32 parts (K-contiguous) in `scratch`, the wgmma kernel, and the
// mma.sync kernel over the tiles with NaN, Inf or results below 2^-90. kernel_splits: the
// operands the kernel splits itself instead, where TMA can read them as they are
// (K-contiguous, 16-byte aligned; the others go through the split pass whatever it says).
// scratch must hold sgemm_3xtf32_wgmma_scratch_bytes(config, p, la, lb, kernel_splits) bytes,
// 256-byte aligned, and may not overlap A, B, C, D or p.workspace. Any alignment is taken,
// so there is no vec4. Throws "not built for this GPU" where the device is not sm_90 or
// the build had no sm_90a target (TORCH_CUDA_ARCH_LIST with 9.0a). overlap: the kernel and
// the fix-up launched to overlap the pass before each (programmatic dependent launch).
// config: the output tiles, 0: 128 x 128, 1: 128 x 64 (for N <= 64, where 128 columns would
// be half padding); the fix-up recomputes flagged tiles with the mma.sync tiling of the same
// tiles.
inline constexpr int kNumTf32x3WgmmaConfigs = 2;
size_t sgemm_3xtf32_wgmma_scratch_bytes(int config, const GemmParams& p, Layout la, Layout lb,
                                        SplitOperands kernel_splits);
void launch_sgemm_3xtf32_wgmma(int config, const GemmParams& p, Layout la, Layout lb, SplitOperands kernel_splits,
                               void* scratch, bool overlap, cudaStream_t stream);
// Its first pass alone (the split into scratch), for probes that price it.
void launch_sgemm_3xtf32_wgmma_split(int config, const GemmParams& p, Layout la, Layout lb,
                                     SplitOperands kernel_splits, void* scratch, cudaStream_t stream);
// Whether the current device can run it (sm_90 with sm_90a code in this build); the first
// call per device runs a one-thread kernel and waits for it.
bool sgemm_3xtf32_wgmma_available();
// A config's main kernel, for cudaFuncGetAttributes; its block size and dynamic shared memory.
const void* tf32x3_wgmma_kernel_entry(int config);
Tf32x3ConfigInfo tf32x3_wgmma_config_info(int config);

// ---- the narrow-side form (sgemm_3xtf32_skinny.cuh): few rows of A or few columns of B ----
// Same results as launch_sgemm_3xtf32 (split-K partials into p.workspace when p.k_splits >
// 1), for any storage orders and alignment (vec4: both operands 16-byte aligned, read 16
// bytes at a time; otherwise 4). Config
// kSkinnyFewRows streams B past up to 32 rows of A at a time, kSkinnyFewColumns A past up
// to 32 columns of B; a narrow side past 32 runs as several blocks along it, each reading
// the wide operand again, which is what the planner keeps it from (kSkinnyMaxNarrow).
inline constexpr int kSkinnyFewRows = 0, kSkinnyFewColumns = 1;
inline constexpr int kSkinnyMaxNarrow = 32;
// Slices of a K split are whole multiples of this: the K a block takes at a time.
inline constexpr int kSkinnyBlockK = 128;
void launch_sgemm_3xtf32_skinny(int config, const GemmParams& p, Layout la, Layout lb, bool vec4, cudaStream_t stream);
// Its block at the widest narrow side (32 x 32) and no dynamic shared memory.
Tf32x3ConfigInfo tf32x3_skinny_config_info(int config);
// Its instance for 8 narrow rows in these storage orders, for cudaFuncGetAttributes and
// occupancy queries.
const void* tf32x3_skinny_kernel_entry(int config, Layout la, Layout lb, bool vec4);
// For probes: the rows of the narrow operand a block takes, 8, 16 or 32 (a narrow side past
// them runs as several blocks along it, each reading its tile of the wide operand, the
// second and later from L2), or 0 (the default) for the fewest that cover the narrow side.
// The results do not depend on it. Throws for any other value.
void set_tf32x3_skinny_block_rows(int rows);

}  // namespace vecgemm
