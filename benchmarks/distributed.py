"""Tensor parallelism and FSDP2 on a model built from torch_vecgemm.nn.Linear: checked
against a float64 single-device reference and for the collectives each plan implies, then
timed against the same model built from torch.nn.Linear.

    torchrun --nproc-per-node 2 -m benchmarks.distributed            # NCCL on GPUs, else gloo
    torchrun --nproc-per-node 2 -m benchmarks.distributed --steps 50 --dim 8192 --hidden 32768

Each check runs the two-layer MLP ``down(relu(up(x)))``:

* tensor parallel: ``parallelize_module(model, mesh, {"up": ColwiseParallel(), "down":
  RowwiseParallel()})``; the forward must all-reduce once (down's partial sums) and the
  backward once (the input's gradient, partial in up's K-sharded product), nothing else;
* FSDP2: ``fully_shard`` on each layer and on the model; each layer's parameters are
  gathered for its forward and again for its backward, and its gradients reduce-scattered.

Outputs and gradients are compared with the float64 model on the same (float32-rounded)
parameters and inputs, by relative error. Any mismatch prints and makes the exit status 1.
The tests (tests/test_distributed.py) run these same functions on two CPU processes.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import math
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_vecgemm

TOLERANCE = 1e-5  # relative error; fp32 MLPs of these sizes land near 1e-7


@dataclasses.dataclass(frozen=True)
class Config:
    batch: int
    seq: int
    dim: int
    hidden: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


# The checks: small, so that the float64 reference is cheap. The hidden size must divide by
# the ranks: ColwiseParallel hands its output on as a local tensor and RowwiseParallel
# rewraps it as if evenly sharded (torch.nn.Linear fails alike on 39 over 2 ranks).
# The timings: a transformer MLP on GPUs; something a CPU finishes.
CHECK = Config(batch=2, seq=6, dim=24, hidden=40)
TIMING = {"cuda": Config(batch=8, seq=512, dim=4096, hidden=16384), "cpu": Config(batch=4, seq=64, dim=256, hidden=1024)}

PLANS = ("tensor_parallel", "fully_sharded")
# What each plan must communicate on two or more ranks, per forward and backward.
EXPECTED_COLLECTIVES = {
    "tensor_parallel": ({"all_reduce": 1}, {"all_reduce": 1}),
    "fully_sharded": ({"all_gather": 2}, {"all_gather": 2, "reduce_scatter": 2}),
}


class MLP(torch.nn.Module):
    def __init__(self, cfg: Config, linear: type = torch_vecgemm.nn.Linear, **factory):
        super().__init__()
        self.up = linear(cfg.dim, cfg.hidden, **factory)
        self.down = linear(cfg.hidden, cfg.dim, **factory)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def draw(cfg: Config, seed: int, inputs: int):
    """float32 parameters (by name, initialised as nn.Linear does) and `inputs` pairs of
    (x, upstream gradient), all from one generator seeded with `seed`."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, fan_in, fan_out in (("up", cfg.dim, cfg.hidden), ("down", cfg.hidden, cfg.dim)):
        bound = 1 / math.sqrt(fan_in)
        params[f"{name}.weight"] = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=g)
        params[f"{name}.bias"] = torch.empty(fan_out).uniform_(-bound, bound, generator=g)
    data = [tuple(torch.randn(cfg.batch, cfg.seq, cfg.dim, generator=g) for _ in range(2)) for _ in range(inputs)]
    return params, data


def make_mlp(cfg: Config, params: dict, linear: type = torch_vecgemm.nn.Linear, device="cpu", dtype=torch.float32):
    # On the meta device first: nn.Linear's own initialisation would draw from (and move)
    # the global generator for values that are overwritten anyway.
    model = MLP(cfg, linear, device="meta").to_empty(device=device).to(dtype)
    model.load_state_dict(params)
    return model


def reference(cfg: Config, seed: int, inputs: int) -> list[dict]:
    """The float64 model, on CPU, for each of the inputs `draw` gives: its output, the
    input's gradient and the parameters' gradients."""
    params, data = draw(cfg, seed, inputs)
    model = make_mlp(cfg, params, torch.nn.Linear, dtype=torch.float64)
    results = []
    for x, grad in data:
        model.zero_grad()
        x = x.double().requires_grad_()
        out = model(x)
        out.backward(grad.double())
        results.append({"output": out.detach(), "input_grad": x.grad,
                        "grads": {name: p.grad.clone() for name, p in model.named_parameters()}})
    return results


