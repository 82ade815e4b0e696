"""Inputs, files, environments and threads that once crashed the process or gave a silently
wrong result, one test each (they failed before the fix): what the library must do with
them instead is refuse with a message that says what to do, or fall back, or be right."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_vecgemm
from conftest import DEVICES, assert_gemm_close, gpu, ops, randn, requires_kernels

from torch_vecgemm._tuning import TuningCacheWarning

KERNELS_BUILT = torch_vecgemm._C.cuda_kernels_built()


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with `env` added: what an import does with them."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


# ---- the tuning cache: entries that named no kernel, files that broke the import ---------


@requires_kernels
@pytest.mark.parametrize(
    "key,config,splits,message",
    [
        ("b1_m64_n64_k64_rr_v4_d4", "tiled_64x64x8_t84", -1, "split count"),
        ("b1_m64_n64_k64_rr_v4_d4", "tiled_64x64x8_t84", 0, "split count"),
        ("b1_m64_n64_k64_rr_v4_d4", "tiled_64x64x8_t84", 10**6, "split count"),
        # An aligned-only config for unaligned operands: its kernel does not exist.
        ("b1_m64_n64_k64_cr_v1_d4", "tiled_128x128x8_t816", 1, "has no kernel"),
        ("b1_m64_n64_k64_rr_v1_d4", "async_128x128x8_t816_s4", 1, "has no kernel"),
        ("not a key", "tiled_64x64x8_t84", 1, "not a tuning key"),
        ("b1_m64_n64_k64_rr_v4", "tiled_64x64x8_t84", 1, "not a tuning key"),
        ("b1_m64_n64_k64_rr_v4_d4", "tiled_9x9x9", 1, "unknown kernel config"),
    ],
)
def test_invalid_tuning_entries_are_refused(key, config, splits, message):
    torch_vecgemm._C.clear_tuning_cache()
    with pytest.raises(RuntimeError, match=message):
        torch_vecgemm._C.add_tuning_entry(key, config, splits)
    assert torch_vecgemm.tuning_cache() == {}


@requires_kernels
def test_cache_file_entries_are_checked_one_by_one(tmp_path):
    torch_vecgemm._C.clear_tuning_cache()
    good = "b1_m64_n64_k64_rr_v4_d4"
    entries = {
        good: {"config": "tiled_64x64x8_t84", "splits": 2, "stream_k": False},
        "b1_m64_n64_k64_cr_v1_d4": {"config": "tiled_128x128x8_t816", "splits": 1},  # no such kernel
        "b1_m65_n64_k64_rr_v4_d4": {"config": "tiled_64x64x8_t84", "splits": 1000000},
        "b1_m66_n64_k64_rr_v4_d4": {"config": "tiled_64x64x8_t84", "splits": 1, "stream_k": "false"},
        "b1_m67_n64_k64_rr_v4_d4": {"splits": 1},
    }
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"format": 3, "build": {"torch_vecgemm": "0.0.0"}, "entries": entries}))
    with pytest.warns(TuningCacheWarning) as caught:
        assert torch_vecgemm.load_tuning_cache(path) == 1
    assert torch_vecgemm.tuning_cache() == {good: ("tiled_64x64x8_t84", 2, False, False)}
    assert sum("skipped" in str(w.message) for w in caught) == 4
    assert any("another build" in str(w.message) for w in caught)
    torch_vecgemm._C.clear_tuning_cache()


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b"{not json", b"[1, 2]", b'{"format": 99, "entries": {}}'])
def test_damaged_cache_file_raises_value_error(tmp_path, content):
    path = tmp_path / "cache.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a torch_vecgemm tuning cache"):
        torch_vecgemm.load_tuning_cache(path)


@pytest.mark.parametrize("content", [None, b"\xff\xfe\x00garbage"])
def test_bad_tuning_cache_variable_warns_and_imports(tmp_path, content):
    path = tmp_path / "cache.json"
    if content is not None:
        path.write_bytes(content)
    done = run_python("import torch_vecgemm; print('imported')", VECGEMM_TUNING_CACHE=str(path))
    assert done.returncode == 0, done.stderr
    assert "imported" in done.stdout
    assert "VECGEMM_TUNING_CACHE" in done.stderr  # the warning names the variable


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "cache.json"
    torch_vecgemm.save_tuning_cache(path)
    before = path.read_bytes()
    assert json.loads(before)["format"] == 4

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        torch_vecgemm.save_tuning_cache(path)
    assert path.read_bytes() == before  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]  # no temporary left


# ---- environment switches ------------------------------------------------------------------


@requires_kernels
@pytest.mark.parametrize("value,expected", [("true", True), ("ON", True), ("yes", True), ("1", True),
                                            ("off", False), ("False", False), ("0", False)])
def test_switch_values(value, expected):
    done = run_python("import torch_vecgemm; print(torch_vecgemm._C.autotune_enabled())", VECGEMM_AUTOTUNE=value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(expected)


@requires_kernels
def test_switch_nonsense_warns_and_keeps_default():
    done = run_python("import torch_vecgemm; print(torch_vecgemm._C.autotune_enabled())", VECGEMM_AUTOTUNE="maybe")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "False"
    assert "VECGEMM_AUTOTUNE='maybe' is not a switch value" in done.stderr


# ---- API semantics: like torch, or torch's error -------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_sgemm_with_c_defaults_to_beta_one_like_addmm(device, rng):
    A, B, C = randn(rng, 33, 17, device=device), randn(rng, 17, 9, device=device), randn(rng, 33, 9, device=device)
    assert_gemm_close(torch_vecgemm.sgemm(A, B, C), A, B, C, 1.0, 1.0)
    assert_gemm_close(torch_vecgemm.sgemm(A, B, C, alpha=2.0), A, B, C, 2.0, 1.0)
    assert_gemm_close(torch_vecgemm.sgemm(A, B), A, B)


@pytest.mark.parametrize("device", DEVICES)
def test_lenient_op_takes_c_as_torch_does_even_at_beta_zero(device, rng):
    """A C that does not broadcast to the result: whatever torch.addmm does with it on this
    device (raise, on the CPU), the lenient op does too, never a kernel run that ignores it."""
    A, B = randn(rng, 8, 4, device=device), randn(rng, 4, 6, device=device)
    C = randn(rng, 7, 6, device=device)
    try:
        theirs = torch.addmm(C, A, B, beta=0.0)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as ours:
            torch_vecgemm.sgemm(A, B, C, beta=0.0)
        assert str(ours.value).splitlines()[0] == str(e).splitlines()[0]
    else:
        assert torch_vecgemm.fallback_reason(A, B, C) is not None  # not a kernel's problem
        torch.testing.assert_close(torch_vecgemm.sgemm(A, B, C, beta=0.0), theirs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(5,), (2, 3), (0,)])
def test_linear_with_zero_in_features(device, bias, lead, rng):
    x = randn(rng, *lead, 0, device=device)
    w = randn(rng, 7, 0, device=device)
    b = randn(rng, 7, device=device) if bias else None
    torch.testing.assert_close(torch_vecgemm.linear(x, w, b), F.linear(x, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_op_refuses_gradients_instead_of_dropping_them(device, rng):
    A = randn(rng, 16, 8, device=device).requires_grad_()
    B, C = randn(rng, 8, 4, device=device), randn(rng, 16, 4, device=device)
    with pytest.raises(RuntimeError, match="in-place op has no gradient"):
        ops.sgemm_(C, A, B, 1.0, 0.0)
    with torch.no_grad():  # outside autograd it runs
        ops.sgemm_(C, A, B, 1.0, 0.0)
    assert_gemm_close(C, A.detach(), B)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "view",
    [
        lambda buf: buf.as_strided((32, 16), (8, 1)),  # rows 8 apart, 16 long
        lambda buf: buf.as_strided((16, 32), (1, 8)),  # columns 8 apart, 16 long
        lambda buf: buf.as_strided((3, 8, 8), (16, 8, 1)),  # matrices 16 apart, 64 long
    ],
)
def test_inplace_op_refuses_self_overlapping_c(device, view, rng):
    C = view(randn(rng, 4096, device=device))
    A, B = randn(rng, *C.shape[:-1], 8, device=device), randn(rng, *C.shape[:-2], 8, C.shape[-1], device=device)
    with pytest.raises(RuntimeError, match="overlap"):
        ops.sgemm_(C, A, B, 1.0, 0.0)


@requires_kernels
@pytest.mark.parametrize("dim", ["m", "n", "k"])
def test_dimension_limit_is_what_the_index_math_supports(dim):
    def view(rows, cols):
        """A rows x cols operand of one row or column of memory (stride 0 along the long
        dimension): a shape for the rules, no memory behind it."""
        return torch.zeros(1, cols).expand(rows, cols) if cols <= rows else torch.zeros(rows, 1).expand(rows, cols)

    for size, allowed in [(2**31 - 200, False), (2**31 - 257, True)]:
        sizes = {"m": 4, "n": 4, "k": 4, dim: size}
        reason = torch_vecgemm._C._testing.kernel_violation(view(sizes["m"], sizes["k"]), view(sizes["k"], sizes["n"]))
        if allowed:
            assert reason is None, reason
        else:
            assert reason is not None and "2^31 - 257" in reason, reason


# ---- on the GPU ------------------------------------------------------------------------------


@gpu
def test_vectorized_past_the_grid_limit_of_batches(rng):
    batch = 65543  # grid.z takes 65535
    A = randn(rng, batch, 128, 8)
    B = randn(rng, 1, 8, 128).expand(batch, 8, 128)
    out = ops.sgemm(A, B, variant="vectorized")
    for b in (0, 1, 65534, 65535, 65536, batch - 1):
        assert_gemm_close(out[b], A[b], B[b])


@gpu
@pytest.mark.parametrize("variant", ["auto", "tiled_64x64x8_t84"])
def test_inplace_refusal_on_the_gpu(variant, rng):
    C = randn(rng, 4096).as_strided((32, 16), (8, 1))
    with pytest.raises(RuntimeError, match="overlap"):
        ops.sgemm_(C, randn(rng, 32, 8), randn(rng, 8, 16), 1.0, 0.0, variant)


DETERMINISTIC_RUN = """
import hashlib, torch, torch_vecgemm as tv
torch.use_deterministic_algorithms(True)
tv.autotune(True)
g = torch.Generator(device="cuda").manual_seed(7)
A = torch.randn(64, 4096, device="cuda", generator=g)
B = torch.randn(4096, 4096, device="cuda", generator=g)
out = tv.mm(A, B)
torch.cuda.synchronize()
print(tv.plan(A, B).description, "|", hashlib.sha256(out.cpu().numpy().tobytes()).hexdigest())
"""


@gpu
def test_deterministic_mode_gives_the_same_bits_in_every_process():
    runs = [run_python(DETERMINISTIC_RUN) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    lines = [run.stdout.strip().splitlines()[-1] for run in runs]
    assert lines[0] == lines[1]
    torch.use_deterministic_algorithms(False)


@gpu
def test_deterministic_mode_plans_without_timing_or_cache(rng):
    A, B = randn(rng, 64, 4096), randn(rng, 4096, 4096)
    model = torch_vecgemm.plan(A, B)
    key = torch_vecgemm._C.tuning_key(A, B)
    other = next(v for v in torch_vecgemm.variants() if v.startswith("tiled_") and v != model.kernel and "t816" not in v)
    torch_vecgemm._C.add_tuning_entry(key, other, 1)
    torch_vecgemm.autotune(True)
    try:
        assert torch_vecgemm.plan(A, B).kernel == other
        torch.use_deterministic_algorithms(True)
        planned = torch_vecgemm.plan(A, B)
        assert planned.kernel == model.kernel and not planned.autotune_pending
    finally:
        torch.use_deterministic_algorithms(False)
        torch_vecgemm.autotune(False)
        torch_vecgemm._C.clear_tuning_cache()


@gpu
@pytest.mark.skipif(os.environ.get("VECGEMM_EXPECT_NO_KERNEL") != "1",
                    reason="needs a build that leaves this GPU's architecture out, with VECGEMM_EXPECT_NO_KERNEL=1 "
                    "(benchmarks/gpu_session.sh, step arch)")
def test_a_gpu_the_build_has_no_kernel_for_falls_back(rng):
    major, minor = torch.cuda.get_device_capability()
    A, B = randn(rng, 256, 64), randn(rng, 64, 128)
    reason = torch_vecgemm.fallback_reason(A, B)
    assert reason is not None and f"this build has no kernel for sm_{major}{minor}" in reason, reason
    assert_gemm_close(torch_vecgemm.mm(A, B), A, B)  # the fallback, right
    assert torch_vecgemm.plan(A, B).family == "fallback"
    with pytest.raises(RuntimeError, match="no kernel for"):
        ops.sgemm(A, B)
    with pytest.raises(RuntimeError, match="no kernel for"):
        ops.sgemm_(randn(rng, 256, 128), A, B)


@gpu
def test_this_build_runs_on_this_gpu(rng):
    if os.environ.get("VECGEMM_EXPECT_NO_KERNEL") == "1":
        pytest.skip("a build without this GPU's architecture")
    assert torch_vecgemm._C.built_architectures()
    assert torch_vecgemm.fallback_reason(randn(rng, 8, 8), randn(rng, 8, 8)) is None


def compute_sanitizer():
    """compute-sanitizer from PATH or the CUDA toolkit torch was built against, or None."""
    from torch.utils.cpp_extension import CUDA_HOME

    found = shutil.which("compute-sanitizer")
    if found is None and CUDA_HOME is not None:
        candidate = os.path.join(CUDA_HOME, "bin", "compute-sanitizer")
        found = candidate if os.path.exists(candidate) else None
    return found


@gpu
@pytest.mark.parametrize("family", ["tiled_", "async_", "tf32x3_", "gemv|vectorized"])
def test_edge_tiles_read_nothing_past_the_operands(family):
    # Rows of A past M and columns of B past N reach only outputs that are never stored, so a
    # kernel that reads them gives right results and no test of values sees it (9a9c2bb's
    # cp.async kernels did, on every edge tile); memcheck does. The sample's edge shapes on
    # every tiling of the family, in every storage order and alignment. Without the caching
    # allocator every tensor is its own allocation, whose end memcheck knows to the byte; in
    # the cache's segments a read past a tensor lands in the segment and passes.
    sanitizer = compute_sanitizer()
    if sanitizer is None:
        pytest.skip("compute-sanitizer not found on PATH or in CUDA_HOME/bin")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sanitizer, "--tool", "memcheck", "--error-exitcode", "1", sys.executable, "-m",
         "benchmarks.sanitize_sample", "--variants", f"^({family})"],
        cwd=root, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    output = done.stdout + done.stderr
    # memcheck's first reports name the kernel, the access and the thread; the tail, the count.
    first = [line for line in output.splitlines() if line.startswith("=========") and "Host Frame" not in line]
    report = "\n".join(first[:40]) + "\n...\n" + output[-2000:]
    assert done.returncode == 0, report
    assert "ERROR SUMMARY: 0 errors" in output, report
    assert re.search(r"[1-9]\d* checked launches, 0 wrong", done.stdout), report
