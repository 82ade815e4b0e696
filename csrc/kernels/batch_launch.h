// Kernel launches shared by the 3xTF32 kernels' launchers (host side; builds in the
// extension and standalone): one over a GemmParams problem's batch, and one that may overlap
// the kernel before it.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/gemm_params.h"
#include "kernels/host_error.h"

namespace vecgemm {

// fn<<<grid, block, smem_bytes, stream>>>(args), allowed with `overlap` to begin while the
// kernel before it on the stream drains (programmatic dependent launch, sm_90): only for a
// kernel that keeps dependent_launch.cuh's contract, behind one that lets it.
inline cudaError_t launch_overlapping(const void* fn, dim3 grid, dim3 block, size_t smem_bytes, void** args,
                                      cudaStream_t stream, bool overlap) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = overlap ? 1 : 0;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelExC(&config, fn, args);
}

// fn over `blocks` x 1 x (batch * k_splits) blocks of `threads`, with `smem_bytes` of dynamic
// shared memory; batches past grid.z's limit run in chunks (unsplit problems only: the
// split-K workspace is indexed by the whole batch). Errors name `who`.
inline void launch_over_batch(const void* fn, const GemmParams& p, int64_t blocks, int threads, int smem_bytes,
                              cudaStream_t stream, const char* who) {
  if (blocks > 0x7fffffff) fail_in(who, "too many blocks");
  const int splits = std::max(1, p.k_splits);
  if (splits > 1 && int64_t(p.batch) * splits > kMaxGridYZ) fail_in(who, "batch * k_splits past grid.z's 65535");
  const int chunk = splits > 1 ? p.batch : std::min(p.batch, kMaxGridYZ);
  for (int b0 = 0; b0 < p.batch; b0 += chunk) {
    GemmParams q = batch_slice(p, b0, std::min(chunk, p.batch - b0));
    q.k_splits = splits;
    const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(q.batch * splits));
    void* args[] = {&q};
    const cudaError_t e = cudaLaunchKernel(fn, grid, dim3(threads), args, smem_bytes, stream);
    if (e != cudaSuccess) fail_in(who, std::string("launch failed: ") + cudaGetErrorString(e));
    check_launch_in(who);
  }
}

}  // namespace vecgemm
