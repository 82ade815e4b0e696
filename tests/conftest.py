"""Shared helpers: seeded random inputs, float64 references, error bounds, poisoning, the
markers of GPU tests, the library's own lists of kernels and shapes derived from the device.

Every random input comes from the `rng` fixture: torch.Generators seeded from the test's
node id with a stable hash (crc32), so a case draws the same inputs in every process and on
every machine. A failing case prints its seed; `VECGEMM_TEST_SEED=<seed> pytest <node id>`
replays it (the variable overrides every case's seed).
"""
from __future__ import annotations

import contextlib
import math
import os
import zlib

import pytest
import torch

import torch_vecgemm
from benchmarks.common import block_tile, whole_waves_grid  # noqa: F401 (the tests' helpers too)

ops = torch.ops.vecgemm

HAS_CUDA = torch.cuda.is_available()
NO_CUDA_REASON = (
    "no CUDA device: torch.cuda.is_available() is False"
    + ("" if torch.version.cuda else " (CPU-only torch build)")
    + "; GPU tests run on the H200"
)
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
requires_kernels = pytest.mark.skipif(
    not torch_vecgemm._C.cuda_kernels_built(), reason="torch_vecgemm was built without CUDA kernels"
)
# The marks of a GPU test: `pytestmark = GPU` for a module of them, `@gpu` for one test;
# `-m "not gpu"` deselects them.
GPU = [pytest.mark.gpu, requires_cuda, requires_kernels]


def gpu(test):
    for mark in GPU:
        test = mark(test)
    return test


DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
LAYOUTS = ["rr", "rc", "cr", "cc"]

# The library's own list of kernels, read at collection: a new tiling (or a new family of
# them) is tested without editing the tests. A CPU-only build lists "auto" alone.
VARIANTS = torch_vecgemm.variants()
TILINGS = [v for v in VARIANTS if v.startswith(("tiled_", "async_"))]
# The 3xTF32 kernels (precision "3xtf32"; tests/test_precision.py): tf32x3_<BM>x<BN>_<instruction>.
TF32X3_KERNELS = [v for v in VARIANTS if v.startswith("tf32x3_")]
# The one tiling built with the stream-K tail (docs/design.md, "Kernel families").
STREAM_K_TILING = "tiled_128x128x8_t816"

# Unit roundoff of float32.
U32 = 2.0**-24


# ---- seeds ---------------------------------------------------------------------------------

SEED_ENV = "VECGEMM_TEST_SEED"
_SEED = pytest.StashKey[int]()


def node_seed(nodeid: str) -> int:
    """The seed of a test case: crc32 of its node id (hash() of a str differs per process)."""
    return zlib.crc32(nodeid.encode())


class Rng:
    """A test case's source of random inputs: one torch.Generator per device, each seeded
    with the case's seed (CUDA inputs are drawn on the GPU, by its own generator)."""

    def __init__(self, seed: int):
        self.seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def generator(self, device="cuda") -> torch.Generator:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._generators:
            self._generators[device] = torch.Generator(device).manual_seed(self.seed)
        return self._generators[device]

    def randint(self, low, high, shape, device="cuda"):
        return torch.randint(low, high, shape, device=device, generator=self.generator(device))

    def uniform(self, *shape, low=-1.0, high=1.0, device="cuda"):
        return torch.empty(*shape, device=device).uniform_(low, high, generator=self.generator(device))


@pytest.fixture
def seed(request) -> int:
    """This case's seed: VECGEMM_TEST_SEED if set, else crc32 of the node id."""
    override = os.environ.get(SEED_ENV)
    value = int(override, 0) if override else node_seed(request.node.nodeid)
    request.node.stash[_SEED] = value
    request.node.user_properties.append(("seed", value))
    return value


