"""RMSNorm (or any row scale from a statistic of the rows) before a matmul is one kernel with it
(tinyton/rewrites/row_scale.py, tinyton/rewrites/row_stats.py, matmul_operands.row_prologue), and matches NumPy, on the
simulator and, where there is one, on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime import driver


def _rms(x):
    return x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)


@tt.jit
def norm_qkv(x, wq, wk, wv):
    h = _rms(x)
    return h @ wq, h @ wk, h @ wv


@tt.jit
def norm_mlp(x, w1, w2):
    return x + tt.maximum(_rms(x) @ w1, 0.0) @ w2


@tt.jit
def absmax_scaled(x, w):
    return (x * (1.0 / tt.abs(x).max(axis=-1, keepdims=True))) @ w


def _numpy_rms(x):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)


def _arrays(shape, n, count, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    return x, [rng.standard_normal((shape[-1], n)).astype(np.float32) * 0.2 for _ in range(count)]


@pytest.mark.parametrize("shape", [(1, 16), (1, 1024), (37, 40), (2, 5, 48)])
def test_norm_and_projections_are_one_kernel(shape):
    x, ws = _arrays(shape, 24, 3, len(shape) + shape[-1])
    program = norm_qkv.compile(x, *ws)
    assert program.num_launches == 1
    for got, w in zip(program(x, *ws), ws):
        np.testing.assert_allclose(got, _numpy_rms(x) @ w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("c", [16, 100])
def test_norm_mlp_is_two_kernels(c):
    rng = np.random.default_rng(c)
    x = rng.standard_normal((1, c)).astype(np.float32)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) * 0.2 for s in ((c, 4 * c), (4 * c, c)))
    program = norm_mlp.compile(x, w1, w2)
    assert program.num_launches == 2
    want = x + np.maximum(_numpy_rms(x) @ w1, 0.0) @ w2
    np.testing.assert_allclose(program(x, w1, w2), want, rtol=1e-4, atol=1e-5)


def test_any_row_statistic_of_the_left_operand():
    x, (w,) = _arrays((9, 33), 17, 1, 3)
    program = absmax_scaled.compile(x, w)
    assert program.num_launches == 1
    np.testing.assert_allclose(program(x, w), (x / np.abs(x).max(axis=-1, keepdims=True)) @ w, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not driver.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("shape", [(1, 16), (1, 1024), (37, 40)])
def test_norm_and_projections_on_gpu(shape):
    x, ws = _arrays(shape, 64, 3, 11)
    got = norm_qkv(tt.to_device(x), *map(tt.to_device, ws))
    for g, w in zip(got, ws):
        np.testing.assert_allclose(g.numpy(), _numpy_rms(x) @ w, rtol=1e-3, atol=1e-4)
