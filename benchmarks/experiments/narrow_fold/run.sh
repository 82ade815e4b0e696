#!/usr/bin/env bash
# Step 69's device run (the device tool; writes under $OUT). Run from the repository root.
set -u
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
NV=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0] if hasattr(nvidia, '__path__') else nvidia.__file__))" 2>/dev/null)
CUB=""; for d in /usr/local/cuda/include $(ls -d $NV/nvidia/cu13 $NV/nvidia/cublas 2>/dev/null); do [ -f $d/cublas_v2.h ] && CUB="-I$d" && break; [ -f $d/include/cublas_v2.h ] && CUB="-I$d/include -L$d/lib -Xlinker -rpath=$d/lib" && break; done
echo "cublas flags: $CUB" > $OUT/ab_build.log
(for N in 0 2 4; do nvcc -std=c++20 -O3 -Icsrc $CUB -gencode=arch=compute_90a,code=sm_90a -DVECGEMM_NARROW_PREFETCH_CHUNKS=$N benchmarks/experiments/narrow_fold/narrow_ab.cu -o /tmp/ab$N -lcublas || nvcc -std=c++20 -O3 -Icsrc $CUB -gencode=arch=compute_90a,code=sm_90a -DVECGEMM_NARROW_PREFETCH_CHUNKS=$N benchmarks/experiments/narrow_fold/narrow_ab.cu -o /tmp/ab$N -l:libcublas.so.13 & done; wait) >> $OUT/ab_build.log 2>&1 &
LOGDIR=/tmp/gl ARCHIVE=$OUT/gl.tgz STEPS="build" bash benchmarks/gpu_session.sh > $OUT/session.log 2>&1
wait
for r in 1 2; do for N in 0 2 4; do /tmp/ab$N; done; done > $OUT/ab.txt 2>&1
echo "ab done $(date +%T)" >> $OUT/session.log
PYTHONPATH=. timeout 120 python3 benchmarks/experiments/narrow_fold/fold_ab.py $OUT/fold_ab.json > $OUT/fold_ab.log 2>&1
echo "fold done $(date +%T)" >> $OUT/session.log
LOGDIR=/tmp/gl ARCHIVE=$OUT/gl.tgz STEPS="tests" TESTS_LIMIT=200 bash benchmarks/gpu_session.sh >> $OUT/session.log 2>&1
PYTHONPATH=. timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest -q -x -p no:cacheprovider tests/test_precision.py -k "split_added_in_kernel" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?" >> $OUT/session.log
tail -5 $OUT/memcheck.log >> $OUT/session.log
