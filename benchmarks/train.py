"""Train real models with torch.nn.Linear and with torch_vecgemm.nn.Linear, and compare.

    python -m benchmarks.train                        # gpt2-small and mlp, 300 steps each: 3.5 min on an H200
    python -m benchmarks.train --steps 100 --models mlp
    python -m benchmarks.train --out /tmp/train       # /tmp/train.json, .png, .md
    python -m benchmarks.train --preset tiny          # CPU-sized models (the smoke test's)

Two models, built from standard layers (benchmarks/models.json holds their configs):

* gpt2-small: a decoder with GPT-2 small's shape (12 layers, d_model 768, 12 heads, MLP
  3072, GPT-2's vocabulary of 50257 tokens, tied embeddings) over a context of 256 tokens,
  16 sequences a step. 4096 tokens a step make every Linear a product with M = 4096 rows,
  large enough to fill the H200 (the qkv product alone has 576 tiles of 128 x 128 for 264
  resident blocks) so the kernels are what is compared, not launch overhead; and a step
  costs about 3 TFLOP, so 300 steps take about half a minute in fp32. The full vocabulary
  keeps the head's product (4096 x 50257 x 768, an odd N) in the run.
* mlp: a language model that sees the two previous tokens of each position: their
  embeddings, a Linear, then residual blocks of LayerNorm, Linear(768, 3072), GELU,
  Linear(3072, 768), and the head. Nearly all of its time is Linear layers.

Each is trained from the same initial weights on the same batches five times: with
torch.nn.Linear (the reference), with its Linear layers swapped by
torch_vecgemm.nn.swap_linear (IEEE fp32), with every Linear computed in float64 and rounded
to float32 (the "twin": the reference less its own rounding errors), and with the model
unchanged two more ways: every product routed to the library in 3xTF32 by the
whole-program switch (torch_vecgemm.enable), and torch's own with TF32 allowed (another
precision, for comparison). The data is a seeded
synthetic language made here, no downloads: an order-2 Markov chain whose next token is one
of eight successors of the previous token, chosen with probabilities that the token before
decides (Language). A model that reads one token back cannot get below ln 8 nats; one that
uses both can reach the chain's entropy rate, so a loss under ln 8 shows the context used.

The agreement check: a correct fp32 kernel differs from cuBLAS by rounding (about
sqrt(K) ulps a product, both ways), and training amplifies such differences step after
step, so two correct runs drift apart by an amount that no fixed number predicts. The twin
measures that drift for the reference's rounding errors themselves: the swapped model
carries its own and the reference's, about sqrt(2) times as much, and must stay within
`margin` times the twin's drift (or a floor of a few ulps where that is smaller) at step 0
(forward only: identical weights), over the first `early_steps` steps, and in the mean loss
of the last `final_window` steps. (A first twin that summed two half-K products with torch's
kernels gave the H200's reference loss bit for bit at step 0: cuBLAS's own order can absorb
such a split, so it measured less than rounding.) A defect of the swapped layers (a dropped bias gradient, a
transposed operand) departs from the reference by orders of magnitude more than rounding
does in the first steps; tests/test_train.py plants one and checks the check fails. The
switch's run, fp32-accurate too, must pass the same check; TF32's drift is reported.

Throughput, tokens per second, for training (forward, backward, gradient clipping, AdamW
step) and inference (forward under torch.inference_mode), eager and under
torch.compile(fullgraph=True), for the reference and each way but the twin, in one process,
and for one way timed only: the switch in IEEE fp32 under autotune, each product's kernels
and torch's own timed once and the faster kept (the tuning happens in the warm-up steps);
warm-up steps (and compilation) excluded, then the median of several timed windows, each
synchronized at both ends. Compilation also records what inductor generated around the
ops: its kernels, which of them fuse a GELU, and the matrix products it calls.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import re
import statistics
import sys
import time
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

import torch_vecgemm
from benchmarks.common import figure, save_figure, tf32_allowed
from torch_vecgemm.nn import swap_linear

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "models.json")
# The ways of computing a model's products, as the records name them: torch's fp32 (the
# reference), its Linear layers swapped for the library's in IEEE fp32, the float64 twin
# (below), the model unchanged with every product routed to the library in 3xTF32 by the
# whole-program switch, and torch's own with TF32 allowed (another precision: what a user
# gives accuracy up for). Timed only: the switch in IEEE fp32 under autotune, which times
# each product's candidates and torch's own once and keeps the faster (the library's way of
# never losing to torch where its model would; its results are IEEE fp32's).
TORCH, VECGEMM, TWIN = "torch.nn.Linear", "torch_vecgemm.nn.Linear", "float64 twin"
SWITCH_3XTF32, TORCH_TF32 = "torch_vecgemm.enable('3xtf32')", "torch.nn.Linear, TF32"
SWITCH_IEEE_TUNED = "torch_vecgemm.enable('ieee'), autotune"
CURVES = (TORCH, VECGEMM, TWIN, SWITCH_3XTF32, TORCH_TF32)                    # trained, loss curve each
LINEARS = (TORCH, VECGEMM, SWITCH_IEEE_TUNED, SWITCH_3XTF32, TORCH_TF32)      # timed
# The fp32-accurate ways, whose loss curves must agree with the reference's for a record.
AGREEING = (VECGEMM, SWITCH_3XTF32)


def load_configs(path=CONFIGS):
    with open(path) as f:
        return json.load(f)


# ---- the synthetic language ----------------------------------------------------------------


class Language:
    """A seeded order-2 Markov chain over `vocab` tokens. Each token a has `successors`
    successor tokens succ[a, 0..S-1], drawn from a Zipf distribution (so a few tokens are
    frequent, as in text); the next token after (b, a) is succ[a, j] with j = (k + b) mod S
    and k drawn with probability proportional to slot_decay**k. Without b, every slot is
    equally likely; with it, the distribution is peaked."""

    def __init__(self, vocab, order=2, successors=8, slot_decay=0.5, zipf=1.1, seed=0):
        if order != 2:
            raise ValueError(f"the language is order 2 (one token decides the successors, the one before picks); got {order}")
        self.vocab, self.successors = vocab, successors
        self.generator = torch.Generator().manual_seed(seed)
        ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
        self.unigram = (ranks ** -zipf / (ranks ** -zipf).sum()).float()
        self.succ = torch.multinomial(self.unigram, vocab * successors, replacement=True,
                                      generator=self.generator).view(vocab, successors)
        slot = slot_decay ** torch.arange(successors, dtype=torch.float64)
        self.slot_probs = (slot / slot.sum()).float()

    def entropy_bounds(self):
        """Nats per token: the entropy rate is at most `order2` (equal where a token's
        successors are distinct); a model of one token back cannot beat `order1` = ln S."""
        p = self.slot_probs.double()
        return {"order2": float(-(p * p.log()).sum()), "order1": math.log(self.successors)}

    def sample(self, sequences, length):
        """(sequences, length) tokens, on the CPU from the language's own generator: the
        same stream on every machine."""
        g, n, s = self.generator, sequences, self.successors
        x = torch.empty(n, length, dtype=torch.long)
        x[:, 0] = torch.multinomial(self.unigram, n, replacement=True, generator=g)
        x[:, 1] = self.succ[x[:, 0], torch.randint(s, (n,), generator=g)]
        for t in range(2, length):
            k = torch.multinomial(self.slot_probs, n, replacement=True, generator=g)
            x[:, t] = self.succ[x[:, t - 1], (k + x[:, t - 2]) % s]
        return x


# ---- the models ------------------------------------------------------------------------------


class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then a GELU MLP."""

    def __init__(self, d, heads, d_mlp):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, d_mlp), nn.Linear(d_mlp, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class LanguageModel(nn.Module):
    """The part both models share: token embeddings, a final LayerNorm and a head tied to
    the embeddings (as GPT-2's), and the loss when targets are given, so that
    torch.compile takes the cross-entropy into the graph too."""

    def __init__(self, vocab, d):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def body(self, tokens):
        raise NotImplementedError

    def forward(self, tokens, targets=None):
        logits = self.head(self.ln_f(self.body(tokens)))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class GPT(LanguageModel):
    def __init__(self, vocab, d_model, layers, heads, d_mlp, context, **_):
        super().__init__(vocab, d_model)
        self.position = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, d_mlp) for _ in range(layers))

    def body(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return x


class MLPBlock(nn.Module):
    def __init__(self, d, d_mlp):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, d_mlp), nn.Linear(d_mlp, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.ln(x)), approximate="tanh"))


