// The narrow-side 3xTF32 kernel's 12 instances for few columns (B the narrow operand)
// with A's rows, the wide operand, K-contiguous (A row-major)
// (sgemm_3xtf32_skinny_instances.cuh).
#include "kernels/tf32x3/sgemm_3xtf32_skinny_instances.cuh"

namespace vecgemm {
namespace tf32x3_skinny {
template const void* skinny_entry<false, true>(int, bool, bool);
}  // namespace tf32x3_skinny
}  // namespace vecgemm
