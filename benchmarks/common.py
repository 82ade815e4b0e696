"""Pieces shared by the benchmark, the probes and the profiler: operands, timing, and the
stamp of a run (machine, software, commit, build)."""
from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import platform
import re
import subprocess
import time

import torch

FP32_LANES_PER_SM = 128  # Hopper, Ampere GA100: FP32 FMA lanes per SM
# The references' names in the records: cuBLAS in fp32 (every ratio is against it) and in TF32.
CUBLAS = "torch.matmul"
TF32 = "cuBLAS TF32 (tensor cores, other precision)"


def make_operands(m, n, k, layout, device, seed=0):
    """Fresh N(0, 1) operands; 'c' gives a column-major operand as a .t() view."""
    g = torch.Generator(device=device).manual_seed(seed)
    A = torch.randn(m, k, device=device, generator=g) if layout[0] == "r" else torch.randn(k, m, device=device, generator=g).t()
    B = torch.randn(k, n, device=device, generator=g) if layout[1] == "r" else torch.randn(n, k, device=device, generator=g).t()
    return A, B


def block_tile(name):
    """(BM, BN, BK) of a tiling, from its name ({tiled|async}_{BM}x{BN}x{BK}...)."""
    found = re.match(r"(?:tiled|async)_(\d+)x(\d+)x(\d+)", name)
    if found is None:
        raise ValueError(f"{name!r} is not a tiling's name")
    return tuple(int(x) for x in found.groups())


def whole_waves_grid(slots, waves):
    """(tiles in M, tiles in N) with exactly `waves` whole waves of `slots` blocks, the
    squarest such grid."""
    tiles = waves * slots
    tiles_m = max(d for d in range(1, math.isqrt(tiles) + 1) if tiles % d == 0)
    return tiles_m, tiles // tiles_m


def planned_tiling(A, B):
    """The tiling auto's plan for A @ B runs on (the first word of selected_kernel), or None
    where the plan is not a tiling (gemv, a fallback)."""
    import torch_vecgemm

    name = torch_vecgemm.selected_kernel(A, B).split(" ")[0].rstrip(",")
    return name if name.startswith(("tiled_", "async_")) else None


def kernels_of(fn, calls=3):
    """Device microseconds per call of each kernel fn launches, in order of first launch
    (torch.profiler; one call first, unprofiled, for plans and caches)."""
    import collections

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times = collections.OrderedDict()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name] = times.get(e.name, 0.0) + e.time_range.elapsed_us() / calls
    return times


@contextlib.contextmanager
def torch_handoff(enabled):
    """Inside the block, the lenient op hands IEEE plans to torch.matmul where the device
    profile's rule predicts it faster (enabled, the default) or runs them on the kernels;
    restored after it."""
    import torch_vecgemm

    testing = torch_vecgemm._C._testing
    saved = testing.torch_handoff_enabled()
    testing.set_torch_handoff(enabled)
    try:
        yield
    finally:
        testing.set_torch_handoff(saved)


@contextlib.contextmanager
def tf32_allowed(allowed):
    """torch.backends.cuda.matmul.allow_tf32 set inside the block, restored after it."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def queued_us(fn, calls=200):
    """(host us, device us) per call of `calls` calls of fn queued back to back: the host's
    wall clock until the last is queued, and CUDA events around the loop. Where the host's
    figure is the larger, the calls are host-bound."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    host = (time.perf_counter() - t0) * 1e6 / calls
    end.synchronize()
    return host, start.elapsed_time(end) * 1e3 / calls


def time_ms(fn, *, warmup_ms=25, rep_ms=100):
    """Median milliseconds of fn(). On CUDA: triton.testing.do_bench, which also clears the
    L2 cache before every run, so small problems are not timed from cache; elsewhere
    torch.utils.benchmark."""
    if torch.cuda.is_available():
        try:
            from triton.testing import do_bench
        except ImportError:
            do_bench = None
        if do_bench is not None:
            return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    import torch.utils.benchmark as tb

    timer = tb.Timer(stmt="fn()", globals={"fn": fn})
    return timer.blocked_autorange(min_run_time=rep_ms / 1000).median * 1e3


