#!/usr/bin/env bash
# Step 26's device run: the stream-K tail's main loop rewritten as well. From an unrewritten
# build: "base" is what setup.py makes (the plain and whole-wave t816 cr loops rewritten),
# each TAILS entry "name=tool args" is base with the tail's unchecked loop rewritten by those
# args. Each library: the exact-on-integers test (whole waves and tail pieces), then kernel
# times of one call (stream_k_cost.py: the tail kernel apart) and the benchmark's auto at
# SIZES in cr and rr, base first and last for the drift.
#   LOGDIR=out TAILS="walk24=--order walk24;cw0=--conflict-weight 0" bash benchmarks/experiments/sass_loop/tail.sh
set -u
LOGDIR=${LOGDIR:-tail_out}; SODIR=${SODIR:-/tmp/sass_tail_so}; mkdir -p "$LOGDIR" "$SODIR"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
VECGEMM_SASS_REWRITE=0 python3 setup.py build_ext --inplace > "$LOGDIR/build.log" 2>&1 || { tail -30 "$LOGDIR/build.log"; exit 1; }
SO=$(ls torch_vecgemm/_C*.so)
cp "$SO" "$SODIR/orig.so"
TILED='sgemm_tiledINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16E.*LNS_6LayoutE1ELS3_0E'
TAIL='sgemm_stream_kINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16E.*LNS_6LayoutE1ELS3_0E'
python3 tools/sass_rewrite rewrite "$SODIR/orig.so" --function "$TILED" --order walk24 --out "$SODIR/base.so" > "$LOGDIR/patch_base.log" 2>&1
IFS=';' read -ra SPECS <<< "${TAILS:-walk24=--order walk24}"
NAMES=(base)
for spec in "${SPECS[@]}"; do
  name=${spec%%=*}; args=${spec#*=}
  if python3 tools/sass_rewrite rewrite "$SODIR/base.so" --function "$TAIL" $args --out "$SODIR/$name.so" > "$LOGDIR/patch_$name.log" 2>&1 \
      && grep -q "^1 loops rewritten" "$LOGDIR/patch_$name.log"; then
    NAMES+=("$name")
  else
    echo "=== $name: rewrite failed"; tail -3 "$LOGDIR/patch_$name.log"
  fi
done
for name in "${NAMES[@]}"; do
  cp "$SODIR/$name.so" "$SO"
  echo "=== $name" | tee -a "$LOGDIR/exact.log"
  timeout 120 python3 -m pytest -q -x tests/test_cuda_kernels.py -k "exact_on_integers or stream_k" 2>&1 | tail -3 | tee -a "$LOGDIR/exact.log"
done
for name in "${NAMES[@]}" base; do
  cp "$SODIR/$name.so" "$SO"
  echo "=== $name" | tee -a "$LOGDIR/time.log"
  timeout 60 python3 -m benchmarks.stream_k_cost --shapes "${SHAPES:-4096x4096x4096:cr}" --rounds 2 2>&1 | tee -a "$LOGDIR/time.log"
  timeout 120 python3 -m benchmarks.bench --suite square --sizes "${SIZES:-4096}" --layouts cr,rr --variants auto --no-tf32 2>/dev/null | grep "square" | tee -a "$LOGDIR/time.log"
done
cp "$SODIR/base.so" "$SO"
