#!/bin/bash
# Builds knob_bench once per set of ptxas options, as knob_bench_<tag>, from the repository
# root. CUBLAS: the folder holding include/cublas_v2.h and lib/libcublas.so.13 (the nvidia
# wheels torch installs). Usage: build.sh TAG "PTXAS OPTIONS" [TAG "OPTIONS"]...
set -e
D=benchmarks/experiments/ptxas_knobs
: "${CUBLAS:=$(python3 -c 'import nvidia.cu13, os; print(os.path.dirname(nvidia.cu13.__file__))' 2>/dev/null \
    || python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')}"
while [ $# -ge 2 ]; do
  tag=$1; opts=$2; shift 2
  x=""; for o in $opts; do x="$x -Xptxas $o"; done
  nvcc -Icsrc/cuda -Icsrc -I"$CUBLAS/include" -O3 -std=c++17 --expt-relaxed-constexpr \
      -gencode=arch=compute_90,code=sm_90 -Xptxas -v $x -o $D/knob_bench_$tag $D/knob_bench.cu \
      -L"$CUBLAS/lib" -l:libcublas.so.13 > $D/knob_bench_$tag.ptxas 2>&1 &
done
wait
