// 3xTF32 on Hopper's warpgroup MMA (wgmma, sm_90a only): the numerics of the mma.sync
// kernel (sgemm_3xtf32.cuh, whose header explains the split, the per-K-tile accumulator
// restart and the special values), at the tensor-core rate that mma.sync cannot reach
// (mma.sync TF32 tops out near 110 TFLOP/s of 3xTF32 on an H200; wgmma TF32 has ~2x that).
//
// Three passes per call (launch_sgemm_3xtf32_wgmma, sgemm_3xtf32_wgmma.cu), each after the
// first launched to overlap the one before it (programmatic dependent launch,
// dependent_launch.cuh): on a small problem a launch behind another costs ~2.7 us of idle
// GPU, a third of the call (docs/history.md, step 47). Each waits for its predecessor
// before touching global memory.
//  1. split_operands, memory-bound, one launch for the operands the kernel does not split
//     itself: each written into the workspace as its big and small TF32 parts, K-contiguous,
//     [plane][part][row][kp] with kp = K rounded up to 4 floats (TMA's 16-byte stride rule).
//     wgmma's .tf32 form takes both shared operands K-major only (no transposed layout for
//     32-bit types), so an M- or N-contiguous operand needs a transpose somewhere anyway;
//     done once here. The split is round_tf32 of x and of x - big, as the mma.sync
//     kernel's. Cost: reads 4 and writes 8 bytes per element, ~0.1 ms for both operands at
//     4096 (~7% of the GEMM), 27% of llama's mlp up at 512 tokens, where the weight is
//     most of the traffic. An operand the caller names (kernel_splits) skips it where it is
//     16-byte aligned and the kernel can read its fp32 tile: A in either storage order, B
//     K-contiguous (column-major; x @ W.T has both). TMA loads the fp32 tile and the kernel
//     makes the parts itself, with the split pass's arithmetic, so the results are bit for
//     bit the pass's, for half the operand's traffic. A's are made in registers: each
//     consumer thread loads its fragments' 16 fp32 values of a K tile from the tile TMA
//     landed and splits them there, and its wgmma take A from registers. Registers have no
//     K-major rule, so a column-major A (M-contiguous: a weight stored (in, out) on the
//     transpose of x @ W) is read so too, its K tile landed as four boxes of 32 rows by 32
//     K, at twice the shared-memory wavefronts a load. That reads A's tile from shared
//     memory once, where wgmma read its two parts three times, and the stages shrink to
//     48 KB, so 4 fit. B's are made in shared memory by the producer warpgroup's three
//     idle warps (big in place, small beside it) before the consumers see the stage; that
//     costs shared memory's traffic (16 KB read, 32 KB written a K tile beside wgmma's):
//     11-15% of the kernel at 4096^3 (docs/history.md, step 36). The planner weighs each
//     against the pass (cost_model.cpp).
//  2. sgemm_3xtf32_wgmma: 128 x 128 output tiles (or 128 x 64 for N <= 64, Tile: the same
//     pipeline over half the columns, m64n64k8, its smaller stages 4 or 6), K tiles of 32
//     (one 128-byte swizzle row of 32 tf32 values: a TMA box and a wgmma K-major SW128 atom
//     line up exactly), a TMA pipeline of 3 stages of 64 KB (A big and small, B big and
//     small: each one TMA box [2][rows][32] that lands both parts, or [rows][32] of fp32),
//     or 4 of 48 KB where A comes as fp32, one producer warpgroup (one thread issues the
//     TMA, three warps split B's fp32 tiles) and two consumer warpgroups of 64 x 128
//     (m64n128k8). Per K tile a consumer issues 12 wgmma into a short accumulator whose
//     first wgmma has scale-d = 0 (the restart costs nothing): the 8 small terms of its 4 K
//     steps (a_small b_big, a_big b_small) first, then the 4 big ones (a_big b_big). Order:
//     each wgmma's sum is truncated relative to the accumulator (sgemm_3xtf32.cuh,
//     "Accumulation"), and while it holds small terms only it is ~2^-11 of the tile sum, so
//     4 wgmma a tile truncate at the tile sum's size where the mma.sync kernel's order (by K
//     step, each step's fragments split in registers once) has 10. The parts are all at hand
//     (in shared memory, or a K tile's A fragments in registers), so the order costs no
//     instruction. It then waits for them (wait_group 0), frees the stage and adds the short
//     accumulator into the tile sum with 64 FFMAs, which give back its 4 truncations' loss
//     on average (kWgmmaRestoreUlps; sgemm_3xtf32.cuh, "The truncations' loss restored").
//     The wait leaves its warpgroup idle for the FFMAs, but the other consumer's 12 wgmma
//     (~770 clocks of tensor work) are queued by then: the two warpgroups alternate on the
//     tensor cores (the ping-pong FlashAttention-3 uses), so no second short accumulator is
//     needed. A consumer holds 128 accumulator registers, and with A's fragments 32 more:
//     the 168 a thread that 384 threads get (one block an SM) hold the first (ptxas:
//     144-146), not both, so those instances move registers from the producer warpgroup to
//     the consumers (setmaxnreg, kConsumerRegs). The consumers stage the tile for the store
//     themselves, so that the producer never holds the sums.
//  3. sgemm_3xtf32_fixup (sgemm_3xtf32.cuh): a tile whose sums hold NaN or Inf (an Inf or
//     NaN input, or a value whose TF32 rounding overflows: its small part is then NaN) or
//     a nonzero result below 2^-90 (subnormal products, sgemm_3xtf32.cuh "Subnormals") is
//     not stored by this kernel; its flag is set and the mma.sync kernel recomputes exactly
//     those tiles from the original fp32 operands with its guarded and rescaled passes, so
//     their results are bit for bit the mma.sync kernel's (same 128 x 128 tiles, same
//     raster order). Every block writes its flag, 0 or 1: no memset before the call.
//     The wgmma kernel stores nothing for a flagged tile, so C may alias D.
//
// Operand traffic: 2x fp32's (big and small), 64 KB from L2 per K tile of a 128 x 128 block
// on the pass's parts (~7 TB/s at the kernel's 120 TFLOP/s), 48 KB with A as fp32.
// Clusters of two blocks sharing B through TMA multicast (48 KB a block's K tile) measured
// 0.78x this kernel (docs/history.md, step 32): whatever the traffic saved, tying two
// blocks' pipelines together (a stage refilled only when both are done with it) cost more.
//
// Split-K (p.k_splits > 1): blockIdx.z = batch * k_splits + split, as in every kernel of the
// library; a block covers its slice's K tiles (whole tiles: the planner's slices are
// multiples of 32), writes its sums as the slice's partials (store_partial4) and the
// split-K reduction applies alpha, beta and C. A flagged slice is recomputed by the fix-up
// into the same partials, so the reduction is the only writer of D.
#pragma once
#include <cuda.h>  // CUtensorMap (the type only; the driver is reached through the runtime)

