"""Build torch_vecgemm._C with torch.utils.cpp_extension.

Install torch first, then build against it: `pip install --no-build-isolation -e .`.
CUDA kernels are compiled whenever the installed torch is a CUDA build and a CUDA
toolkit of the same major version is found, whether or not this machine has a GPU;
otherwise a CPU-only library is built whose ops fall back to ATen. Environment:
  TORCH_CUDA_ARCH_LIST   target architectures. Default: the local GPUs' on a machine with
                         GPUs (as torch.utils.cpp_extension does); else every architecture
                         from sm_80 on that the installed torch supports, at least sm_80,
                         8.6, 8.9 and 9.0, with PTX for the newest. Either way sm_90 is
                         built as sm_90a, which the wgmma kernel needs
  VECGEMM_CPU_ONLY=1     build without the CUDA kernels
  VECGEMM_PTXAS_VERBOSE=1  print ptxas' register / spill report for every kernel
  VECGEMM_SASS_REWRITE=0 leave the t816 main loops as ptxas wrote them (see below)
  MAX_JOBS               parallel compile jobs (ninja)
Switches take 1/0, true/false, on/off, yes/no. After the link the build writes
_build_info.json next to the extension (in place, or in the wheel): versions,
architectures and what the SASS rewrite did; torch_vecgemm.build_info() reads it.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from setuptools import find_packages, setup


def _locate_cuda_home():
    """Point CUDA_HOME at the toolkit behind `nvcc` when nvcc is a wrapper script.

    torch guesses CUDA_HOME as the parent of nvcc's folder; a wrapper on PATH makes that
    guess wrong and the link then fails on -lcudart. nvcc itself reports where it lives.
    """
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    if not os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
        try:
            dry = subprocess.run([nvcc, "-dryrun", "-E", "-x", "cu", os.devnull], capture_output=True, text=True).stderr
        except OSError:
            return
        match = re.search(r"^#\$ _HERE_=(.+)$", dry, re.MULTILINE)
        if match is None:
            return
        home = os.path.dirname(match.group(1).strip())
    os.environ["CUDA_HOME"] = home


def _switch(name, default):
    """An on/off environment switch, read as the library reads its own (csrc/env_flags.h)."""
    value = os.environ.get(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word in ("1", "true", "on", "yes"):
        return True
    if word in ("0", "false", "off", "no"):
        return False
    print(f"torch_vecgemm: {name}={value!r} is not a switch value (1/0, true/false, on/off, yes/no); "
          f"using the default, {'on' if default else 'off'}", file=sys.stderr)
    return default


_locate_cuda_home()

try:
    import torch  # noqa: E402
except ImportError:
    sys.exit(
        "torch_vecgemm builds against the torch it will run with, and none is importable here. "
        "Install torch first (pip install -r requirements.txt), then build without pip's isolated "
        "build environment: pip install --no-build-isolation -e ."
    )
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.1.0"
BUILD_INFO = "_build_info.json"  # next to the extension; torch_vecgemm/_build.py reads it
CPU_ONLY_HINT = "or build without CUDA kernels (every call then falls back to torch): VECGEMM_CPU_ONLY=1"
WITH_CUDA = torch.version.cuda is not None and CUDA_HOME is not None and not _switch("VECGEMM_CPU_ONLY", False)
# The oldest architecture the defaults build for; the kernels themselves also build for
# older ones named in TORCH_CUDA_ARCH_LIST (cp.async is compiled out there, its kernels
# never chosen).
OLDEST_DEFAULT_ARCH = (8, 0)
ALWAYS_BUILT = ["8.0", "8.6", "8.9", "9.0"]


def _toolkit_matches_torch():
    """Stops the build with a message that says what to do when the toolkit's major version
    differs from torch's CUDA (torch's own check fails later, with less to go on)."""
    toolkit = _cuda_toolkit()
    if toolkit is None or torch.version.cuda is None:
        return
    if toolkit.split(".")[0] != torch.version.cuda.split(".")[0]:
        sys.exit(
            f"torch_vecgemm: the CUDA toolkit at {CUDA_HOME} is {toolkit}, but torch {torch.__version__} "
            f"was built with CUDA {torch.version.cuda}; the kernels must be compiled by a toolkit of the same "
            f"major version. Install CUDA {torch.version.cuda.split('.')[0]}.x and point CUDA_HOME at it, "
            f"or install a torch built for CUDA {toolkit.split('.')[0]}, {CPU_ONLY_HINT}."
        )


# sm_90a code runs on exactly the GPUs sm_90 code runs on (compute capability 9.0) and adds
# wgmma, which the 3xTF32 path's fastest kernel needs; the other kernels compile the same
# for both. So a default list names 9.0 as 9.0a: no extra compile, and the kernel is there.
ARCH_SPECIFIC = {"9.0": "9.0a"}


def _default_arch_list():
    """TORCH_CUDA_ARCH_LIST when the environment does not set one: the local GPUs'
    architectures where there are GPUs (as torch.utils.cpp_extension takes them), else
    every one torch supports from OLDEST_DEFAULT_ARCH on and ALWAYS_BUILT; PTX for the
    newest, ARCH_SPECIFIC's names."""
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        archs = {"{}.{}".format(*torch.cuda.get_device_capability(d)) for d in range(torch.cuda.device_count())}
    else:
        archs = set(ALWAYS_BUILT)
        for arch in torch.cuda.get_arch_list():  # e.g. "sm_90"; "compute_90" entries are PTX
            match = re.fullmatch(r"sm_(\d+)(\d)", arch)
            if match and (int(match.group(1)), int(match.group(2))) >= OLDEST_DEFAULT_ARCH:
                archs.add(f"{match.group(1)}.{match.group(2)}")
    ordered = [ARCH_SPECIFIC.get(a, a) for a in sorted(archs, key=lambda a: tuple(int(x) for x in a.split(".")))]
    return ";".join(ordered[:-1] + [ordered[-1] + "+PTX"])


