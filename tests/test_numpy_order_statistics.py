"""NumPy's `median`, `quantile`, `percentile`, their `nan*` forms, `partition` and `argpartition` in array programs,
against NumPy bit for bit (values, dtypes, shapes): odd and even rows, int/tuple/None axes, keepdims, rows with and
without NaN, all-NaN rows, q a Python number, a sequence or a constant array; on the simulator, marked `gpu` on the
GPU; and the errors."""

from __future__ import annotations

import warnings
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.errors import CompilationError

SHAPES_AXES = [((7,), None), ((8,), -1), ((1,), 0), ((3, 5), 1), ((4, 6), 0), ((2, 3, 4), (0, 2)), ((2, 3, 5), None),
               ((), None), ((5, 2, 3), ())]  # fmt: skip
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int32, np.int64, np.uint8, np.bool_]
METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]


def values(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Ties and distinct values; floats with a NaN in some rows and whole NaN rows where there are enough (not
    bfloat16: NumPy's quantile and median do not know ml_dtypes' NaN, array programs give NaN for its NaN rows)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if np.dtype(dtype).kind == "u" else -50, 50, shape).astype(dtype)
    x = np.where(rng.random(shape) < 0.3, rng.integers(-3, 4, shape), rng.standard_normal(shape) * 10)
    flat = x.reshape(-1)
    if np.dtype(dtype) == ml_dtypes.bfloat16:
        return x.astype(dtype)
    if flat.size > 4:
        flat[1] = np.nan
    if x.ndim == 2 and x.shape[0] > 3:
        x[-1] = np.nan
    return x.astype(dtype)


def same(got: Any, expected: Any) -> None:
    """Equal values (NaN equal to NaN), dtypes and shapes."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    np.testing.assert_array_equal(got, expected)


def numpy(fn: Any, *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices, inf - inf
        return fn(*args)


def _medians(backend: str):
    @pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
    @pytest.mark.parametrize("shape, axis", SHAPES_AXES, ids=str)
    def test(shape: tuple[int, ...], axis: Any, dtype: Any, request) -> None:
        request.getfixturevalue(backend)
        x = values(shape, dtype, len(shape))
        program = tt.jit(lambda a: (np.median(a, axis), tt.median(a, axis, keepdims=True), np.nanmedian(a, axis),
                                    tt.nanmedian(a, axis, keepdims=True)))
        got = program(x)
        nanmedian = np.median if np.dtype(dtype) == ml_dtypes.bfloat16 else np.nanmedian  # NumPy's is float64 there
        same(got[0], numpy(np.median, x, axis))
        same(got[1], numpy(lambda: np.median(x, axis, keepdims=True)))
        same(got[2], numpy(nanmedian, x, axis))
        same(got[3], numpy(lambda: nanmedian(x, axis, keepdims=True)))

    return test


test_median = _medians("simulator")
test_median_on_gpu = pytest.mark.gpu(_medians("gpu"))

QS = [0.3, 1, [0.0, 0.25, 0.5, 0.999, 1.0], np.array([[0.1], [0.7]], np.float32), np.float64(0.5)]


def _quantiles(backend: str):
    @pytest.mark.parametrize("method", METHODS)
    @pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
    @pytest.mark.parametrize("shape, axis", [((7,), None), ((4, 6), 1), ((2, 3, 5), (0, 2)), ((6, 3), 0)], ids=str)
    def test(shape: tuple[int, ...], axis: Any, dtype: Any, method: str, request) -> None:
        request.getfixturevalue(backend)
        x = values(shape, dtype, len(shape) + 1)
        program = tt.jit(lambda a: (*(np.quantile(a, q, axis, method=method) for q in QS),
                                    np.percentile(a, 35, axis, method=method, keepdims=True),
                                    *(np.nanquantile(a, q, axis, method=method) for q in QS),
                                    tt.nanpercentile(a, [5, 50.0], axis, method=method, keepdims=True)))
        got = program(x)
        want = [*(numpy(lambda: np.quantile(x, q, axis, method=method)) for q in QS),
                numpy(lambda: np.percentile(x, 35, axis, method=method, keepdims=True)),
                *(numpy(lambda: np.nanquantile(x, q, axis, method=method)) for q in QS),
                numpy(lambda: np.nanpercentile(x, [5, 50.0], axis, method=method, keepdims=True))]
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if isinstance(axis, tuple) and i == len(QS) + 1 + 3:
                continue  # NumPy's nanquantile puts a 2-d q's axes elsewhere for a tuple axis ((1, 3, 2), not (2, 1, 3))
            if np.ndim(w) == 0 and np.isnan(w):  # NumPy returns the row's NaN itself: the array's type, not q's
                assert np.isnan(g)
                continue
            same(g, w)
    return test


test_quantile = _quantiles("simulator")
test_quantile_on_gpu = pytest.mark.gpu(_quantiles("gpu"))


def test_linear_interpolation_is_numpys_lerp_to_the_last_bit(simulator) -> None:
    """Values far apart and many q: `a + (b - a) * t` below t = 0.5, `b - (b - a) * (1 - t)` from it."""
    x = np.random.default_rng(7).standard_normal((3, 11)) * np.array([[1e-3], [1.0], [1e30]])
    qs = np.linspace(0, 1, 41)
    got = tt.jit(lambda a: (np.quantile(a, qs, axis=1), np.quantile(a.astype(np.float32), 0.37, axis=1)))(x)
    same(got[0], np.quantile(x, qs, axis=1))
    same(got[1], np.quantile(x.astype(np.float32), 0.37, axis=1))


def test_bool_and_inf_rows(simulator) -> None:
    """bool medians are float64, its discrete quantiles bool; a row with inf interpolates to NumPy's inf or NaN."""
    b = np.array([[True, False, True, True], [False, False, True, False]])
    got = tt.jit(lambda a: (np.median(a, 1), np.quantile(a, 0.5, 1, method="lower"),
                            np.quantile(a, [0.2, 0.9], 1, method="nearest")))(b)
    same(got[0], np.median(b, 1))
    same(got[1], np.quantile(b, 0.5, 1, method="lower"))
    same(got[2], np.quantile(b, [0.2, 0.9], 1, method="nearest"))
    f = np.array([[1.0, np.inf, np.inf, 2.0], [-np.inf, 0.0, 1.0, np.inf]], np.float32)
    got = tt.jit(lambda a: (np.median(a, 1), np.quantile(a, [0.0, 0.5, 0.8, 1.0], 1)))(f)
    same(got[0], numpy(np.median, f, 1))
    same(got[1], numpy(np.quantile, f, [0.0, 0.5, 0.8, 1.0], 1))


