// The 128x64 tiling's instances of the mma.sync 3xTF32 kernel (sgemm_3xtf32_instances.cuh).
#include "kernels/tf32x3/sgemm_3xtf32_instances.cuh"

namespace vecgemm {
namespace tf32x3 {
template const void* tf32x3_entry<Shape128x64>(Layout, Layout, bool);
}  // namespace tf32x3
}  // namespace vecgemm
