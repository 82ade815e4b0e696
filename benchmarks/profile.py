"""Profile one variant (and cuBLAS) on one shape with Nsight Compute and extract the
figures that matter: warp cycles per issued instruction, the top stall reasons, shared-
memory bank conflicts, achieved occupancy, registers, instructions issued.

    python -m benchmarks.profile --variant auto --size 4096 --out /tmp/h200_profile

Needs `ncu` on PATH and a GPU. Clocks are left as they are (--clock-control none).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys

SECTIONS = ["SpeedOfLight", "WarpStateStats", "Occupancy", "LaunchStats", "InstructionStats", "SchedulerStats", "ComputeWorkloadAnalysis"]
EXTRA_METRICS = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_issued.sum",
    "smsp__inst_executed_pipe_fma.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "gpu__time_duration.sum",
]
WARMUP_CALLS = 2


def child(args):
    """The profiled program: warm-up calls, then the one call ncu records."""
    import torch

    import torch_vecgemm  # noqa: F401
    from benchmarks.common import make_operands

    A, B = make_operands(args.m, args.n, args.k, args.layout, "cuda")
    if args.target == "cublas":
        fn = lambda: torch.matmul(A, B)
    else:
        fn = lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, args.variant)
    for _ in range(WARMUP_CALLS + 1):
        fn()
    torch.cuda.synchronize()


def run_ncu(args, target, rep_path):
    cmd = [
        "ncu", "--clock-control", "none", "--target-processes", "all",
        "--kernel-name", "regex:gemm", "--launch-skip", str(WARMUP_CALLS), "--launch-count", "1",
        *sum((["--section", s] for s in SECTIONS), []),
        "--metrics", ",".join(EXTRA_METRICS), "-f", "-o", rep_path,
        sys.executable, "-m", "benchmarks.profile", "--child", "--target", target, "--variant", args.variant,
        "--m", str(args.m), "--n", str(args.n), "--k", str(args.k), "--layout", args.layout,
    ]
    subprocess.run(cmd, check=True)
    pages = {}
    for page in ("details", "raw"):
        out = subprocess.run(["ncu", "--import", rep_path + ".ncu-rep", "--page", page, "--csv"], check=True, capture_output=True, text=True).stdout
        pages[page] = out
    return pages


def _num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def extract(pages):
    details = list(csv.DictReader(io.StringIO(pages["details"])))
    raw_rows = list(csv.reader(io.StringIO(pages["raw"])))
    raw = dict(zip(raw_rows[0], raw_rows[2])) if len(raw_rows) > 2 else {}
    units = dict(zip(raw_rows[0], raw_rows[1])) if len(raw_rows) > 1 else {}
    to_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
    by_name = {r.get("Metric Name"): r.get("Metric Value") for r in details}
    stalls = {
        m.group(1): _num(v)
        for k, v in raw.items()
        if (m := re.fullmatch(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio", k)) and _num(v)
    }
    top = sorted(stalls.items(), key=lambda kv: -kv[1])[:6]
    return {
        "kernel": raw.get("Kernel Name"),
        "duration_us": (_num(raw.get("gpu__time_duration.sum")) or 0) * to_us.get(units.get("gpu__time_duration.sum"), float("nan")),
        "duration_raw": f'{raw.get("gpu__time_duration.sum")} {units.get("gpu__time_duration.sum")}',
        "warp_cycles_per_issued_instruction": _num(by_name.get("Warp Cycles Per Issued Instruction")),
        "top_stalls_cycles_per_issue": dict(top),
        "issue_slots_busy_pct": _num(by_name.get("Issue Slots Busy")),
        "executed_ipc_active": _num(by_name.get("Executed Ipc Active")),
        "smem_load_bank_conflicts": _num(raw.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")),
        "smem_store_bank_conflicts": _num(raw.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")),
        "smem_load_wavefronts": _num(raw.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")),
        "smem_store_wavefronts": _num(raw.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")),
        "achieved_occupancy_pct": _num(raw.get("sm__warps_active.avg.pct_of_peak_sustained_active")),
        "registers_per_thread": _num(raw.get("launch__registers_per_thread")),
        "instructions_issued": _num(raw.get("smsp__inst_issued.sum")),
        "fma_pipe_instructions": _num(raw.get("smsp__inst_executed_pipe_fma.sum")),
        "sm_throughput_pct": _num(by_name.get("Compute (SM) Throughput")),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="auto")
    ap.add_argument("--size", type=int, default=4096, help="M = N = K unless --m/--n/--k are given")
    ap.add_argument("--m", type=int)
    ap.add_argument("--n", type=int)
    ap.add_argument("--k", type=int)
    ap.add_argument("--layout", default="rr")
    ap.add_argument("--no-cublas", action="store_true", help="profile only our kernel")
    ap.add_argument("--out", default="profile", help="writes OUT.json and OUT_<target>.ncu-rep")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--target", default="vecgemm", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.m, args.n, args.k = args.m or args.size, args.n or args.size, args.k or args.size
    if args.child:
        return child(args)
    if shutil.which("ncu") is None:
        print("ncu (Nsight Compute) is not on PATH", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    results = {"shape": [args.m, args.n, args.k], "layout": args.layout, "variant": args.variant}
    for target in ["vecgemm"] + ([] if args.no_cublas else ["cublas"]):
        results[target] = extract(run_ncu(args, target, f"{args.out}_{target}"))
    with open(args.out + ".json", "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
