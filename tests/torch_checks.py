"""Checks shared by the torch backend's CPU and GPU tests: a compiled model against eager, forward and backward."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch

import tinyton.torch as ttt
from tinyton.torch.common import has_builtin

TOL = {"atol": 1e-4, "rtol": 1e-4}


def kernel_kinds(e: ttt.Explanation) -> list[str]:
    """The kinds of the kernels the explained call launched, group after group, in launch order."""
    return [step.launch.kind for group in e.report.groups if group.last is not None for step in group.last.steps]


def expected_fallbacks(*builtins_and_ops: tuple[str, str]) -> set[str]:
    """The ATen ops that still run in torch: those whose `tt.` builtin array programs lack."""
    return {op for builtin, op in builtins_and_ops if not has_builtin(builtin)}


class Lambda(torch.nn.Module):
    """A function as a module, for `check_forward_backward` (which compares gradients of a module's inputs)."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


def check_forward_backward(model: torch.nn.Module, *args: torch.Tensor, fallbacks: set[str] = frozenset(),
                           tol: dict | None = None) -> ttt.Explanation:
    """The compiled model's output and every gradient (parameters and float inputs) match eager's, and
    exactly `fallbacks` ran in torch."""
    tol = tol or TOL
    reference = copy.deepcopy(model)
    ref_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    e = ttt.explain(model, *args)
    expected = reference(*ref_args)
    torch.testing.assert_close(e.output, expected, **tol)
    e.output.float().sum().backward()
    expected.float().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol, msg=lambda m, name=name: f"grad of {name}: {m}")
    for a, r in zip(args, ref_args):
        if a.requires_grad:
            torch.testing.assert_close(a.grad, r.grad, **tol)
    assert set(e.fallbacks) == set(fallbacks), e.reasons
    assert e.num_launches > 0
    return e


def training_losses(model: torch.nn.Module, step: Callable, steps: int, idx: torch.Tensor,
                    targets: torch.Tensor) -> list[float]:
    """Losses of `steps` SGD steps of `model`, computed by `step` (the model, or its compiled form)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        loss = step(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_training(model: torch.nn.Module, idx: torch.Tensor, targets: torch.Tensor, steps: int = 3) -> ttt.Explanation:
    """`steps` training steps through the backend give eager's losses and weights, with no op in torch."""
    reference = copy.deepcopy(model)
    e = ttt.explain(model, idx, targets)
    losses = training_losses(model, e.compiled, steps, idx, targets)
    assert losses == pytest.approx(training_losses(reference, reference, steps, idx, targets), abs=1e-4, rel=1e-4)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, **TOL)
    assert not e.fallbacks, e.reasons
    assert {g.graph for g in e.report.groups} >= {"forward", "backward"}
    return e
