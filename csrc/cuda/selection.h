// Chooses the tiling and split-K factor of the tiled kernel for one problem: by a cost
// model over the configurations of tile_configs.h, or, in autotune mode, by timing the
// model's best candidates once per problem shape and caching the winner.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "../gemm_params.h"
#include "../tuning.h"

namespace vecgemm {

struct Choice {
  int config;     // index into tile_configs.h
  int splits;     // K slices; 1 = no split
  bool stream_k;  // unsplit, with the last partial wave as the stream-K tail (sgemm_stream_k.cuh)
};

struct ProblemKey {
  int batch, m, n, k;
  Layout la, lb;
  bool vec4;
  bool out_vec4;  // D's rows are 16-byte aligned: the epilogue stores 4 floats at a time
  std::string str() const;
};

// forced_config >= 0 fixes the tiling (a variant asked for by name); the split is still chosen.
Choice choose(const ProblemKey& key, int forced_config, const GemmParams& params, cudaStream_t stream);

// The model's estimate, in nanoseconds, of the tiled kernel's best choice for this problem
// (the auto variant's plan of copies compares storage orders with it).
double model_best_ns(const ProblemKey& key);
// The model's estimate of one pass copying `elements` floats into new storage.
double copy_ns(int64_t elements);

// Whether run_tiled runs this choice with the stream-K tail: asked for, unsplit, and the
// problem has whole waves and a partial one.
bool stream_k_tail(const ProblemKey& key, Choice choice);

// Runs the tiled kernel (and the split-K reduction or the stream-K tail) with the given
// choice. Allocates the workspaces from PyTorch's caching allocator (unsplit, without the
// tail, where it cannot) and walks batches past grid limits.
void run_tiled(GemmParams p, const ProblemKey& key, Choice choice, cudaStream_t stream);

}  // namespace vecgemm