#include <cstdint>

#include "kernels/dependent_launch.cuh"   // allow_dependents
#include "kernels/epilogue.cuh"           // store_result4
#include "kernels/gemm_params.h"
#include "kernels/simt/block_tile.cuh"         // tile_origin: the same raster order as the mma.sync kernel
#include "kernels/tf32x3/sgemm_3xtf32.cuh"       // round_tf32, kTinyResult

// wgmma and setmaxnreg exist only in the arch-specific sm_90a target.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VECGEMM_WGMMA_BUILT 1
#else
#define VECGEMM_WGMMA_BUILT 0
#endif

namespace vecgemm {
namespace tf32x3_wgmma {

constexpr int BM = 128, kBK = 32;
constexpr int kConsumers = 2;                     // warpgroups of 64 rows
constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
constexpr int kAPartBytes = BM * kBK * 4;         // A's K tile of one part, or of fp32: 16 KB
// The pipeline's memory, cut into as many stages as fit (Tile::Stages).
constexpr int kPipelineBytes = 192 * 1024;
// The output tile's width: 128, or 64 where N is at most 64 (tall-skinny products), which
// the 128-wide tile would compute half of as padding. Both run the same pipeline over the
// same 192 KB: a 64-wide tile's stages are smaller, so more of them are in flight.
template <int kBN>
struct Tile {
  static_assert(kBN == 128 || kBN == 64, "m64n128k8 or m64n64k8");
  static constexpr int BN = kBN;
  static constexpr int kBPartBytes = BN * kBK * 4;  // B's K tile of one part, or of fp32
  static constexpr int kBTileBytes = 2 * kBPartBytes;  // B's [big, small][BN][32]
  // A stage holds both operands' parts, or A's fp32 tile where the consumers make A's parts
  // in registers (kFp32A below): 3 or 4 stages of a 128-wide tile, 4 or 6 of a 64-wide one.
  template <bool kFp32A>
  struct Stages {
    static constexpr int kABytes = kFp32A ? kAPartBytes : 2 * kAPartBytes;
    static constexpr int kBytes = kABytes + kBTileBytes;
    static constexpr int kCount = kPipelineBytes / kBytes;
  };
  static constexpr int kMaxStages = Stages<true>::kCount;
  // The stages, 1 KB to align them (SW128 atoms are 1024-byte aligned), then the barriers:
  // full, empty and landed, kMaxStages each.
  static constexpr int kSmemBytes = kPipelineBytes + 1024 + 3 * kMaxStages * 8;
  // A consumer's m64 x BN sums over its 128 threads.
  static constexpr int kAccRegs = 64 * BN / 128;
  static_assert(Stages<false>::kCount * Stages<false>::kBytes == kPipelineBytes &&
                    Stages<true>::kCount * Stages<true>::kBytes == kPipelineBytes,
                "the stages fill the pipeline's memory");
};
// The producer warpgroup's warps 1-3 split B's fp32 tiles (warp 0's first lane issues the TMA).
constexpr int kSplitterThreads = 96;
// The tile sums' restoration: 4 full-size truncations a K tile (the header's "Order"),
// 2.5 beta ~ 2 u of the tile sum, 2^-23 (sgemm_3xtf32.cuh, "The truncations' loss restored").
constexpr int kWgmmaRestoreUlps = 1;
// Where the consumers make A's parts in registers they hold more than the 168 a thread that
// 384 threads get (two accumulators, 64 each, and a K tile's 32 fragment registers): the
// producer warpgroup gives registers back (setmaxnreg): (168 - 72) x 128 = (216 - 168) x 256.
constexpr int kProducerRegs = 72, kConsumerRegs = 216;
static_assert(BM == 64 * kConsumers, "a consumer warpgroup takes 64 rows");
static_assert(BM == 128, "the fix-up recomputes the mma.sync kernel's tiles of 128 rows and the same width");
static_assert((168 - kProducerRegs) * 128 >= (kConsumerRegs - 168) * 2 * 128, "registers the producer gives back");

// The workspace of one operand: [plane][part][rows][kp] floats, part 0 big, 1 small.
__host__ __device__ inline int64_t padded_k(int k) { return (int64_t(k) + 3) / 4 * 4; }

// ---- pass 1: the split ---------------------------------------------------------------

// One operand's share of the pass: row_tiles 0 where the pass leaves it to the kernel.
struct SplitSource {
  const float* src;
  int64_t ld, batch_stride;
  int rows, planes, row_tiles;
  float* dst;  // its parts, [plane][part][rows][kp]
};

// Tile of 32 rows x 32 K through shared memory (padded rows: no bank conflicts either way):
// read along the operand's contiguous dimension, written along K. kKContiguous: element
// (row, q) at src[row * ld + q]; otherwise at src[q * ld + row].
template <bool kKContiguous>
__device__ __forceinline__ void split_tile(const SplitSource& x, int k, int r0, int q0, int plane,
                                           float (&tile)[32][33]) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float* src = x.src + plane * x.batch_stride;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (kKContiguous) {
      const int r = r0 + ty + 8 * j, q = q0 + tx;
      tile[ty + 8 * j][tx] = r < x.rows && q < k ? src[int64_t(r) * x.ld + q] : 0.0f;
    } else {
      const int q = q0 + ty + 8 * j, r = r0 + tx;
      tile[tx][ty + 8 * j] = r < x.rows && q < k ? src[int64_t(q) * x.ld + r] : 0.0f;
    }
  }
  __syncthreads();
  const int64_t kp = padded_k(k);
  float* big = x.dst + int64_t(plane) * 2 * x.rows * kp;
  float* small = big + int64_t(x.rows) * kp;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int r = r0 + ty + 8 * j, q = q0 + tx;
    if (r < x.rows && q < k) {
      const float v = tile[ty + 8 * j][tx];
      const float hi = tf32x3::round_tf32(v);
      big[int64_t(r) * kp + q] = hi;
      small[int64_t(r) * kp + q] = tf32x3::round_tf32(v - hi);
    }
  }
}