def collectives(comm_mode) -> dict[str, int]:
    """CommDebugMode's counts under stable names: the ops differ between the functional
    collectives DTensor uses and the c10d ones FSDP2 uses, and between torch releases."""
    counts: dict[str, int] = {}
    for op, n in comm_mode.get_comm_counts().items():
        name = str(op).rsplit(".", 1)[-1].strip("_")
        for stable, spellings in (("reduce_scatter", ("reduce_scatter",)), ("all_reduce", ("all_reduce", "allreduce")),
                                  ("all_gather", ("all_gather", "allgather"))):
            if any(s in name for s in spellings):
                name = stable
                break
        counts[name] = counts.get(name, 0) + n
    return counts


def _host(t):
    """A CPU copy of a tensor, a DTensor's full value (a collective: every rank must call it)."""
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().to("cpu", copy=True)  # copying also waits for an async collective's result


def _placements(t):
    return tuple(str(p) for p in t.placements) if hasattr(t, "placements") else None


def _step(model, x, grad):
    """One forward and backward under CommDebugMode; returns the output and the counts."""
    from torch.distributed.tensor.debug import CommDebugMode

    with CommDebugMode() as forward:
        out = model(x)
    with CommDebugMode() as backward:
        out.backward(grad)
    return out, collectives(forward), collectives(backward)


def _report(model, out, x, forward, backward) -> dict:
    return {
        "output": _host(out),
        "output_placements": _placements(out),
        "input_grad": _host(x.grad),
        "grads": {name: _host(p.grad) for name, p in model.named_parameters()},
        "param_placements": {name: _placements(p) for name, p in model.named_parameters()},
        "grad_placements": {name: _placements(p.grad) for name, p in model.named_parameters()},
        "forward": forward,
        "backward": backward,
    }


def tensor_parallel(mesh, cfg: Config = CHECK, seed: int = 0, linear: type = torch_vecgemm.nn.Linear) -> dict:
    """The MLP with up column-wise and down row-wise parallel over `mesh`, every rank on the
    same input (`reference(cfg, seed, 1)[0]` is its float64 result)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    params, [(x, grad)] = draw(cfg, seed, 1)
    model = make_mlp(cfg, params, linear, device=mesh.device_type)
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    x = x.to(mesh.device_type).requires_grad_()
    out, forward, backward = _step(model, x, grad.to(mesh.device_type))
    return _report(model, out, x, forward, backward)


def fully_sharded(mesh, cfg: Config = CHECK, seed: int = 0, linear: type = torch_vecgemm.nn.Linear) -> dict:
    """The MLP under FSDP2 (each layer and the model a unit), rank r on input r of
    `reference(cfg, seed, ranks)`; the gradients are the mean of the ranks'."""
    from torch.distributed.fsdp import fully_shard

    params, data = draw(cfg, seed, mesh.size())
    model = make_mlp(cfg, params, linear, device=mesh.device_type)
    for layer in (model.up, model.down, model):
        fully_shard(layer, mesh=mesh)
    x, grad = (t.to(mesh.device_type) for t in data[mesh.get_local_rank()])
    x.requires_grad_()
    out, forward, backward = _step(model, x, grad)
    return _report(model, out, x, forward, backward)


def relative_error(got, ref) -> float:
    return (torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref)).item()


def mismatches(plan: str, rank: int, ranks: int, got: dict, ref: list[dict]) -> list[str]:
    """What is wrong with one rank's result of `plan` (empty: nothing): values against the
    float64 reference, the collectives against the plan's, the gradients' placements
    against their parameters'."""
    if plan == "tensor_parallel":
        expected, grads = ref[0], ref[0]["grads"]
    else:  # each rank its own input; FSDP averages the gradients over the ranks
        expected = ref[rank]
        grads = {name: sum(r["grads"][name] for r in ref) / ranks for name in ref[0]["grads"]}
    values = [("output", got["output"], expected["output"]), ("input grad", got["input_grad"], expected["input_grad"])]
    values += [(f"{name} grad", got["grads"][name], grads[name]) for name in grads]
    wrong = []
    for what, ours, theirs in values:
        if ours.shape != theirs.shape:
            wrong.append(f"{plan} rank {rank}: {what} has shape {tuple(ours.shape)}, expected {tuple(theirs.shape)}")
        elif not relative_error(ours, theirs) < TOLERANCE:
            wrong.append(f"{plan} rank {rank}: {what} relative error {relative_error(ours, theirs):.3g} >= {TOLERANCE}")
    if ranks > 1:
        for when, counted, plan_count in zip(("forward", "backward"), (got["forward"], got["backward"]),
                                             EXPECTED_COLLECTIVES[plan]):
            if counted != plan_count:
                wrong.append(f"{plan} rank {rank}: {when} collectives {counted}, the plan implies {plan_count}")
    for name, placements in got["grad_placements"].items():
        if placements != got["param_placements"][name]:
            wrong.append(f"{plan} rank {rank}: {name} grad placed {placements}, its parameter {got['param_placements'][name]}")
    return wrong


