#!/usr/bin/env bash
# Device run of step 24: build, rewrite the t816 cr main loops (tools/sass_rewrite),
# check the rewritten build on large problems and the t816 tests, time it against the
# unmodified build alternating the two libraries (A B A B) in separate processes, and
# profile both at 4096 cr.
#   LOGDIR=out SIZES=2048,4096,8192 bash benchmarks/experiments/sass_loop/run.sh
set -u
LOGDIR=${LOGDIR:-sass_loop_out}; mkdir -p "$LOGDIR"
SIZES=${SIZES:-2048,4096,8192}
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
ls torch_vecgemm/_C*.so >/dev/null 2>&1 || python3 setup.py build_ext --inplace > "$LOGDIR/build.log" 2>&1 || { tail -30 "$LOGDIR/build.log"; exit 1; }
SO=$(ls torch_vecgemm/_C*.so)
[ -f "$LOGDIR/orig.so" ] || cp "$SO" "$LOGDIR/orig.so"
python3 tools/sass_rewrite rewrite "$LOGDIR/orig.so" --out "$LOGDIR/patched.so" ${PATCH_ARGS:-} 2>&1 | cut -c1-400 | tee "$LOGDIR/patch.log"
[ -f "$LOGDIR/patched.so" ] || exit 1
use() { cp "$LOGDIR/$1.so" "$SO"; }
use patched
timeout 120 python3 benchmarks/experiments/sass_loop/check.py 2>&1 | tee "$LOGDIR/check.log"
timeout 180 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_kernels.py -k "t816 or stream_k or split_k or graph or auto" 2>&1 | tail -8 | tee "$LOGDIR/tests.log"
for round in 1 2; do
  for lib in orig patched; do
    use $lib
    echo "=== $lib round $round" | tee -a "$LOGDIR/bench.log"
    timeout 150 python3 -m benchmarks.bench --suite square --sizes "$SIZES" --layouts rr,cr --variants auto --no-tf32 --rep-ms ${REP_MS:-60} 2>/dev/null | grep -v "^#\|^---\|^problem" | tee -a "$LOGDIR/bench.log"
  done
done
if [ "${PROFILE:-1}" = 1 ]; then
  for lib in orig patched; do
    use $lib
    timeout 150 python3 -m benchmarks.profile --variant auto --layout cr --size 4096 --no-cublas --out "$LOGDIR/profile_$lib" > "$LOGDIR/profile_$lib.log" 2>&1
    python3 -c "import json,sys; d=json.load(open('$LOGDIR/profile_$lib.json'))['vecgemm']; print('$lib', d['duration_us'], d['issue_slots_busy_pct'], d['top_stalls_cycles_per_issue'], d['instructions_issued'])" 2>&1 | tee -a "$LOGDIR/profile.log"
  done
fi
use orig
