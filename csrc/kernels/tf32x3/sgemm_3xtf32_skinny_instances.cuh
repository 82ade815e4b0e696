// The narrow-side 3xTF32 kernel's instances (sgemm_3xtf32_skinny.cuh), 48 of them: each
// narrow side and order of the wide operand compiles its 12 (three block heights, the
// narrow operand's two orders, two load widths) in a unit of its own
// (sgemm_3xtf32_skinny_<side>_<wide operand's order>.cu), so that no unit outlasts the rest
// of the build; sgemm_3xtf32_skinny.cu reaches them through skinny_entry.
#pragma once
#include "kernels/tf32x3/sgemm_3xtf32_skinny.cuh"

namespace vecgemm {
namespace tf32x3_skinny {

template <int kQTiles, bool kFewRows, bool kPAlongK, bool kQAlongK, bool kVec4>
const void* instance() {
  return (const void*)&sgemm_3xtf32_skinny<SkinnyShape<kQTiles, kFewRows, kPAlongK, kQAlongK, kVec4>>;
}

template <bool kFewRows, bool kPAlongK, bool kQAlongK, bool kVec4>
const void* entry_for(int q_rows) {
  return q_rows == 8    ? instance<1, kFewRows, kPAlongK, kQAlongK, kVec4>()
         : q_rows == 16 ? instance<2, kFewRows, kPAlongK, kQAlongK, kVec4>()
                        : instance<4, kFewRows, kPAlongK, kQAlongK, kVec4>();
}

// The kernel for the narrow side (kFewRows: A's rows, else B's columns) and the wide
// operand's order (kPAlongK: its rows K-contiguous), taking q_rows (8, 16 or 32) of the
// narrow operand a block, stored K-contiguous or not (q_along_k), at the load width vec4;
// defined (instantiated) only in that side and order's unit.
template <bool kFewRows, bool kPAlongK>
const void* skinny_entry(int q_rows, bool q_along_k, bool vec4) {
  if (q_along_k)
    return vec4 ? entry_for<kFewRows, kPAlongK, true, true>(q_rows) : entry_for<kFewRows, kPAlongK, true, false>(q_rows);
  return vec4 ? entry_for<kFewRows, kPAlongK, false, true>(q_rows) : entry_for<kFewRows, kPAlongK, false, false>(q_rows);
}

extern template const void* skinny_entry<true, true>(int, bool, bool);
extern template const void* skinny_entry<true, false>(int, bool, bool);
extern template const void* skinny_entry<false, true>(int, bool, bool);
extern template const void* skinny_entry<false, false>(int, bool, bool);

}  // namespace tf32x3_skinny
}  // namespace vecgemm