def test_empty_rows_have_a_nan_median(simulator) -> None:
    x = np.zeros((3, 0), np.float32)
    same(tt.jit(lambda a: np.median(a, axis=1))(x), numpy(np.median, x, 1))


@pytest.mark.parametrize("shape, axis", [((9,), -1), ((4, 7), 0), ((3, 8), 1), ((2, 3, 4), None)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16], ids=lambda d: np.dtype(d).name)
def test_partition_is_the_sorted_row(simulator, shape: tuple[int, ...], axis: Any, dtype: Any) -> None:
    """Every kth element is in its sorted place with the smaller before it: the sorted row (argpartition: the
    stable argsort), NaN last."""
    x = values(shape, dtype, 3)
    got = tt.jit(lambda a: (np.partition(a, 2, axis), np.argpartition(a, [0, -1], axis), tt.partition(a, 1, axis)))(x)
    same(got[0], np.sort(x, axis))
    same(got[1], np.argsort(x, axis, kind="stable"))
    same(got[2], np.sort(x, axis))
    n = x.size if axis is None else x.shape[axis]
    for k in (0, 2, n - 1):  # a valid partition by NumPy's definition
        part = np.partition(x, k, axis)
        same(np.take(got[0], k, axis if axis is not None else 0), np.take(part, k, axis if axis is not None else 0))


@pytest.mark.parametrize(("program", "message"), [
    (lambda x: np.quantile(x, 1.5), r"Quantiles must be in the range \[0, 1\]"),
    (lambda x: np.quantile(x, [0.5, -0.1]), r"Quantiles must be in the range \[0, 1\]"),
    (lambda x: np.quantile(x, np.nan), r"Quantiles must be in the range"),
    (lambda x: np.percentile(x, 101), r"Percentiles must be in the range \[0, 100\]"),
    (lambda x: np.nanpercentile(x, -1), r"Percentiles must be in the range \[0, 100\]"),
    (lambda x: np.quantile(x, 0.5, method="hazen"), "method 'hazen' is not supported in array programs; use one of "
                                                    "'linear', 'lower', 'higher', 'nearest', 'midpoint'"),
    (lambda x: np.quantile(x, x[0, 0]), "q must be a constant"),
    (lambda x: np.quantile(x, []), "non-empty"),
    (lambda x: np.quantile(x, 0.5, weights=x), "weights= is not supported"),
    (lambda x: np.median(x, axis=2), "out of bounds"),
    (lambda x: np.median(x, axis=(1, 1)), "duplicate value"),
    (lambda x: np.partition(x, 4), r"kth\(=4\) out of bounds \(4\)"),
    (lambda x: np.argpartition(x, [0, -5]), r"kth\(=-5\) out of bounds \(4\)"),
    (lambda x: np.partition(x, 1.5), "kth must be an integer"),
    (lambda x: np.partition(x, 1, kind="quick"), "select kind must be 'introselect'"),
    (lambda x: np.argpartition(x, 1, order="f"), "structured arrays"),
    (lambda x: np.quantile(x > 0, 0.5), "boolean subtract"),
])  # fmt: skip
def test_errors(simulator, program, message: str) -> None:
    with pytest.raises(CompilationError, match=message) as info:
        tt.jit(program)(np.zeros((3, 4), np.float32))
    assert "test_numpy_order_statistics.py" in str(info.value)  # the user's line