// Both operands in one launch: grid (A's row tiles + B's, K tiles, planes), 32 x 8 threads
// (rows in x: grid.y's 65535 tiles cover K up to 2^21); a block past its operand's planes
// (one broadcast over the batch) has nothing to do.
template <bool kAKContiguous, bool kBKContiguous>
__global__ void __launch_bounds__(256) split_operands(const SplitSource a, const SplitSource b, int k) {
  __shared__ float tile[32][33];
  const int plane = blockIdx.z;
  if (int(blockIdx.x) < a.row_tiles) {
    if (plane < a.planes) split_tile<kAKContiguous>(a, k, blockIdx.x * 32, blockIdx.y * 32, plane, tile);
  } else if (plane < b.planes) {
    split_tile<kBKContiguous>(b, k, (blockIdx.x - a.row_tiles) * 32, blockIdx.y * 32, plane, tile);
  }
  allow_dependents();  // the product may launch now; it waits for this pass before its loads
}

// ---- pass 2: the wgmma kernel ----------------------------------------------------------

#if VECGEMM_WGMMA_BUILT
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// A wait that cannot end (a wrong phase or byte count) traps after 2^24 polls (a second
// or more; a real wait is microseconds), so that a bug is a launch error ("unspecified
// launch failure"), not a hung probe. No printf: any call in the kernel makes ptxas
// serialize every wgmma (a WARPGROUP.DEPBAR after each).
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  uint32_t done, polls = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
    if (!done && ++polls == (1u << 24)) __trap();
  } while (!done);
}