@pytest.fixture
def rng(seed) -> Rng:
    return Rng(seed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and _SEED in item.stash:
        seed = item.stash[_SEED]
        report.sections.append(("seed", f"inputs drawn with seed {seed}; replay: {SEED_ENV}={seed} pytest '{item.nodeid}'"))
    return report


def pytest_report_header(config):
    if os.environ.get(SEED_ENV):
        return f"{SEED_ENV}={os.environ[SEED_ENV]}: every case draws its inputs with this seed"
    return None


# ---- the hand-off to torch -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _kernels_not_handed():
    """Every test runs the lenient op's IEEE plans on the kernels: the device profile's rule
    would hand many of the suite's small and mid-size products to torch.matmul
    (kernel_rules.h, hands_to_torch), and they are here to test the kernels. The tests of the
    hand-off ask for it with `torch_handoff_on`."""
    from benchmarks.common import torch_handoff

    with torch_handoff(False):
        yield


@pytest.fixture
def torch_handoff_on(_kernels_not_handed):
    """The lenient op hands IEEE plans to torch.matmul where the rule says (the default
    outside the tests)."""
    from benchmarks.common import torch_handoff

    with torch_handoff(True):
        yield


# ---- inputs --------------------------------------------------------------------------------


def randn(rng: Rng, *shape, device="cuda", dtype=torch.float32):
    """Fresh N(0, 1) data from the case's generator; never zeros (0 has probability 0)."""
    return torch.randn(*shape, device=device, dtype=dtype, generator=rng.generator(device))


def make_operand(rng: Rng, rows, cols, layout, *, batch=None, device="cuda", offset=0, ld_pad=0):
    """A (batch?, rows, cols) float32 operand stored row- ("r") or column-major ("c"), as a
    view with storage offset `offset` elements and leading dimension padded by `ld_pad`."""
    lead = () if batch is None else (batch,)
    if layout == "r":
        ld = cols + ld_pad
        base = randn(rng, *lead, rows * ld + offset, device=device)
        t = base[..., offset:].reshape(*lead, rows, ld)[..., :cols]
    else:
        ld = rows + ld_pad
        base = randn(rng, *lead, cols * ld + offset, device=device)
        t = base[..., offset:].reshape(*lead, cols, ld)[..., :rows].transpose(-1, -2)
    assert t.shape == (*lead, rows, cols)
    return t


def aligned_operand(rng: Rng, rows, cols, layout, batch=None, device="cuda", offset=0):
    """make_operand with the leading dimension padded to a multiple of 4 floats: every
    variant, the ones built for 16-byte aligned operands included, takes it at any shape
    (with offset 0; offset 1 starts every row one float past that)."""
    return make_operand(rng, rows, cols, layout, batch=batch, device=device, offset=offset,
                        ld_pad=-(cols if layout == "r" else rows) % 4)


# ---- references and checks -----------------------------------------------------------------


def reference(A, B, C=None, alpha=1.0, beta=0.0):
    """alpha * A @ B + beta * C in float64, on the inputs' device."""
    ref = alpha * torch.matmul(A.double(), B.double())
    if C is not None and beta != 0.0:
        ref = ref + beta * C.double()
    return ref


def assert_gemm_close(out, A, B, C=None, alpha=1.0, beta=0.0, *, tol=1e-5):
    """out must be float32 alpha * A @ B + beta * C to float32 accuracy.

    Two checks against a float64 reference: the relative Frobenius error (a systematic
    fault such as a missing K step shows up at 1e-2 or worse), and each element against
    the standard dot-product error bound sqrt(K) * u * (|alpha| |A| |B| + |beta| |C|)
    with a 32x margin (a single wrong or unwritten element shows up here).
    """
    assert out.dtype == torch.float32
    ref = reference(A, B, C, alpha, beta)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if out.numel() == 0:
        return
    out64 = out.double()
    bad = ~torch.isfinite(out64)
    assert not bad.any(), f"{int(bad.sum())} non-finite outputs (unwritten or NaN leaked), first at {bad.nonzero()[0].tolist()}"
    k = A.shape[-1]
    scale = abs(alpha) * torch.matmul(A.double().abs(), B.double().abs())
    if C is not None and beta != 0.0:
        scale = scale + abs(beta) * C.double().abs().expand_as(scale)
    bound = 32.0 * math.sqrt(max(k, 1)) * U32 * scale + 1e-30
    err = (out64 - ref).abs()
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"element error {worst:.3g}x over the bound at {(err / bound).argmax().item()}"
    rel = (torch.linalg.norm(out64 - ref) / torch.linalg.norm(ref)).item()
    assert rel < tol, f"relative error {rel:.3g} >= {tol}"


def poison_allocator(shape, device="cuda"):
    """Fill the caching allocator's next block of this size with NaN, so an output (or a
    copy, or a workspace) the kernels fail to write shows as NaN instead of stale data."""
    t = torch.full(shape, float("nan"), device=device)
    del t


# ---- running the kernels -------------------------------------------------------------------


def run_strict(A, B, C=None, alpha=1.0, beta=0.0, variant="auto"):
    """The strict op, so a fallback can never hide a kernel fault; output poisoned."""
    assert torch_vecgemm.fallback_reason(A, B, C, variant=variant) is None
    poison_allocator((*A.shape[:-1], B.shape[-1]))
    return ops.sgemm(A, B, C, alpha, beta, variant)


def run_inplace(A, B, C, alpha, beta, variant="auto"):
    D = C.clone() if beta != 0.0 else torch.full_like(C, float("nan"))
    ops.sgemm_(D, A, B, alpha, beta, variant)
    return D


ALIGNED_ONLY = "16-byte aligned operands only"


def takes(A, B, C=None, variant="auto"):
    """Whether the variant takes these operands. A tiling may refuse them only for the one
    rule of its own (16-byte aligned operands), and the strict op must then raise with it."""
    reason = torch_vecgemm.fallback_reason(A, B, C, variant=variant)
    if reason is None:
        return True
    assert variant in TILINGS and ALIGNED_ONLY in reason, reason
    with pytest.raises(RuntimeError, match=ALIGNED_ONLY):
        ops.sgemm(A, B, C, 1.0, 1.0, variant)
    return False


# ---- what the planner knows of the device ------------------------------------------------------

def measured_profile() -> bool:
    """Whether the H200's measured profile (torch_vecgemm/profiles/h200.json) prices this
    GPU: there the cost model prefers some storage orders (column-major A with row-major B)
    and copies operands into them; a GPU with the neutral profile counts every order the
    same and makes no copy for the order alone."""
    return torch_vecgemm._C._testing.profile_name(torch.cuda.current_device()) == "NVIDIA H200"


def split_priced_profile(doc, a_tiles, b_tiles, **changes):
    """A copy of the profile `doc` (changes applied) with the wgmma row's own-split figures
    at these multiples of its K tile (the kernel-split probe's forcing): far below the pass
    (-0.9, within the profile's check that a K tile keeps a time above 0) makes the kernel
    split that operand wherever it can, far above (1e3) leaves it to the pass."""
    from benchmarks.probes.tf32x3_kernel_split import forced

    doc = forced(doc, a_tiles, b_tiles)
    doc.update(changes)
    return doc


@contextlib.contextmanager
def device_profile_changed(change):
    """This GPU's profile as `change(shipped profile)` returns it, the shipped one put back
    after (each put in place starts a new generation of the plan cache: plans made before
    are not reused)."""
    from benchmarks.probes.tf32x3_kernel_split import profile_of_device, use

    shipped = profile_of_device()
    use(change(shipped))
    try:
        yield
    finally:
        use(shipped)


def wgmma_split_priced(a_tiles, b_tiles):
    """This GPU's profile with the wgmma row's own-split figures as `split_priced_profile`
    sets them, for the `with` block."""
    return device_profile_changed(lambda doc: split_priced_profile(doc, a_tiles, b_tiles))


def m_major_a_priced_profile(doc, **changes):
    """A copy of the profile `doc` (changes applied) in which each wgmma row prices a
    column-major A's parts made in registers (a_split_m_major_ns) as its row-major A's
    (a_split_ns), where the profile has no figure of its own."""
    import copy

    doc = copy.deepcopy(doc)
    for row in doc["tf32x3"].values():
        if isinstance(row, dict) and row.get("a_split_ns", 0) != 0:
            row.setdefault("a_split_m_major_ns", row["a_split_ns"])
    doc.update(changes)
    return doc


def prices_m_major_a(doc) -> bool:
    """Whether the profile `doc` prices an M-major A's parts made in the wgmma kernel."""
    return any(isinstance(row, dict) and "a_split_m_major_ns" in row for row in doc["tf32x3"].values())


def m_major_a_priced():
    """This GPU's profile as `m_major_a_priced_profile` makes it, for the `with` block."""
    return device_profile_changed(m_major_a_priced_profile)


def passed_operands(description: str) -> set:
    """The operands a 3xTF32 plan's description says go through the split pass
    ("tf32x3_128x128_wgmma, split pass of A B" -> {"A", "B"})."""
    return set(description.split(", split pass of ")[1].split()) if ", split pass of " in description else set()


# ---- shapes derived from the device ----------------------------------------------------------


def tail_grid(slots, waves, tail_fraction):
    """(tiles in M, tiles in N): a near-square grid of `waves` whole waves of `slots`
    resident blocks and a partial last wave of about `tail_fraction` of one. On the H200
    (264 slots of t816) waves 1, 2, 1, 3 and fractions 0.095, 0.18, 0.16, 0.88 give 17 x 17,
    24 x 24, 17 x 18 and 32 x 32 tiles."""
    assert slots > 1, slots
    target = waves * slots + min(slots - 1, max(1, round(tail_fraction * slots)))
    for tiles_m in range(math.isqrt(target), 0, -1):  # the squarest grid still in the partial wave
        tiles_n = -(-target // tiles_m)
        if tiles_m * tiles_n < (waves + 1) * slots:
            return tiles_m, tiles_n
    raise AssertionError("unreachable: tiles_m = 1 gives the target")


# (M, N, K) large enough that auto copies misaligned operands and pads an odd K: the copies
# (~3% of the product) cost less than the 4-byte loads and the checked loop they save, or
# than doing without the fastest config, which has no 4-byte instance. K is odd.
COPIED_SHAPE = (2048, 2080, 2047)


def copied_problem(rng):
    """(A, B) of COPIED_SHAPE that auto copies both of: K odd and A's rows misaligned."""
    m, n, k = COPIED_SHAPE
    return make_operand(rng, m, k, "r", offset=1), make_operand(rng, k, n, "c")


def transposing_problems(rng, batch):
    """(layout, A, B) for each pair of storage orders: COPIED_SHAPE, so that auto copies both
    operands (into the orders the planner rates fastest) and pads K; A misaligned (the copy
    reads it with scalar loads); batches of 3, or B one matrix broadcast over them."""
    m, n, k = COPIED_SHAPE
    nb = None if batch is None else 3
    for layout in LAYOUTS:
        A = make_operand(rng, m, k, layout[0], batch=nb, offset=1)
        B = make_operand(rng, k, n, layout[1], batch=None if batch == "broadcast" else nb)
        yield layout, A, (B.expand(3, k, n) if batch == "broadcast" else B)


def force_choice(A, B, config, splits=1, stream_k=False):
    """Fix the auto variant's choice for A @ B through the tuning cache (key after copies)."""
    torch_vecgemm._C.add_tuning_entry(torch_vecgemm._C.tuning_key(A, B), config, splits, stream_k=stream_k)


@pytest.fixture
def clean_tuning():
    """An empty tuning cache, autotune off and dependent launch on, before and after."""
    torch_vecgemm._C.clear_tuning_cache()
    torch_vecgemm.autotune(False)
    yield
    torch_vecgemm.autotune(False)
    torch_vecgemm._C.clear_tuning_cache()
    torch_vecgemm._C._testing.set_dependent_launch(True)