# ---- under torchrun ---------------------------------------------------------------------------


def _time_steps(model, x, grad, steps: int, warmup: int = 3) -> float:
    """Milliseconds per forward and backward, the slowest rank's: every rank runs the same
    number of steps (a per-rank adaptive count would leave collectives unmatched)."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)

    def step():
        # A loss that reads the output, as training does: backward alone never waits for
        # the forward's all-reduce, which would then be neither timed nor completed.
        (model(x) * grad).sum().backward()

    for _ in range(warmup):
        step()
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    elapsed = torch.tensor([(time.perf_counter() - start) * 1e3 / steps], dtype=torch.float64, device=x.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # on the device: NCCL takes no CPU tensor
    return elapsed.item()


def _timed(plan: str, mesh, cfg: Config, steps: int, linear: type) -> float:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    model = MLP(cfg, linear, device=mesh.device_type)
    if plan == "tensor_parallel":
        parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    else:
        for layer in (model.up, model.down, model):
            fully_shard(layer, mesh=mesh)
    x = torch.randn(cfg.batch, cfg.seq, cfg.dim, device=mesh.device_type)
    return _time_steps(model, x, torch.randn_like(x), steps)


def _kernels(plan: str, cfg: Config, ranks: int, device: str) -> str:
    """What each layer's forward product runs on, per rank: for tensor parallelism on its
    shard of the hidden dimension (x @ W.T, W.T a column-major view, as tv.linear has it)."""
    hidden = cfg.hidden // ranks if plan == "tensor_parallel" else cfg.hidden
    names = []
    for layer, k, n in (("up", cfg.dim, hidden), ("down", hidden, cfg.dim)):
        x, w = torch.empty(cfg.tokens, k, device=device), torch.empty(n, k, device=device)
        names.append(f"{layer} {cfg.tokens}x{k}x{n}: {torch_vecgemm.selected_kernel(x, w.t())}")
    return "; ".join(names)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--plans", default=",".join(PLANS), help=f"comma-separated, of {', '.join(PLANS)}")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args(argv)
    plans = args.plans.split(",")
    if not set(plans) <= set(PLANS):
        parser.error(f"--plans: {args.plans}: each must be one of {', '.join(PLANS)}")
    if "RANK" not in os.environ:
        parser.error("run under torchrun: torchrun --nproc-per-node 2 -m benchmarks.distributed")

    from torch.distributed.device_mesh import init_device_mesh

    use_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])
    device = "cuda" if use_cuda else "cpu"
    if use_cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(minutes=5))
    rank, ranks = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device, (ranks,))

    def say(text):
        if rank == 0:
            print(text, flush=True)

    say(f"{ranks} ranks, {device}, {dist.get_backend()}, torch {torch.__version__}, "
        f"torch_vecgemm {torch_vecgemm.__version__}")
    ref = reference(CHECK, args.seed, ranks)
    wrong = []
    for plan in plans:
        got = globals()[plan](mesh, CHECK, args.seed)
        found = mismatches(plan, rank, ranks, got, ref)
        wrong += found
        errors = {what: relative_error(got[key], ref[0 if plan == "tensor_parallel" else rank][key])
                  for what, key in (("output", "output"), ("input grad", "input_grad"))}
        say(f"{plan}: forward {got['forward']}, backward {got['backward']}, relative errors "
            + ", ".join(f"{k} {v:.2g}" for k, v in errors.items()) + (" MISMATCH" if found else " ok"))
    for line in wrong:
        print(line, flush=True)

    if not args.no_timing:
        defaults = TIMING[device]
        cfg = Config(**{f.name: getattr(args, f.name) or getattr(defaults, f.name) for f in dataclasses.fields(Config)})
        say(f"timing: {cfg}, {args.steps} steps, forward + backward, ms per step of the slowest rank (tokens/s of all ranks)")
        for plan in plans:
            say(f"  {plan} kernels: {_kernels(plan, cfg, ranks, device)}")
            times = {name: _timed(plan, mesh, cfg, args.steps, linear)
                     for name, linear in (("torch_vecgemm", torch_vecgemm.nn.Linear), ("torch.nn", torch.nn.Linear))}
            say(f"  {plan}: " + ", ".join(f"{name} {ms:.3f} ms ({cfg.tokens / ms * 1e3:.0f} tokens/s)" for name, ms in times.items())
                + f"; torch.nn's time / ours {times['torch.nn'] / times['torch_vecgemm']:.3f}")

    failed = torch.tensor([len(wrong)], dtype=torch.int64, device=device)
    dist.all_reduce(failed)
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    if failed.item():
        say(f"FAILED: {failed.item()} mismatches")
        return 1
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
