// Instances and launchers of the 3xTF32 kernel (sgemm_3xtf32.cuh). Builds inside the
// extension (setup.py compiles every csrc/kernels/**/*.cu) and on its own (the standalone probe,
// benchmarks/probes/tf32x3), where there are no torch headers.
#include <algorithm>
#include <string>

#include "kernels/batch_launch.h"
#include "kernels/host_error.h"
#include "kernels/tf32x3/sgemm_3xtf32.cuh"
#include "kernels/tf32x3/sgemm_3xtf32.h"

namespace vecgemm {
namespace {

using tf32x3::Tf32x3Shape;
// Warps of 64 x 32. 128 x 128: 8 warps, one block per SM (the registers), so 4 stages
// (128 KB) to cover the pipeline bubbles no second block hides. 128 x 64: 4 warps, two
// blocks per SM (72 KB each), as the 64 x 64-warp kernel's faster 128 x 128 config was.
// 64 x 128: the same warps side by side along N, for problems of few rows (decode: M of
// 1-64), where a 128-row tile would compute mostly padding.
using Shape128x128 = Tf32x3Shape<128, 128, 4>;
using Shape128x64 = Tf32x3Shape<128, 64, 3>;
using Shape64x128 = Tf32x3Shape<64, 128, 3>;

[[noreturn]] void fail(const std::string& what) { fail_in("sgemm_3xtf32", what); }

void check_launch() { check_launch_in("sgemm_3xtf32"); }

// vec4 only changes K-contiguous operands' copies: where neither is (column-major A,
// row-major B) one instance serves both.
template <class S, Layout LA, Layout LB, bool V>
constexpr auto instance() {
  constexpr bool any_k_contiguous = LA == Layout::RowMajor || LB == Layout::ColMajor;
  return &tf32x3::sgemm_3xtf32<S, LA, LB, V && any_k_contiguous>;
}

template <class S>
const void* entry_of(Layout la, Layout lb, bool vec4) {
  using L = Layout;
  const bool ar = la == L::RowMajor, br = lb == L::RowMajor;
  if (vec4) {
    if (ar) return br ? (const void*)instance<S, L::RowMajor, L::RowMajor, true>() : (const void*)instance<S, L::RowMajor, L::ColMajor, true>();
    return br ? (const void*)instance<S, L::ColMajor, L::RowMajor, true>() : (const void*)instance<S, L::ColMajor, L::ColMajor, true>();
  }
  if (ar) return br ? (const void*)instance<S, L::RowMajor, L::RowMajor, false>() : (const void*)instance<S, L::RowMajor, L::ColMajor, false>();
  return br ? (const void*)instance<S, L::ColMajor, L::RowMajor, false>() : (const void*)instance<S, L::ColMajor, L::ColMajor, false>();
}

int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) fail("no current CUDA device");
  return dev;
}

// The kernels take more than 48 KB of dynamic shared memory, which each function must be
// allowed once per device; and they need sm_80 and the device's opt-in shared memory.
void prepare(const void* fn, int smem_bytes) {
  constexpr int kMaxDevices = 64;
  const int dev = current_device();
  if (dev >= kMaxDevices) fail("device index past 63");
  int major = 0, optin = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (major < 8) fail("needs sm_80 or later (TF32 mma.sync)");
  if (optin < smem_bytes)
    fail("needs " + std::to_string(smem_bytes) + " bytes of shared memory per block; the device allows " +
         std::to_string(optin));
  // Cheap and idempotent: set on every launch rather than remembered per device.
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) fail(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e));
}

