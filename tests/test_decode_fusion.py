"""Fusion rules for a decode step over a KV cache: a run-time position in an attention's index mask, and
an index array reshaped onto another axis (the cache row being written) in its consumer's kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ml_dtypes import bfloat16 as BF16

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.lowering.ptx.toolchain import find_tool


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


@tt.jit
def _rotated_heads(x, w, cos, sin):
    """Llama's RoPE'd key projection: `x @ w.T` split into heads, rotated by halves (`w`'s rows read through
    windows: no descriptor reads them)."""
    b, t, _ = x.shape
    k = tt.swapaxes((x.to(tt.bfloat16) @ w.T).to(tt.float32).reshape(b, t, 2, 64), 1, 2)
    return k * cos + tt.concatenate([-k[..., 32:], k[..., :32]], axis=-1) * sin


def _rotated_heads_inputs(batch: int, k: int):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((batch, 1, k)).astype(np.float32)
    w = rng.standard_normal((128, k)).astype(BF16)
    cos, sin = rng.standard_normal((2, 1, 64)).astype(np.float32)
    return x, w, cos, sin


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("batch,k", [(1, 256), (3, 200)])
def test_rotated_projection_reads_weight_rows_through_windows(monkeypatch, backend, batch, k):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x, w, cos, sin = _rotated_heads_inputs(batch, k)
    program = _rotated_heads.compile(x, w, cos, sin)
    assert program.num_launches == 1
    h = (x.astype(BF16).astype(np.float32) @ w.astype(np.float32).T).astype(BF16).astype(np.float32)
    h = h.reshape(batch, 1, 2, 64).swapaxes(1, 2)
    want = h * cos + np.concatenate([-h[..., 32:], h[..., :32]], axis=-1) * sin
    np.testing.assert_allclose(program(x, w, cos, sin), want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_rotated_projection_copies_weight_tiles_16_bytes_at_a_time():
    """The windows' `[BK, BN]` tiles of `w.T` are contiguous along K: loaded as they were, a thread moved
    one bf16 at a time, synchronously (32 `ld.global.b16` per thread and K step; the decode step's k/v and q
    projections then took most of its time on an H200). Loaded as `[BN, BK]` tiles of `w` and transposed,
    they are 16-byte `cp.async` copies in flight behind the dots."""
    (step,) = _rotated_heads.compile(*_rotated_heads_inputs(1, 256)).steps
    ptx = compile_module(step.launch.module.clone(), num_warps=step.launch.num_warps, arch="sm_90a").asm["ptx"]
    assert not re.search(r"ld\.global\S*\.b16", ptx)
    assert "cp.async.cg.shared.global" in ptx
