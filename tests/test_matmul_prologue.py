"""A computed left operand of a matmul is evaluated in the matmul's K loop (tinyton/analysis/matmul_operands.py):
RMSNorm rounded to bf16 before the projections, the cast of an attention output before the output projection.
Exact against NumPy on the simulator: the operand is computed as written (the norm's scale before the rounding)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt

BF16 = ml_dtypes.bfloat16


@tt.jit
def norm_projections(x, g, wq, wk, wv):
    h = (x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5) * g.to(tt.float32)).to(tt.bfloat16)
    return tuple((h @ w.T).to(tt.float32) for w in (wq, wk, wv))


@tt.jit
def heads_projection(o, w):
    """`(B, H, T, D)` heads back to `(B, T, H * D)`, rounded to bf16, projected."""
    b, h, t, d = o.shape
    return (tt.swapaxes(o, 1, 2).reshape(b, t, h * d).to(tt.bfloat16) @ w.T).to(tt.float32)


def _linear(x, w):
    return (x.astype(BF16).astype(np.float32) @ w.astype(np.float32).T).astype(BF16).astype(np.float32)


@pytest.mark.parametrize("shape", [(2, 1, 64), (5, 40), (3, 2, 48)])
def test_norm_is_computed_in_the_projections_k_loop(shape):
    rng = np.random.default_rng(len(shape))
    k = shape[-1]
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(k).astype(BF16)
    wq, wk, wv = (rng.standard_normal((n, k)).astype(BF16) for n in (24, 16, 16))
    program = norm_projections.compile(x, g, wq, wk, wv)
    assert program.num_launches == 2  # q, and k/v (siblings), each with its own copy of the norm
    normed = x * (1 / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(1e-5))) * g.astype(np.float32)
    for got, w in zip(program(x, g, wq, wk, wv), (wq, wk, wv)):
        np.testing.assert_array_equal(got, _linear(normed, w))


def test_cast_of_a_transposed_view_is_the_operand():
    rng = np.random.default_rng(3)
    o = rng.standard_normal((2, 4, 1, 16)).astype(np.float32)
    w = rng.standard_normal((32, 64)).astype(BF16)
    program = heads_projection.compile(o, w)
    assert program.num_launches == 1
    np.testing.assert_array_equal(program(o, w), _linear(o.swapaxes(1, 2).reshape(2, 1, 64), w))
