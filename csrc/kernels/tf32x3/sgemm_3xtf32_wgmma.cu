// Host side of the wgmma 3xTF32 kernel (sgemm_3xtf32_wgmma.cuh): the scratch, the TMA
// descriptors and the three passes. Builds in the extension and
// standalone (the probe).
// TMA descriptors come from the driver's cuTensorMapEncodeTiled, reached through the
// runtime's entry-point query, so nothing links against libcuda.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <algorithm>
#include <atomic>
#include <string>

#include "kernels/batch_launch.h"  // launch_overlapping
#include "kernels/host_error.h"
#include "kernels/tf32x3/sgemm_3xtf32.h"
#include "kernels/tf32x3/sgemm_3xtf32_wgmma.cuh"

namespace vecgemm {
namespace {

namespace w = tf32x3_wgmma;

[[noreturn]] void fail_wgmma(const std::string& what) { fail_in("sgemm_3xtf32_wgmma", what); }

void launched(cudaError_t e) {
  if (e != cudaSuccess) fail_wgmma(std::string("launch failed: ") + cudaGetErrorString(e));
  check_launch_in("sgemm_3xtf32_wgmma");
}

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// The output tile's width of each config (w::Tile): 0 the 128-wide tile, 1 the 64-wide one.
constexpr int kWidths[] = {128, 64};
static_assert(sizeof(kWidths) / sizeof(kWidths[0]) == kNumTf32x3WgmmaConfigs, "a width for each config");

int width_of(int config) {
  if (config < 0 || config >= kNumTf32x3WgmmaConfigs) fail_wgmma("no config " + std::to_string(config));
  return kWidths[config];
}

int64_t tiles_of(const GemmParams& p, int bn) { return int64_t((p.m + w::BM - 1) / w::BM) * ((p.n + bn - 1) / bn); }

// Whether TMA can read an operand's fp32 values as they are, so that the kernel splits
// them and the split pass skips it: a 16-byte aligned pointer and strides (TMA's rule),
// lines at least as long as the values they hold (a line's box never reads the next line's)
// and planes that do not overlap (the stride order TMA describes). lines and line_length:
// rows and K for a K-contiguous operand, K and rows for an M-major A (rows: M for A, N for
// B); planes > 1 only where the operand is not broadcast and the batch is.
bool read_as_fp32(const Operand& x, int64_t lines, int64_t line_length, int planes) {
  constexpr int64_t kMaxStride = int64_t(1) << 37;  // floats: TMA's strides are below 2^40 bytes
  const int64_t batch_stride = planes == 1 ? 0 : x.batch_stride;
  if (lines <= 0 || line_length <= 0 || !lines_aligned16(x.ptr, x.ld, batch_stride) || x.ld < line_length ||
      x.ld >= kMaxStride)
    return false;
  return planes == 1 || (x.batch_stride >= x.ld * lines && x.batch_stride < kMaxStride);
}

struct Scratch {
  int64_t flag_bytes, a_bytes, b_bytes;
  int a_planes, b_planes, chunk;
  w::ASource a;  // the kernel's A: the pass's parts, or read as fp32 (no workspace parts)
  bool fp32_b;   // B read as fp32 and split in the kernel
};

// A split call's partials are indexed by the whole batch (the caller chunks it), so it runs
// as one chunk; an unsplit one in chunks of grid.z's limit.
Scratch layout(int bn, const GemmParams& p, Layout la, Layout lb, SplitOperands kernel_splits) {
  Scratch w{};
  const int splits = std::max(1, p.k_splits);
  w.chunk = splits > 1 ? std::max(p.batch, 1) : std::min(std::max(p.batch, 1), kMaxGridYZ);
  w.a_planes = p.a.batch_stride == 0 ? 1 : w.chunk;
  w.b_planes = p.b.batch_stride == 0 ? 1 : w.chunk;
  // A's fp32 lines run along K where it is row-major, along M where it is column-major.
  const bool a_k_major = la == Layout::RowMajor;
  w.a = !kernel_splits.a ? w::ASource::kParts
        : a_k_major      ? (read_as_fp32(p.a, p.m, p.k, w.a_planes) ? w::ASource::kFp32KMajor : w::ASource::kParts)
                         : (read_as_fp32(p.a, p.k, p.m, w.a_planes) ? w::ASource::kFp32MMajor : w::ASource::kParts);
  w.fp32_b = kernel_splits.b && lb == Layout::ColMajor && read_as_fp32(p.b, p.n, p.k, w.b_planes);
  const int64_t kp = w::padded_k(std::max(p.k, 1));
  w.flag_bytes = align256(tiles_of(p, bn) * w.chunk * splits * 4);
  w.a_bytes = w.a != w::ASource::kParts ? 0 : align256(int64_t(w.a_planes) * 2 * p.m * kp * 4);
  w.b_bytes = w.fp32_b ? 0 : align256(int64_t(w.b_planes) * 2 * p.n * kp * 4);
  return w;
}

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static std::atomic<PFN_cuTensorMapEncodeTiled_v12000> fn{nullptr};
  PFN_cuTensorMapEncodeTiled_v12000 f = fn.load();
  if (f) return f;
  void* sym = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &sym, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || sym == nullptr)
    fail_wgmma("the driver has no cuTensorMapEncodeTiled");
  f = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(sym);
  fn.store(f);
  return f;
}