// One box at coordinates (x, y, z) into dst, completing on bar: (k, row, 2 plane), a box
// {32 K, rows, 2 parts}, from the workspace; (k, row, plane), {32 K, rows, 1}, from a
// K-contiguous fp32 operand; (row, k, plane), {32 rows, 32 K, 1}, from an M-major A.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y, int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
}

// The split of one operand's fp32 tile that TMA landed in its big part's place: big
// rounded in place, small into the part after it. Element by element at the same offsets,
// so the 128-byte swizzle (a function of the address within 1024-byte atoms; the parts are
// 16 KB apart) lays both parts out as the workspace's boxes would. The loads come first in
// the source (ptxas still keeps only the next chunk's in flight); taking the splitters'
// latency out of the way did not help: splitting both operands ran 1.45x the kernel on the
// split pass's parts as a plain loop and 1.58x so, shared memory's traffic being the cost
// (docs/history.md, step 36). The writes are the generic proxy's and wgmma reads
// through the async proxy: the caller fences before it releases the stage. kPartBytes: B's
// K tile of one part (Tile::kBPartBytes).
template <int kPartBytes>
__device__ __forceinline__ void split_in_place(unsigned char* tile, int thread) {
  constexpr int kChunks = kPartBytes / 16;
  constexpr int kPerThread = (kChunks + kSplitterThreads - 1) / kSplitterThreads;
  const uint32_t base = smem_addr(tile) + 16 * thread;
  float4 x[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j)
    if (thread + j * kSplitterThreads < kChunks)
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                   : "=f"(x[j].x), "=f"(x[j].y), "=f"(x[j].z), "=f"(x[j].w)
                   : "r"(base + 16 * j * kSplitterThreads)
                   : "memory");
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (thread + j * kSplitterThreads >= kChunks) continue;
    const float4 hi = {tf32x3::round_tf32(x[j].x), tf32x3::round_tf32(x[j].y), tf32x3::round_tf32(x[j].z),
                       tf32x3::round_tf32(x[j].w)};
    const float4 lo = {tf32x3::round_tf32(x[j].x - hi.x), tf32x3::round_tf32(x[j].y - hi.y),
                       tf32x3::round_tf32(x[j].z - hi.z), tf32x3::round_tf32(x[j].w - hi.w)};
    const uint32_t at = base + 16 * j * kSplitterThreads;
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(at), "f"(hi.x), "f"(hi.y), "f"(hi.z), "f"(hi.w)
                 : "memory");
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(at + kPartBytes), "f"(lo.x), "f"(lo.y), "f"(lo.z),
                 "f"(lo.w)
                 : "memory");
  }
}

