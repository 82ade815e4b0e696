#include "runtime/execute.h"

#include <ATen/ATen.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/baddbmm_cuda_dispatch.h>
#include <ATen/ops/bmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <limits>

#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "planner/tf32x3_rows.h"
#include "runtime/autotune.h"

namespace vecgemm {

at::Tensor torch_product(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha,
                         double beta) {
  const bool batched = A.dim() == 3;
  if (C.has_value()) return batched ? at::cuda::baddbmm(*C, A, B, beta, alpha) : at::cuda::addmm(*C, A, B, beta, alpha);
  at::Tensor out = batched ? at::cuda::bmm(A, B) : at::cuda::mm(A, B);
  if (alpha != 1.0) out.mul_(alpha);
  return out;
}

namespace {

// The same values in storage of the given order, rows starting 16-byte aligned, with the K
// dimension (k_dim: -1 for A, -2 for B) zero-filled up to k_padded; one pass (pad_copy.cu,
// or transpose_copy.cu when the order changes).
at::Tensor padded_copy(const at::Tensor& t, int k_dim, int64_t k_padded, Layout order) {
  if (t.dim() == 3 && t.size(0) > 1 && t.stride(0) == 0) {  // keep a broadcast batch broadcast
    const at::Tensor one = padded_copy(t.select(0, 0), k_dim, k_padded, order);
    return one.unsqueeze(0).expand({t.size(0), one.size(0), one.size(1)});
  }
  // Source and copy as views whose last dimension is the contiguous one.
  const bool src_row_major = storage_of(t)->layout == Layout::RowMajor;
  const bool dst_row_major = order == Layout::RowMajor;
  const at::Tensor rows = src_row_major ? t : t.transpose(-1, -2);
  std::vector<int64_t> sizes = t.sizes().vec();  // the copy's, in t's (logical) terms
  sizes[sizes.size() + k_dim] = k_padded;
  if (!dst_row_major) std::swap(sizes[sizes.size() - 1], sizes[sizes.size() - 2]);
  const int64_t width = sizes.back();
  sizes.back() = (width + 3) / 4 * 4;
  TORCH_CHECK(sizes.back() <= std::numeric_limits<int>::max(), "vecgemm: padded operand too large");
  const at::Tensor copy = at::empty(sizes, t.options());
  const bool batched = rows.dim() == 3;
  const PadCopy c{rows.data_ptr<float>(), rows.stride(-2), batched ? rows.stride(0) : 0,
                  int(rows.size(-2)), int(rows.size(-1)), copy.data_ptr<float>(),
                  int(copy.size(-2)), int(copy.size(-1)), batched ? int(rows.size(0)) : 1};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (src_row_major == dst_row_major)
    launch_pad_copy(c, stream);
  else
    launch_transpose_copy(c, stream);
  const at::Tensor view = copy.narrow(-1, 0, width);
  return dst_row_major ? view : view.transpose(-1, -2);
}

// The operands' part of the kernel parameters; the caller fills in D and C.
GemmParams operand_params(const at::Tensor& A, const at::Tensor& B, double alpha) {
  const GemmShape s = shape_of(A, B);
  GemmParams p{};
  p.m = int(s.m), p.n = int(s.n), p.k = int(s.k), p.batch = int(s.batch);
  p.a = Operand{A.data_ptr<float>(), storage_of(A)->ld, A.dim() == 3 ? A.stride(0) : 0};
  p.b = Operand{B.data_ptr<float>(), storage_of(B)->ld, B.dim() == 3 ? B.stride(0) : 0};
  p.alpha = float(alpha);
  p.k_splits = 1, p.k_slice = p.k;
  return p;
}

// The stream-K tail's launch: its pieces' workspace, the whole waves and the tail, the
// fix-up. False where the workspace cannot be had.
bool run_stream_k(const GemmParams& p, const ProblemKey& key, int config, cudaStream_t stream) {
  const auto sk = stream_k_schedule(key, config);
  if (!sk) return false;
  const Tiling& t = kKernelConfigs[config].tiling;
  at::Tensor pieces;  // two partial tiles a block
  try {
    pieces = at::empty({2 * int64_t(sk->blocks) * t.bm * t.bn}, at::device(at::kCUDA).dtype(at::kFloat));
  } catch (const c10::OutOfMemoryError&) {
    return false;
  }
  GemmParams q = p;
  q.workspace = pieces.data_ptr<float>();
  tiled_kernel(config, key.la, key.lb, key.vec4).stream_k(q, *sk, stream);
  launch_stream_k_fixup(q, *sk, t.bm, t.bn, stream);
  return true;
}

// p's K in `splits` slices of whole K tiles of bk, as the planner priced them (k_slices).
void split_k(GemmParams& p, int splits, int bk) {
  const KSlices slices = k_slices(p.k, splits, bk);
  p.k_slice = slices.length, p.k_splits = slices.count;
}

// A kernel over p's batch with K in p.k_splits slices of p.k_slice: the split-K workspace,
// sized for the largest chunk of batches grid.z takes (batch x splits <= kMaxGridYZ), and
// per chunk launch(q) on the chunk's parameters, then, where K is split, reduce(q, first,
// count) on the chunk's batches. False, with nothing launched, where the caching allocator
// cannot give the workspace.
template <class Launch, class Reduce>
bool run_k_slices(GemmParams p, int batch, const Launch& launch, const Reduce& reduce) {
  const int max_batch = std::max(1, kMaxGridYZ / p.k_splits);
  at::Tensor workspace;
  if (p.k_splits > 1) {
    try {
      workspace = at::empty({int64_t(p.k_splits) * std::min(max_batch, batch) * p.m * p.n},
                            at::device(at::kCUDA).dtype(at::kFloat));
    } catch (const c10::OutOfMemoryError&) {
      return false;
    }
    p.workspace = workspace.data_ptr<float>();
  }
  for (int b0 = 0; b0 < batch; b0 += max_batch) {
    const int count = std::min(max_batch, batch - b0);
    const GemmParams q = batch_slice(p, b0, count);
    launch(q);
    if (p.k_splits > 1) reduce(q, b0, count);
  }
  return true;
}

// run_k_slices with the split-K reduction, for every family that writes split-K partials
// (epilogue.cuh's store_partial4). Where the workspace cannot be had, the kernel runs over
// the whole of K instead.
template <class Launch>
void run_split_k(GemmParams p, int batch, const Launch& launch, cudaStream_t stream) {
  const auto reduce = [&](const GemmParams& q, int, int) { launch_splitk_reduce(q, stream); };
  if (run_k_slices(p, batch, launch, reduce)) return;
  p.k_slice = p.k, p.k_splits = 1;
  run_k_slices(p, batch, launch, reduce);  // unsplit: no workspace to fail
}

// The plan's 3xTF32 row on q (its K slices set), with the scratch its launch asks for.
void launch_tf32x3_row(const GemmParams& q, const Plan& plan, cudaStream_t stream) {
  const Tf32x3Tiling& tiling = plan.tf32x3;
  const Tf32x3Row& row = kTf32x3Rows[tiling.row];
  const ProblemKey& key = plan.key;
  // The caching allocator's block is stream-ordered: free for reuse once this stream's
  // work up to here is done, so it can be released as soon as the launches are queued.
  at::Tensor scratch;
  if (row.scratch_bytes != nullptr)
    scratch = at::empty({int64_t(row.scratch_bytes(row.config, q, key.la, key.lb, tiling.kernel_splits))},
                        at::TensorOptions().dtype(at::kByte).device(at::kCUDA, key.device));
  row.launch(row.config, q, key.la, key.lb, key.vec4, tiling.kernel_splits,
             scratch.defined() ? scratch.data_ptr() : nullptr, stream);
}

// The 3xTF32 row of the plan, split as planned (whole K tiles of the row's bk).
void run_tf32x3(GemmParams p, const Plan& plan, cudaStream_t stream) {
  const Tf32x3Row& row = kTf32x3Rows[plan.tf32x3.row];
  split_k(p, plan.tf32x3.splits, row.bk);
  run_split_k(p, plan.key.batch, [&](const GemmParams& q) { launch_tf32x3_row(q, plan, stream); }, stream);
}

// A transposed 3xTF32 plan on p (D's problem): the row computes C^T = B^T A^T's partial sums
// over its K slices, and the transposing reduction writes D. False, with nothing launched,
// where the split's workspace cannot be had (the row alone would write C^T over D).
bool run_tf32x3_transposed(const GemmParams& p, const Plan& plan, cudaStream_t stream) {
  const Tf32x3Row& row = kTf32x3Rows[plan.tf32x3.row];
  GemmParams t = p;  // the kernel's problem
  t.m = p.n, t.n = p.m;
  t.a = p.b, t.b = p.a;
  t.c = nullptr, t.beta = 0.0f;
  split_k(t, plan.tf32x3.splits, row.bk);
  TORCH_INTERNAL_ASSERT(t.k_splits > 1, "vecgemm: a transposed plan of ", plan.key.str(), " without a K split");
  return run_k_slices(
      t, p.batch, [&](const GemmParams& q) { launch_tf32x3_row(q, plan, stream); },
      [&](const GemmParams& q, int first, int count) {
        GemmParams reduce = p;  // D's problem, summing the kernel's partials
        reduce.k_splits = q.k_splits, reduce.k_slice = q.k_slice, reduce.workspace = q.workspace;
        launch_splitk_reduce_transposed(batch_slice(reduce, first, count), stream);
      });
}

// The tiled kernel of `choice` (and the split-K reduction or the stream-K tail and its
// fix-up) on the operands of p; walks batches past grid limits.
void run_tiled(GemmParams p, const ProblemKey& key, TilingChoice choice, cudaStream_t stream) {
  const TiledKernel kernel = tiled_kernel(choice.config, key.la, key.lb, key.vec4);
  TORCH_INTERNAL_ASSERT(kernel.launch != nullptr, "vecgemm: no ", kernel_config_name(choice.config),
                        " kernel for ", key.str());
  split_k(p, choice.splits, kKernelConfigs[choice.config].tiling.bk);
  if (choice.stream_k && p.k_splits == 1 && run_stream_k(p, key, choice.config, stream)) return;
  run_split_k(p, key.batch, [&](const GemmParams& q) { kernel.launch(q, stream); }, stream);
}

}  // namespace

void execute(const Plan& planned, const at::Tensor& D, const at::Tensor& A, const at::Tensor& B,
             const std::optional<at::Tensor>& C, double alpha, double beta) {
  const GemmShape s = shape_of(A, B);
  const bool use_c = C.has_value() && beta != 0.0;
  const auto out_sizes = s.out_sizes();
  if (planned.family == Family::Empty) {
    if (s.batch == 0 || s.m == 0 || s.n == 0) return;
    // An empty sum: D = beta * C.
    if (!use_c) {
      D.zero_();
    } else {
      if (!D.is_same(*C)) D.copy_(C->expand(out_sizes));
      D.mul_(beta);
    }
    return;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

  const Plan* chosen = &planned;
  at::Tensor a = A, b = B;
  if (planned.copy_a.made || planned.copy_b.made) {
    try {
      if (planned.copy_a.made) a = padded_copy(A, -1, planned.key.k, planned.copy_a.order);
      if (planned.copy_b.made) b = padded_copy(B, -2, planned.key.k, planned.copy_b.order);
    } catch (const c10::OutOfMemoryError&) {
      // Both or neither, since a padded K must be the same in A and B.
      a = A, b = B;
      chosen = planned.without_copies.get();
      TORCH_INTERNAL_ASSERT(chosen != nullptr, "vecgemm: a plan with copies has no plan without them");
    }
  }
  const Plan& plan = *chosen;

  GemmParams p = operand_params(a, b, alpha);
  p.d = D.data_ptr<float>();
  p.d_ld = D.stride(-2);
  p.d_batch_stride = D.dim() == 3 ? D.stride(0) : 0;
  p.d_vec4 = plan.key.out_vec4;
  p.beta = use_c ? float(beta) : 0.0f;

  if (plan.family == Family::Vectorized) {
    // The seed's kernel reads beta * C from D itself.
    if (use_c && !D.is_same(*C)) D.copy_(C->expand(out_sizes));
    launch_vectorized(p, stream);
    return;
  }
  if (use_c) {
    const at::Tensor c = C->expand(out_sizes);
    p.c = c.data_ptr<float>();
    p.c_row_stride = c.stride(-2), p.c_col_stride = c.stride(-1);
    p.c_batch_stride = c.dim() == 3 ? c.stride(0) : 0;
    p.c_vec4 = p.c_col_stride == 1 && lines_aligned16(p.c, p.c_row_stride, p.c_batch_stride);
  }
  if (plan.family == Family::Gemv) {
    split_k(p, plan.gemv_splits, kGemvKRound);
    run_split_k(p, plan.key.batch, [&](const GemmParams& q) { launch_gemv(q, plan.key.la, plan.key.lb, stream); },
                stream);
    return;
  }
  if (plan.family == Family::Tf32x3) {
    if (!plan.transposed)
      run_tf32x3(p, plan, stream);
    else if (!run_tf32x3_transposed(p, plan, stream))
      execute(*plan.untransposed, D, A, B, C, alpha, beta);
    return;
  }
  TilingChoice choice = plan.tiling;
  if (plan.autotune_pending && !capturing(stream)) {
    AutotuneRuns runs{[&](const GemmParams& q, TilingChoice candidate) { run_tiled(q, plan.key, candidate, stream); },
                      [&] { (void)torch_product(A, B, C, alpha, beta); }, nullptr};
    if (plan.copy_a.made || plan.copy_b.made)
      runs.copies = [&] {
        if (plan.copy_a.made) (void)padded_copy(A, -1, plan.key.k, plan.copy_a.order);
        if (plan.copy_b.made) (void)padded_copy(B, -2, plan.key.k, plan.copy_b.order);
      };
    choice = autotune(plan.key, p, runs, stream);
  }
  run_tiled(p, plan.key, choice, stream);
}

}  // namespace vecgemm
