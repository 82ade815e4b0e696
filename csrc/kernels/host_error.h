// Host-side errors of the kernels that also build without torch (the standalone probes,
// -DVECGEMM_STANDALONE): c10::Error inside the extension, std::runtime_error outside it.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#if !defined(VECGEMM_STANDALONE) && defined(__has_include)
#if __has_include(<c10/cuda/CUDAException.h>)
#include <c10/cuda/CUDAException.h>
#define VECGEMM_HAVE_C10 1
#endif
#endif

namespace vecgemm {

// "who: what", thrown.
[[noreturn]] inline void fail_in(const char* who, const std::string& what) {
#ifdef VECGEMM_HAVE_C10
  TORCH_CHECK(false, who, ": ", what);
#else
  throw std::runtime_error(std::string(who) + ": " + what);
#endif
}

// After a launch: its error, or the sticky error of an earlier asynchronous one.
inline void check_launch_in(const char* who) {
#ifdef VECGEMM_HAVE_C10
  (void)who;
  C10_CUDA_KERNEL_LAUNCH_CHECK();
#else
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail_in(who, std::string("launch failed: ") + cudaGetErrorString(e));
#endif
}

}  // namespace vecgemm