class MLP(LanguageModel):
    """Each position sees its token and the one before (a token 0 before the first): as
    much context as the order-2 language has."""

    def __init__(self, vocab, d_model, layers, d_mlp, **_):
        super().__init__(vocab, d_model)
        self.mix = nn.Linear(2 * d_model, d_model)
        self.blocks = nn.Sequential(*(MLPBlock(d_model, d_mlp) for _ in range(layers)))

    def body(self, tokens):
        before = F.pad(tokens[:, :-1], (1, 0))
        return self.blocks(self.mix(torch.cat([self.embed(tokens), self.embed(before)], dim=-1)))


KINDS = {"gpt": GPT, "mlp": MLP}


def build(config, seed):
    """The model of a config with GPT-2's initialisation (N(0, 0.02), the projections into
    the residual stream scaled by 1/sqrt(2 * layers), zero biases), made on the CPU from
    `seed` so that it is the same on every machine."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = KINDS[config["kind"]](**config)
        for name, p in model.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * config["layers"]) if name.endswith(("proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, std=std)
    return model


class Float64Linear(nn.Linear):
    """The twin's Linear: the product (and, through autograd, its gradients) in float64,
    rounded to float32: the reference's values without its rounding errors."""

    def forward(self, x):
        bias = None if self.bias is None else self.bias.double()
        return F.linear(x.double(), self.weight.double(), bias).to(x.dtype)