// The shared-memory descriptor of a K-major operand in TMA's 128-byte swizzle: rows of
// 128 bytes (32 tf32), 8-row atoms of 1024 bytes one after another (SBO = 1024), LBO unused
// for a swizzled K-major layout (1 by convention), layout type 1 = 128B swizzle. K step s
// (8 tf32, 32 bytes) starts 32 s bytes into the row: the hardware applies the swizzle to the
// full address, so advancing the start address inside the atom is how CUTLASS steps K too.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return uint64_t((addr & 0x3ffff) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pins the accumulator's registers here in the instruction order: the compiler sees the
// wgmma asm as producing them at once, so without this it could move their reads above the
// wait (CUTLASS's warpgroup_fence_operand).
template <int kRegs>
__device__ __forceinline__ void fence_operand(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// An accumulator's registers as asm operands: the first 32 (%0-%31), or 64 (%0-%63).
#define VECGEMM_WGMMA_ACC32(d)                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),          \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),          \
      "+f"(d[30]), "+f"(d[31])
#define VECGEMM_WGMMA_ACC64(d)                                                                          \
  VECGEMM_WGMMA_ACC32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),             \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),          \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),          \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),          \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define VECGEMM_WGMMA_D32                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
#define VECGEMM_WGMMA_D64                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "

// d (+)= A B for one m64nNk8 tf32 step (N = 2 kRegs: 128 or 64), both from shared memory;
// kAccumulate false: d = A B (scale-d = 0).
template <bool kAccumulate, int kRegs>
__device__ __forceinline__ void wgmma_k8(float (&d)[kRegs], uint64_t da, uint64_t db) {
  if constexpr (kRegs == 64) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " VECGEMM_WGMMA_D64 "%64, %65, p, 1, 1;\n}\n"
        : VECGEMM_WGMMA_ACC64(d)
        : "l"(da), "l"(db), "r"(int(kAccumulate)));
  } else {
    static_assert(kRegs == 32, "m64n128k8 or m64n64k8");
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " VECGEMM_WGMMA_D32 "%32, %33, p, 1, 1;\n}\n"
        : VECGEMM_WGMMA_ACC32(d)
        : "l"(da), "l"(db), "r"(int(kAccumulate)));
  }
}

// The same with A's 64 x 8 slice from registers (A's fragment below).
template <bool kAccumulate, int kRegs>
__device__ __forceinline__ void wgmma_k8(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (kRegs == 64) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " VECGEMM_WGMMA_D64 "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : VECGEMM_WGMMA_ACC64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(int(kAccumulate)));
  } else {
    static_assert(kRegs == 32, "m64n128k8 or m64n64k8");
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " VECGEMM_WGMMA_D32 "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : VECGEMM_WGMMA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(int(kAccumulate)));
  }
}
#undef VECGEMM_WGMMA_ACC32
#undef VECGEMM_WGMMA_ACC64
#undef VECGEMM_WGMMA_D32
#undef VECGEMM_WGMMA_D64

// A's parts of one K tile in registers, in wgmma's fragment for a 64 x 8 tf32 slice: thread
// `lane` of warp w holds rows 16 w + lane / 4 (+ 8) and columns lane % 4 (+ 4), as
// {(r, c), (r + 8, c), (r, c + 4), (r + 8, c + 4)}; [K step][register].
struct AFragments {
  uint32_t big[4][4], small[4][4];
};

// Pins the fragments' registers here, so that the compiler neither computes them after the
// wgmma fence nor reuses their registers before the wgmma reading them are done.
__device__ __forceinline__ void fence_fragments(AFragments& f) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(f.big[s][i]), "+r"(f.small[s][i])::"memory");
}

// The fragments of a warp's 16 rows from A's fp32 K tile as TMA landed it (rows of 32
// floats, 128-byte swizzle: 16-byte chunk c of row r at r * 128 + ((c ^ r % 8) << 4)),
// split as the split pass splits: big = round_tf32(x), small = round_tf32(x - big), so the
// product is bit for bit the one on the pass's parts. rows: the warp's first row's address
// plus 4 (lane % 4) bytes; g = lane / 4 (= the row's r % 8: the warp's rows start at a
// multiple of 16). A warp's 32 loads of one register hit 8 rows x 4 columns: 32 banks.
__device__ __forceinline__ void split_a_fragments(uint32_t rows, int g, AFragments& f) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int chunk = 2 * s + i / 2;
      const uint32_t at = rows + (g + 8 * (i % 2)) * 128 + ((chunk ^ g) << 4);
      float x;
      asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(at) : "memory");
      const float hi = tf32x3::round_tf32(x);
      f.big[s][i] = __float_as_uint(hi);
      f.small[s][i] = __float_as_uint(tf32x3::round_tf32(x - hi));
    }
}