def figure(**subplots):
    """A new matplotlib figure and axes (``plt.subplots(**subplots)``), drawn off-screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(**subplots)


def figure_stamp(info):
    """What a figure was measured on, in one line: the GPU, the commit and the build (the
    SASS main loops rewritten or ptxas')."""
    done = (info.get("build") or {}).get("sass_rewrite")
    if isinstance(done, dict) and "loops" in done:
        loops = done.get("loops") or []
        rewritten = sum(str(loop.get("state", "")).startswith("rewritten") for loop in loops)
        build = f"SASS main loops: {rewritten} of {len(loops)} rewritten" if done.get("enabled", True) and loops \
            else "SASS main loops: ptxas'"
    elif done is None:
        build = "build not recorded"
    else:
        build = "SASS main loops rewritten" if done else "SASS main loops: ptxas'"
    dirty = " (uncommitted changes)" if info.get("git_dirty") else ""
    return f"{info.get('gpu') or 'CPU'}, commit {info.get('git_commit')}{dirty}, {build}"


def save_figure(fig, path, info=None):
    """Lay the figure out, stamped with `info`'s figure_stamp where given, write it as a PNG
    and free it."""
    import matplotlib.pyplot as plt

    if info is not None:
        fig.suptitle(figure_stamp(info), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_record(data, out, plot):
    """OUT.json (data) and OUT.png (plot(data, path)); returns the paths written."""
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    plot(data, out + ".png")
    return [out + ".json", out + ".png"]


def _nvidia_smi(query):
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.SubprocessError):
        return None


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a run writes into the tree itself: changes there do not make the checkout dirty.
OUTPUTS = ("benchmarks/records", "README.md")


def _git(*args):
    try:
        out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit():
    """The checkout's commit, or the one VECGEMM_SOURCE_COMMIT names: a copy of the tree on
    another machine (a remote GPU's) may carry no .git, or a stale one."""
    return os.environ.get("VECGEMM_SOURCE_COMMIT") or (_git("rev-parse", "--short", "HEAD") or "").strip() or None


def uncommitted_changes():
    """Tracked files changed since the commit, outside what a run writes (OUTPUTS); None
    outside a git checkout, and for a copy named by VECGEMM_SOURCE_COMMIT (whose .git, if
    any, is not the one it came from)."""
    if os.environ.get("VECGEMM_SOURCE_COMMIT"):
        return None
    out = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":(exclude){p}" for p in OUTPUTS))
    return None if out is None else [line[3:] for line in out.splitlines() if line.strip()]


def build_info():
    """How the loaded library was built: torch_vecgemm.build_info() where the library has
    it ({} where it predates it), made JSON-safe, and whether its CUDA kernels were compiled."""
    import torch_vecgemm

    info = json.loads(json.dumps(dict(getattr(torch_vecgemm, "build_info", lambda: {})()), default=str))
    built = getattr(torch_vecgemm._C, "cuda_kernels_built", None)
    if built is not None:
        info.setdefault("cuda_kernels_built", bool(built()))
    return info


def measure_copy_bandwidth():
    """Device-to-device copy of 2 GiB, bytes read plus written over the median time."""
    src = torch.empty(2**29, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), rep_ms=50)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def machine_info():
    """The stamp of a run: date, software, commit (and whether the checkout had uncommitted
    changes), the library's build, and the GPU (name, SMs, clock, driver, fp32 peak, copy
    bandwidth) or the CPU."""
    changes = uncommitted_changes()
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "git_commit": git_commit(),
        "git_dirty": None if changes is None else bool(changes),
        "build": build_info(),
        "tf32_default": torch.backends.cuda.matmul.allow_tf32,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        max_clock = _nvidia_smi("clocks.max.sm")
        clock_ghz = float(max_clock) / 1000 if max_clock else 1.98
        info.update(
            gpu=props.name,
            sms=props.multi_processor_count,
            max_sm_clock_ghz=clock_ghz,
            driver=_nvidia_smi("driver_version"),
            fp32_peak_tflops=props.multi_processor_count * FP32_LANES_PER_SM * 2 * clock_ghz / 1e3,
            copy_bandwidth_tbs=measure_copy_bandwidth() / 1e12,
        )
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            pass
    else:
        info.update(gpu=None, cpu=platform.processor() or platform.machine())
    return info
