"""Division by one value per row (softmax's `e / sum(e)`) is a reciprocal per row and a multiplication per
element (tinyton/lowering/fusion/region.py `_divide_by_row`): f32 quotients stay NumPy's correctly
rounded ones (one Newton step), IEEE's special cases included; whole and split rows alike."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import run_program

from tinyton.frontend import array_ops as ops


def row_divide(x, d):
    return x / d


def softmax(x):
    e = ops.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("cols", [1000, 40000])  # whole rows, rows split over programs
def test_f32_quotients_are_numpys(cols):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, cols)).astype(np.float32) * np.float32(1e3)
    d = rng.standard_normal((3, 1)).astype(np.float32)
    (got,), launches = run_program(row_divide, [x, d], fuse=True)
    assert launches == 1
    np.testing.assert_array_equal(got, x / d)


def test_special_divisors_and_dividends():
    x = np.array([[1.0, -2.0, 0.0, np.inf, np.nan, 3.0]] * 5, dtype=np.float32)
    x[4] = [np.inf, -np.inf, 1.0, 0.0, 2.0, -5.0]
    d = np.array([[0.0], [np.inf], [np.nan], [-0.0], [7.0]], dtype=np.float32)
    (got,), _ = run_program(row_divide, [x, d], fuse=True)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, x / d)


def test_f16_softmax_rounds_the_f32_quotient():
    x = np.random.default_rng(2).standard_normal((4, 2048)).astype(np.float16)
    (got,), _ = run_program(softmax, [x], fuse=True)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True, dtype=np.float32).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-6)
