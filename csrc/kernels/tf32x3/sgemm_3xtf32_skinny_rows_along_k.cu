// The narrow-side 3xTF32 kernel's 12 instances for few rows (A the narrow operand)
// with B's columns, the wide operand, K-contiguous (B column-major)
// (sgemm_3xtf32_skinny_instances.cuh).
#include "kernels/tf32x3/sgemm_3xtf32_skinny_instances.cuh"

namespace vecgemm {
namespace tf32x3_skinny {
template const void* skinny_entry<true, true>(int, bool, bool);
}  // namespace tf32x3_skinny
}  // namespace vecgemm