// A {inner, outer, planes} tensor with the given outer and plane strides (floats), in boxes
// of {box_inner, box_outer, box_planes}, 128-byte swizzled for wgmma. Coordinates past its
// dimensions read as zero: no padding is written or needed.
CUtensorMap tensor_map(const float* base, int64_t inner, int64_t outer, int64_t planes, int64_t outer_stride,
                       int64_t plane_stride, int box_inner, int box_outer, int box_planes) {
  const cuuint64_t dims[3] = {cuuint64_t(std::max<int64_t>(inner, 1)), cuuint64_t(std::max<int64_t>(outer, 1)),
                              cuuint64_t(planes)};
  const cuuint64_t strides[2] = {cuuint64_t(outer_stride) * 4, cuuint64_t(plane_stride) * 4};
  const cuuint32_t box[3] = {cuuint32_t(box_inner), cuuint32_t(box_outer), cuuint32_t(box_planes)};
  const cuuint32_t steps[3] = {1, 1, 1};
  CUtensorMap map;
  const CUresult r = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base), dims, strides, box,
                               steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail_wgmma("cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ")");
  return map;
}

// The parts of one operand in the workspace: {K, rows, 2 planes}, row stride kp floats,
// boxes of both parts.
CUtensorMap parts_map(const float* parts, int rows, int k, int planes, int box_rows) {
  const int64_t kp = w::padded_k(std::max(k, 1));
  return tensor_map(parts, k, rows, 2 * int64_t(planes), kp, kp * rows, w::kBK, box_rows, 2);
}

// A K-contiguous operand read as fp32 (read_as_fp32): its own strides, boxes of one plane.
// The plane stride of a single plane is never used; it is given as a whole matrix's, which
// TMA takes.
CUtensorMap fp32_map(const Operand& x, int rows, int k, int planes, int box_rows) {
  return tensor_map(x.ptr, k, rows, planes, x.ld, planes == 1 ? x.ld * rows : x.batch_stride, w::kBK, box_rows, 1);
}

// An M-major A read as fp32: {M, K, planes} in boxes of 32 rows by one K tile (the kernel
// loads BM / 32 of them a K tile).
CUtensorMap m_major_map(const Operand& x, int rows, int k, int planes) {
  return tensor_map(x.ptr, rows, k, planes, x.ld, planes == 1 ? x.ld * k : x.batch_stride, w::kAMajorBoxRows,
                    w::kBK, 1);
}

// One operand's share of the split pass (rows: M for A, N for B); none where the kernel
// splits it.
w::SplitSource split_source(const Operand& x, int rows, int planes, bool in_kernel, float* parts) {
  return {x.ptr, x.ld, x.batch_stride, rows, planes, in_kernel ? 0 : (rows + 31) / 32, parts};
}