template <class S>
void launch_shape(const GemmParams& p, Layout la, Layout lb, bool vec4, cudaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  const void* fn = entry_of<S>(la, lb, vec4);
  prepare(fn, S::kSmemBytes);
  const int64_t tiles = int64_t((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  launch_over_batch(fn, p, tiles, S::kThreads, S::kSmemBytes, stream, "sgemm_3xtf32");
}

template <Layout LA, Layout LB>
constexpr const void* fixup_instance() {
  return (const void*)&tf32x3::sgemm_3xtf32_fixup<Shape128x128, LA, LB, false>;
}

}  // namespace

// Scalar copies only: vec4 changes how the tiles travel, not what the kernel computes, and
// the fix-up's rare tiles do not pay for four more instances.
void launch_sgemm_3xtf32_fixup(const GemmParams& p, Layout la, Layout lb, const int* flags, bool overlap,
                               cudaStream_t stream) {
  using S = Shape128x128;
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  using L = Layout;
  const bool ar = la == L::RowMajor, br = lb == L::RowMajor;
  const void* fn = ar ? (br ? fixup_instance<L::RowMajor, L::RowMajor>() : fixup_instance<L::RowMajor, L::ColMajor>())
                      : (br ? fixup_instance<L::ColMajor, L::RowMajor>() : fixup_instance<L::ColMajor, L::ColMajor>());
  prepare(fn, S::kSmemBytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, current_device());
  const int64_t tiles = int64_t((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  if (tiles > 0x7fffffff) fail("too many output tiles");
  int tiles32 = static_cast<int>(tiles);
  GemmParams q = p;
  q.k_splits = std::max(1, p.k_splits);
  void* args[] = {&q, &flags, &tiles32};
  const cudaError_t e = launch_overlapping(fn, dim3(std::max(1, sms)), dim3(S::kThreads), S::kSmemBytes, args, stream, overlap);
  if (e != cudaSuccess) fail(std::string("launch failed: ") + cudaGetErrorString(e));
  check_launch();
}

Tf32x3ConfigInfo tf32x3_config_info(int config) {
  if (config == 0) return {Shape128x128::BM, Shape128x128::BN, Shape128x128::kThreads, Shape128x128::kSmemBytes};
  if (config == 1) return {Shape128x64::BM, Shape128x64::BN, Shape128x64::kThreads, Shape128x64::kSmemBytes};
  if (config == 2) return {Shape64x128::BM, Shape64x128::BN, Shape64x128::kThreads, Shape64x128::kSmemBytes};
  fail("no config " + std::to_string(config));
}

const void* tf32x3_kernel_entry(int config, Layout la, Layout lb, bool vec4) {
  if (config == 0) return entry_of<Shape128x128>(la, lb, vec4);
  if (config == 1) return entry_of<Shape128x64>(la, lb, vec4);
  if (config == 2) return entry_of<Shape64x128>(la, lb, vec4);
  fail("no config " + std::to_string(config));
}

int tf32x3_default_config(const GemmParams&) {
  // Not yet timed with 64 x 32 warps. With 64 x 64 warps, two blocks of 4 warps per SM
  // measured faster than one of 8 at every size on the H200 (67.4 against 62.7 TFLOP/s at
  // 4096^3 rr): two independent blocks hide each other's barrier and pipeline bubbles. So
  // 128 x 64 (two blocks of 4) until the probe says otherwise; it reads 1.5x the operand
  // bytes per flop of 128 x 128 (~2.8 TB/s from L2 at 60 TFLOP/s), within the H200's L2.
  return 1;
}

void launch_sgemm_3xtf32_config(int config, const GemmParams& p, Layout la, Layout lb, bool vec4,
                                cudaStream_t stream) {
  if (config == 0) return launch_shape<Shape128x128>(p, la, lb, vec4, stream);
  if (config == 1) return launch_shape<Shape128x64>(p, la, lb, vec4, stream);
  if (config == 2) return launch_shape<Shape64x128>(p, la, lb, vec4, stream);
  fail("no config " + std::to_string(config));
}

void launch_sgemm_3xtf32(const GemmParams& p, Layout la, Layout lb, bool vec4, cudaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  launch_sgemm_3xtf32_config(tf32x3_default_config(p), p, la, lb, vec4, stream);
}

}  // namespace vecgemm
