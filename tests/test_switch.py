"""The whole-program switch (torch_vecgemm.enable, csrc/aten_override.h): aten's float32
CUDA products on the library while it is on, torch's kernels for everything else and
after it goes off. A product is seen to run on the library by its kernels' names in the
profiler (every kernel of the library is in namespace vecgemm). GPU tests are skipped, with
the reason shown, where there is no GPU."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_vecgemm
from conftest import assert_gemm_close, gpu, measured_profile, randn


@pytest.fixture(autouse=True)
def switch_off():
    """Every test starts and ends with the switch off."""
    torch_vecgemm.disable()
    yield
    torch_vecgemm.disable()


def ran_on_library(fn):
    """(fn's result, whether any CUDA kernel it launched is the library's)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return out, any("vecgemm" in name for name in names)


# ---- the switch's state (any build) -----------------------------------------------------------


def test_enable_disable_and_nesting():
    assert torch_vecgemm.enabled() is None
    torch_vecgemm.enable()
    assert torch_vecgemm.enabled() == "3xtf32"
    with torch_vecgemm.enable("ieee"):
        assert torch_vecgemm.enabled() == "ieee"
        with torch_vecgemm.enable("auto"):
            assert torch_vecgemm.enabled() == "auto"
        assert torch_vecgemm.enabled() == "ieee"
    assert torch_vecgemm.enabled() == "3xtf32"
    torch_vecgemm.disable()
    assert torch_vecgemm.enabled() is None
    with torch_vecgemm.enable():
        assert torch_vecgemm.enabled() == "3xtf32"
    assert torch_vecgemm.enabled() is None


def test_block_restores_on_an_exception():
    with pytest.raises(KeyError):
        with torch_vecgemm.enable("ieee"):
            raise KeyError("inside")
    assert torch_vecgemm.enabled() is None


@pytest.mark.parametrize("bad", ["3xTF32x", "fp32", "", None, 3])
def test_a_bad_precision_raises_and_changes_nothing(bad):
    torch_vecgemm.enable("ieee")
    with pytest.raises((ValueError, TypeError)):
        torch_vecgemm.enable(bad)
    assert torch_vecgemm.enabled() == "ieee"


def test_cpu_products_stay_torchs(rng):
    A, B = randn(rng, 33, 20, device="cpu"), randn(rng, 20, 17, device="cpu")
    want, want_added = A @ B, torch.addmm(B[0], A, B)
    with torch_vecgemm.enable():
        assert torch.equal(A @ B, want)
        assert torch.equal(torch.addmm(B[0], A, B), want_added)


# ---- routing (GPU) ------------------------------------------------------------------------------


