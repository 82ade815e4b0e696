// Compiles a shard of the rows of kernel_configs.h for one storage order of A and B and
// registers the instances at load time. setup.py generates one translation unit per
// (storage order, shard), each defining VECGEMM_LA, VECGEMM_LB, VECGEMM_SHARD and
// VECGEMM_SHARDS, so that the many instances build in parallel.
#include <c10/cuda/CUDAException.h>

#include <utility>

#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "kernels/simt/sgemm_async.cuh"
#include "kernels/simt/sgemm_stream_k.cuh"
#include "kernels/simt/sgemm_tiled.cuh"

namespace vecgemm {
namespace {

template <int I>
using TileOf = TileShape<kKernelConfigs[I].tiling.bm, kKernelConfigs[I].tiling.bn, kKernelConfigs[I].tiling.bk,
                         kKernelConfigs[I].tiling.wm, kKernelConfigs[I].tiling.wn, kKernelConfigs[I].tiling.tm,
                         kKernelConfigs[I].tiling.tn>;
template <int I>
using PolicyOf = MainloopPolicy<kKernelConfigs[I].mainloop.min_blocks, kKernelConfigs[I].mainloop.prefetch,
                                kKernelConfigs[I].mainloop.steer, kKernelConfigs[I].mainloop.pin_loads>;
template <int I>
using ShapeOf = KernelShape<TileOf<I>, PolicyOf<I>>;

// The kernel function of row I with loads VEC floats wide.
template <int I, int VEC>
constexpr auto kernel_of() {
  if constexpr (kKernelConfigs[I].mainloop.family == MainloopFamily::CpAsync)
    return &sgemm_async<AsyncShape<ShapeOf<I>, kKernelConfigs[I].mainloop.stages>, VECGEMM_LA, VECGEMM_LB, VEC>;
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
  StreamKFn stream_k = nullptr;
  if constexpr (kKernelConfigs[I].stream_k && VEC == 4) stream_k = &launch_stream_k<I>;
  register_tiled_kernel(I, VECGEMM_LA, VECGEMM_LB, VEC == 4,
                        TiledKernel{&launch_tiled<I, VEC>, reinterpret_cast<const void*>(kernel_of<I, VEC>()),
                                    ShapeOf<I>::kThreads, stream_k});
}

template <int I>
void register_row() {
  if constexpr (I % VECGEMM_SHARDS == VECGEMM_SHARD) {
    register_instance<I, 4>();
    if constexpr (kKernelConfigs[I].scalar) register_instance<I, 1>();
  }
}

template <std::size_t... I>
bool register_rows(std::index_sequence<I...>) {
  (register_row<int(I)>(), ...);
  return true;
}

const bool registered = register_rows(std::make_index_sequence<kNumKernelConfigs>{});

}  // namespace
}  // namespace vecgemm
