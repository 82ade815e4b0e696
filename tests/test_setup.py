"""The build's own messages: what a newcomer sees when the build cannot go on (setup.py is
run as pip runs it, in a fresh interpreter; nothing is compiled)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_setup(tmp_path, **env):
    return subprocess.run([sys.executable, os.path.join(ROOT, "setup.py"), "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def test_missing_torch_says_to_install_it_and_skip_build_isolation(tmp_path):
    # pip's isolated build environment has no torch: a module that fails to import stands in.
    (tmp_path / "torch.py").write_text("raise ImportError('no torch in this environment')\n")
    done = run_setup(tmp_path, PYTHONPATH=str(tmp_path))
    assert done.returncode != 0
    assert "--no-build-isolation" in done.stderr and "Install torch first" in done.stderr


@pytest.mark.skipif(torch.version.cuda is None, reason="a CPU-only torch builds no CUDA kernels, so no toolkit is checked")
def test_toolkit_of_another_major_version_says_what_to_do(tmp_path):
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "include").mkdir()
    (cuda / "include" / "cuda_runtime.h").write_text("")
    other = int(torch.version.cuda.split(".")[0]) - 1
    nvcc = cuda / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {other}.4, V{other}.4.131'\n")
    nvcc.chmod(0o755)
    done = run_setup(tmp_path, CUDA_HOME=str(cuda))
    assert done.returncode != 0
    message = done.stderr
    assert f"is {other}.4.131" in message and f"built with CUDA {torch.version.cuda}" in message
    assert "VECGEMM_CPU_ONLY=1" in message and "CUDA_HOME" in message