// The same fragments from A's fp32 K tile landed M-contiguous (an M-major A: column-major,
// x^T's rows): kAMajorBoxes boxes of 32 rows (M) by 32 K, box j at j * 4096 bytes, each K
// line of 32 floats 128-byte swizzled: element (m, k) of a box at k * 128 + (((m / 4) ^
// (k % 8)) << 4) + 4 (m % 4). Split as split_a_fragments splits, so the product is bit for
// bit the pass's. row0: the warp's first row in the tile (16 w of its warpgroup's 64), g =
// lane / 4, c = lane % 4. A warp's 32 loads of one register read 8 rows (two 16-byte
// chunks) at 4 K (lines 128 bytes apart, their chunks XOR-ed by k % 8): two chunk pairs,
// 16 banks, so two wavefronts where the K-major tile takes one.
__device__ __forceinline__ void split_a_fragments_m_major(uint32_t tile, int row0, int g, int c, AFragments& f) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = row0 + g + 8 * (i % 2), k = 8 * s + c + 4 * (i / 2);
      const uint32_t at = tile + (m / 32) * 4096 + k * 128 + ((((m % 32) / 4) ^ (k % 8)) << 4) + 4 * (m % 4);
      float x;
      asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(at) : "memory");
      const float hi = tf32x3::round_tf32(x);
      f.big[s][i] = __float_as_uint(hi);
      f.small[s][i] = __float_as_uint(tf32x3::round_tf32(x - hi));
    }
}

#endif  // VECGEMM_WGMMA_BUILT

// Where the kernel's A comes from: the split pass's parts in the workspace, or A's own fp32
// values, K-contiguous (row-major) or M-contiguous (column-major), whose parts the
// consumers make in registers.
enum class ASource { kParts, kFp32KMajor, kFp32MMajor };
// An M-major A's K tile lands as BM / 32 TMA boxes of 32 rows: 128 bytes of M, SW128's span.
constexpr int kAMajorBoxRows = 32, kAMajorBoxes = BM / kAMajorBoxRows;

