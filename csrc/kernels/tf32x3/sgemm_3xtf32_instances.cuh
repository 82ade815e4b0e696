// The mma.sync 3xTF32 kernel's tilings and the instances of one of them (sgemm_3xtf32.cuh):
// each tiling's instances are compiled in a unit of their own (sgemm_3xtf32_<tiling>.cu), so
// that the build compiles the tilings in parallel rather than one after another in a unit
// that outlasts every other; sgemm_3xtf32.cu reaches them through tf32x3_entry.
#pragma once
#include "kernels/gemm_params.h"
#include "kernels/tf32x3/sgemm_3xtf32.cuh"

namespace vecgemm {
namespace tf32x3 {

// Warps of 64 x 32. 128 x 128: 8 warps, one block per SM (the registers), so 4 stages
// (128 KB) to cover the pipeline bubbles no second block hides. 128 x 64: 4 warps, two
// blocks per SM (72 KB each), as the 64 x 64-warp kernel's faster 128 x 128 config was.
// 64 x 128: the same warps side by side along N, for problems of few rows (decode: M of
// 1-64), where a 128-row tile would compute mostly padding.
using Shape128x128 = Tf32x3Shape<128, 128, 4>;
using Shape128x64 = Tf32x3Shape<128, 64, 3>;
using Shape64x128 = Tf32x3Shape<64, 128, 3>;

// vec4 only changes K-contiguous operands' copies: where neither is (column-major A,
// row-major B) one instance serves both.
template <class S, Layout LA, Layout LB, bool V>
constexpr auto instance() {
  constexpr bool any_k_contiguous = LA == Layout::RowMajor || LB == Layout::ColMajor;
  return &sgemm_3xtf32<S, LA, LB, V && any_k_contiguous>;
}

// The kernel of tiling S for the storage orders and load width; defined (instantiated) only
// in that tiling's unit.
template <class S>
const void* tf32x3_entry(Layout la, Layout lb, bool vec4) {
  using L = Layout;
  const bool ar = la == L::RowMajor, br = lb == L::RowMajor;
  if (vec4) {
    if (ar) return br ? (const void*)instance<S, L::RowMajor, L::RowMajor, true>() : (const void*)instance<S, L::RowMajor, L::ColMajor, true>();
    return br ? (const void*)instance<S, L::ColMajor, L::RowMajor, true>() : (const void*)instance<S, L::ColMajor, L::ColMajor, true>();
  }
  if (ar) return br ? (const void*)instance<S, L::RowMajor, L::RowMajor, false>() : (const void*)instance<S, L::RowMajor, L::ColMajor, false>();
  return br ? (const void*)instance<S, L::ColMajor, L::RowMajor, false>() : (const void*)instance<S, L::ColMajor, L::ColMajor, false>();
}

extern template const void* tf32x3_entry<Shape128x128>(Layout, Layout, bool);
extern template const void* tf32x3_entry<Shape128x64>(Layout, Layout, bool);
extern template const void* tf32x3_entry<Shape64x128>(Layout, Layout, bool);

}  // namespace tf32x3
}  // namespace vecgemm
