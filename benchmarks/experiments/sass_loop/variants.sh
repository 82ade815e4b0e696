#!/usr/bin/env bash
# Step 24's second device run: the rewritten loop under several FFMA orders and reuse
# settings, each timed at 4096 cr against the unmodified build in the same round and
# profiled (stall reasons per issued instruction).
#   LOGDIR=out bash benchmarks/experiments/sass_loop/variants.sh
set -u
LOGDIR=${LOGDIR:-sass_loop_out}; mkdir -p "$LOGDIR"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
ls torch_vecgemm/_C*.so >/dev/null 2>&1 || python3 setup.py build_ext --inplace > "$LOGDIR/build.log" 2>&1 || exit 1
SO=$(ls torch_vecgemm/_C*.so)
[ -f "$LOGDIR/orig.so" ] || cp "$SO" "$LOGDIR/orig.so"
declare -A ARGS=([model]="" [ptxas]="--order ptxas" [slot]="--cache slot" [noreuse]="--no-reuse"
  [cw0]="--conflict-weight 0" [rows]="--order rows" [cols]="--order cols" [walk42]="--order walk42" [walk24]="--order walk24"
  [cw0b32]="--conflict-weight 0 --beam 32")
for v in ${VARIANTS:-model ptxas slot noreuse}; do
  python3 tools/sass_rewrite rewrite "$LOGDIR/orig.so" --out "$LOGDIR/$v.so" --beam 8 ${ARGS[$v]} 2>&1 | tail -2 | cut -c150-400 | tee -a "$LOGDIR/patch.log"
done
for v in orig ${VARIANTS:-model ptxas slot noreuse} orig; do
  cp "$LOGDIR/$v.so" "$SO"
  echo "=== $v" | tee -a "$LOGDIR/bench.log"  # orig twice: before and after, for the drift
  timeout 60 python3 -m benchmarks.bench --suite square --sizes 4096 --layouts cr --variants auto --no-tf32 --rep-ms 80 2>/dev/null | grep "square" | tee -a "$LOGDIR/bench.log"
  [ "${PROFILE:-1}" = 1 ] || continue
  timeout 100 python3 -m benchmarks.profile --variant auto --layout cr --size 4096 --no-cublas --out "$LOGDIR/profile_$v" > "$LOGDIR/profile_$v.log" 2>&1
  python3 -c "import json; d=json.load(open('$LOGDIR/profile_$v.json'))['vecgemm']; print('$v', d['duration_us'], d['issue_slots_busy_pct'], d['top_stalls_cycles_per_issue'])" 2>&1 | tee -a "$LOGDIR/profile.log"
done
cp "$LOGDIR/orig.so" "$SO"