@contextlib.contextmanager
def autotuned():
    """Autotune on from an empty tuning cache, then off and the cache emptied again, so that
    its choices (torch's product among them) serve this way alone."""
    torch_vecgemm._C.clear_tuning_cache()
    torch_vecgemm.autotune(True)
    try:
        yield
    finally:
        torch_vecgemm.autotune(False)
        torch_vecgemm._C.clear_tuning_cache()


@contextlib.contextmanager
def computing(linear):
    """What must hold while a model computed the given way runs: the whole-program switch
    on (with autotune), or TF32 allowed in torch's products; nothing for the others."""
    if linear == SWITCH_3XTF32:
        with torch_vecgemm.enable("3xtf32"):
            yield
    elif linear == SWITCH_IEEE_TUNED:
        with torch_vecgemm.enable("ieee"), autotuned():
            yield
    elif linear == TORCH_TF32:
        with tf32_allowed(True):
            yield
    else:
        yield


def variant(model, linear):
    """A copy of `model` (the same weights) with its Linear layers computed the given way
    (the switch and TF32 change nothing in the model: `computing` says what they need);
    returns (copy, names of the layers changed)."""
    model = copy.deepcopy(model)
    if linear == VECGEMM:
        return model, swap_linear(model)
    if linear == TWIN:
        names = [n for n, m in model.named_modules() if type(m) is nn.Linear]
        for m in model.modules():
            if type(m) is nn.Linear:
                m.__class__ = Float64Linear
        return model, names
    return model, []


# ---- training --------------------------------------------------------------------------------


def optimizer(model, training, schedule=True):
    """AdamW with decay on the matrices only, and GPT-2's learning-rate schedule: a linear
    warm-up, then a cosine down to min_lr_fraction of the peak over the run."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": training["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=training["lr"], betas=tuple(training["betas"]))
    steps, warm, low = training["steps"], training["warmup_steps"], training["min_lr_fraction"]

    def factor(step):
        if not schedule:
            return 1.0
        if step < warm:
            return (step + 1) / warm
        progress = min(1.0, (step - warm) / max(1, steps - warm))
        return low + (1 - low) * 0.5 * (1 + math.cos(math.pi * progress))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def train_step(forward, model, opt, clip, x, y):
    loss = forward(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.detach()


def loss_curve(model, batches, training, desc):
    """The loss of every step of a run over `batches`, (steps, batch, context + 1) tokens."""
    opt, sched = optimizer(model, training)
    losses = []
    for step in _progress(range(len(batches)), desc):
        batch = batches[step]
        losses.append(train_step(model, model, opt, training["clip"], batch[:, :-1], batch[:, 1:]))
        sched.step()
    return torch.stack(losses).tolist()


# ---- the agreement check ---------------------------------------------------------------------


def divergence(reference, other, agreement):
    """How far a loss curve is from the reference's, relatively: at step 0, the most over
    the first early_steps steps, and in the mean of the last final_window steps."""
    rel = [abs(a - b) / abs(a) for a, b in zip(reference, other)]
    w = min(agreement["final_window"], len(reference))
    ref_final, other_final = statistics.fmean(reference[-w:]), statistics.fmean(other[-w:])
    early = rel[:agreement["early_steps"]]
    # max() skips a NaN that is not first (every comparison with it is False): say it.
    return {"step0": rel[0], "early": math.nan if any(map(math.isnan, early)) else max(early),
            "final": abs(ref_final - other_final) / abs(ref_final)}


def check_agreement(curves, agreement, linear=VECGEMM):
    """A way's divergence from the reference (the swapped model's by default) against the
    bound the twin sets: margin x the twin's own divergence, at least the floor (the
    module's doc says why)."""
    ours, twin = divergence(curves[TORCH], curves[linear], agreement), divergence(curves[TORCH], curves[TWIN], agreement)
    bounds = {k: max(agreement["margin"] * twin[k], agreement["floors"][k]) for k in ours}
    failed = [k for k in ours if not ours[k] <= bounds[k]]  # a NaN fails too
    return {"vecgemm": ours, "twin": twin, "bounds": bounds, "failed": failed, "ok": not failed}


