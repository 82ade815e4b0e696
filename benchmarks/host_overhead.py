"""Host time per call: what eager code pays the CPU for each call, torch_vecgemm against the
torch function it replaces, path by path.

    python -m benchmarks.host_overhead                  # ~30 s on an H200
    python -m benchmarks.host_overhead --out /tmp/host  # /tmp/host.json, /tmp/host.png

A call's host time is the CPU's wall time for `calls` calls queued back to back with no
synchronisation among them, divided by `calls`. The device is put to sleep first (a spin
kernel longer than all the timed calls' kernels together) and synchronised after, outside
the timing: the kernels queue up behind the sleep, so the figure is the launch path alone
(argument checks, planning, allocation, the launches), never the kernels' own time. Ours and torch's are timed alternately, `repeats` times, and the
median is kept. The paths: a 2-D product, a batch, `linear` with a bias, the gemv path (one
row against a weight read as W.T), the split-K and stream-K tiling paths (shapes found by
asking the planner), each as the wrapper and as the strict op, and forward passes with
inputs that require grad. One row times the whole-program switch instead: torch.mm routed
to the library (torch_vecgemm.enable) against the library's own function, both with the
switch on.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import torch_vecgemm as tv
from benchmarks import report
from benchmarks.common import figure, machine_info, save_figure, write_record

ops = torch.ops.vecgemm


# Cycles of the GPU's sleep per call timed: longer than any timed call's kernels, so the
# device is still asleep when the last launch is queued.
SLEEP_CYCLES_PER_CALL = 200_000


def per_call_us(fn, calls):
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES_PER_CALL * calls)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def no_grad(fn):
    def call():
        with torch.no_grad():
            return fn()

    return call


def first_with(predicate, shapes):
    """The first (m, n, k) whose row-major product's plan satisfies the predicate."""
    for m, n, k in shapes:
        if predicate(tv.plan(torch.empty(m, k, device="cuda"), torch.empty(k, n, device="cuda"))):
            return m, n, k
    return None


def paths(generator):
    """(name, shape text, torch's callable, ours, the plan of ours) for each path measured."""
    rand = lambda *s: torch.randn(*s, device="cuda", generator=generator)
    out = []

    def add(name, shape, theirs, ours, A=None, B=None, switch=None):
        plan = str(tv.plan(A, B)) if A is not None else None
        out.append((name, shape, theirs, ours, plan, switch))

    a, b = rand(64, 64), rand(64, 64)
    add("2-D, wrapper", "64x64x64", lambda: torch.mm(a, b), lambda: tv.mm(a, b), a, b)
    add("2-D, strict op", "64x64x64", lambda: torch.mm(a, b), lambda: ops.sgemm(a, b), a, b)
    c = rand(64, 64)
    add("2-D with C, wrapper", "64x64x64", lambda: torch.addmm(c, a, b), lambda: tv.sgemm(a, b, c), a, b)
    x3, w3 = rand(4, 64, 64), rand(4, 64, 64)
    add("3-D, wrapper", "4x64x64x64", lambda: torch.bmm(x3, w3), lambda: tv.bmm(x3, w3), x3, w3)
    add("3-D, strict op", "4x64x64x64", lambda: torch.bmm(x3, w3), lambda: ops.sgemm(x3, w3), x3, w3)
    x, w, bias = rand(64, 256), rand(128, 256), rand(128)
    add("linear + bias, wrapper", "64x128x256", lambda: F.linear(x, w, bias), lambda: tv.linear(x, w, bias), x, w.t())
    xs = rand(2, 32, 256)
    add("linear 3-D input, wrapper", "2x32x128x256", lambda: F.linear(xs, w, bias), lambda: tv.linear(xs, w, bias), xs.reshape(64, 256), w.t())
    torch_layer = torch.nn.Linear(256, 128, device="cuda")
    our_layer = tv.nn.Linear(256, 128, device="cuda")
    add("nn.Linear module, no_grad", "64x128x256", no_grad(lambda: torch_layer(x)), no_grad(lambda: our_layer(x)), x, w.t())
    v, W = rand(1, 4096), rand(4096, 4096)
    add("gemv (x @ W.T), wrapper", "1x4096x4096", lambda: torch.mm(v, W.t()), lambda: tv.mm(v, W.t()), v, W.t())
    add("gemv (x @ W.T), strict op", "1x4096x4096", lambda: torch.mm(v, W.t()), lambda: ops.sgemm(v, W.t()), v, W.t())
    split = first_with(lambda p: p.split_k > 1, [(8, 4096, 4096), (64, 64, 8192), (32, 256, 16384)])
    if split:
        m, n, k = split
        sa, sb = rand(m, k), rand(k, n)
        add("split-K, wrapper", f"{m}x{n}x{k}", lambda: torch.mm(sa, sb), lambda: tv.mm(sa, sb), sa, sb)
        add("split-K, strict op", f"{m}x{n}x{k}", lambda: torch.mm(sa, sb), lambda: ops.sgemm(sa, sb), sa, sb)
    # The benchmark of record's squares from 3072 up run a stream-K tail on the H200.
    stream = first_with(lambda p: p.stream_k, [(s, s, s) for s in (3072, 4096, 2560, 6144)])
    if stream:
        m, n, k = stream
        ta, tb = rand(m, k), rand(k, n)
        add("stream-K, wrapper", f"{m}x{n}x{k}", lambda: torch.mm(ta, tb), lambda: tv.mm(ta, tb), ta, tb)
        add("stream-K, strict op", f"{m}x{n}x{k}", lambda: torch.mm(ta, tb), lambda: ops.sgemm(ta, tb), ta, tb)
    # A product the device profile's rule hands to torch.matmul: our wrapper's decision, then
    # torch's own call (the sweep's mid-size problems on the H200).
    handed = first_with(lambda p: p.family == "torch", [(1523, 1290, 24), (2400, 262, 26), (1000, 1000, 256)])
    if handed:
        m, n, k = handed
        ha, hb = rand(m, k), rand(k, n)
        add("handed to torch, wrapper", f"{m}x{n}x{k}", lambda: torch.mm(ha, hb), lambda: tv.mm(ha, hb), ha, hb)
    ga, gb = rand(64, 64).requires_grad_(), rand(64, 64).requires_grad_()
    add("2-D, inputs require grad, wrapper", "64x64x64", lambda: torch.mm(ga, gb), lambda: tv.mm(ga, gb), a, b)
    add("2-D, inputs require grad, strict op", "64x64x64", lambda: torch.mm(ga, gb), lambda: ops.sgemm(ga, gb), a, b)
    gx = rand(64, 256).requires_grad_()
    add("nn.Linear module, training", "64x128x256", lambda: torch_layer(gx), lambda: our_layer(gx), x, w.t())
    # The whole-program switch: torch.mm routed to the library, against the library's own
    # function (both sides measured with the switch on, in IEEE: the same kernel).
    add("torch.mm under the switch, against tv.mm", "64x64x64", lambda: tv.mm(a, b, precision="ieee"),
        lambda: torch.mm(a, b), a, b, switch="ieee")
    return out


