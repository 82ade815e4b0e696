#!/usr/bin/env bash
# One GPU session: build in place, read the compiler's report and the SASS, run the full
# test suite, the benchmark, the probes named in PROBES, compute-sanitizer and the profiler,
# logging everything under LOGDIR (default ./gpu_out, ignored by git). Steps run in order of
# importance, each under its own time limit, so a slow step cannot eat the ones after it.
# With ARCHIVE=path.tgz the logs are re-archived after every step (for machines that hand
# back only a few files).
#   STEPS="build tests bench"  (default: all)   BENCH_ARGS="--variants all"
#   PROBES="copy_cost stream_k_cost"  (benchmarks/probes/README.md lists them)
#   STEPS="build tests records"  the records of record (benchmarks/records/README.md)
#   OTHER_ARCH_LIST=8.0  the arch step's build, which must leave this GPU's architecture out
set -u
LOGDIR=${LOGDIR:-gpu_out}
mkdir -p "$LOGDIR"
STEPS=${STEPS:-"build sass tests arch bench probes sanitize profile"}
BENCH_ARGS=${BENCH_ARGS-"--variants all --rep-ms 60"}  # set to "" for the defaults of bench.py
PROBES=${PROBES-"copy_cost"}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-"vectorized auto"}
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
status=0
step() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
run() {  # run NAME SECONDS CMD...: log to $LOGDIR/NAME.log, remember a failure
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date +%T))"
  timeout "$limit" "$@" >"$LOGDIR/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-15}" "$LOGDIR/$name.log"
  echo "=== $name rc=$rc"
  [ $rc -eq 0 ] || status=1
  [ -z "${ARCHIVE:-}" ] || tar czf "$ARCHIVE" --exclude='*.ncu-rep' -C "$LOGDIR" .
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$LOGDIR/gpu.txt"
if step build; then
  VECGEMM_PTXAS_VERBOSE=1 run build 400 python3 setup.py build_ext --inplace || exit 1
  grep -E "registers|spill" "$LOGDIR/build.log" | sort | uniq -c | sort -rn > "$LOGDIR/ptxas.txt"
fi
step sass && TAIL=60 run sass 60 python3 tools/sass_rewrite report
if step tests; then
  # The suite in six processes at once, about 2.5 minutes on an H100 (step 60) where three
  # took 5.5 and one more than 7: the groups are sized by their files' times, and the last
  # ignores the others' files, so no file is left out.
  groups=("tests/test_precision.py" "tests/test_kernels.py"
          "tests/test_planning.py tests/test_recorded_device.py tests/test_second_passes.py tests/test_tuning.py"
          "tests/test_integration.py tests/test_nn.py"
          "tests/test_op_contract.py tests/test_faults.py tests/test_switch.py")
  ignore=""; for g in "${groups[@]}"; do for f in $g; do ignore="$ignore --ignore=$f"; done; done
  groups+=("tests $ignore")
  pytest_args="-q --maxfail=30 --durations=8 -p no:cacheprovider -rfE"
  for i in "${!groups[@]}"; do
    TAIL=20 run tests_$((i + 1)) ${TESTS_LIMIT:-420} python3 -m pytest $pytest_args ${groups[$i]} &
  done
  for job in $(jobs -p); do wait "$job" || status=1; done
  [ -z "${ARCHIVE:-}" ] || tar czf "$ARCHIVE" --exclude='*.ncu-rep' -C "$LOGDIR" .  # the groups' logs, written at once
fi
if step arch; then  # a build that leaves this GPU's architecture out must fall back cleanly on it
  ARCH_DIR=${ARCH_DIR:-/tmp/vecgemm_other_arch}
  rm -rf "$ARCH_DIR" && mkdir -p "$ARCH_DIR" && cp -r setup.py pyproject.toml csrc torch_vecgemm tools tests "$ARCH_DIR"/
  rm -f "$ARCH_DIR"/torch_vecgemm/_C*.so "$ARCH_DIR"/torch_vecgemm/_build_info.json
  log=$(cd "$LOGDIR" && pwd)
  (cd "$ARCH_DIR" && LOGDIR=$log TORCH_CUDA_ARCH_LIST=${OTHER_ARCH_LIST:-8.0} run arch_build 400 python3 setup.py build_ext --inplace &&
   cd "$ARCH_DIR" && LOGDIR=$log VECGEMM_EXPECT_NO_KERNEL=1 TAIL=20 run arch_tests 300 python3 -m pytest -q -p no:cacheprovider tests/test_faults.py -k "no_kernel or runs_on_this_gpu" -rs) || status=1
fi
step bench && TAIL=120 run bench ${BENCH_LIMIT:-400} python3 -m benchmarks.bench $BENCH_ARGS --out "$LOGDIR/bench"
if step records; then  # not in the default STEPS: rewrites benchmarks/records/<gpu>/ and README.md, copied to LOGDIR;
  # the GEMM benchmark and the training one (3.5 min on the H200), RECORDS_ARGS="--only train" for one
  TAIL=60 run records ${RECORDS_LIMIT:-900} python3 -m benchmarks.records ${RECORDS_ARGS:-} && cp -r benchmarks/records README.md "$LOGDIR/"
fi
if step probes; then
  for p in $PROBES; do run "probe_$p" ${PROBE_LIMIT:-180} python3 -m "benchmarks.probes.$p"; done
fi
if step sanitize; then
  run memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m benchmarks.sanitize_sample
  run racecheck 420 compute-sanitizer --tool racecheck --error-exitcode 1 python3 -m benchmarks.sanitize_sample
fi
if step profile; then
  cublas=""  # cuBLAS's kernel is profiled once, beside the first variant
  for v in $PROFILE_VARIANTS; do
    run "profile_$v" 180 python3 -m benchmarks.profile --variant "$v" --size 4096 $cublas --out "$LOGDIR/profile_$v"
    cublas="--no-cublas"
  done
fi
exit $status
