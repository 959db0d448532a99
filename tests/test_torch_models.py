"""torch.compile(backend=tinyton) on whole models: forward and backward match eager (fp32, 1e-4) on the simulator
(CPU tensors), with the ATen ops that ran in torch checked: none, except the ops whose `tt.` builtin array
programs do not have yet (`EXPECTED_FALLBACKS`), which disappear when the builtin lands."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch (pip install torch)")

import tinyton.torch as ttt  # noqa: E402
from tinyton.torch.common import has_builtin  # noqa: E402
from torch_models import GPTBlock, LayerNorm, LlamaBlock, MicroGPT, NanoGPT, rope_tables  # noqa: E402

TOL = {"atol": 1e-4, "rtol": 1e-4}


def expected_fallbacks(*builtins_and_ops: tuple[str, str]) -> set[str]:
    """The ATen ops that still run in torch: those whose `tt.` builtin is missing."""
    return {op for builtin, op in builtins_and_ops if not has_builtin(builtin)}


def check_forward_backward(model: torch.nn.Module, *args: torch.Tensor, fallbacks: set[str] = frozenset()) -> ttt.Explanation:
    """The compiled model's output and every gradient (parameters and float inputs) match eager's."""
    reference = copy.deepcopy(model)
    ref_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    e = ttt.explain(model, *args)
    expected = reference(*ref_args)
    torch.testing.assert_close(e.output, expected, **TOL)
    e.output.sum().backward()
    expected.sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m, name=name: f"grad of {name}: {m}")
    for a, r in zip(args, ref_args):
        if a.requires_grad:
            torch.testing.assert_close(a.grad, r.grad, **TOL)
    assert set(e.fallbacks) == set(fallbacks), e.reasons
    assert e.num_launches > 0
    return e


def test_llama_block_forward_backward() -> None:
    torch.manual_seed(0)
    cos, sin = rope_tables(8, 8)
    e = check_forward_backward(LlamaBlock(), torch.randn(2, 8, 32, requires_grad=True), cos, sin)
    assert {g.graph for g in e.report.groups} == {"forward", "backward"}


@pytest.mark.parametrize("gqa", ["repeat", "enable_gqa"])
def test_qwen_block_with_qkv_bias(gqa: str) -> None:
    torch.manual_seed(1)
    cos, sin = rope_tables(8, 8)
    check_forward_backward(LlamaBlock(qkv_bias=True, gqa=gqa), torch.randn(1, 8, 32, requires_grad=True), cos, sin)


def test_nanogpt_block_forward_backward() -> None:
    torch.manual_seed(0)
    check_forward_backward(GPTBlock().eval(), torch.randn(2, 8, 32, requires_grad=True))


def test_gpt_block_with_erf_gelu_and_handwritten_layernorm() -> None:
    torch.manual_seed(2)
    check_forward_backward(GPTBlock(gelu="none", norm=LayerNorm).eval(), torch.randn(2, 8, 32, requires_grad=True),
                           fallbacks=expected_fallbacks(("erf", "aten.gelu.default"), ("erf", "aten.erf.default")))


def _training_losses(model: torch.nn.Module, step_model: torch.nn.Module, steps: int, idx: torch.Tensor,
                     targets: torch.Tensor) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        loss = step_model(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("model_class", [NanoGPT, MicroGPT])
def test_small_lm_training_steps_match_eager(model_class: type) -> None:
    torch.manual_seed(0)
    model = model_class()
    reference = copy.deepcopy(model)
    idx = torch.randint(0, 32, (2, 16))
    targets = torch.randint(0, 32, (2, 16))
    e = ttt.explain(model, idx, targets)
    losses = _training_losses(model, e.compiled, 3, idx, targets)
    expected = _training_losses(reference, reference, 3, idx, targets)
    assert losses == pytest.approx(expected, abs=1e-4, rel=1e-4)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, **TOL)
    assert not e.fallbacks, e.reasons
    assert {g.graph for g in e.report.groups} >= {"forward", "backward"}
