"""q, k and v read as views inside the flash-attention kernel: split heads (reshape, then swap axes) of a
`(B, S, H*D)` array, or windows of one packed qkv projection (nanoGPT's `split`), are one attention kernel
reading them in place, no transposed copy (tinyton/analysis/strided_views.py `strided_view`), NumPy-checked; chains
that are not a view (a reshape after a transpose) still compute right."""

from __future__ import annotations

import numpy as np
import pytest

from test_attention import randn, reference
from toolchains import needs_ptxas

import tinyton as tt
from tinyton.compiler import compile_module


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


@tt.jit
def regrouped_after_transpose(x, k, v):
    q = tt.swapaxes(x, 0, 1).reshape(x.shape[0], x.shape[1], -1)  # (2, 3, D) of a (3, 2, D) array as (3, 2, D)
    sc = (q @ tt.swapaxes(k, -1, -2)) * 0.5
    e = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def test_a_reshape_regrouping_dims_that_do_not_divide_is_materialised():
    """(2, 3) regrouped as (3, 2) over strided dims: no run of whole pieces makes the 3 (the view analysis once
    split pieces of one forever there)."""
    rng = np.random.default_rng(4)
    x, k, v = randn(rng, 3, 2, 8), randn(rng, 3, 5, 8), randn(rng, 3, 5, 8)
    q = np.swapaxes(x, 0, 1).reshape(3, 2, 8)
    np.testing.assert_allclose(regrouped_after_transpose(x, k, v), reference(q, k, v, 0.5), rtol=1e-4, atol=1e-5)


def test_a_reshape_after_a_transpose_is_materialised():
    rng = np.random.default_rng(3)
    x, k, v = randn(rng, 8, 6, 4), randn(rng, 6, 32), randn(rng, 6, 32)
    q = np.swapaxes(x, 0, 1).reshape(6, -1)
    np.testing.assert_allclose(reshaped_after_transpose(x, k, v), reference(q, k, v, 1.0), rtol=1e-4, atol=1e-5)


@tt.jit
def packed_qkv_attention(x, w, heads):
    """nanoGPT's attention: one projection to q, k and v side by side, each a window with its heads split."""
    b, s, c = x.shape
    qkv = x @ w
    q, k, v = (tt.swapaxes(qkv[:, :, i * c : (i + 1) * c].reshape(b, s, heads, c // heads), 1, 2) for i in range(3))
    sc = (q @ tt.swapaxes(k, -1, -2)) * 0.3
    sc = tt.where(tt.tril(tt.ones((s, s), dtype=bool)), sc, -np.inf)
    e = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("b, s, heads, d", [(2, 16, 4, 8), (1, 37, 3, 16)])
def test_windows_of_a_packed_projection_are_read_in_place(b, s, heads, d):
    """q, k and v of one `x @ w` of width 3C: the projection, then one attention kernel that reads each window of
    its output through its strides (before, a kernel copied the windows and two more transposed k and v)."""
    rng = np.random.default_rng(b * s)
    x, w = randn(rng, b, s, heads * d), randn(rng, heads * d, 3 * heads * d) / 8
    program = packed_qkv_attention.compile(x, w, heads)
    assert [step.launch.kind for step in program.steps] == ["matmul_epilogue", "attention"]
    qkv = x.astype(np.float64) @ w
    c = heads * d
    q, k, v = (np.swapaxes(qkv[:, :, i * c : (i + 1) * c].reshape(b, s, heads, d), 1, 2) for i in range(3))
    sc = q @ np.swapaxes(k, -1, -2) * 0.3
    sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(program(x, w, heads), want, rtol=1e-4, atol=1e-5)


@tt.jit
def stacked_heads_attention(qkv):
    """`nn.MultiheadAttention`'s layout: q, k and v stacked on the first axis, sequence before batch x heads."""
    three, s, bh, d = qkv.shape
    q, k, v = (tt.swapaxes(qkv[i], 0, 1).reshape(2, bh // 2, s, d) for i in range(3))
    sc = (q @ tt.swapaxes(k, -1, -2)) * 0.25
    e = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def test_stacked_and_transposed_heads_are_read_in_place():
    rng = np.random.default_rng(7)
    qkv = randn(rng, 3, 24, 8, 16)
    program = stacked_heads_attention.compile(qkv)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    q, k, v = (np.swapaxes(qkv[i], 0, 1).reshape(2, 4, 24, 16) for i in range(3))
    np.testing.assert_allclose(program(qkv), reference(q, k, v, 0.25), rtol=1e-4, atol=1e-5)


@tt.jit
def merged_batch_heads_attention(qkv, heads):
    """`nn.MultiheadAttention`'s layout: q, k and v windows of one projection `(S, B, 3E)`, reshaped to
    `(S, B * heads, D)` (batch and heads merged, which no strided view is: their strides differ), transposed, and
    reshaped back to `(B, heads, S, D)`, which splits the merged dim again: a view after all."""
    s, b, e3 = qkv.shape
    e = e3 // 3
    q, k, v = (tt.swapaxes(qkv[:, :, i * e : (i + 1) * e].reshape(s, b * heads, e // heads), 0, 1)
               .reshape(b, heads, s, e // heads) for i in range(3))
    sc = (q @ tt.swapaxes(k, -1, -2)) * 0.25
    e_ = tt.exp(sc - tt.max(sc, axis=-1, keepdims=True))
    return (e_ / tt.sum(e_, axis=-1, keepdims=True)) @ v


def test_heads_merged_with_the_batch_and_split_back_are_read_in_place():
    rng = np.random.default_rng(8)
    s, b, heads, d = 12, 2, 4, 16
    qkv = randn(rng, s, b, 3 * heads * d)
    program = merged_batch_heads_attention.compile(qkv, heads)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    q, k, v = (np.swapaxes(qkv[:, :, i * heads * d : (i + 1) * heads * d].reshape(s, b * heads, d), 0, 1)
               .reshape(b, heads, s, d) for i in range(3))
    np.testing.assert_allclose(program(qkv, heads), reference(q, k, v, 0.25), rtol=1e-4, atol=1e-5)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_windows_of_a_packed_projection_assemble(arch):
    """The attention kernel that reads q, k and v as windows of one projection passes ptxas, without spills."""
    rng = np.random.default_rng(11)
    x, w = randn(rng, 2, 64, 128), randn(rng, 128, 384) / 8
    attention = packed_qkv_attention.compile(x, w, 2).steps[-1].launch
    kernel = compile_module(attention.module, num_warps=attention.num_warps, arch=arch, toolchain="llvmlite")
    assert "ld.global" in kernel.asm["ptx"] and kernel.n_spills == 0
