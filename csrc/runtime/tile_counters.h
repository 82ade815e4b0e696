// The split-K tile counters of a stream (GemmParams::tile_counters): what lets a kernel add
// its own K slices, the last slice of each output tile to finish reducing it
// (epilogue.cuh, reduce_if_last_slice), instead of a reduction kernel launched after it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace vecgemm {

// `count` counters for a launch on `stream` of `device`, zero, which the launch leaves
// zero; or null, where a reduction kernel must add the slices instead:
//  - while the stream is being captured into a CUDA graph (a graph's launches may run
//    beside the stream's own, so they could not share its counters),
//  - where the launch needs more counters than a stream keeps (kMaxTileCounters),
//  - where the experiment's switch VECGEMM_SPLITK_EXP is not on.
// A stream's counters are made at its first such launch, zeroed on that stream; its
// launches run one after another, so they take turns with them.
unsigned int* stream_tile_counters(int device, cudaStream_t stream, int64_t count);

inline constexpr int64_t kMaxTileCounters = int64_t(1) << 16;

}  // namespace vecgemm
