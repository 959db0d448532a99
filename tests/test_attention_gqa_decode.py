"""Grouped-query decoding packs the query heads that share a key/value head into one program's query block
(tinyton/lowering/fusion/attention_blocks.py `packed_group_axes`): each K/V block is read once per group,
not once per query head. Causal masks and biases index the query `row % S_q`; flash-decoding splits and
combines the packed rows as it does one head's."""

from __future__ import annotations

import numpy as np
import pytest
from test_attention import batched_attention, causal_reference, randn, reference

import tinyton as tt


def attention_launch(program):
    return next(step.launch for step in program.steps if step.launch.kind == "attention")


@pytest.mark.parametrize("group, s_kv", [(4, 300), (8, 1500), (3, 77)])
def test_a_group_of_query_heads_is_one_program(group, s_kv):
    rng = np.random.default_rng(group + s_kv)
    q = randn(rng, 2, 2, group, 1, 64)
    k, v = randn(rng, 2, 2, 1, s_kv, 64), randn(rng, 2, 2, 1, s_kv, 64)
    program = batched_attention.compile(q, k, v, 0.125)
    launch = attention_launch(program)
    assert launch.grid[:2] == (1, 4), "one program per key/value head (and KV chunk), the group's rows packed"
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


@tt.jit
def causal_grouped(q, k, v):
    s_q, s_kv = q.shape[-2], k.shape[-2]
    keep = tt.arange(s_q).reshape(s_q, 1) + (s_kv - s_q) >= tt.arange(s_kv)
    s = tt.where(keep, (q @ k.mT) * 0.125, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("s_q, s_kv", [(1, 200), (3, 130), (4, 1300)])
def test_causal_speculative_queries_of_a_group(s_q, s_kv):
    rng = np.random.default_rng(s_q * 7 + s_kv)
    q = randn(rng, 1, 3, 4, s_q, 32)
    k, v = randn(rng, 1, 3, 1, s_kv, 32), randn(rng, 1, 3, 1, s_kv, 32)
    program = causal_grouped.compile(q, k, v)
    assert attention_launch(program).grid[1] == 3
    np.testing.assert_allclose(program(q, k, v), causal_reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


@tt.jit
def biased_grouped(q, k, v, bias):
    s = (q @ k.mT) * 0.125 + bias
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def test_a_bias_shared_by_the_group_packs_one_per_head_does_not():
    rng = np.random.default_rng(5)
    q = randn(rng, 2, 2, 4, 2, 32)
    k, v = randn(rng, 2, 2, 1, 90, 32), randn(rng, 2, 2, 1, 90, 32)
    shared = randn(rng, 2, 2, 1, 2, 90)
    shared[..., 1, :40] = -np.inf
    program = biased_grouped.compile(q, k, v, shared)
    assert attention_launch(program).grid[1] == 4
    np.testing.assert_allclose(program(q, k, v, shared), reference(q, k, v, 0.125, shared), rtol=1e-4, atol=1e-5)
    per_head = randn(rng, 2, 2, 4, 2, 90)
    program = biased_grouped.compile(q, k, v, per_head)
    assert attention_launch(program).grid[1] == 16, "a bias per query head: one program per head"
    np.testing.assert_allclose(program(q, k, v, per_head), reference(q, k, v, 0.125, per_head), rtol=1e-4, atol=1e-5)


def test_float16_grouped_decoding():
    rng = np.random.default_rng(6)
    q = randn(rng, 1, 8, 4, 1, 128, dtype=np.float16)
    k, v = randn(rng, 1, 8, 1, 2000, 128, dtype=np.float16), randn(rng, 1, 8, 1, 2000, 128, dtype=np.float16)
    program = batched_attention.compile(q, k, v, 0.088)
    assert attention_launch(program).grid[1] == 8
    got = program(q, k, v, 0.088).astype(np.float64)
    np.testing.assert_allclose(got, reference(q, k, v, 0.088), rtol=2e-2, atol=2e-3)


def test_prefill_keeps_one_program_per_head():
    rng = np.random.default_rng(8)
    q = randn(rng, 1, 2, 2, 40, 16)
    k, v = randn(rng, 1, 2, 1, 40, 16), randn(rng, 1, 2, 1, 40, 16)
    program = batched_attention.compile(q, k, v, 0.25)
    assert attention_launch(program).grid[1] == 4


@tt.jit
def llama_decode_attention(x, kc, vc, pos):
    """examples/llama's decode attention: q from `(B, 1, H * D)` through `swapaxes` (its query axis' stride is
    H x D, moot for one query), grouped over the caches' KV heads, positions up to `pos` visible."""
    b, kv, s, d = kc.shape
    h = x.shape[-1] // d
    q = tt.swapaxes(x.reshape(b, 1, h, d), 1, 2).reshape(b, kv, h // kv, 1, d)
    keep = tt.arange(s) <= pos
    p = tt.where(keep, q @ kc.reshape(b, kv, 1, s, d).mT * 0.125, float("-inf"))
    e = tt.exp(p - tt.max(p, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ vc.reshape(b, kv, 1, s, d)


def test_one_query_per_head_packs_whatever_its_query_stride():
    """Llama-3.2-1B's decode attention ran one program per query head (grid (1, 32, 4)): q's size-1 query
    axis has stride H x D after `swapaxes`, and packing asked for rows one query stride apart."""
    rng = np.random.default_rng(3)
    x, kc, vc = randn(rng, 2, 1, 8 * 64), randn(rng, 2, 2, 40, 64), randn(rng, 2, 2, 40, 64)
    pos = np.array([29], np.int32)
    program = llama_decode_attention.compile(x, kc, vc, pos)
    assert attention_launch(program).grid[:2] == (1, 4), "one program per (sequence, key/value head)"
    q = x.reshape(2, 1, 8, 64).swapaxes(1, 2).reshape(2, 2, 4, 1, 64)
    s = np.where(np.arange(40) <= 29, q @ kc[:, :, None].swapaxes(-1, -2) * 0.125, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = p / p.sum(-1, keepdims=True) @ vc[:, :, None]
    np.testing.assert_allclose(program(x, kc, vc, pos), want, rtol=1e-4, atol=1e-5)