// D = alpha * A @ B + beta * C (or split-K partials) for blockIdx.z = batch * k_splits + split
// and output tile blockIdx.x (tile_origin's order). tma_a: A's parts in the workspace
// ({K, M, 2 planes}), or A itself (kA: {K, M, planes} K-major, {M, K, planes} M-major; the
// consumers make its parts in registers); tma_b likewise ({K, N, ...}, kFp32B: the splitter warps make its parts in
// shared memory). a_planes / b_planes: 1 for an operand broadcast over the batch.
// flags[blockIdx.z * gridDim.x + blockIdx.x]: 1 where pass 3 must recompute the tile.
// kBN: the output tile's width (Tile).
template <int kBN, ASource kA, bool kFp32B>
__global__ void __launch_bounds__(kThreads, 1)
    sgemm_3xtf32_wgmma(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                       const GemmParams p, int a_planes, int b_planes, int* flags) {
#if VECGEMM_WGMMA_BUILT
  constexpr bool kFp32A = kA != ASource::kParts;
  using T = Tile<kBN>;
  using St = typename T::template Stages<kFp32A>;
  constexpr int BN = T::BN, kAcc = T::kAccRegs;
  constexpr int kStages = St::kCount;
  // With B in fp32 a stage goes TMA -> landed -> splitter warps -> full -> consumers ->
  // empty -> TMA; otherwise TMA completes full itself.
  constexpr bool kSplits = kFp32B;
  constexpr int kStageTxBytes = St::kABytes + (kFp32B ? T::kBPartBytes : T::kBTileBytes);
  allow_dependents();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Offset from the shared array itself (not through an integer), so that the compiler keeps
  // the state space: the splitters' accesses are LDS / STS, not generic loads and stores.
  unsigned char* smem = smem_raw + ((1024u - smem_addr(smem_raw)) & 1023u);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kPipelineBytes);
  uint64_t* empty = full + kStages;
  uint64_t* landed = empty + kStages;

  int m0, n0;
  tile_origin(p.m, p.n, BM, BN, blockIdx.x, m0, n0);
  const int batch = blockIdx.z / p.k_splits, split_id = blockIdx.z % p.k_splits;
  const int k_begin = split_id * p.k_slice;
  const int k_tiles = (max(0, min(p.k - k_begin, p.k_slice)) + kBK - 1) / kBK;
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], kSplits ? kSplitterThreads / 32 : 1);  // splitter warps, or expect_tx
      mbar_init(&empty[s], kConsumers * 4);                       // one arrival per consumer warp
      mbar_init(&landed[s], 1);                                   // expect_tx, when splitting
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tma_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tma_b)) : "memory");
  }
  wait_for_predecessor();  // the split pass's parts (launched to overlap it, or a no-op)
  __syncthreads();

  // The tile through shared memory, as the mma.sync kernel stores its own (store_tile,
  // sgemm_3xtf32.cuh): the consumers' sums into a [BM][BN + 8] tile over the stages, then
  // every thread of the block stores 16-byte pieces along rows.
  constexpr int kLd = BN + 8;
  static_assert(BM * kLd * 4 <= kPipelineBytes, "the tile fits in the stages");
  float* staged = reinterpret_cast<float*>(smem);
  bool bad = false;

  if (wg == kConsumers) {
    if constexpr (kFp32A) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (warp == 0) {
      // Producer: one thread keeps kStages tiles in flight.
      if (lane == 0) {
        const int a_plane = a_planes == 1 ? 0 : batch, b_plane = b_planes == 1 ? 0 : batch;
        for (int t = 0; t < k_tiles; ++t) {
          const int s = t % kStages, k = k_begin + t * kBK;
          if (t >= kStages) mbar_wait(&empty[s], ((t / kStages) & 1) ^ 1);
          uint64_t* done = kSplits ? &landed[s] : &full[s];
          mbar_expect_tx(done, kStageTxBytes);
          unsigned char* st = smem + s * St::kBytes;
          if constexpr (kA == ASource::kFp32MMajor) {
#pragma unroll
            for (int j = 0; j < kAMajorBoxes; ++j)
              tma_load(st + j * kAMajorBoxRows * kBK * 4, &tma_a, done, m0 + j * kAMajorBoxRows, k, a_plane);
          } else {
            tma_load(st, &tma_a, done, k, m0, kFp32A ? a_plane : 2 * a_plane);
          }
          tma_load(st + St::kABytes, &tma_b, done, k, n0, kFp32B ? b_plane : 2 * b_plane);
        }
      }
      __syncwarp();
    } else if constexpr (kSplits) {
      // Splitters: each of B's fp32 tiles into its parts, then the stage is the consumers'.
      const int thread = threadIdx.x - (kConsumers * 128 + 32);
      for (int t = 0; t < k_tiles; ++t) {
        const int s = t % kStages;
        mbar_wait(&landed[s], (t / kStages) & 1);
        split_in_place<T::kBPartBytes>(smem + s * St::kBytes + St::kABytes, thread);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to wgmma's reads
        __syncwarp();
        if (lane == 0) mbar_arrive(&full[s]);
      }
    }
  } else {
    if constexpr (kFp32A) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    float acc[kAcc], sum[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = sum[i] = 0.0f;
    const uint32_t base = smem_addr(smem);
    for (int t = 0; t < k_tiles; ++t) {
      const int s = t % kStages;
      mbar_wait(&full[s], (t / kStages) & 1);
      const uint32_t stage = base + s * St::kBytes;
      const uint32_t b_big = stage + St::kABytes, b_small = b_big + BN * 128;
      // The tile's small terms first, then its big ones: the header's "Order".
      if constexpr (kFp32A) {
        AFragments a;
        if constexpr (kA == ASource::kFp32MMajor)
          split_a_fragments_m_major(stage, wg * 64 + warp * 16, lane / 4, lane % 4, a);
        else
          split_a_fragments(stage + (wg * 64 + warp * 16) * 128 + 4 * (lane % 4), lane / 4, a);
        fence_fragments(a);
        fence_operand(acc);
        wgmma_fence();  // acc was last read by the FFMAs below, the fragments just written
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t o = 32 * ks;
          if (ks == 0) wgmma_k8<false>(acc, a.small[ks], sw128_desc(b_big + o));
          else wgmma_k8<true>(acc, a.small[ks], sw128_desc(b_big + o));
          wgmma_k8<true>(acc, a.big[ks], sw128_desc(b_small + o));
        }
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_k8<true>(acc, a.big[ks], sw128_desc(b_big + 32 * ks));
        wgmma_commit();
        wgmma_wait<0>();
        fence_fragments(a);
      } else {
        const uint32_t a_big = stage + wg * 64 * 128;  // the warpgroup's 64 rows
        const uint32_t a_small = a_big + BM * 128;
        fence_operand(acc);
        wgmma_fence();  // acc was last read by the FFMAs below
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t o = 32 * ks;
          if (ks == 0) wgmma_k8<false>(acc, sw128_desc(a_small + o), sw128_desc(b_big + o));
          else wgmma_k8<true>(acc, sw128_desc(a_small + o), sw128_desc(b_big + o));
          wgmma_k8<true>(acc, sw128_desc(a_big + o), sw128_desc(b_small + o));
        }
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t o = 32 * ks;
          wgmma_k8<true>(acc, sw128_desc(a_big + o), sw128_desc(b_big + o));
        }
        wgmma_commit();
        wgmma_wait<0>();
      }
      fence_operand(acc);
      if (lane == 0) mbar_arrive(&empty[s]);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) sum[i] = tf32x3::add_tile<kWgmmaRestoreUlps>(sum[i], acc[i]);
    }
