"""Sibling matmuls (one output shape, an operand in common: q/k/v projections) share one kernel, each with its
own epilogue, and match NumPy on the simulator (tinyton/analysis/domain.py `check_matmul`)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt


@tt.jit
def qkv(x, wq, wk, wv, b):
    return (x @ wq) * 0.5, tt.maximum(x @ wk + b, 0.0), x @ wv


@tt.jit
def shared_weight(x, y, w):
    return x @ w + y @ w


@pytest.mark.parametrize("shape", [(1, 16), (37, 24), (2, 5, 40)])
def test_projections_of_one_input_are_one_kernel(shape):
    rng = np.random.default_rng(len(shape))
    c, n = shape[-1], 20
    x = rng.standard_normal(shape).astype(np.float32)
    wq, wk, wv = (rng.standard_normal((c, n)).astype(np.float32) for _ in range(3))
    b = rng.standard_normal(n).astype(np.float32)
    program = qkv.compile(x, wq, wk, wv, b)
    assert program.num_launches == 1
    expected = ((x @ wq) * 0.5, np.maximum(x @ wk + b, 0.0), x @ wv)
    for got, want in zip(program(x, wq, wk, wv, b), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_matmuls_sharing_a_weight_fuse_with_their_sum():
    rng = np.random.default_rng(7)
    x, y, w = (rng.standard_normal(s).astype(np.float32) for s in ((9, 33), (9, 33), (33, 17)))
    program = shared_weight.compile(x, y, w)
    assert program.num_launches == 1
    np.testing.assert_allclose(program(x, y, w), x @ w + y @ w, rtol=1e-5, atol=1e-5)