ROUTED = {
    "mm": lambda A, B, C: torch.mm(A, B),
    "mm out=": lambda A, B, C: torch.mm(A, B, out=torch.empty(A.shape[0], B.shape[1], device="cuda")),
    "addmm": lambda A, B, C: torch.addmm(C, A, B, beta=0.5, alpha=2.0),
    "addmm out=": lambda A, B, C: torch.addmm(C, A, B, out=torch.empty(A.shape[0], B.shape[1], device="cuda")),
    # NaN-poisoned out= tensors the kernels write as out^T = B^T A^T, and one whose rows
    # start off 16 bytes.
    "mm out= column-major": lambda A, B, C: torch.mm(A, B, out=_nans(B.shape[1], A.shape[0]).t()),
    "addmm out= column-major": lambda A, B, C: torch.addmm(
        C, A, B, beta=0.5, alpha=2.0, out=_nans(B.shape[1], A.shape[0]).t()),
    "bmm out= column-major": lambda A, B, C: torch.bmm(
        A.view(3, -1, A.shape[1]), B.expand(3, *B.shape), out=_nans(3, B.shape[1], A.shape[0] // 3).transpose(1, 2)),
    "mm out= rows off 16 bytes": lambda A, B, C: torch.mm(
        A, B, out=_nans(A.shape[0] * B.shape[1] + 1)[1:].view(A.shape[0], B.shape[1])),
    # Padded rows, as inductor pads its buffers' strides (a logits buffer of 50257 columns).
    "mm out= padded rows": lambda A, B, C: torch.mm(A, B, out=_padded(A.shape[0], B.shape[1])),
    "addmm out= column-major, padded": lambda A, B, C: torch.addmm(
        C, A, B, out=_padded(B.shape[1], A.shape[0]).t()),
    "bmm out= padded rows": lambda A, B, C: torch.bmm(
        A.view(3, -1, A.shape[1]), B.expand(3, *B.shape), out=_padded(A.shape[0], B.shape[1]).unflatten(0, (3, -1))),
    "matmul": lambda A, B, C: torch.matmul(A, B),
    "@ column-major B": lambda A, B, C: A @ B.t().contiguous().t(),
    "linear": lambda A, B, C: F.linear(A, B.t(), C),
    "nn.Linear": lambda A, B, C: _linear_module(B, C)(A),
    "matmul 3-D @ 2-D": lambda A, B, C: torch.matmul(A.view(3, -1, A.shape[1]), B),
    "matmul 4-D": lambda A, B, C: torch.matmul(A.view(1, 3, -1, A.shape[1]), B.expand(2, 3, *B.shape)),
    "bmm": lambda A, B, C: torch.bmm(A.view(3, -1, A.shape[1]), B.expand(3, *B.shape)),
    "baddbmm": lambda A, B, C: torch.baddbmm(C, A.view(3, -1, A.shape[1]), B.expand(3, *B.shape), beta=2.0),
    "einsum": lambda A, B, C: torch.einsum("bik,kj->bij", A.view(3, -1, A.shape[1]), B),
    "tensordot": lambda A, B, C: torch.tensordot(A.view(3, -1, A.shape[1]), B, dims=1),
}


def _nans(*shape):
    return torch.full(shape, float("nan"), device="cuda")


def _padded(rows, cols, pad=3):
    """A NaN-poisoned rows x cols view whose rows are `pad` floats longer than it."""
    return _nans(rows, cols + pad)[:, :cols]


def _linear_module(B, C):
    layer = torch.nn.Linear(B.shape[0], B.shape[1], device="cuda")
    with torch.no_grad():
        layer.weight.copy_(B.t())
        layer.bias.copy_(C)
    return layer


def _operands(rng):
    A, B, C = randn(rng, 3 * 96, 160), randn(rng, 160, 136), randn(rng, 136)
    return A, B, C


@pytest.mark.parametrize("form", sorted(ROUTED))
@gpu
def test_products_run_on_the_library(form, rng):
    # IEEE: every product the kernels take runs on them (3xTF32 hands small ones to torch).
    A, B, C = _operands(rng)
    fn = ROUTED[form]
    want, on_library = ran_on_library(lambda: fn(A, B, C))
    assert not on_library
    with torch_vecgemm.enable("ieee"):
        out, on_library = ran_on_library(lambda: fn(A, B, C))
    assert on_library, f"{form} ran on torch's kernels with the switch on"
    assert out.shape == want.shape
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


@gpu
def test_padded_out_keeps_its_padding(rng):
    # The kernels store through out's row stride: the padding between rows stays untouched.
    A, B, C = _operands(rng)
    rows, cols = _nans(A.shape[0], B.shape[1] + 3), _nans(B.shape[1], A.shape[0] + 5)
    with torch_vecgemm.enable("ieee"):
        (_, on_rows), (_, on_cols) = (ran_on_library(lambda: torch.mm(A, B, out=rows[:, :B.shape[1]])),
                                      ran_on_library(lambda: torch.addmm(C, A, B, out=cols[:, :A.shape[0]].t())))
    assert on_rows and on_cols
    torch.testing.assert_close(rows[:, :B.shape[1]], A @ B, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cols[:, :A.shape[0]].t(), torch.addmm(C, A, B), rtol=1e-5, atol=1e-5)
    assert rows[:, B.shape[1]:].isnan().all() and cols[:, A.shape[0]:].isnan().all()


@gpu
def test_mm_is_the_librarys_product(rng):
    A, B, C = _operands(rng)
    with torch_vecgemm.enable("ieee"):
        out = A @ B
        added = torch.addmm(C, A, B, beta=0.5, alpha=2.0)
    assert torch.equal(out, torch_vecgemm.mm(A, B, precision="ieee"))
    assert torch.equal(added, torch_vecgemm.sgemm(A, B, C, alpha=2.0, beta=0.5, precision="ieee"))
    assert_gemm_close(out, A, B)


@gpu
def test_3xtf32_where_it_serves_and_torch_elsewhere(rng):
    # A product 3xTF32 serves runs on it; a short sum goes to torch's fp32, as the lenient
    # functions send it.
    A, B = randn(rng, 2048, 2048), randn(rng, 2048, 2048)
    a, b = randn(rng, 64, 48), randn(rng, 48, 40)
    served = torch_vecgemm.plan(A, B, precision="3xtf32")
    if served.precision != "3xtf32":
        # Where the H200's figures price the GPU, 3xTF32 serves 2048^3 (about 2x fp32 in the
        # records): losing it there is a regression, not a reason to skip.
        assert not measured_profile(), f"3xTF32 no longer serves 2048^3 on the H200's profile: {served}"
        pytest.skip(f"3xTF32 does not serve 2048^3 here: {served}")
    with torch_vecgemm.enable("3xtf32"):
        big, on_library = ran_on_library(lambda: A @ B)
        small, small_on_library = ran_on_library(lambda: a @ b)
    assert on_library and not small_on_library
    assert torch.equal(big, torch_vecgemm.mm(A, B, precision="3xtf32"))
    assert torch.equal(small, a @ b)


@pytest.mark.parametrize("case", ["float64", "float16", "out= of another dtype", "strided A"])
@gpu
def test_what_the_kernels_cannot_take_runs_as_torch_would(case, rng):
    A, B = randn(rng, 96, 64), randn(rng, 64, 80)
    if case == "float64":
        fn = lambda: A.double() @ B.double()  # noqa: E731
    elif case == "float16":
        fn = lambda: A.half() @ B.half()  # noqa: E731
    elif case == "out= of another dtype":
        fn = lambda: torch.mm(A.double(), B.double(), out=torch.empty(96, 80, device="cuda", dtype=torch.float64))  # noqa: E731
    else:
        W = randn(rng, 96, 128)
        fn = lambda: W[:, ::2] @ B  # noqa: E731
    want = fn()
    with torch_vecgemm.enable("ieee"):
        out = fn()
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@gpu
def test_out_aliasing_an_operand_runs_as_torch(rng):
    A = randn(rng, 64, 64)
    B = randn(rng, 64, 64)
    want = A @ B
    with torch_vecgemm.enable("ieee"):
        _, on_library = ran_on_library(lambda: torch.mm(A, B, out=A))
    assert not on_library
    torch.testing.assert_close(A, want)


@gpu
def test_gradients_run_on_the_library(rng):
    x = randn(rng, 256, 192).requires_grad_()
    W = randn(rng, 128, 192).requires_grad_()
    with torch_vecgemm.enable("ieee"):
        y = F.linear(x, W)
        grad = randn(rng, *y.shape)
        _, on_library = ran_on_library(lambda: y.backward(grad))
    assert on_library
    assert_gemm_close(x.grad, grad, W.detach())
    assert_gemm_close(W.grad, grad.t(), x.detach())


@gpu
def test_off_is_torch_again(rng):
    A, B = randn(rng, 200, 96), randn(rng, 96, 120)
    before = A @ B
    with torch_vecgemm.enable("ieee"):
        A @ B
    after, on_library = ran_on_library(lambda: A @ B)
    assert not on_library and torch.equal(after, before)


@gpu
def test_cuda_graph_under_the_switch(rng):
    A, B = randn(rng, 192, 160), randn(rng, 160, 136)
    with torch_vecgemm.enable("ieee"):
        out = A @ B  # warm-up outside the graph
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = A @ B
    for _ in range(2):
        A.copy_(randn(rng, *A.shape))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_gemm_close(out, A, B)


@gpu
def test_compiled_model_under_the_switch(rng):
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(160, 256), torch.nn.GELU(), torch.nn.Linear(256, 96)).cuda()
    x = randn(rng, 384, 160)
    want = model(x)
    compiled = torch.compile(model, fullgraph=True)
    with torch_vecgemm.enable("ieee"):
        compiled(x)  # compiles
        out, on_library = ran_on_library(lambda: compiled(x))
    torch._dynamo.reset()
    assert on_library, "the compiled graph's products ran on torch's kernels with the switch on"
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
