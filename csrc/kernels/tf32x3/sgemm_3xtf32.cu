// Launchers of the 3xTF32 kernel (sgemm_3xtf32.cuh; its tilings' instances are in units of
// their own, sgemm_3xtf32_instances.cuh) and its fix-up pass's instances. Builds inside the
// extension (setup.py compiles every csrc/kernels/**/*.cu) and on its own (the standalone probe,
// benchmarks/probes/tf32x3), where there are no torch headers.
#include <algorithm>
#include <string>

#include "kernels/batch_launch.h"
#include "kernels/host_error.h"
#include "kernels/tf32x3/sgemm_3xtf32.h"
#include "kernels/tf32x3/sgemm_3xtf32_instances.cuh"

namespace vecgemm {
namespace {

using tf32x3::Shape128x128;
using tf32x3::Shape128x64;
using tf32x3::Shape64x128;
using tf32x3::tf32x3_entry;

[[noreturn]] void fail(const std::string& what) { fail_in("sgemm_3xtf32", what); }

void check_launch() { check_launch_in("sgemm_3xtf32"); }

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
  const void* fn = tf32x3_entry<S>(la, lb, vec4);
  prepare(fn, S::kSmemBytes);
  const int64_t tiles = int64_t((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  launch_over_batch(fn, p, tiles, S::kThreads, S::kSmemBytes, stream, "sgemm_3xtf32");
}

template <class S, Layout LA, Layout LB>
constexpr const void* fixup_instance() {
  return (const void*)&tf32x3::sgemm_3xtf32_fixup<S, LA, LB, false>;
}

template <class S>
const void* fixup_entry(Layout la, Layout lb) {
  using L = Layout;
  const bool ar = la == L::RowMajor, br = lb == L::RowMajor;
  return ar ? (br ? fixup_instance<S, L::RowMajor, L::RowMajor>() : fixup_instance<S, L::RowMajor, L::ColMajor>())
            : (br ? fixup_instance<S, L::ColMajor, L::RowMajor>() : fixup_instance<S, L::ColMajor, L::ColMajor>());
}

template <class S>
void launch_fixup(const GemmParams& p, Layout la, Layout lb, const int* flags, bool overlap, cudaStream_t stream) {
  const void* fn = fixup_entry<S>(la, lb);
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

}  // namespace

// Scalar copies only: vec4 changes how the tiles travel, not what the kernel computes, and
// the fix-up's rare tiles do not pay for four more instances.
void launch_sgemm_3xtf32_fixup(int config, const GemmParams& p, Layout la, Layout lb, const int* flags, bool overlap,
                               cudaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  if (config == 0) return launch_fixup<Shape128x128>(p, la, lb, flags, overlap, stream);
  if (config == 1) return launch_fixup<Shape128x64>(p, la, lb, flags, overlap, stream);
  fail("no fix-up for config " + std::to_string(config));
}

Tf32x3ConfigInfo tf32x3_config_info(int config) {
  if (config == 0) return {Shape128x128::BM, Shape128x128::BN, Shape128x128::kThreads, Shape128x128::kSmemBytes};
  if (config == 1) return {Shape128x64::BM, Shape128x64::BN, Shape128x64::kThreads, Shape128x64::kSmemBytes};
  if (config == 2) return {Shape64x128::BM, Shape64x128::BN, Shape64x128::kThreads, Shape64x128::kSmemBytes};
  fail("no config " + std::to_string(config));
}

const void* tf32x3_kernel_entry(int config, Layout la, Layout lb, bool vec4) {
  if (config == 0) return tf32x3_entry<Shape128x128>(la, lb, vec4);
  if (config == 1) return tf32x3_entry<Shape128x64>(la, lb, vec4);
  if (config == 2) return tf32x3_entry<Shape64x128>(la, lb, vec4);
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
