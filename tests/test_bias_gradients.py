"""A biased linear layer's training step: the bias gradient `dy.sum(0)` (over every leading dim) is summed in the
weight gradient's kernel, `dy.T @ x`, from the K tiles of `dy.T` its dot loads anyway, and stored by the programs of
the first column tile (tinyton/analysis/matmul_operands.py `permuted_map`, tinyton/rewrites/row_stats.py
`operand_sum_groups`): no reduction kernel reads `dy` again. Checked on the simulator against eager and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import program as array_program
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch (pip install torch)")

import tinyton.torch as ttt
from torch_checks import check_forward_backward, check_training


def backward_kinds(e: ttt.Explanation) -> list[str]:
    """The kinds of the kernels the backward graphs launched."""
    return [step.launch.kind for g in e.report.groups if g.graph == "backward" for step in g.last.steps]


def mlp(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Two biased linear layers around a GELU: the first weight gradient has two column tiles of 64 (96 inputs), so
    the masked store is exercised; each has at most PROLOGUE_MAX_ROWS outputs, the weight gradients whose kernel
    takes the bias's sum in (the sums of several row tiles: `test_sums_over_row_and_column_tiles_and_k_ranges`)."""
    return torch.nn.Sequential(torch.nn.Linear(96, 48), torch.nn.GELU(), torch.nn.Linear(48, 64)).to(dtype)


@pytest.mark.parametrize("shape,backward", [((6, 96), 4), ((3, 40, 96), 5)])
def test_mlp_bias_gradients_ride_in_weight_gradients(shape: tuple[int, ...], backward: int) -> None:
    """fp32, 2-D and `[batch, seq, features]` activations: forward unchanged (two launches), backward 4 and 5
    launches (6 and 7 when each bias gradient was a reduction kernel of its own); eager's numbers."""
    torch.manual_seed(0)
    e = check_forward_backward(mlp(), torch.randn(*shape, requires_grad=True))
    kinds = backward_kinds(e)
    assert e.num_launches == 2 and "reduction" not in kinds and len(kinds) == backward, str(e)


@pytest.mark.parametrize("shape", [(64, 96), (4, 16, 96)])
def test_bf16_bias_gradient_sums_in_fp32(shape: tuple[int, ...]) -> None:
    """bf16: torch sums the gradient in fp32 and rounds once, and so does the kernel. The incoming gradient, 1 + k/128
    over 64 rows, sums exactly in fp32 and rounds at most steps when summed in bf16; the bias gradient is eager's to
    the bit. Backward: the input's and the weight's gradients, two launches (three with the bias's reduction)."""
    torch.manual_seed(1)
    model = torch.nn.Linear(96, 40).to(torch.bfloat16)
    reference = torch.nn.Linear(96, 40).to(torch.bfloat16)
    reference.load_state_dict(model.state_dict())
    x = torch.randn(*shape, dtype=torch.bfloat16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad = (1 + torch.randint(0, 128, (*shape[:-1], 40)) / 128).to(torch.bfloat16)
    e = ttt.explain(model, x)
    e.output.backward(grad)
    reference(x_ref).backward(grad)
    rows = tuple(range(len(shape) - 1))
    assert torch.equal(model.bias.grad, grad.float().sum(rows).to(torch.bfloat16))
    assert torch.equal(model.bias.grad, reference.bias.grad)
    bf16 = {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(model.weight.grad, reference.weight.grad, **bf16)
    torch.testing.assert_close(x.grad, x_ref.grad, **bf16)
    kinds = backward_kinds(e)
    assert kinds == ["matmul_epilogue"] * 2, str(e)


class Regressor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.mlp(x), y)


def test_training_steps_match_eager() -> None:
    """Three SGD steps of an MLP regressor over `[batch, seq, features]` give eager's losses and weights; no
    reduction kernel in the backward."""
    torch.manual_seed(2)
    e = check_training(Regressor(), torch.randn(3, 10, 24), torch.randn(3, 10, 8))
    assert "reduction" not in backward_kinds(e), str(e)


@tt.jit
def linear_grads(dy, x):
    return dy.T @ x, dy.sum(0)


@tt.jit
def linear_grads_3d(dy, x):
    return dy.reshape(-1, dy.shape[-1]).T @ x, dy.sum((0, 1))


@tt.jit
def weight_gradient_and_maxima(dy, x):
    return dy.T @ x, dy.max(0)


@tt.jit
def weight_gradient_and_mean_square(dy, x):
    return dy.T @ x, (dy * dy).mean(0, keepdims=True)


@tt.jit
def input_gradient_and_bias(dy, w):
    return dy @ w, dy.sum(0)


@pytest.mark.parametrize("fn,dy_shape", [(linear_grads, (70, 48)), (linear_grads_3d, (2, 35, 48)),
                                         (weight_gradient_and_maxima, (70, 48)),
                                         (weight_gradient_and_mean_square, (70, 48))])
def test_array_program_statistic_along_k_is_one_kernel(fn, dy_shape: tuple[int, ...]) -> None:
    """Sums, maxima and means (of an elementwise function) of `dy` over the rows `dy.T @ x` contracts: one launch
    computing both, NumPy's numbers."""
    rng = np.random.default_rng(0)
    dy, x = rng.standard_normal(dy_shape, dtype=np.float32), rng.standard_normal((70, 96), dtype=np.float32)
    program = fn.compile(dy, x)
    assert program.num_launches == 1
    for got, want in zip(program(dy, x), fn.fn(dy, x), strict=True):  # the function run by NumPy
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_statistic_across_k_is_a_kernel_of_its_own() -> None:
    """`dy @ w` contracts dy's columns, so `dy.sum(0)` (over its rows) is not in its K loop: two launches."""
    rng = np.random.default_rng(1)
    dy, w = rng.standard_normal((70, 48), dtype=np.float32), rng.standard_normal((48, 96), dtype=np.float32)
    program = input_gradient_and_bias.compile(dy, w)
    assert program.num_launches == 2
    dx, db = program(dy, w)
    np.testing.assert_allclose(dx, dy @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tiles", [MatmulTiles(16, 32, 16, 4), MatmulTiles(16, 32, 16, 4, split_k=3)])
def test_sums_over_row_and_column_tiles_and_k_ranges(monkeypatch, tiles: MatmulTiles) -> None:
    """`[16, 32]` tiles of a `[48, 96]` weight gradient: three row tiles each summing their own rows of the bias
    gradient, three column tiles of which the first stores them; with the K loop split in three ranges the sums come
    from a loop over all of K of their own (each range's programs see a third of it)."""
    monkeypatch.setattr(array_program, "matmul_tiles", lambda p: tiles.fit(p))
    rng = np.random.default_rng(2)
    dy, x = rng.standard_normal((70, 48), dtype=np.float32), rng.standard_normal((70, 96), dtype=np.float32)
    fresh = tt.jit(lambda dy, x: linear_grads.fn(dy, x))  # compiled for these tiles
    program = fresh.compile(dy, x)
    assert program.num_launches == 1 and program.steps[0].launch.tiles["BM"] == 16
    assert program.steps[0].launch.tiles.get("SPLIT_K", 1) == tiles.split_k
    dw, db = program(dy, x)
    np.testing.assert_allclose(dw, dy.T @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-5, atol=1e-5)
