"""Grouped-query attention in every spelling is the one grouped flash-attention kernel (issue 23): k and v
repeated over the heads of a group by `tt.repeat`, the method, `np.repeat` or `broadcast_to(...).reshape`
become a broadcast along a group axis (tinyton/rewrites/attention_groups.py), so no kernel copies them and
the attention kernel is the canonical grouped form's, `q.reshape(B, H_kv, G, S, D) @ k[:, :, None].mT`,
decoding's packed heads included. Checked against NumPy in float64 on the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from attention_reference import attention_reference
from test_attention_spellings import SCALE, kernel_text, softmax

import tinyton as tt

B, H, H_KV, D = 2, 8, 2, 64


@tt.jit
def grouped(q, k, v):
    b, h, s, d = q.shape
    h_kv = k.shape[1]
    out = softmax(q.reshape(b, h_kv, h // h_kv, s, d) @ k[:, :, None].mT * SCALE) @ v[:, :, None]
    return out.reshape(b, h, s, d)


@tt.jit
def tt_repeat(q, k, v):
    g = q.shape[1] // k.shape[1]
    return softmax(q @ tt.repeat(k, g, axis=1).mT * SCALE) @ tt.repeat(v, g, axis=1)


@tt.jit
def repeat_method(q, k, v):
    g = q.shape[1] // k.shape[1]
    return softmax(q @ k.repeat(g, axis=1).swapaxes(-1, -2) * SCALE) @ v.repeat(g, axis=1)


@tt.jit
def numpy_repeat(q, k, v):
    g = q.shape[1] // k.shape[1]
    return softmax(q @ np.repeat(k, g, axis=1).mT * SCALE) @ np.repeat(v, g, axis=1)


@tt.jit
def broadcast_then_reshape(q, k, v):
    b, h = q.shape[:2]
    wide = (b, k.shape[1], h // k.shape[1], *k.shape[2:])
    kr = tt.broadcast_to(k[:, :, None], wide).reshape(b, h, *k.shape[2:])
    vr = tt.broadcast_to(v[:, :, None], wide).reshape(b, h, *v.shape[2:])
    return softmax(q @ kr.mT * SCALE) @ vr


SPELLINGS = [tt_repeat, repeat_method, numpy_repeat, broadcast_then_reshape]


def reference(q, k, v, bias=None, keep=None):
    """The float64 reference with k and v repeated over each group's heads."""
    g = q.shape[1] // k.shape[1]
    return attention_reference(q, np.repeat(k, g, 1), np.repeat(v, g, 1), SCALE, bias, keep)


def inputs(seed, s_q, s_kv, h_kv=H_KV, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, s_q, D)).astype(dtype), rng.standard_normal((B, h_kv, s_kv, D)).astype(dtype),
            rng.standard_normal((B, h_kv, s_kv, D)).astype(dtype))


@pytest.mark.parametrize("s_q, s_kv", [(100, 100), (1, 300)], ids=["prefill", "decode"])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_grouped_spelling_is_the_grouped_kernel(spelling, s_q, s_kv):
    q, k, v = inputs(20, s_q, s_kv, dtype=np.float16)
    assert kernel_text(spelling, q, k, v) == kernel_text(grouped, q, k, v)


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_grouped_spelling_matches_numpy(spelling):
    q, k, v = inputs(21, 50, 50)
    np.testing.assert_allclose(spelling(q, k, v), reference(q, k, v), rtol=1e-4, atol=1e-5)


def test_multi_query_attention():
    q, k, v = inputs(22, 40, 40, h_kv=1)
    program = tt_repeat.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    np.testing.assert_allclose(program(q, k, v), reference(q, k, v), rtol=1e-4, atol=1e-5)


@tt.jit
def repeated_with_bias_and_mask(q, k, v, bias):
    g, n = q.shape[1] // k.shape[1], q.shape[-2]
    keep = tt.arange(n)[:, None] >= tt.arange(n)[None, :]
    s = tt.where(keep, q @ tt.repeat(k, g, axis=1).mT * SCALE + bias, float("-inf"))
    return softmax(s) @ tt.repeat(v, g, axis=1)


@pytest.mark.parametrize("bias_shape", [(60, 60), (1, H, 1, 60), (B, H, 60, 60)], ids=["2d", "per_head", "full"])
def test_bias_and_causal_mask_regrouped(bias_shape):
    """Bias arrays varying along the query heads are read through the grouped shape (a reshape in place)."""
    q, k, v = inputs(23, 60, 60)
    bias = np.random.default_rng(24).standard_normal(bias_shape).astype(np.float32)
    program = repeated_with_bias_and_mask.compile(q, k, v, bias)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    want = reference(q, k, v, bias=bias, keep=np.tril(np.ones((60, 60), bool)))
    np.testing.assert_allclose(program(q, k, v, bias), want, rtol=1e-4, atol=1e-5)


@tt.jit
def repeated_with_alibi(q, k, v, slopes):
    g, n = q.shape[1] // k.shape[1], q.shape[-2]
    i, j = tt.arange(n)[:, None], tt.arange(n)[None, :]
    s = q @ tt.repeat(k, g, axis=1).mT * SCALE + slopes * (j - i).astype(np.float32)
    return softmax(tt.where(j <= i, s, float("-inf"))) @ tt.repeat(v, g, axis=1)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_an_index_bias_is_regrouped_from_its_slopes(monkeypatch, backend):
    """ALiBi over repeated keys: the bias is rebuilt over the grouped heads from its slopes reshaped, so the one
    attention kernel still computes it from the indices (a reshape of the `[H, S, S]` bias was a kernel of its own
    and an array the attention read)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    n = 60 if backend == "sim" else 300
    q, k, v = inputs(27, n, n)
    slopes = (2.0 ** -np.arange(1, H + 1, dtype=np.float32)).reshape(H, 1, 1)
    program = repeated_with_alibi.compile(q, k, v, slopes)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    attention = next(line for line in str(program.fused).splitlines() if 'tta.fusion "attention"' in line)
    assert f"x{n}x{n}x" not in attention, "no bias array read"
    distance = np.arange(n)[None, :] - np.arange(n)[:, None]
    want = reference(q, k, v, bias=slopes * distance, keep=np.tril(np.ones((n, n), bool)))
    np.testing.assert_allclose(program(q, k, v, slopes), want, rtol=1e-4, atol=1e-5)


@tt.jit
def split_heads_repeated(x, k, v):  # x (B, S, H, D): q a transposed view, its heads split into groups in place
    q = x.transpose(0, 2, 1, 3)
    g = q.shape[1] // k.shape[1]
    return softmax(q @ tt.repeat(k, g, axis=1).mT * SCALE) @ tt.repeat(v, g, axis=1)


def test_split_heads_are_read_in_place():
    q, k, v = inputs(25, 48, 48)
    x = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
    program = split_heads_repeated.compile(x, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"], "no copy of the transposed q"
    np.testing.assert_allclose(program(x, k, v), reference(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("s_q, s_kv", [(300, 300), (1, 3000)], ids=["prefill", "decode"])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_grouped_spellings_on_the_gpu(spelling, s_q, s_kv):
    q, k, v = inputs(26, s_q, s_kv, dtype=np.float16)
    np.testing.assert_allclose(spelling(q, k, v).astype(np.float64), reference(q, k, v), rtol=2e-2, atol=2e-3)
