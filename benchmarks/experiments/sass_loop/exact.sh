#!/usr/bin/env bash
# Step 25's device run: exact.py (which operand a rewritten loop gets wrong; with
# OUTPUTS=1 also outputs.py, the raw results saved for decoding offline) on the unmodified
# build and on rewritten copies, one per VARIANTS entry "name=tool args", separated by ';'
# ("orig=" is the unmodified build).
#   LOGDIR=out VARIANTS="orig=;rows=--order rows" bash benchmarks/experiments/sass_loop/exact.sh
set -u
LOGDIR=${LOGDIR:-exact_out}; SODIR=${SODIR:-/tmp/sass_loop_so}; mkdir -p "$LOGDIR" "$SODIR"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
ls torch_vecgemm/_C*.so >/dev/null 2>&1 || python3 setup.py build_ext --inplace > "$LOGDIR/build.log" 2>&1 || { tail -30 "$LOGDIR/build.log"; exit 1; }
SO=$(ls torch_vecgemm/_C*.so)
[ -f "$SODIR/orig.so" ] || cp "$SO" "$SODIR/orig.so"
IFS=';' read -ra SPECS <<< "${VARIANTS:-orig=}"
for spec in "${SPECS[@]}"; do
  name=${spec%%=*}; args=${spec#*=}
  if [ -n "$args" ]; then
    python3 tools/sass_rewrite rewrite "$SODIR/orig.so" --out "$SODIR/$name.so" $args > "$LOGDIR/patch_$name.log" 2>&1 \
      || { echo "=== $name: rewrite failed" | tee -a "$LOGDIR/exact.log"; tail -3 "$LOGDIR/patch_$name.log"; continue; }
    cp "$SODIR/$name.so" "$SO"
  else
    cp "$SODIR/orig.so" "$SO"
  fi
  echo "=== $name ($args)" | tee -a "$LOGDIR/exact.log"
  timeout 60 python3 benchmarks/experiments/sass_loop/exact.py 2>&1 | tee -a "$LOGDIR/exact.log"
  [ "${OUTPUTS:-0}" = 1 ] && timeout 60 python3 benchmarks/experiments/sass_loop/outputs.py "$LOGDIR/outputs_$name.pt"
done
cp "$SODIR/orig.so" "$SO"
