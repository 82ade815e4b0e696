#!/bin/bash
# Builds the search's shards in parallel, as search_<i>, from the repository root.
# CUBLAS: the folder holding include/cublas_v2.h and lib/libcublas.so.13. Usage: build.sh SHARDS
set -e
D=benchmarks/experiments/codegen_search
SHARDS=${1:-16}
: "${CUBLAS:=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')}"
(cd $D && python3 variants.py "$SHARDS")
for ((s = 0; s < SHARDS; ++s)); do
  nvcc -Icsrc/cuda -Icsrc -I"$CUBLAS/include" -O3 -std=c++17 --expt-relaxed-constexpr \
      -gencode=arch=compute_90,code=sm_90 -Xptxas -v -DVARIANTS_INC="\"variants_$s.inc\"" \
      -o $D/search_$s $D/search.cu -L"$CUBLAS/lib" -l:libcublas.so.13 > $D/search_$s.ptxas 2>&1 &
done
wait
