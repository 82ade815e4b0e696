// Plain data shared by the host dispatch and the CUDA kernels: no torch types here,
// so kernels compile without ATen headers.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define VECGEMM_HOST_DEVICE __host__ __device__
#else
#define VECGEMM_HOST_DEVICE
#endif

namespace vecgemm {

// Storage order of one operand. For A (M x K) and B (K x N) the kernels only need to
// know which of the two logical dimensions is contiguous; `ld` is the other stride.
enum class Layout : int { RowMajor = 0, ColMajor = 1 };

struct Operand {
  const float* ptr;
  int64_t ld;            // stride of the non-contiguous dimension, in elements
  int64_t batch_stride;  // 0 broadcasts one matrix over the batch
};

// D[b] = alpha * A[b] @ B[b] + beta * C[b], with D row-major.
struct GemmParams {
  int m, n, k;
  int batch;
  Operand a, b;
  // C may have any strides (a bias broadcast over rows has row_stride 0); it is not
  // read when beta == 0 or when it is null.
  const float* c;
  int64_t c_row_stride, c_col_stride, c_batch_stride;
  float* d;
  int64_t d_ld, d_batch_stride;
  float alpha, beta;
  // Split-K: grid.z = batch * k_splits; slice s covers K range [s*k_slice, (s+1)*k_slice).
  // With k_splits > 1 the kernel writes raw partial sums to `workspace`
  // ([k_splits][batch][m][n], dense) and a reduction kernel applies alpha, beta and C.
  int k_splits;
  int k_slice;
  float* workspace;
  // Whether the epilogue may move C and D four elements at a time (16-byte aligned rows).
  bool c_vec4, d_vec4;
};

// Whether every line of a matrix starts 16-byte aligned (where 16-byte loads and stores, and
// TMA, may move it): its pointer, the stride between its lines (`ld`) and between its
// batch's matrices (0 where there is one, or one broadcast) all multiples of 16 bytes. The
// one test of this kind every caller asks (the planner's operands, the output and C, the
// passes' sources), each adding what its own reads need.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
inline bool lines_aligned16(const void* p, int64_t ld, int64_t batch_stride) {
  return aligned16(p) && ld % 4 == 0 && batch_stride % 4 == 0;
}

// grid.y's and grid.z's limit: the kernels take the batch (times the K slices) in grid.z, so
// their launchers walk a longer batch in chunks of batch_slice, and those with rows or K
// tiles in grid.y cap them likewise.
constexpr int kMaxGridYZ = 65535;

// p's batches [first, first + count) as a problem of its own: the same matrices, the
// operands, C and D moved on by `first` batches. The split-K workspace is not: partials are
// indexed by the chunk's batch, so a chunk's reduction must run before the next chunk.
inline GemmParams batch_slice(const GemmParams& p, int first, int count) {
  GemmParams q = p;
  q.batch = count;
  q.a.ptr += first * p.a.batch_stride;
  q.b.ptr += first * p.b.batch_stride;
  if (q.c != nullptr) q.c += first * p.c_batch_stride;
  q.d += first * p.d_batch_stride;
  return q;
}

// The stream-K tail (sgemm_stream_k.cuh): the tiles first_tile .. first_tile + tiles - 1
// (in the kernels' raster order), those of a last, partial wave, shared out over `blocks`
// blocks, each a contiguous range of their K iterations (`iters` BK steps a tile): block b
// runs iterations [start(b), start(b + 1)), at most two pieces when there are fewer
// iterations than a tile's, and writes piece j's partial tile to workspace slot 2 b + j.
struct StreamK {
  int first_tile, tiles;
  int iters;
  int blocks;
  VECGEMM_HOST_DEVICE int64_t start(int b) const { return int64_t(b) * tiles * iters / blocks; }
};

}  // namespace vecgemm
