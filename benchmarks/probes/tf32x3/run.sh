#!/usr/bin/env bash
# Builds and runs the 3xTF32 probe (README.md). Run from anywhere; exits with the probe's status.
# Options are passed to the probe: --quick (correctness of the small cases only), --time (timing only).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUT="${TF32X3_PROBE_BIN:-/tmp/tf32x3_probe}"
cd "$ROOT"
# sm_90a: the wgmma kernel exists only in the arch-specific target (the mma.sync one runs on it
# too). TF32X3_NVCC_FLAGS: extra flags, e.g. cuBLAS from the pip wheel where the toolkit has
# none: "-I$N/include -L$N/lib -l:libcublas.so.13" with N the wheel's nvidia/cu13 directory.
if [ ! -x "$OUT" ] || [ -n "$(find csrc/kernels/tf32x3/sgemm_3xtf32*.* csrc/kernels/gemm_params.h csrc/kernels/simt/async_tile.cuh \
      csrc/kernels/simt/block_tile.cuh csrc/kernels/epilogue.cuh csrc/kernels/dependent_launch.cuh csrc/kernels/host_error.h \
      benchmarks/probes/tf32x3/probe.cu -newer "$OUT" 2>/dev/null)" ]; then
  echo "building $OUT"
  LINK_CUBLAS=-lcublas
  case "${TF32X3_NVCC_FLAGS:-}" in *cublas*) LINK_CUBLAS= ;; esac  # the flags name their own
  # shellcheck disable=SC2086
  "$NVCC" -O3 -std=c++17 -arch=sm_90a -split-compile=0 -DVECGEMM_STANDALONE -Icsrc ${TF32X3_NVCC_FLAGS:-} \
    benchmarks/probes/tf32x3/probe.cu csrc/kernels/tf32x3/sgemm_3xtf32*.cu $LINK_CUBLAS -o "$OUT"
fi
"$OUT" "$@"
