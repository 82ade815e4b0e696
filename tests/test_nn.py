"""torch_vecgemm.nn: Linear interchangeable with torch.nn.Linear (constructor, parameters,
initialisation, state_dict, both ways), the swap of a model's layers and back, its values
and gradients against float64, and torch.compile."""
from __future__ import annotations

import pytest
import torch

import torch_vecgemm
from conftest import DEVICES, assert_gemm_close, randn
from torch_vecgemm.nn import Linear, swap_linear, unswap_linear


class MLP(torch.nn.Module):
    def __init__(self, d=24, h=40):
        super().__init__()
        self.up, self.down = torch.nn.Linear(d, h), torch.nn.Linear(h, d, bias=False)
        self.head = torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 5))

    def forward(self, x):
        return self.head(self.down(torch.relu(self.up(x))))


def test_linear_is_a_torch_linear_with_the_same_initialisation():
    torch.manual_seed(3)
    ours = Linear(17, 9)
    torch.manual_seed(3)
    theirs = torch.nn.Linear(17, 9)
    assert isinstance(ours, torch.nn.Linear)
    torch.testing.assert_close(ours.weight, theirs.weight, rtol=0, atol=0)
    torch.testing.assert_close(ours.bias, theirs.bias, rtol=0, atol=0)
    assert Linear(3, 2, bias=False).bias is None


def test_state_dicts_load_both_ways():
    theirs, ours = torch.nn.Linear(6, 4), Linear(6, 4)
    ours.load_state_dict(theirs.state_dict())
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    back = torch.nn.Linear(6, 4)
    back.load_state_dict(ours.state_dict())
    for a, b in zip(back.state_dict().values(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_gradients_against_float64(device, bias, rng):
    layer = Linear(33, 20, bias=bias, device=device)
    x = randn(rng, 3, 7, 33, device=device).requires_grad_()
    out = layer(x)
    assert out.shape == (3, 7, 20)
    C = layer.bias.detach().expand(21, 20) if bias else None
    assert_gemm_close(out.reshape(21, 20), x.detach().reshape(21, 33), layer.weight.detach().t(), C, 1.0, 1.0 if bias else 0.0)
    grad = randn(rng, 3, 7, 20, device=device)
    out.backward(grad)
    x64, w64 = x.detach().double().requires_grad_(), layer.weight.detach().double().requires_grad_()
    b64 = layer.bias.detach().double().requires_grad_() if bias else None
    torch.nn.functional.linear(x64, w64, b64).backward(grad.double())
    for ours, ref in [(x.grad, x64.grad), (layer.weight.grad, w64.grad)] + ([(layer.bias.grad, b64.grad)] if bias else []):
        rel = (torch.linalg.norm(ours.double() - ref) / torch.linalg.norm(ref)).item()
        assert rel < 1e-5, rel


def test_swap_and_swap_back_keep_the_weights_and_the_outputs(rng):
    model = MLP()
    params = {name: p for name, p in model.named_parameters()}
    x = randn(rng, 4, 24, device="cpu")
    before = model(x)
    assert swap_linear(model) == ["up", "down", "head.1"]
    assert all(type(m) is Linear for m in (model.up, model.down, model.head[1]))
    assert {name: p for name, p in model.named_parameters()} == params  # the same Parameter objects
    torch.testing.assert_close(model(x), before)
    assert unswap_linear(model) == ["up", "down", "head.1"]
    assert type(model.up) is torch.nn.Linear and type(model.head[1]) is torch.nn.Linear


def test_swap_filters_and_the_model_itself():
    model = MLP()
    assert swap_linear(model, include="head.*") == ["head.1"]
    assert swap_linear(model, exclude=["down"]) == ["up"]
    assert swap_linear(model, include=lambda name, m: m.out_features == 24) == ["down"]
    layer = torch.nn.Linear(3, 3)
    assert swap_linear(layer) == [""] and type(layer) is Linear

    class Custom(torch.nn.Linear):  # a subclass with its own forward is left alone
        def forward(self, x):
            return super().forward(x) * 2

    assert swap_linear(torch.nn.Sequential(Custom(2, 2))) == []


def test_compiles_fullgraph_and_trains(rng):
    model = MLP()
    swap_linear(model)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = randn(rng, 8, 24, device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = compiled(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    torch.testing.assert_close(compiled(x), model(x))


def test_package_exports_nn():
    assert torch_vecgemm.nn.Linear is Linear


@pytest.mark.parametrize("shape", [(7, 33), (3, 7, 33), (33,)])
def test_linear_result_is_a_view_where_f_linear_s_is(rng, shape):
    """Not for a matrix: FSDP2 warns of a module returning a view (an in-place op on it
    would drop its hooks), and F.linear's result for a matrix is none."""
    layer = Linear(33, 20)
    x = randn(rng, *shape, device="cpu")
    out = layer(x)
    theirs = torch.nn.functional.linear(x, layer.weight, layer.bias)
    assert (out._base is None) == (theirs._base is None) == (x.dim() == 2)
    assert out.shape == theirs.shape
    torch.testing.assert_close(out, theirs)
