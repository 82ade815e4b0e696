// The GPU architectures this build compiled its kernels for, as nvcc saw them: a CUDA
// source file is where the compiler states its target list (__CUDA_ARCH_LIST__).
#include <vector>

#include "plan_summary.h"

namespace vecgemm {

std::vector<int> built_architectures() {
#ifdef __CUDA_ARCH_LIST__
  return {__CUDA_ARCH_LIST__};
#else
  return {};
#endif
}

}  // namespace vecgemm