# ---- throughput ------------------------------------------------------------------------------


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_windows(step, tokens_per_step, timing, device):
    """Tokens per second of `step`: timing's warm-up steps first (compilation among them),
    then `windows` windows of steps_per_window steps, each synchronized at both ends; the
    median window, and every window."""
    for _ in range(timing["warmup_steps"]):
        step()
    rates = []
    for _ in range(timing["windows"]):
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(timing["steps_per_window"]):
            step()
        _sync(device)
        rates.append(tokens_per_step * timing["steps_per_window"] / (time.perf_counter() - t0))
    return {"tokens_per_s": statistics.median(rates), "windows_tokens_per_s": rates}


def _captured(first_call, capture):
    """Run first_call; with capture, return what inductor generated for it too (caches off,
    so that a cached graph is generated again rather than loaded unseen)."""
    if not capture:
        first_call()
        return None
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    patches = {k: False for k in ("fx_graph_cache", "fx_graph_remote_cache") if hasattr(inductor_config, k)}
    with inductor_config.patch(patches):
        if hasattr(functorch_config, "enable_autograd_cache"):
            with functorch_config.patch(enable_autograd_cache=False):
                return run_and_get_code(first_call)[1]
        return run_and_get_code(first_call)[1]


def throughput(base, linear, batches, training, timing, compile_backend, device):
    """Training and inference tokens/s of one way of computing the Linear layers, eager
    and (unless compile_backend is None) compiled; with inductor, what it generated."""
    tokens = batches.shape[1] * (batches.shape[2] - 1)
    x, y = batches[0, :, :-1], batches[0, :, 1:]
    results, generated = [], {}
    for compiled in [False] + ([True] if compile_backend else []):
        with computing(linear):
            results += _rates(base, linear, compiled, x, y, tokens, training, timing, compile_backend, device,
                                      generated)
    return results, generated


def _rates(base, linear, compiled, x, y, tokens, training, timing, compile_backend, device, generated):
    """throughput's rows (train, inference) for one way, eager or compiled."""
    results = []
    model, _ = variant(base, linear)
    opt, _ = optimizer(model, training, schedule=False)
    forward, fullgraph, error = model, (True if compiled else None), None
    if compiled:
        # Each way's graphs from scratch: copies of one model class share its code, whose
        # recompilations for every way would reach dynamo's limit.
        torch._dynamo.reset()
        forward = torch.compile(model, fullgraph=True, backend=compile_backend)
    capture = compiled and compile_backend == "inductor"

    def train():
        train_step(forward, model, opt, training["clip"], x, y)

    def infer():
        with torch.inference_mode():
            forward(x)

    for mode, step in (("train", train), ("inference", infer)):
        try:
            codes = _captured(step, capture)
        except Exception as e:  # noqa: BLE001 - a graph break under fullgraph=True is a result to record
            if not compiled:
                raise
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            forward = torch.compile(model, backend=compile_backend)
            codes, fullgraph = _captured(step, capture), False
        if codes is not None:
            generated[mode] = codes
        rate = time_windows(step, tokens, timing, device)
        results.append({"linear": linear, "mode": mode, "compiled": compiled, "fullgraph": fullgraph,
                        "graph_break": error, **rate})
    return results


# ---- what inductor generated -----------------------------------------------------------------

