// Compiles a shard of the rows of tile_configs.h for one storage order of A and B and
// registers the instances at load time. setup.py generates one translation unit per
// (storage order, shard), each defining VECGEMM_LA, VECGEMM_LB, VECGEMM_SHARD and
// VECGEMM_SHARDS, so that the many instances build in parallel.
#include <c10/cuda/CUDAException.h>

#include <utility>

#include "kernels.h"
#include "sgemm_async.cuh"
#include "sgemm_stream_k.cuh"
#include "sgemm_tiled.cuh"
#include "tile_configs.h"

namespace vecgemm {
namespace {

template <int I>
using ShapeOf = TileShape<kTileConfigs[I].bm, kTileConfigs[I].bn, kTileConfigs[I].bk, kTileConfigs[I].wm,
                          kTileConfigs[I].wn, kTileConfigs[I].tm, kTileConfigs[I].tn,
                          kTileConfigs[I].min_blocks, kTileConfigs[I].prefetch, kTileConfigs[I].steer,
                          kTileConfigs[I].pin_loads>;

// The kernel function of row I with loads VEC floats wide.
template <int I, int VEC>
constexpr auto kernel_of() {
  if constexpr (kTileConfigs[I].stages > 0)
    return &sgemm_async<AsyncShape<ShapeOf<I>, kTileConfigs[I].stages>, VECGEMM_LA, VECGEMM_LB>;
  else
    return &sgemm_tiled<ShapeOf<I>, VECGEMM_LA, VECGEMM_LB, VEC>;
}

template <int I, int VEC>
void launch_tiled(const GemmParams& p, cudaStream_t stream) {
  using S = ShapeOf<I>;
  const int64_t tiles = int64_t((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  const dim3 grid(static_cast<unsigned>(tiles), 1, p.batch * p.k_splits);
  kernel_of<I, VEC>()<<<grid, S::kThreads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int I>
void launch_stream_k(const GemmParams& p, const StreamK& sk, cudaStream_t stream) {
  using S = ShapeOf<I>;
  if (sk.first_tile > 0) {
    sgemm_tiled<S, VECGEMM_LA, VECGEMM_LB, 4, true><<<sk.first_tile, S::kThreads, 0, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  sgemm_stream_k<S, VECGEMM_LA, VECGEMM_LB><<<sk.blocks, S::kThreads, 0, stream>>>(p, sk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int I, int VEC>
void register_instance() {
  static_assert(VEC == 4 || kTileConfigs[I].stages == 0, "cp.async moves 16-byte chunks");
  static_assert(!kTileConfigs[I].stream_k || kTileConfigs[I].stages == 0, "the stream-K tail is register-staged");
  StreamKFn stream_k = nullptr;
  if constexpr (kTileConfigs[I].stream_k && VEC == 4) stream_k = &launch_stream_k<I>;
  register_tiled_kernel(I, VECGEMM_LA, VECGEMM_LB, VEC == 4,
                        TiledKernel{&launch_tiled<I, VEC>, reinterpret_cast<const void*>(kernel_of<I, VEC>()),
                                    ShapeOf<I>::kThreads, stream_k});
}

template <int I>
void register_row() {
  if constexpr (I % VECGEMM_SHARDS == VECGEMM_SHARD) {
    register_instance<I, 4>();
    if constexpr (kTileConfigs[I].scalar) register_instance<I, 1>();
  }
}

template <std::size_t... I>
bool register_rows(std::index_sequence<I...>) {
  (register_row<int(I)>(), ...);
  return true;
}

const bool registered = register_rows(std::make_index_sequence<kNumTileConfigs>{});

}  // namespace
}  // namespace vecgemm
