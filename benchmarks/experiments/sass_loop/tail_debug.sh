#!/usr/bin/env bash
# Step 26: where the rewritten tail loop faults. memcheck on the failing stream-K test with
# the tail rewritten (walk24), and the exact-on-integers tests at 4096 (interior tiles only).
set -u
LOGDIR=${LOGDIR:-tail_dbg}; SODIR=/tmp/sass_tail_so; mkdir -p "$LOGDIR" "$SODIR"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
VECGEMM_SASS_REWRITE=0 python3 setup.py build_ext --inplace > "$LOGDIR/build.log" 2>&1 || { tail -30 "$LOGDIR/build.log"; exit 1; }
SO=$(ls torch_vecgemm/_C*.so)
cp "$SO" "$SODIR/orig.so"
TAIL='sgemm_stream_kINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16E.*LNS_6LayoutE1ELS3_0E'
python3 tools/sass_rewrite rewrite "$SODIR/orig.so" --function "$TAIL" --order walk24 --out "$SODIR/tail.so" > "$LOGDIR/patch.log" 2>&1
cp "$SODIR/tail.so" "$SO"
timeout 120 python3 -m pytest -q tests/test_cuda_kernels.py -k "exact_on_integers" 2>&1 | tail -8 > "$LOGDIR/exact.log"
timeout 200 compute-sanitizer --tool memcheck --print-limit 4 python3 -m pytest -x -q tests/test_cuda_kernels.py -k "test_stream_k_tail and 3000-3000-520-cr" > "$LOGDIR/memcheck.log" 2>&1
cp "$SODIR/orig.so" "$SO"