_KERNEL_CALL = re.compile(r"^\s+((?:triton|cpp_fused)_\w+?)(?:\.run)?\(", re.MULTILINE)
_EXTERN_GEMM = re.compile(r"extern_kernels\.(mm|addmm|bmm|baddbmm)\(")
_CUSTOM_OP = re.compile(r"torch\.ops\.(vecgemm\.\w+|aten\.\w+)\.default\(")


def inductor_summary(code):
    """One generated module in numbers: the kernels it launches (inductor's own: triton
    on a GPU, C++ on the CPU), those that fuse a GELU (or its gradient: tanh), the matrix
    products it hands to ATen (extern_kernels) and the ops it calls as they are (ours
    among them)."""
    calls = _KERNEL_CALL.findall(code)
    gelu = sorted({c for c in calls if "tanh" in c or "gelu" in c})
    return {"kernel_launches": len(calls), "distinct_kernels": len(set(calls)),
            "gelu_kernels": gelu, "extern_gemms": dict(Counter(_EXTERN_GEMM.findall(code))),
            "ops_called": dict(Counter(_CUSTOM_OP.findall(code)))}


# ---- the run ---------------------------------------------------------------------------------


def _progress(iterable, desc):
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, file=sys.stderr, leave=False)


def save_code(folder, model, linear, generated):
    """Inductor's modules as files, for reading: MODEL_LINEAR_MODE_N.py."""
    os.makedirs(folder, exist_ok=True)
    for mode, codes in generated.items():
        for i, code in enumerate(codes):
            with open(os.path.join(folder, f"{model}_{linear.split('.')[0]}_{mode}_{i}.py"), "w") as f:
                f.write(code)


def run_model(name, config, configs, training, timing, compile_backend, device, code_dir=None):
    language = Language(config["vocab"], **{k: v for k, v in configs["language"].items()})
    batches = language.sample(training["steps"] * config["batch"], config["context"] + 1)
    batches = batches.view(training["steps"], config["batch"], config["context"] + 1).to(device)
    base = build(config, training["init_seed"]).to(device)
    curves, swapped = {}, None
    for linear in CURVES:
        model, names = variant(base, linear)
        if linear == VECGEMM:
            swapped = names
        with computing(linear):
            curves[linear] = loss_curve(model, batches, training, f"{name}, {linear}")
        del model
    agreement = check_agreement(curves, configs["agreement"])
    # Every way's drift from the reference, against the twin's bound: the fp32-accurate ones
    # must stay within it (failures()), TF32 is there to be compared.
    drift = {linear: check_agreement(curves, configs["agreement"], linear) for linear in (SWITCH_3XTF32, TORCH_TF32)}
    timings, inductor = [], {}
    for linear in LINEARS:
        rows, generated = throughput(base, linear, batches, training, timing, compile_backend, device)
        timings += rows
        inductor[linear] = {mode: [inductor_summary(code) for code in codes] for mode, codes in generated.items()}
        if code_dir:
            save_code(code_dir, name, linear, generated)
    return {"config": config, "parameters": sum(p.numel() for p in base.parameters()),
            "tokens_per_step": config["batch"] * config["context"], "swapped_layers": len(swapped),
            "entropy_bounds": language.entropy_bounds(), "loss": curves, "agreement": agreement, "drift": drift,
            "throughput": timings, "inductor": inductor}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="default", help="the models of a preset in models.json (default, tiny)")
    ap.add_argument("--models", help="comma list of models.json's models (overrides --preset)")
    ap.add_argument("--steps", type=int, help="training steps of each loss curve (default: models.json's)")
    ap.add_argument("--batch", type=int, help="sequences a step, every model (default: each model's)")
    ap.add_argument("--context", type=int, help="tokens a sequence, every model (default: each model's)")
    ap.add_argument("--compile-backend", default="inductor",
                    help="torch.compile's backend for the compiled timings; 'none' times eager only")
    ap.add_argument("--windows", type=int, help="timed windows (default: models.json's)")
    ap.add_argument("--steps-per-window", type=int, help="steps a timed window (default: models.json's)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--configs", default=CONFIGS, help="the configs file")
    ap.add_argument("--out", help="write OUT.json, OUT.png and OUT.md")
    ap.add_argument("--save-code", metavar="DIR", help="write the modules inductor generated into DIR")
    return ap.parse_args(argv)


