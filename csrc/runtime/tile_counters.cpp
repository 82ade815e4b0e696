#include "runtime/tile_counters.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#include <utility>

#include "env_flags.h"
#include "runtime/autotune.h"  // capturing

namespace vecgemm {

unsigned int* stream_tile_counters(int device, cudaStream_t stream, int64_t count) {
  if (!env_flag("VECGEMM_SPLITK_EXP", false) || count > kMaxTileCounters || capturing(stream)) return nullptr;
  static std::mutex mutex;
  // Never destroyed: the tensors would otherwise be freed after CUDA has shut down at exit.
  static auto* counters = new std::map<std::pair<int, cudaStream_t>, at::Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& held = (*counters)[{device, stream}];
  if (!held.defined()) {
    // Zeroed on the current stream, the one the launch that asks runs on (execute.cpp).
    TORCH_INTERNAL_ASSERT(c10::cuda::getCurrentCUDAStream(device).stream() == stream,
                          "vecgemm: tile counters asked for a stream that is not the current one");
    held = at::zeros({kMaxTileCounters}, at::device(at::Device(at::kCUDA, device)).dtype(at::kInt));
  }
  return reinterpret_cast<unsigned int*>(held.data_ptr<int>());
}

}  // namespace vecgemm