// The split pass over both operands' shares, A K-contiguous when row-major, B when
// column-major; false where it has nothing to split.
bool split(const w::SplitSource& a, Layout la, const w::SplitSource& b, Layout lb, int k, cudaStream_t stream) {
  if (k <= 0 || a.row_tiles + b.row_tiles == 0) return false;
  const int planes = std::max(a.row_tiles ? a.planes : 0, b.row_tiles ? b.planes : 0);
  const dim3 grid(a.row_tiles + b.row_tiles, (k + 31) / 32, planes), block(32, 8);
  if ((k + 31) / 32 > kMaxGridYZ) fail_wgmma("K past 2^21");
  const bool ak = la == Layout::RowMajor, bk = lb == Layout::ColMajor;
  if (ak) {
    if (bk) w::split_operands<true, true><<<grid, block, 0, stream>>>(a, b, k);
    else w::split_operands<true, false><<<grid, block, 0, stream>>>(a, b, k);
  } else {
    if (bk) w::split_operands<false, true><<<grid, block, 0, stream>>>(a, b, k);
    else w::split_operands<false, false><<<grid, block, 0, stream>>>(a, b, k);
  }
  launched(cudaSuccess);
  return true;
}

int current_device_wgmma() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) fail_wgmma("no current CUDA device");
  return dev;
}

}  // namespace

size_t sgemm_3xtf32_wgmma_scratch_bytes(int config, const GemmParams& p, Layout la, Layout lb,
                                        SplitOperands kernel_splits) {
  const int bn = width_of(config);
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return 0;
  const Scratch w = layout(bn, p, la, lb, kernel_splits);
  return size_t(w.flag_bytes + w.a_bytes + w.b_bytes);
}

bool sgemm_3xtf32_wgmma_available() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices];  // 0 unknown, 1 no, 2 yes
  const int dev = current_device_wgmma();
  if (dev >= kMaxDevices) return false;
  int state = known[dev].load();
  if (state == 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    bool built = false;
    // sm_90a code runs on 9.0 only; on another GPU the kernel would be PTX-JIT'd or absent.
    if (major == 9 && minor == 0) {
      int* flag = nullptr;
      int host = 0;
      if (cudaMalloc(&flag, sizeof(int)) == cudaSuccess) {
        w::wgmma_built<<<1, 1>>>(flag);
        if (cudaGetLastError() == cudaSuccess && cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess)
          built = host == 1;
        cudaFree(flag);
      }
      cudaGetLastError();  // a missing kernel image is an answer, not an error to keep
    }
    state = built ? 2 : 1;
    known[dev].store(state);
  }
  return state == 2;
}

namespace {
template <int kBN, w::ASource kA>
const void* kernel_for(bool fp32_b) {
  return fp32_b ? reinterpret_cast<const void*>(&w::sgemm_3xtf32_wgmma<kBN, kA, true>)
                : reinterpret_cast<const void*>(&w::sgemm_3xtf32_wgmma<kBN, kA, false>);
}

template <int kBN>
const void* kernel_for(w::ASource a, bool fp32_b) {
  switch (a) {
    case w::ASource::kParts:
      return kernel_for<kBN, w::ASource::kParts>(fp32_b);
    case w::ASource::kFp32KMajor:
      return kernel_for<kBN, w::ASource::kFp32KMajor>(fp32_b);
    case w::ASource::kFp32MMajor:
      return kernel_for<kBN, w::ASource::kFp32MMajor>(fp32_b);
  }
  fail_wgmma("no kernel for this source of A");
}

const void* kernel_for(int bn, w::ASource a, bool fp32_b) {
  return bn == 128 ? kernel_for<128>(a, fp32_b) : kernel_for<64>(a, fp32_b);
}

int smem_bytes_of(int bn) { return bn == 128 ? w::Tile<128>::kSmemBytes : w::Tile<64>::kSmemBytes; }

// The mma.sync tiling whose tiles are this kernel's (the fix-up recomputes them in its raster
// order, so the two must cut the output alike).
int fixup_config_of(int bn) {
  for (int c = 0; c < kNumTf32x3Configs; ++c) {
    const Tf32x3ConfigInfo info = tf32x3_config_info(c);
    if (info.bm == w::BM && info.bn == bn) return c;
  }
  fail_wgmma("no mma.sync tiling of " + std::to_string(w::BM) + " x " + std::to_string(bn) + " for the fix-up");
}
}  // namespace

// A config's instances share their block size and shared memory: one stands for all.
const void* tf32x3_wgmma_kernel_entry(int config) { return kernel_for(width_of(config), w::ASource::kParts, false); }

Tf32x3ConfigInfo tf32x3_wgmma_config_info(int config) {
  const int bn = width_of(config);
  return {w::BM, bn, w::kThreads, smem_bytes_of(bn)};
}