def run(args):
    """Trains and times what args asks for; returns the record (the stamp, the settings,
    each model's results)."""
    from benchmarks.common import machine_info

    configs = load_configs(args.configs)
    names = args.models.split(",") if args.models else configs["presets"][args.preset]
    training = {**configs["training"], **({"steps": args.steps} if args.steps else {})}
    timing = dict(configs["timing"])
    for key in ("windows", "steps_per_window"):
        if getattr(args, key):
            timing[key] = getattr(args, key)
    backend = None if args.compile_backend == "none" else args.compile_backend
    device = torch.device(args.device)
    # The comparison is fp32 against fp32: TF32 would make the reference another precision.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device.type == "cpu":
        print("No GPU: torch_vecgemm falls back to ATen on the CPU; the models are compared but the kernels are not run.",
              file=sys.stderr)
    info = machine_info()
    models = {}
    for name in names:
        config = dict(configs["models"][name])
        config.update({k: getattr(args, k) for k in ("batch", "context") if getattr(args, k)})
        models[name] = run_model(name, config, configs, training, timing, backend, device, args.save_code)
    settings = {"training": training, "timing": timing, "agreement": configs["agreement"],
                "language": configs["language"], "compile_backend": backend, "device": str(device),
                "float32_matmul_precision": torch.get_float32_matmul_precision()}
    return {"machine": info, "settings": settings, "models": models}


def agreements(model):
    """{way: its agreement check} for the fp32-accurate ways a model's record holds."""
    checks = {VECGEMM: model["agreement"]}
    checks.update({linear: model["drift"][linear] for linear in AGREEING if linear in model.get("drift", {})})
    return checks


def failures(data):
    """(model, way, the checks it failed) for every fp32-accurate way whose loss departs
    from the reference's."""
    return [(name, linear, a["failed"]) for name, m in data["models"].items()
            for linear, a in agreements(m).items() if not a["ok"]]