#pragma unroll
    for (int i = 0; i < kAcc; ++i)
      bad |= !(fabsf(sum[i]) <= 3.402823466e38f) || (sum[i] != 0.0f && fabsf(sum[i]) < tf32x3::kTinyResult);
    // Once both consumers are past their K loops the stages are idle: every stage the
    // producer filled has been waited for (full) and read (wait_group 0) by both. Staged
    // here, so that the producer warpgroup never holds the sums. sum[4c + e] is row 16 warp
    // + lane / 4 + 8 (e / 2), column 8 c + 2 (lane % 4) + e % 2 of the warpgroup's 64 rows:
    // pairs of columns, whose 8-byte writes a half warp spreads over 4 rows; the + 8 of kLd
    // puts those rows 8 banks apart.
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers * 128) : "memory");
    const int row = wg * 64 + warp * 16 + lane / 4, col = 2 * (lane % 4);
#pragma unroll
    for (int c = 0; c < BN / 8; ++c)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        *reinterpret_cast<float2*>(staged + (row + 8 * half) * kLd + 8 * c + col) =
            make_float2(sum[4 * c + 2 * half], sum[4 * c + 2 * half + 1]);
  }

  // Block-uniform: a flagged tile is left to the fix-up pass, D untouched. The vote is a
  // barrier too, but compute-sanitizer's racecheck does not take it for one (it reported
  // every read of the staged tile below against the writes above); the plain barrier after
  // it costs one more a tile and keeps racecheck's answer meaningful.
  const bool flagged = __syncthreads_or(bad);
  if (threadIdx.x == 0) flags[int64_t(blockIdx.z) * gridDim.x + blockIdx.x] = flagged ? 1 : 0;
  if (flagged) return;
  __syncthreads();  // the staged tile is whole
  constexpr int kPiecesPerRow = BN / 4;
#pragma unroll 1
  for (int piece = threadIdx.x; piece < BM * kPiecesPerRow; piece += kThreads) {
    const int r = piece / kPiecesPerRow, c = 4 * (piece % kPiecesPerRow);
    const float4 v4 = *reinterpret_cast<const float4*>(staged + r * kLd + c);
    const float v[4] = {v4.x, v4.y, v4.z, v4.w};
    store_result4(p, split_id, batch, m0 + r, n0 + c, v);
  }
#else
  __trap();  // built without sm_90a: the host entry refuses before launching
#endif
}

// 1 where this kernel was compiled with wgmma (the host asks once per device).
__global__ void wgmma_built(int* out) { *out = VECGEMM_WGMMA_BUILT; }

}  // namespace tf32x3_wgmma
}  // namespace vecgemm