def run(calls=100, repeats=15, select=None):
    """The record: each path's host time per call, ours and torch's; select(name, switch),
    where given, picks the paths timed."""
    if not torch.cuda.is_available():
        raise SystemExit("host time per call is measured beside a GPU and there is none here")
    generator = torch.Generator(device="cuda").manual_seed(0)
    records = []
    for name, shape, theirs, ours, plan, switch in paths(generator):
        if select is not None and not select(name, switch):
            continue
        with tv.enable(switch) if switch else contextlib.nullcontext():
            for fn in (theirs, ours):  # warm-up: plans, caches, the allocator's blocks
                for _ in range(20):
                    fn()
            torch_us, ours_us = [], []
            for _ in range(repeats):
                torch_us.append(per_call_us(theirs, calls))
                ours_us.append(per_call_us(ours, calls))
        t, o = statistics.median(torch_us), statistics.median(ours_us)
        records.append(dict(path=name, shape=shape, plan=plan, torch_us=t, ours_us=o, extra_us=o - t))
    return dict(machine=machine_info(), settings=dict(calls=calls, repeats=repeats), records=records)


def markdown(data, title=True):
    lines = []
    if title:
        m = data["machine"]
        lines += [f"# Host time per call, {m.get('gpu')}", "", report.stamp(m), "",
                  f"Median of {data['settings']['repeats']} runs of {data['settings']['calls']} calls queued back to back.", ""]
    lines += ["| path | problem | plan | torch us | torch_vecgemm us | extra us |", "|---|---|---|---:|---:|---:|"]
    for r in data["records"]:
        lines.append(f"| {r['path']} | {r['shape']} | {r['plan'] or ''} | {r['torch_us']:.1f} | {r['ours_us']:.1f} | {r['extra_us']:+.1f} |")
    return "\n".join(lines) + "\n"


def plot(data, path):
    records, m = data["records"], data["machine"]
    fig, ax = figure(figsize=(9, 0.45 * len(records) + 1.5))
    rows = range(len(records))
    ax.barh([y + 0.2 for y in rows], [r["torch_us"] for r in records], height=0.4, label="torch")
    ax.barh([y - 0.2 for y in rows], [r["ours_us"] for r in records], height=0.4, label="torch_vecgemm")
    ax.set_yticks(list(rows), [f"{r['path']} ({r['shape']})" for r in records], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("host time per call, us")
    ax.set_title("Host time per call", fontsize=10)
    ax.legend()
    save_figure(fig, path, m)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.host_overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", help="write OUT.json and OUT.png")
    args = ap.parse_args(argv)
    data = run(args.calls, args.repeats)
    print(markdown(data))
    if args.out:
        print("wrote " + ", ".join(write_record(data, args.out, plot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