def write_outputs(out, data):
    """OUT.json, OUT.md and OUT.png; returns the paths written."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(markdown(data))
    plot(data, out + ".png")
    return [out + ".json", out + ".md", out + ".png"]


# ---- the report ------------------------------------------------------------------------------


def _rate(model, linear, mode, compiled):
    for r in model["throughput"]:
        if (r["linear"], r["mode"], r["compiled"]) == (linear, mode, compiled):
            return r
    return None


def throughput_rows(data, linear=VECGEMM):
    """(model, mode, compiled, torch tokens/s, the way's tokens/s, ratio, note) for every
    timing the record has of a way of computing the products (the swapped layers by
    default) beside the reference's."""
    rows = []
    for name, m in data["models"].items():
        for compiled in (False, True):
            for mode in ("train", "inference"):
                ref, ours = _rate(m, TORCH, mode, compiled), _rate(m, linear, mode, compiled)
                if ref is None or ours is None:
                    continue
                breaks = [r["graph_break"] for r in (ref, ours) if r.get("graph_break")]
                rows.append((name, mode, compiled, ref["tokens_per_s"], ours["tokens_per_s"],
                             ours["tokens_per_s"] / ref["tokens_per_s"], "; ".join(breaks)))
    return rows


# The ways the reports set beside the reference, as a reader knows them.
COMPARED = {VECGEMM: "IEEE fp32, Linear layers swapped", SWITCH_IEEE_TUNED: "IEEE fp32, torch_vecgemm.enable() + autotune",
            SWITCH_3XTF32: "3xTF32, torch_vecgemm.enable()", TORCH_TF32: "torch, TF32 allowed"}


def _drift(model, linear):
    """A way's agreement check in a model's record, if the record has the way."""
    return model["agreement"] if linear == VECGEMM else model.get("drift", {}).get(linear)


def _gemms(summary):
    parts = [f"{n} {op}" for op, n in sorted(summary["extern_gemms"].items())]
    parts += [f"{n} {op}" for op, n in sorted(summary["ops_called"].items()) if op.startswith("vecgemm")]
    return ", ".join(parts) or "none"


def _stamp(info):
    from benchmarks.report import stamp

    if info.get("gpu"):
        return stamp(info)
    return f"CPU ({info.get('cpu')}, no GPU: every product fell back to ATen), torch {info['torch']}, {info['date'][:10]}, commit {info.get('git_commit')}."


def headline(data, link):
    """The README's training table: for each model and way of computing its products,
    tokens/s over torch.nn.Linear's (fp32, TF32 off) per mode, and the final loss's drift
    from the reference against the bound the float64 twin sets; `link` is the page with
    every table (train.md)."""
    modes = [("train", False), ("train", True), ("inference", False), ("inference", True)]
    lines = [f"{data['machine'].get('gpu') or data['machine'].get('cpu')}, commit {data['machine'].get('git_commit')}: "
             "tokens/s over tokens/s with `torch.nn.Linear` in fp32 (TF32 off), and the final loss's relative drift "
             f"from that reference against the bound fp32 rounding sets ([every table]({link})).", "",
             "| model | products computed as | " + " | ".join(f"{mode}, {'compiled' if c else 'eager'}" for mode, c in modes)
             + " | loss drift (bound) |",
             "|---|---|" + "---:|" * len(modes) + "---|"]
    for name, m in data["models"].items():
        for linear, label in COMPARED.items():
            ratios = {(mode, c): r for _, mode, c, _, _, r, _ in throughput_rows({"models": {name: m}}, linear)}
            drift = _drift(m, linear)
            if not ratios and drift is None:
                continue
            cells = [f"{ratios[(mode, c)]:.2f}x" if (mode, c) in ratios else "-" for mode, c in modes]
            verdict = "-" if drift is None else (f"{drift['vecgemm']['final']:.1e} ({drift['bounds']['final']:.0e})"
                                                 + ("" if drift["ok"] else ", outside"))
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def markdown(data, *, title=True):
    s = data["settings"]
    lines = [f"## Training: {data['machine'].get('gpu') or data['machine'].get('cpu')}\n"] if title else []
    lines.append(
        _stamp(data["machine"]) + f" `python -m benchmarks.train`: {s['training']['steps']} AdamW steps per curve on the "
        "seeded synthetic language, fp32 throughout (TF32 off); tokens/s the median of "
        f"{s['timing']['windows']} windows of {s['timing']['steps_per_window']} steps after "
        f"{s['timing']['warmup_steps']} warm-up steps, compiled with torch.compile(fullgraph=True, backend="
        f"{s['compile_backend']!r}).\n")
    ways = [linear for linear in COMPARED if throughput_rows(data, linear)]
    lines.append("| model | tokens/step | mode | torch.nn.Linear tokens/s | "
                 + " | ".join(f"{COMPARED[w]} tokens/s (x torch)" for w in ways) + " |")
    lines.append("|---|---:|---|---:|" + "---:|" * len(ways))
    rows = {w: {(n, mode, c): (ours, ratio, note) for n, mode, c, _, ours, ratio, note in throughput_rows(data, w)}
            for w in ways}
    for name, mode, compiled, ref, *_ in throughput_rows(data, TORCH):
        notes = "; ".join(sorted({rows[w][(name, mode, compiled)][2] for w in ways
                                  if (name, mode, compiled) in rows[w] and rows[w][(name, mode, compiled)][2]}))
        label = f"{mode}, {'compiled' if compiled else 'eager'}" + (f" (graph break: {notes})" if notes else "")
        cells = [f"{rows[w][(name, mode, compiled)][0]:,.0f} ({rows[w][(name, mode, compiled)][1]:.2f})"
                 if (name, mode, compiled) in rows[w] else "-" for w in ways]
        lines.append(f"| {name} | {data['models'][name]['tokens_per_step']} | {label} | {ref:,.0f} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| model | parameters | loss: first, last (torch / ours) | entropy rate at most | step 0 | first steps | final | agree |")
    lines.append("|---|---:|---|---:|---|---|---|---|")
    for name, m in data["models"].items():
        a, ref, ours = m["agreement"], m["loss"][TORCH], m["loss"][VECGEMM]

        def cell(k):
            return f"{a['vecgemm'][k]:.1e} (twin {a['twin'][k]:.1e}, bound {a['bounds'][k]:.0e})"

        lines.append(f"| {name} | {m['parameters'] / 1e6:.3g} M | {ref[0]:.3f}, {ref[-1]:.3f} / {ours[0]:.3f}, {ours[-1]:.3f} | "
                     f"{m['entropy_bounds']['order2']:.2f} | {cell('step0')} | {cell('early')} | {cell('final')} | "
                     f"{'yes' if a['ok'] else 'NO: ' + ', '.join(a['failed'])} |")
    drifts = [(name, linear, m["drift"][linear]) for name, m in data["models"].items() for linear in m.get("drift", {})]
    if drifts:
        lines.append("\nThe model unchanged, its products computed another way: the same differences from the reference.\n")
        lines.append("| model | products computed as | step 0 | first steps | final | within the bound |")
        lines.append("|---|---|---|---|---|---|")
        for name, linear, a in drifts:
            def cell(k, a=a):
                return f"{a['vecgemm'][k]:.1e} (bound {a['bounds'][k]:.0e})"

            lines.append(f"| {name} | {COMPARED[linear]} | {cell('step0')} | {cell('early')} | {cell('final')} | "
                         f"{'yes' if a['ok'] else 'no: ' + ', '.join(a['failed'])} |")
    g = s["agreement"]
    lines.append(f"\nRelative loss differences from the reference: at step 0 (the same weights, forward only), the "
                 f"largest over the first {g['early_steps']} steps, and of the mean loss of the last {g['final_window']}; "
                 f"the twin is the reference with every Linear computed in float64 and rounded (its rounding errors removed), "
                 f"and the bound is {g['margin']:g}x the twin's difference, at least the floor "
                 f"({', '.join(f'{k} {v:g}' for k, v in g['floors'].items())}); the entropy rate is the language's floor. A model of the previous token alone "
                 f"cannot go below ln {data['settings']['language']['successors']} nats.\n")
    generated = [(name, linear, mode, graphs) for name, m in data["models"].items()
                 for linear, modes in m.get("inductor", {}).items() for mode, graphs in modes.items()]
    if generated:
        lines.append("What inductor generated (per graph; training: forward, backward):\n")
        lines.append("| model | Linear | mode | kernel launches | products | kernels with a GELU |")
        lines.append("|---|---|---|---|---|---|")
        for name, linear, mode, graphs in generated:
            lines.append(f"| {name} | {linear} | {mode} | {', '.join(str(g['kernel_launches']) for g in graphs)} | "
                         f"{' / '.join(_gemms(g) for g in graphs)} | "
                         f"{' / '.join(', '.join(g['gelu_kernels']) or '-' for g in graphs)} |")
        lines.append("")
    return "\n".join(lines)


def plot(data, path):
    models = data["models"]
    fig, axes = figure(nrows=1, ncols=len(models) + 1, figsize=(6 * (len(models) + 1), 4.8), squeeze=False)
    for ax, (name, m) in zip(axes[0], models.items()):
        for linear, style in ((TORCH, "-"), (VECGEMM, "--"), (TWIN, ":"), (SWITCH_3XTF32, "-."), (TORCH_TF32, (0, (1, 3)))):
            if linear in m["loss"]:
                ax.plot(m["loss"][linear], linestyle=style, label=linear, linewidth=1.2)
        ax.axhline(m["entropy_bounds"]["order2"], color="gray", linewidth=0.8, label="entropy rate (at most)")
        ax.axhline(m["entropy_bounds"]["order1"], color="gray", linestyle="--", linewidth=0.8, label="one token back: ln 8")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats)")
        ax.set_title(f"{name}: {'agree' if m['agreement']['ok'] else 'DISAGREE'}")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    ax = axes[0][-1]
    rows = throughput_rows(data, TORCH)
    labels = [f"{name} {mode}\n{'compiled' if compiled else 'eager'}" for name, mode, compiled, *_ in rows]
    pos = range(len(rows))
    ways = [TORCH] + [w for w in COMPARED if throughput_rows(data, w)]
    height = 0.8 / len(ways)
    for i, way in enumerate(ways):
        rates = {(n, mode, c): ours for n, mode, c, _, ours, _, _ in throughput_rows(data, way)}
        ax.barh([p - 0.4 + height * (i + 0.5) for p in pos], [rates.get(r[:3], 0) / 1e3 for r in rows], height=height,
                label=COMPARED.get(way, way))
    ax.set_yticks(list(pos), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("thousand tokens/s")
    ax.set_title("throughput")
    ax.legend(fontsize=7)
    save_figure(fig, path, data["machine"])


def main(argv=None):
    args = parse_args(argv)
    data = run(args)
    print(markdown(data))
    if args.out:
        print("wrote " + ", ".join(write_outputs(args.out, data)))
    for name, linear, failed in failures(data):
        print(f"!!! {name}: the loss with {linear} departs from the reference's ({', '.join(failed)})", file=sys.stderr)
    return 1 if failures(data) else 0


if __name__ == "__main__":
    sys.exit(main())
