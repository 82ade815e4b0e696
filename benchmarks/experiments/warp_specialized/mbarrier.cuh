// Shared-memory barriers (mbarrier, sm_80+; try_wait sm_90) for the producer/consumer
// pipeline of sgemm_ws.cuh: a barrier counts arrivals, and completes a phase when the
// count set at init has arrived; waiters name the phase by its parity.
#pragma once
#include <cstdint>

namespace vecgemm {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// One arrival, with release semantics: this thread's earlier shared-memory reads are done
// before a thread that sees the phase complete may overwrite what they read.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}

// One arrival once every cp.async this thread has issued so far has landed. The arrival is
// one of those the barrier was initialised to expect (.noinc).
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Blocks until the phase of the given parity has completed (acquire: what the arriving
// threads wrote, or had copied, before arriving is visible after it).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

}  // namespace vecgemm