namespace {

// The passes of launch_sgemm_3xtf32_wgmma; product false: the split alone (for probes).
void launch_wgmma_passes(int config, const GemmParams& p, Layout la, Layout lb, SplitOperands kernel_splits,
                         void* scratch, bool product, bool overlap, cudaStream_t stream) {
  const int bn = width_of(config);
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  const int splits = std::max(1, p.k_splits);
  if (!sgemm_3xtf32_wgmma_available())
    fail_wgmma("not built for this GPU (needs an sm_90 device and sm_90a code: TORCH_CUDA_ARCH_LIST=9.0a)");
  if (scratch == nullptr || reinterpret_cast<uintptr_t>(scratch) % 256 != 0)
    fail_wgmma("needs 256-byte aligned scratch of sgemm_3xtf32_wgmma_scratch_bytes()");
  if (splits > 1) {
    if (p.workspace == nullptr) fail_wgmma("split-K needs p.workspace for the partials");
    if (p.k_slice % w::kBK != 0) fail_wgmma("split-K slices must be whole K tiles of 32");
    if (int64_t(p.batch) * splits > kMaxGridYZ) fail_wgmma("batch * k_splits past grid.z's 65535");
  }
  const Scratch ws = layout(bn, p, la, lb, kernel_splits);
  const void* fn = kernel_for(bn, ws.a, ws.fp32_b);
  const int smem_bytes = smem_bytes_of(bn), fixup_config = fixup_config_of(bn);
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) fail_wgmma(std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e));

  char* base = reinterpret_cast<char*>(scratch);
  int* flags = reinterpret_cast<int*>(base);
  float* a_parts = reinterpret_cast<float*>(base + ws.flag_bytes);
  float* b_parts = reinterpret_cast<float*>(base + ws.flag_bytes + ws.a_bytes);
  const int64_t tiles = tiles_of(p, bn);
  if (tiles > 0x7fffffff) fail_wgmma("too many output tiles");

  for (int b0 = 0; b0 < p.batch; b0 += ws.chunk) {
    GemmParams q = batch_slice(p, b0, std::min(ws.chunk, p.batch - b0));
    q.k_splits = splits, q.k_slice = splits > 1 ? p.k_slice : p.k;
    int a_planes = p.a.batch_stride == 0 ? 1 : q.batch, b_planes = p.b.batch_stride == 0 ? 1 : q.batch;
    const bool after_pass = split(split_source(q.a, q.m, a_planes, ws.a != w::ASource::kParts, a_parts), la,
                                  split_source(q.b, q.n, b_planes, ws.fp32_b, b_parts), lb, q.k, stream);
    if (!product) continue;
    const CUtensorMap map_a = ws.a == w::ASource::kFp32KMajor   ? fp32_map(q.a, q.m, q.k, a_planes, w::BM)
                              : ws.a == w::ASource::kFp32MMajor ? m_major_map(q.a, q.m, q.k, a_planes)
                                                                : parts_map(a_parts, q.m, q.k, a_planes, w::BM);
    const CUtensorMap map_b = ws.fp32_b ? fp32_map(q.b, q.n, q.k, b_planes, bn) : parts_map(b_parts, q.n, q.k, b_planes, bn);
    void* args[] = {const_cast<CUtensorMap*>(&map_a), const_cast<CUtensorMap*>(&map_b), &q, &a_planes, &b_planes,
                    &flags};
    // Behind its own split pass only: behind another kernel the wait would gain nothing.
    launched(launch_overlapping(fn, dim3(static_cast<unsigned>(tiles), 1, static_cast<unsigned>(q.batch * splits)),
                                dim3(w::kThreads), smem_bytes, args, stream, overlap && after_pass));
    launch_sgemm_3xtf32_fixup(fixup_config, q, la, lb, flags, overlap, stream);
  }
}

}  // namespace

void launch_sgemm_3xtf32_wgmma(int config, const GemmParams& p, Layout la, Layout lb, SplitOperands kernel_splits,
                               void* scratch, bool overlap, cudaStream_t stream) {
  launch_wgmma_passes(config, p, la, lb, kernel_splits, scratch, true, overlap, stream);
}

void launch_sgemm_3xtf32_wgmma_split(int config, const GemmParams& p, Layout la, Layout lb,
                                     SplitOperands kernel_splits, void* scratch, cudaStream_t stream) {
  launch_wgmma_passes(config, p, la, lb, kernel_splits, scratch, false, false, stream);
}

}  // namespace vecgemm
