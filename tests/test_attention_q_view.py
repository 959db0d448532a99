"""q read as a view inside the flash-attention kernel: split heads (reshape, then swap axes) of a `(B, S, H*D)`
array is one attention kernel reading q in place, no transposed copy (tinyton/analysis/attention.py
`q_view`), NumPy-checked; chains that are not a view (a reshape after a transpose) still compute right."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from test_attention import randn, reference


@tt.jit
def split_head_attention(x, k, v, heads):
    b, s, c = x.shape
    q = tt.swapaxes(x.reshape(b, s, heads, c // heads), 1, 2)
    sc = (q @ tt.swapaxes(k, -1, -2)) * 0.25
    e = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def reshaped_after_transpose(x, k, v):
    q = tt.swapaxes(x, 0, 1).reshape(k.shape[0], -1)  # a copy in NumPy too: not a view of x
    sc = q @ k.T
    e = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("b, s_q, s_kv, heads, d", [(2, 1, 16, 4, 4), (1, 37, 50, 3, 16), (2, 64, 64, 2, 32)])
def test_split_heads_of_q_are_read_in_place(b, s_q, s_kv, heads, d):
    rng = np.random.default_rng(s_q + s_kv)
    x = randn(rng, b, s_q, heads * d)
    k, v = randn(rng, b, heads, s_kv, d), randn(rng, b, heads, s_kv, d)
    program = split_head_attention.compile(x, k, v, heads)
    assert program.num_launches == 1 and program.steps[0].launch.kind == "attention"
    q = np.swapaxes(x.reshape(b, s_q, heads, d), 1, 2)
    np.testing.assert_allclose(program(x, k, v, heads), reference(q, k, v, 0.25), rtol=1e-4, atol=1e-5)


def test_a_reshape_after_a_transpose_is_materialised():
    rng = np.random.default_rng(3)
    x, k, v = randn(rng, 8, 6, 4), randn(rng, 6, 32), randn(rng, 6, 32)
    q = np.swapaxes(x, 0, 1).reshape(6, -1)
    np.testing.assert_allclose(reshaped_after_transpose(x, k, v), reference(q, k, v, 1.0), rtol=1e-4, atol=1e-5)
