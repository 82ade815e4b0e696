// The host half of dependent_launch.cuh: a launch that lets a kernel overlap the end of the
// one before it on the stream. Only for kernels that keep dependent_launch.cuh's contract.
#pragma once
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include "kernels/launchers.h"

namespace vecgemm {

// kernel<<<grid, block, 0, stream>>>(args...), allowed to overlap its predecessor's end
// unless dependent_launch_enabled() says otherwise.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = dependent_launch_enabled() ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace vecgemm
