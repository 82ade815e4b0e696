"""Is a difference in speed from ours to torch.matmul the clock the GPU held, or the work
done per clock?

Ours (auto) and torch.matmul (cuBLAS) run back to back for a few seconds each while
nvidia-smi samples the SM clock, power and temperature; the throughput over the clock
held gives FLOP per SM cycle, against the fp32 peak of 256 (128 FMA lanes). Needs a GPU
and nvidia-smi.

    python -m benchmarks.probes.clocks [--sizes 4096,8192] [--layout cr] [--seconds 3] [--rounds 2]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import torch

import torch_vecgemm  # noqa: F401  (registers torch.ops.vecgemm)
from benchmarks.common import make_operands

QUERY = "clocks.sm,power.draw,temperature.gpu"


def sample(fn, seconds):
    """Runs fn back to back for `seconds` while nvidia-smi samples every 50 ms; returns the
    calls per second and the median of each sampled quantity (the first half second dropped)."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < seconds:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
        calls += 4
    elapsed = time.perf_counter() - start
    smi.terminate()
    rows = [line.split(", ") for line in smi.communicate()[0].splitlines() if line.strip()]
    rows = rows[len(rows) // (2 * seconds):] if len(rows) > 4 else rows
    clock = statistics.median(float(r[0]) for r in rows)
    power = statistics.median(float(r[1]) for r in rows)
    temp = statistics.median(float(r[2]) for r in rows)
    return calls / elapsed, clock, power, temp


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--layout", default="cr")
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("size who | TFLOP/s | SM MHz | W | C | FLOP per SM cycle (peak 256)")
    for size in map(int, args.sizes.split(",")):
        A, B = make_operands(size, size, size, args.layout, "cuda")
        runs = {"ours": lambda: torch.ops.vecgemm.sgemm(A, B, None, 1.0, 0.0, "auto"), "cuBLAS": lambda: torch.matmul(A, B)}
        for _ in range(args.rounds):
            for who, fn in runs.items():
                fn()
                torch.cuda.synchronize()
                rate, clock, power, temp = sample(fn, args.seconds)
                tflops = 2.0 * size**3 * rate / 1e12
                per_cycle = tflops * 1e12 / (clock * 1e6 * sms)
                print(f"{size} {who:<6} | {tflops:5.1f} | {clock:6.0f} | {power:5.0f} | {temp:3.0f} | {per_cycle:6.1f}")


if __name__ == "__main__":
    main()
