#!/usr/bin/env bash
# Builds and runs the 3xTF32 probe (README.md). Run from anywhere; exits with the probe's status.
# Options are passed to the probe: --quick (correctness of the small cases only), --time (timing only).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OUT="${TF32X3_PROBE_BIN:-/tmp/tf32x3_probe}"
cd "$ROOT"
if [ ! -x "$OUT" ] || [ -n "$(find csrc/cuda/sgemm_3xtf32.* csrc/gemm_params.h csrc/cuda/async_tile.cuh \
      csrc/cuda/block_tile.cuh csrc/cuda/epilogue.cuh benchmarks/probes/tf32x3/probe.cu -newer "$OUT" 2>/dev/null)" ]; then
  echo "building $OUT"
  "$NVCC" -O3 -std=c++17 -arch=sm_90 -split-compile=0 -DVECGEMM_STANDALONE -Icsrc/cuda \
    benchmarks/probes/tf32x3/probe.cu csrc/cuda/sgemm_3xtf32.cu -lcublas -o "$OUT"
fi
"$OUT" "$@"
