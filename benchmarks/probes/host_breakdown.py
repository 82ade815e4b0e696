"""Where does a call's host time go, path by path: planning, allocation, each CUDA runtime
call, against the torch function it replaces?

For each path of the host record (`benchmarks.host_overhead`), `calls` calls of ours and of
torch's are queued behind a sleeping device, as the record times them, once bare (wall
clock per call) and once under torch.profiler, which lists every CUDA runtime call each
makes (launches, attribute sets, queries) with its count and host time per call; `tv.plan`
alone is timed beside them (the Python plan object included: an upper bound on planning,
which a repeated shape reads from the plan cache). The runtime calls' durations are
inflated by the profiler's own tracing, so every bare timing comes first; their counts are
exact, and their differences between ours and torch's are what the record's extra
microseconds are made of. Needs a GPU.

    python -m benchmarks.probes.host_breakdown [--paths REGEX] [--calls 100] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys

import torch

import torch_vecgemm as tv
from benchmarks.common import machine_info
from benchmarks.host_overhead import SLEEP_CYCLES_PER_CALL, paths, per_call_us, run


def tally(events, calls, sleeps=1):
    """{CUDA runtime call: (calls per call of fn, host us per call of fn)}, most time first,
    from (name, host us) of the CPU events of `calls` calls of fn queued behind `sleeps`
    launches of the device's sleep (the first launches, in the events' order); the
    synchronisations (outside fn) are left out."""
    counts, times = collections.Counter(), collections.Counter()
    for name, us in events:
        if name == "cudaLaunchKernel" and sleeps > 0:
            sleeps -= 1
        elif name.startswith("cu") and "Synchronize" not in name:
            counts[name] += 1
            times[name] += us
    return {name: (counts[name] / calls, times[name] / calls) for name in sorted(counts, key=lambda n: -times[n])}


def runtime_calls(fn, calls):
    """tally() of `calls` calls of fn under the profiler, the device asleep as in per_call_us."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(SLEEP_CYCLES_PER_CALL * calls)
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    cpu = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU),
                 key=lambda e: e.time_range.start)
    return tally(((e.name, e.time_range.elapsed_us()) for e in cpu), calls)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.probes.host_breakdown", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", default=".", help="regex on the host record's path names")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", help="write the answer as JSON")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("host time is measured beside a GPU and there is none here")

    def selected(name, switch):
        return not switch and re.search(args.paths, name) is not None

    # Every bare timing before the first profile: once the profiler has run, its tracing
    # stays subscribed and slows every later launch (seen: 22.9 -> 47.4 us a call).
    rows = run(args.calls, args.repeats, select=selected)["records"]
    for row in rows:
        m, n, k = (int(x) for x in row["shape"].split("x")[-3:])
        A, B = torch.empty(m, k, device="cuda"), torch.empty(k, n, device="cuda")
        row["plan_us"] = statistics.median(per_call_us(lambda: tv.plan(A, B), args.calls) for _ in range(args.repeats))
    generator = torch.Generator(device="cuda").manual_seed(0)
    chosen = [p for p in paths(generator) if selected(p[0], p[5])]
    for row, (name, shape, theirs, ours, plan, _) in zip(rows, chosen):
        for side, fn in (("torch", theirs), ("ours", ours)):
            row[side + "_runtime"] = runtime_calls(fn, args.calls)
        print(f"\n{name} {shape}: torch {row['torch_us']:.1f} us, ours {row['ours_us']:.1f} us "
              f"(tv.plan alone {row['plan_us']:.1f}); plan: {plan}")
        for side in ("torch", "ours"):
            for call, (count, us) in row[side + "_runtime"].items():
                print(f"  {side:5s} {call:40s} {count:5.2f} a call  {us:7.2f} us")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(machine=machine_info(), rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