# The tiled kernel has many instances (kernel_configs.h rows x storage orders x load widths).
# They are compiled in LAYOUTS x TILED_SHARDS small translation units so that ninja builds
# them in parallel; each includes sgemm_tiled_instances.cuh with its shard's defines.
TILED_SHARDS = 4
LAYOUTS = {"r": "Layout::RowMajor", "c": "Layout::ColMajor"}


def _generate_tiled_units():
    out_dir = os.path.join("build", "generated")
    os.makedirs(os.path.join(HERE, out_dir), exist_ok=True)
    units = []
    for a, layout_a in LAYOUTS.items():
        for b, layout_b in LAYOUTS.items():
            for shard in range(TILED_SHARDS):
                path = os.path.join(out_dir, f"sgemm_tiled_{a}{b}_{shard}.cu")
                text = (
                    "// Generated by setup.py: one shard of the tiled kernel's instances.\n"
                    f"#define VECGEMM_LA {layout_a}\n#define VECGEMM_LB {layout_b}\n"
                    f"#define VECGEMM_SHARD {shard}\n#define VECGEMM_SHARDS {TILED_SHARDS}\n"
                    '#include "kernels/simt/sgemm_tiled_instances.cuh"\n'
                )
                full = os.path.join(HERE, path)
                if not os.path.exists(full) or open(full).read() != text:
                    with open(full, "w") as f:
                        f.write(text)
                units.append(path)
    return units


# csrc/'s folders built only with CUDA (docs/design.md's map); csrc/*.cpp builds either way.
CUDA_ROOMS = ("planner", "runtime", "kernels")


def _sources():
    rel = lambda pattern: sorted(
        os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern), recursive=True)
    )
    common = [s for s in rel("csrc/*.cpp") if not s.endswith("cpu_only.cpp")]
    if WITH_CUDA:
        cuda_side = sorted(p for room in CUDA_ROOMS for ext in ("cpp", "cu") for p in rel(f"csrc/{room}/**/*.{ext}"))
        return common + cuda_side + _generate_tiled_units()
    return common + ["csrc/cpu_only.cpp"]


