"""Fusion rules for a decode step over a KV cache: a run-time position in an attention's index mask, and
an index array reshaped onto another axis (the cache row being written) in its consumer's kernel."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt


@tt.jit
def _decode_attention(q, k, v, pos):
    visible = tt.arange(16) <= pos
    s = tt.where(visible, q @ tt.swapaxes(k, -1, -2) * 0.5, float("-inf"))
    e = tt.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@tt.jit
def _cache_row(pos, row, cache):
    return tt.where((tt.arange(16) == pos)[:, None], row, cache)


@pytest.mark.parametrize("pos", [0, 5, 15])
def test_position_mask_is_computed_in_the_attention_kernel(pos):
    rng = np.random.default_rng(pos)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((4, 1, 4), (4, 16, 4), (4, 16, 4)))
    at = np.array([pos], np.int32)
    program = _decode_attention.compile(q, k, v, at)
    assert program.num_launches == 1
    s = np.where(np.arange(16) <= pos, q @ k.swapaxes(-1, -2) * 0.5, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(program(q, k, v, at), p / p.sum(-1, keepdims=True) @ v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pos", [0, 9])
def test_reshaped_index_mask_fuses_into_its_consumer(pos):
    rng = np.random.default_rng(pos)
    row, cache = rng.standard_normal((4, 1, 4)).astype(np.float32), rng.standard_normal((4, 16, 4)).astype(np.float32)
    at = np.array([pos], np.int32)
    program = _cache_row.compile(at, row, cache)
    assert program.num_launches == 1
    np.testing.assert_array_equal(program(at, row, cache), np.where((np.arange(16) == pos)[:, None], row, cache))


@tt.jit
def _attention_over_updated_cache(q, k_row, v_row, kcache, vcache, pos):
    t = tt.arange(16)
    here = (t == pos)[:, None]
    k = tt.where(here, tt.swapaxes(k_row.reshape(1, 4, 4), 0, 1), kcache)
    v = tt.where(here, tt.swapaxes(v_row.reshape(1, 4, 4), 0, 1), vcache)
    s = tt.where(t <= pos, q @ tt.swapaxes(k, -1, -2) * 0.5, float("-inf"))
    e = tt.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("pos", [0, 6, 15])
def test_cache_update_is_read_by_the_attention_kernel(pos):
    """k and v as `where(row == pos, new row, cache)`: the attention loads both and selects, no kernel
    writes the updated caches."""
    rng = np.random.default_rng(pos)
    q = rng.standard_normal((4, 1, 4)).astype(np.float32)
    k_row, v_row = (rng.standard_normal((1, 16)).astype(np.float32) for _ in range(2))
    kcache, vcache = (rng.standard_normal((4, 16, 4)).astype(np.float32) for _ in range(2))
    at = np.array([pos], np.int32)
    args = (q, k_row, v_row, kcache, vcache, at)
    program = _attention_over_updated_cache.compile(*args)
    assert program.num_launches == 1
    here = (np.arange(16) == pos)[:, None]
    k = np.where(here, k_row.reshape(1, 4, 4).swapaxes(0, 1), kcache)
    v = np.where(here, v_row.reshape(1, 4, 4).swapaxes(0, 1), vcache)
    s = np.where(np.arange(16) <= pos, q @ k.swapaxes(-1, -2) * 0.5, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(program(*args), p / p.sum(-1, keepdims=True) @ v, rtol=1e-5, atol=1e-6)
