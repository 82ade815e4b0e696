// The compiled instances of the tiled kernels, by kernel config, storage orders and load
// width; the generated translation units of sgemm_tiled_instances.cuh fill it at load time.
#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"

namespace vecgemm {
namespace {

TiledKernel (&kernel_table())[kNumKernelConfigs][2][2][2] {
  static TiledKernel table[kNumKernelConfigs][2][2][2] = {};
  return table;
}

}  // namespace

void register_tiled_kernel(int config, Layout la, Layout lb, bool vec4, TiledKernel kernel) {
  kernel_table()[config][int(la)][int(lb)][vec4] = kernel;
}

TiledKernel tiled_kernel(int config, Layout la, Layout lb, bool vec4) {
  return kernel_table()[config][int(la)][int(lb)][vec4];
}

}  // namespace vecgemm
