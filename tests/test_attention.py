"""Flash attention: naive attention array programs become one tiled kernel (tinyton/rewrites/attention.py,
tinyton/lowering/fusion/attention.py) that matches NumPy in float64, with no S x S buffer anywhere."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from attention_reference import attention_reference as reference

import tinyton as tt


@tt.jit
def attention(q, k, v):
    s = (q @ k.T) * 0.0883883
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def batched_attention(q, k, v, scale):
    s = (q @ tt.swapaxes(k, -1, -2)) * scale
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def masked_attention(q, k, v, bias, keep):
    s = tt.where(keep, q @ k.mT / 8.0 + bias, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def attention_and_probabilities(q, k, v):
    s = q @ k.T
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    p = e / tt.sum(e, axis=-1, keepdims=True)
    return p @ v, p


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def assert_one_kernel_without_scores(program, s_q: int, s_kv: int) -> None:
    assert program.num_launches == 1
    assert program.steps[0].launch.kind == "attention"
    allocated = program.buffer_specs[len(program.input_positions) :]  # intermediates and outputs
    assert not any(shape[-2:] == (s_q, s_kv) for shape, _ in allocated), "an S x S buffer is allocated"


@pytest.mark.parametrize("s_q, s_kv, d", [(64, 64, 32), (1, 1, 16), (1, 37, 64), (50, 70, 24), (130, 33, 128), (17, 200, 40)])
def test_single_head_matches_numpy(s_q, s_kv, d):
    rng = np.random.default_rng(s_q * 1000 + s_kv)
    q, k, v = randn(rng, s_q, d), randn(rng, s_kv, d), randn(rng, s_kv, d)
    program = attention.compile(q, k, v)
    assert_one_kernel_without_scores(program, s_q, s_kv)
    np.testing.assert_allclose(program(q, k, v), reference(q, k, v, 0.0883883), rtol=1e-4, atol=1e-5)


def test_batched_heads_and_grouped_query_attention():
    rng = np.random.default_rng(1)
    b, h_kv, group, s, d = 2, 2, 3, 40, 32
    q = randn(rng, b, h_kv, group, s, d)
    k, v = randn(rng, b, h_kv, 1, s, d), randn(rng, b, h_kv, 1, s, d)  # kv heads broadcast over the group
    program = batched_attention.compile(q, k, v, 0.125)
    assert_one_kernel_without_scores(program, s, s)
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


def test_causal_mask_and_bias_arrays():
    rng = np.random.default_rng(2)
    s, d = 72, 16
    q, k, v = randn(rng, 2, s, d), randn(rng, 2, s, d), randn(rng, 2, s, d)
    bias = randn(rng, s, s)
    causal = np.tril(np.ones((s, s), bool))
    program = masked_attention.compile(q, k, v, bias, causal)
    assert_one_kernel_without_scores(program, s, s)
    expected = reference(q, k, v, 1 / 8.0, bias, causal)
    np.testing.assert_allclose(program(q, k, v, bias, causal), expected, rtol=1e-4, atol=1e-5)


def test_fully_masked_rows_give_nan_like_numpy():
    rng = np.random.default_rng(3)
    q, k, v = randn(rng, 1, 8, 16), randn(rng, 1, 8, 16), randn(rng, 1, 8, 16)
    keep = np.tril(np.ones((8, 8), bool))
    keep[3] = False
    out = masked_attention(q, k, v, np.zeros((8, 8), np.float32), keep)
    expected = reference(q, k, v, 1 / 8.0, 0.0, keep)
    assert np.isnan(out[0, 3]).all() and np.isnan(expected[0, 3]).all()
    np.testing.assert_allclose(np.delete(out, 3, axis=1), np.delete(expected, 3, axis=1), rtol=1e-4, atol=1e-5)


def test_float16_computes_in_float32():
    rng = np.random.default_rng(4)
    q, k, v = (randn(rng, 48, 64, dtype=np.float16) for _ in range(3))
    out = attention(q, k, v)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, 0.0883883), rtol=2e-2, atol=2e-3)


def test_returning_the_probabilities_keeps_them():
    rng = np.random.default_rng(5)
    q, k, v = randn(rng, 16, 16), randn(rng, 16, 16), randn(rng, 16, 16)
    program = attention_and_probabilities.compile(q, k, v)
    assert all(step.launch.kind != "attention" for step in program.steps)
    out, p = program(q, k, v)
    np.testing.assert_allclose(out, reference(q, k, v, 1.0), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_attention_on_the_gpu(dtype):
    rng = np.random.default_rng(6)
    b, h, s, d = 2, 3, 300, 64
    q, k, v = (randn(rng, b, h, s, d, dtype=dtype) for _ in range(3))
    bias = randn(rng, s, s)
    causal = np.tril(np.ones((s, s), bool))
    tolerance = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=2e-2, atol=2e-3)
    out = batched_attention(q, k, v, 0.125)
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, 0.125), **tolerance)
    out = masked_attention(q, k, v, bias, causal)
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, 1 / 8.0, bias, causal), **tolerance)


@tt.jit
def causal_attention(q, k, v):
    s_q, s_kv = q.shape[-2], k.shape[-2]
    i = tt.arange(s_q).reshape(s_q, 1) + (s_kv - s_q)  # bottom-right aligned, as torch's is_causal for S_q < S_kv
    j = tt.arange(s_kv)
    s = tt.where(i >= j, (q @ k.mT) * 0.125, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def tril_masked_attention(q, k, v):
    n = q.shape[-2]
    keep = tt.tril(tt.ones((n, n), tt.int1))
    s = tt.where(keep, q @ k.mT, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def causal_reference(q, k, v, scale):
    s_q, s_kv = q.shape[-2], k.shape[-2]
    keep = np.arange(s_q)[:, None] + (s_kv - s_q) >= np.arange(s_kv)[None, :]
    return reference(q, k, v, scale, 0.0, keep)


@pytest.mark.parametrize("s_q, s_kv", [(1, 1), (64, 64), (100, 100), (37, 130), (1, 77)])
def test_causal_mask_from_arange_skips_blocks_and_matches(s_q, s_kv):
    rng = np.random.default_rng(s_q + s_kv)
    q, k, v = randn(rng, 2, s_q, 32), randn(rng, 2, s_kv, 32), randn(rng, 2, s_kv, 32)
    program = causal_attention.compile(q, k, v)
    assert_one_kernel_without_scores(program, s_q, s_kv)
    if s_q > 1:  # the KV loop stops at the diagonal (one query row is a constant mask)
        assert "tt.minimum" in program.asm["kernel0:tt"]
    np.testing.assert_allclose(program(q, k, v), causal_reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


def test_causal_masks_shared_by_two_attentions_are_cloned():
    @tt.jit
    def two_layers(q, k, v):
        n = q.shape[-2]
        keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
        s1 = tt.where(keep, q @ k.T, float("-inf"))
        e1 = tt.exp(s1 - tt.max(s1, axis=-1, keepdims=True))
        h = (e1 / tt.sum(e1, axis=-1, keepdims=True)) @ v
        s2 = tt.where(keep, h @ k.T, float("-inf"))
        e2 = tt.exp(s2 - tt.max(s2, axis=-1, keepdims=True))
        return (e2 / tt.sum(e2, axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng(9)
    q, k, v = randn(rng, 40, 16), randn(rng, 40, 16), randn(rng, 40, 16)
    program = two_layers.compile(q, k, v)
    assert [s.launch.kind for s in program.steps] == ["attention", "attention"]
    keep = np.tril(np.ones((40, 40), bool))
    h = reference(q, k, v, 1.0, 0.0, keep)
    np.testing.assert_allclose(program(q, k, v), reference(h, k, v, 1.0, 0.0, keep), rtol=1e-4, atol=1e-5)


def test_tril_mask_is_an_index_mask():
    rng = np.random.default_rng(10)
    q, k, v = randn(rng, 50, 16), randn(rng, 50, 16), randn(rng, 50, 16)
    program = tril_masked_attention.compile(q, k, v)
    assert program.num_launches == 1
    keep = np.tril(np.ones((50, 50), bool))
    np.testing.assert_allclose(program(q, k, v), reference(q, k, v, 1.0, 0.0, keep), rtol=1e-4, atol=1e-5)


def _distance(s):
    return tt.arange(s).reshape(s, 1), tt.arange(s).reshape(1, s)


def _alibi_spellings():
    """Index biases as users write them (ALiBi's slope per head times the key's distance from the query, an encoder's
    symmetric form, a clipped distance): each the scores and its float64 value from the slopes and the indices."""

    def slope_times_difference(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        return q @ k.mT * 0.125 + slopes * (j - i).astype(np.float32)

    def minus_slope_times_distance(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        return q @ k.mT * 0.125 - slopes * (i - j).astype(np.float32)

    def float_positions(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        return q @ k.mT * 0.125 + (j.astype(np.float32) - i.astype(np.float32)) * slopes

    def symmetric_distance(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        return q @ k.mT * 0.125 - slopes * tt.abs(j - i).astype(np.float32)

    def clipped_distance(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        return q @ k.mT * 0.125 + slopes * tt.maximum(j - i, -16).astype(np.float32) / 2.0

    def distance(n):
        return np.arange(n)[None, :] - np.arange(n)[:, None]

    return [(slope_times_difference, distance), (minus_slope_times_distance, distance),
            (float_positions, distance), (symmetric_distance, lambda n: -np.abs(distance(n))),
            (clipped_distance, lambda n: np.maximum(distance(n), -16) / 2.0)]


BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spelling", _alibi_spellings(), ids=lambda case: case[0].__name__)
def test_an_index_bias_is_computed_in_the_kernel(monkeypatch, backend, spelling):
    """A bias computed from aranges and a slope per head, in every spelling: one attention kernel that reads the
    slopes and computes the rest from each block's indices (no `[H, S, S]` array), matching NumPy's."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    scores, distance = spelling

    @tt.jit
    def alibi(q, k, v, slopes):
        s = scores(q, k, v, slopes)
        i, j = _distance(q.shape[-2])
        s = tt.where(j <= i, s, float("-inf"))
        e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
        return (e / tt.sum(e, axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng(11)
    b, h, n, d = (2, 4, 48, 16) if backend == "sim" else (2, 4, 300, 64)
    q, k, v = (randn(rng, b, h, n, d) for _ in range(3))
    slopes = (2.0 ** -np.arange(1, h + 1, dtype=np.float32)).reshape(h, 1, 1)
    program = alibi.compile(q, k, v, slopes)
    assert_one_kernel_without_scores(program, n, n)
    attention_line = next(line for line in str(program.fused).splitlines() if 'tta.fusion "attention"' in line)
    assert f"tensor<{h}x1x1xf32>" in attention_line and f"x{n}xf32>, tensor<{b}" not in attention_line
    keep = np.tril(np.ones((n, n), bool))
    np.testing.assert_allclose(program(q, k, v, slopes), reference(q, k, v, 0.125, slopes * distance(n), keep),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_an_index_bias_has_the_programs_values(monkeypatch, backend, dtype):
    """The kernel adds the bias the program computes, rounded as the program rounds it: `slope * (j - i)` in float16 or
    bfloat16 near the diagonal is small and fine, where `slope * j` (a softmax ignores the row's shift) would round
    late rows' values to a whole unit or more. q and k are zero and v the identity, so the output is the
    probabilities themselves."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)

    @tt.jit
    def alibi(q, k, v, slopes):
        i, j = _distance(q.shape[-2])
        s = q @ k.mT + slopes * (j - i).astype(q.dtype)
        s = tt.where(j <= i, s, float("-inf"))
        e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
        return (e / tt.sum(e, axis=-1, keepdims=True)) @ v

    h, n = 2, 128
    q = k = np.zeros((h, n, n), dtype)
    v = np.broadcast_to(np.eye(n, dtype=dtype), (h, n, n)).copy()
    slopes = np.array([0.7, 0.3], dtype).reshape(h, 1, 1)
    distance = (np.arange(n)[None, :] - np.arange(n)[:, None]).astype(dtype)
    bias = (slopes * distance).astype(np.float64)  # rounded in `dtype`, as NumPy computes it
    expected = np.where(np.tril(np.ones((n, n), bool)), np.exp(bias - bias.max(-1, keepdims=True)), 0.0)
    expected /= expected.sum(-1, keepdims=True)
    tolerance = 2.0 ** -np.finfo(dtype).nmant
    np.testing.assert_allclose(alibi(q, k, v, slopes).astype(np.float64), expected, rtol=4 * tolerance, atol=1e-6)