def _nvcc_threads():
    """Architectures nvcc compiles at once within a unit (--threads). The build ends with
    one long unit (the 3xTF32 kernels) compiling its architectures one after another while
    the other jobs' cores idle; a few at a time shorten that tail. Bounded so that jobs x
    threads stays near 16 ptxas processes, each of which can take a gigabyte or more."""
    jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
    archs = len([a for a in re.split(r"[;\s]+", os.environ.get("TORCH_CUDA_ARCH_LIST", "")) if a])
    return max(1, min(archs, 4, 16 // max(jobs, 1)))


def _extension():
    cxx = ["-O3"]  # the C++ standard is the one torch's headers ask for (17 or 20)
    if not WITH_CUDA:
        return CppExtension(
            "torch_vecgemm._C", _sources(), include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args={"cxx": cxx}
        )
    nvcc = ["-O3", "-lineinfo", f"--threads={_nvcc_threads()}"]
    if _switch("VECGEMM_PTXAS_VERBOSE", False):
        nvcc.append("-Xptxas=-v")
    return CUDAExtension(
        "torch_vecgemm._C",
        _sources(),
        include_dirs=[os.path.join(HERE, "csrc")],
        extra_compile_args={"cxx": cxx, "nvcc": nvcc},
    )


# After the link, the main loops of tiled_128x128x8_t816 for (column-major A, row-major B),
# the plain launch's, the stream-K whole waves' and the stream-K tail's, are rewritten below
# ptxas by tools/sass_rewrite (3-4% faster): only a loop that is, bit for bit, the ptxas
# output a rewrite was validated on, and only into that rewrite (tools/sass_rewrite/
# validated.json: nvcc 13.0, sm_90). Anything else leaves ptxas' loop, and the build says so.
TOOLS = os.path.join(HERE, "tools")


def _rewrite_sass(lib):
    """Rewrite the validated loops of the linked library in place; say what was done and
    return the tool's record of it. The rewrite is an optimisation: whatever stops it leaves
    ptxas' loops and the build goes on."""
    say = lambda text: print(f"sass rewrite: {text}", flush=True)
    sys.path.insert(0, TOOLS)
    try:
        import sass_rewrite
    except Exception as e:  # noqa: BLE001 - no tool (a source tree without tools/): ptxas' loops
        reason = f"tool not found ({type(e).__name__}: {e})"
        say(f"{reason}; loops left as ptxas wrote them")
        return {"enabled": False, "reason": reason, "loops": []}
    finally:
        sys.path.remove(TOOLS)
    off = None if _switch("VECGEMM_SASS_REWRITE", True) else f"VECGEMM_SASS_REWRITE={os.environ['VECGEMM_SASS_REWRITE']}"
    try:
        return sass_rewrite.rewrite_for_build(lib, disabled_by=off, cuda_home=CUDA_HOME, say=say)
    except Exception as e:  # noqa: BLE001 - the tool fails soft itself; this is the last guard
        say(f"error ({type(e).__name__}: {e}); loops left as ptxas wrote them")
        return {"enabled": False, "reason": f"error: {type(e).__name__}: {e}", "loops": []}


def _run(*cmd):
    """A command's stdout, or None if it cannot run or fails."""
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return run.stdout if run.returncode == 0 else None


def _cuda_toolkit():
    """The version of CUDA_HOME's nvcc (e.g. "13.0.88"), or None."""
    out = _run(os.path.join(CUDA_HOME, "bin", "nvcc"), "--version") if CUDA_HOME else None
    match = re.search(r"release [\d.]+, V([\d.]+)", out or "")
    return match.group(1) if match else None


def _architectures():
    """The targets the kernels were compiled for: TORCH_CUDA_ARCH_LIST and the nvcc flags
    torch resolves it to."""
    try:
        from torch.utils.cpp_extension import _get_cuda_arch_flags

        flags = _get_cuda_arch_flags()
    except Exception:  # noqa: BLE001 - a private torch function: record what is known
        flags = None
    return {"arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"), "nvcc_flags": flags}


def _git_commit():
    """The commit VECGEMM_SOURCE_COMMIT names (a copy of the tree on another machine may carry
    no .git, or a stale one), else the checkout's, else None."""
    if os.environ.get("VECGEMM_SOURCE_COMMIT"):
        return os.environ["VECGEMM_SOURCE_COMMIT"]
    out = _run("git", "-C", HERE, "rev-parse", "HEAD") if os.path.exists(os.path.join(HERE, ".git")) else None
    return out.strip() if out else None


def _write_build_info(ext_path, sass):
    """What this build did, next to the extension (torch_vecgemm/_build.py documents it)."""
    info = {
        "schema": 1,
        "version": VERSION,
        "torch": torch.__version__,
        "cuda_toolkit": _cuda_toolkit(),
        "cuda_kernels": WITH_CUDA,
        "architectures": _architectures() if WITH_CUDA else None,
        "sass_rewrite": sass,
        "git_commit": _git_commit(),
    }
    with open(os.path.join(os.path.dirname(ext_path), BUILD_INFO), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")


class BuildExt(BuildExtension.with_options(use_ninja=True)):
    def build_extension(self, ext):
        super().build_extension(ext)
        path = self.get_ext_fullpath(ext.name)  # in build_lib: setuptools copies it in place after
        if WITH_CUDA:
            sass = _rewrite_sass(path)
        else:
            sass = {"enabled": False, "reason": "no CUDA kernels built", "loops": []}
        _write_build_info(path, sass)

    def copy_extensions_to_source(self):
        """In-place and editable builds: the build record goes beside the extension."""
        super().copy_extensions_to_source()
        package_dir = self.get_finalized_command("build_py").get_package_dir("torch_vecgemm")
        built = os.path.join(self.build_lib, "torch_vecgemm", BUILD_INFO)
        if os.path.exists(built):
            shutil.copyfile(built, os.path.join(package_dir, BUILD_INFO))


if WITH_CUDA:
    _toolkit_matches_torch()
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = _default_arch_list()
    units = len(_sources())
    print(f"torch_vecgemm: compiling {units} units with CUDA {_cuda_toolkit()} for "
          f"{os.environ['TORCH_CUDA_ARCH_LIST']}; ninja shows progress as [done/total] "
          f"(pip shows it with -v); the README's Quick start says how long a build takes on 2 cores. "
          f"MAX_JOBS sets the parallel jobs.",
          flush=True)

setup(
    name="torch_vecgemm",
    version=VERSION,
    description="Hand-written float32 GEMM kernels for PyTorch, as torch.ops.vecgemm",
    packages=find_packages(include=["torch_vecgemm", "torch_vecgemm.*"]),
    package_data={"torch_vecgemm": ["profiles/*.json"]},  # the device profiles (_profiles.py)
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.10",
    install_requires=["torch>=2.11"],
    zip_safe=False,
)
