"""The scale an attention's scores are multiplied by is applied in the softmax's FMA, `exp2(s * c - m)`, after the
score steps (tinyton/lowering/fusion/attention_scores.py `_deferred_scale`): the maxima are then the unscaled
scores' maxima times c, or their minima under a negative c, and a mask applied after the scale puts what becomes
-inf once scaled (+inf under a negative c; a runtime zero is the least subnormal there); a zero constant, and a
runtime scale after a mask, are multiplied first as before. Constant and runtime scales of either sign, zero and
NaN, causal and ragged masks, a division by zero: NumPy's results, on the simulator and the GPU, each program one
flash-attention kernel."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt

BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


def _softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def _causal(s):
    n, m = s.shape[-2], s.shape[-1]
    keep = tt.arange(n).reshape(n, 1) + (m - n) >= tt.arange(m)
    return tt.where(keep, s, float("-inf"))


@tt.jit
def runtime_scaled(q, k, v, scale):
    return _softmax(_causal((q @ k.mT) * scale)) @ v


@tt.jit
def runtime_divided(q, k, v, divisor):
    return _softmax(_causal((q @ k.mT) / divisor)) @ v


@tt.jit
def negative_constant(q, k, v):
    return _softmax(_causal((q @ k.mT) * -0.3)) @ v


@tt.jit
def unmasked_runtime(q, k, v, scale):
    return _softmax((q @ k.mT) * scale) @ v


@tt.jit
def zero_constant(q, k, v):
    return _softmax(_causal((q @ k.mT) * 0.0)) @ v


@tt.jit
def divided_by_zero(q, k, v):
    return _softmax((q @ k.mT) / 0.0) @ v


@tt.jit
def masked_then_scaled(q, k, v, scale):
    """The mask before the scale: under a negative scale the masked scores are +inf, as NumPy computes them."""
    n, m = q.shape[-2], k.shape[-2]
    keep = tt.arange(n).reshape(n, 1) + (m - n) >= tt.arange(m)
    return _softmax(tt.where(keep, q @ k.mT, float("-inf")) * scale) @ v


def _reference(q, k, v, scale, causal=True, mask_first=False):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)
    n, m = s.shape[-2:]
    keep = np.arange(n)[:, None] + (m - n) >= np.arange(m) if causal else np.ones((n, m), bool)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = np.where(keep, s, -np.inf) * scale if mask_first else np.where(keep, s * scale, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v.astype(np.float64)


def _inputs(s_q, s_kv, d=64, dtype=np.float16):
    rng = np.random.default_rng(s_q + s_kv)
    q = rng.standard_normal((2, 2, s_q, d)).astype(dtype)
    k, v = (rng.standard_normal((2, 2, s_kv, d)).astype(dtype) for _ in range(2))
    return q, k, v


def _one_kernel(program, *args, fma: bool = True):
    """`program(*args)`, checked to be one flash-attention kernel whose scale is (or is not) in the softmax's FMA."""
    steps = program.compile(*args).steps
    assert [step.launch.kind for step in steps] == ["attention"]
    assert ("tt.fma" in str(steps[0].launch.module)) == fma
    return program(*args)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [0.125, -0.125, 0.0, -0.0, -0.75])
@pytest.mark.parametrize("s_q, s_kv", [(128, 128), (90, 200)])
def test_runtime_scales_of_either_sign(monkeypatch, backend, scale, s_q, s_kv):
    """A 0-d array of q's dtype (a float32 one would make the scores float32, as NumPy promotes them)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    q, k, v = _inputs(s_q, s_kv)
    value = np.array(scale, np.float16)
    for program, causal in ((runtime_scaled, True), (unmasked_runtime, False)):
        want = _reference(q, k, v, scale, causal)
        np.testing.assert_allclose(_one_kernel(program, q, k, v, value), want, rtol=2e-2, atol=2e-2)
    if scale:
        divisor = np.array(1 / scale, np.float16)
        want = _reference(q, k, v, 1 / float(divisor))
        np.testing.assert_allclose(_one_kernel(runtime_divided, q, k, v, divisor), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_zero_and_infinite_constant_scales(monkeypatch, backend):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    q, k, v = _inputs(90, 200)
    np.testing.assert_allclose(_one_kernel(negative_constant, q, k, v), _reference(q, k, v, -0.3), rtol=2e-2, atol=2e-2)
    want = _reference(q, k, v, 0.0)
    np.testing.assert_allclose(_one_kernel(zero_constant, q, k, v, fma=False), want, rtol=2e-2, atol=2e-2)
    with np.errstate(invalid="ignore"):
        got = _one_kernel(divided_by_zero, q, k, v, fma=False)
    np.testing.assert_allclose(got, _reference(q, k, v, np.inf, causal=False), rtol=2e-2, atol=2e-2, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mask_before_a_negative_scale_keeps_numpys_result(monkeypatch, backend):
    """where(keep, s, -inf) * -0.5: the masked scores become +inf, so each row's softmax is NaN or over its masked
    keys alone, as in NumPy; * 0: NaN (-inf * 0). Such a scale is multiplied before the softmax."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    q, k, v = _inputs(64, 64)
    for scale in (-0.5, 0.0):
        want = _reference(q, k, v, scale, mask_first=True)
        with np.errstate(invalid="ignore"):
            got = _one_kernel(masked_then_scaled, q, k, v, np.array(scale, np.float16), fma=False)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nan_runtime_scale_gives_nan(monkeypatch, backend):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    q, k, v = _inputs(64, 64)
    with np.errstate(invalid="ignore"):
        assert np.isnan(_one_kernel(runtime_scaled, q, k, v, np.array(np.nan, np.float16))).all()
