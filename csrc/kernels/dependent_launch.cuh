// Programmatic dependent launch (sm_90), for the second passes: the split-K reduction after
// the GEMM (or gemv), the stream-K fix-up after the tail, and the 3xTF32 wgmma kernel after
// its split pass and its fix-up after it. Each is launched by launch_dependent
// (dependent_launch.h) or launch_overlapping (batch_launch.h) and may start once every block
// of the kernel before it has called allow_dependents() (or exited), which the GEMM kernels
// and the tail do first thing and the split pass last; its launch and ramp-up then overlap
// the GEMM's last blocks instead of following them (on a 10 us product, a tenth of the time:
// docs/performance.md).
//
// The contract of a kernel launched that way: each of its blocks calls
// wait_for_predecessor() before touching global memory (it returns once the kernel before
// has completed and its writes are visible), so its completion implies that kernel's, and
// what follows on the stream sees both complete. The SIMT path's operand copies, GEMM and
// tail are launched as usual: with the GEMM launched this way behind its copies and the tail
// behind the whole waves, the large problems gained nothing and 777x4097x1023 ran 3% slower.
//
// Without such a launch, and before sm_90, both calls return at once.
#pragma once

namespace vecgemm {

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace vecgemm
