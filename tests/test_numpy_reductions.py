"""NumPy's reductions and scans in array programs, against NumPy itself (property tests with hypothesis).

Every op (`sum`, `mean`, `max`, `min`, `prod`, `argmax`, `argmin`, `var`, `std`, `any`, `all`, `logsumexp`,
`cumsum`, `cumprod`, `take_along_axis`) is drawn with random shapes (size 0 and 1, non-powers of two),
dtypes, axes (int, tuple, None), keepdims and NaN/inf values, spelled as a `tt.` builtin, an `np.` function
or an array method, and compared with NumPy: values, result dtypes (NumPy's: int64 counts and indices,
float64 statistics of ints) and errors (NumPy's error is a CompilationError). The same
cases run on the simulator and, marked `gpu`, on the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyton as tt
from tinyton.runtime.simulator.errors import DeviceAssertionError
from tinyton.errors import CompilationError

DTYPES = (np.float32, np.float16, np.int32, np.bool_)
DIMS = (0, 1, 2, 3, 5, 8, 17, 40, 100)
MAX_SIZE = 4000
EXAMPLES = 12


def scipy_logsumexp(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    """scipy.special.logsumexp (scipy is not a dependency): the max shift, non-finite maxima taken as 0."""
    x = x.astype(np.float64) if x.dtype.kind != "f" else x  # scipy >= 1.15: ints and bools as float64
    if x.size == 0 or any(x.shape[a] == 0 for a in np.atleast_1d(axis if axis is not None else range(x.ndim))):
        shape = np.sum(np.zeros(x.shape, np.float32), axis=axis, keepdims=keepdims).shape
        return np.full(shape, -np.inf, x.dtype)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    with np.errstate(all="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return (out if keepdims else np.squeeze(out, axis=axis)).astype(x.dtype)


# name: (tinyton spelling, NumPy reference, dtypes, takes a tuple of axes, takes keepdims)
OPS: dict[str, tuple[Any, Any, tuple, bool, bool]] = {
    "sum": (lambda x, **kw: tt.sum(x, **kw), np.sum, (np.float32, np.float16, np.bool_), True, True),
    "sum_dtype": (lambda x, **kw: x.sum(dtype=np.float32, **kw), lambda x, **kw: np.sum(x, dtype=np.float32, **kw),
                  DTYPES, True, True),
    "mean": (lambda x, **kw: x.mean(**kw), np.mean, DTYPES, True, True),
    "max": (lambda x, **kw: np.max(x, **kw), np.max, DTYPES, True, True),
    "min": (lambda x, **kw: x.min(**kw), np.min, DTYPES, True, True),
    "prod": (lambda x, **kw: np.prod(x, **kw), np.prod, (np.float32, np.float16, np.bool_), True, True),
    "argmax": (lambda x, **kw: x.argmax(**kw), np.argmax, DTYPES, False, True),
    "argmin": (lambda x, **kw: tt.argmin(x, **kw), np.argmin, DTYPES, False, True),
    "var": (lambda x, **kw: np.var(x, **kw), np.var, DTYPES, True, True),
    "var_ddof": (lambda x, **kw: x.var(ddof=1, **kw), lambda x, **kw: np.var(x, ddof=1, **kw), DTYPES, True, True),
    "std": (lambda x, **kw: tt.std(x, **kw), np.std, DTYPES, True, True),
    "any": (lambda x, **kw: x.any(**kw), np.any, DTYPES, True, True),
    "all": (lambda x, **kw: np.all(x, **kw), np.all, DTYPES, True, True),
    "logsumexp": (lambda x, **kw: tt.logsumexp(x, **kw), scipy_logsumexp, (np.float32, np.float16, np.int32), True,
                  True),
    "cumsum": (lambda x, **kw: np.cumsum(x, **kw), np.cumsum, (np.float32, np.float16, np.bool_), False, False),
    "cumsum_int32": (lambda x, **kw: x.cumsum(dtype=np.int32, **kw), lambda x, **kw: np.cumsum(x, dtype=np.int32, **kw),
                     (np.int32,), False, False),
    "cumprod": (lambda x, **kw: tt.cumprod(x, **kw), np.cumprod, (np.float32, np.float16), False, False),
}


SCANS = ("cumsum", "cumprod")


@st.composite
def arrays(draw: st.DrawFn, dtype: Any, positive: bool = False) -> np.ndarray:
    shape = tuple(draw(st.lists(st.sampled_from(DIMS), min_size=0, max_size=3).filter(lambda s: np.prod(s) <= MAX_SIZE)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < draw(st.sampled_from((0.1, 0.5, 0.9))))
    if dtype == np.int32:
        return np.asarray(rng.integers(-5, 6, shape), np.int32)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice((-1, 1), shape) if positive else rng.standard_normal(shape) * 3
    x = np.asarray(x, dtype)
    if x.size and draw(st.booleans()):  # a few NaN / inf / -inf
        for value in draw(st.lists(st.sampled_from((np.nan, np.inf, -np.inf)), min_size=1, max_size=3)):
            x.flat[rng.integers(0, x.size)] = value
    if x.size and draw(st.integers(0, 4)) == 0:  # ties
        x[...] = x.flat[0]
    return x


@st.composite
def cases(draw: st.DrawFn, name: str) -> tuple[np.ndarray, dict[str, Any]]:
    _, _, dtypes, tuples, keeps = OPS[name]
    x = draw(arrays(draw(st.sampled_from(dtypes)), positive=name in ("prod", "cumprod")))
    # one axis out of bounds; none for 0-d arrays, whose reductions NumPy lets take axis 0 or -1 or not
    axes = [None] + (list(range(-x.ndim, x.ndim)) + [x.ndim] if x.ndim else [])
    kwargs: dict[str, Any] = {}
    axis = draw(st.sampled_from(axes))
    if tuples and x.ndim >= 2 and draw(st.booleans()):
        axis = tuple(draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim, unique=True)))
    if axis is not None or draw(st.booleans()):
        kwargs["axis"] = axis
    if keeps and draw(st.booleans()):
        kwargs["keepdims"] = True
    return x, kwargs


def tolerance(name: str, x: np.ndarray) -> dict[str, float]:
    if name in ("argmax", "argmin", "any", "all", "max", "min", "cumsum_int32"):
        return {"rtol": 0, "atol": 0}
    half = x.dtype == np.float16
    scale = float(np.nanmax(np.abs(np.where(np.isfinite(x), x, 0)), initial=1.0)) if x.dtype.kind == "f" else 1.0
    atol = (3e-2 if half else 3e-5) * scale * max(1, x.size) ** 0.5
    if name in ("var", "var_ddof", "std"):
        atol *= scale * 4
    return {"rtol": 2e-2 if half else 1e-4, "atol": atol}


def check(name: str, x: np.ndarray, kwargs: dict[str, Any]) -> None:
    impl, reference, *_ = OPS[name]
    try:
        with np.errstate(all="ignore"):
            expected = np.asarray(reference(x, **kwargs))
            if name in SCANS and x.dtype == np.float16:
                # float16 scans accumulate in float32 (docs/fusion.md); NumPy's add one float16 rounding a
                # step, which drifts: 300 x 4.78 ran to 1198 at step 245 (exactly 1171.4)
                expected = np.asarray(reference(x.astype(np.float32), **kwargs)).astype(np.float16)
    except (ValueError, TypeError, IndexError) as e:  # NumPy's error: a CompilationError at the user's line
        with pytest.raises(CompilationError):
            tt.jit(lambda a: impl(a, **kwargs))(x)
        del e
        return
    got = np.asarray(tt.jit(lambda a: impl(a, **kwargs))(x))
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), equal_nan=True,
                                   **tolerance(name, x))
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def _property(backend: str):
    @pytest.mark.parametrize("name", sorted(OPS))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def test(name: str, data: st.DataObject, request) -> None:
        request.getfixturevalue(backend)
        x, kwargs = data.draw(cases(name))
        check(name, x, kwargs)

    return test


test_matches_numpy = _property("simulator")
test_matches_numpy_on_gpu = pytest.mark.gpu(_property("gpu"))


# ---- take_along_axis ------------------------------------------------------------------------------


@st.composite
def gathers(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int | None]:
    dtype = draw(st.sampled_from(DTYPES))
    x = draw(arrays(dtype))
    if x.ndim == 0:
        x = x.reshape(1)
    if draw(st.integers(0, 5)) == 0:
        n = x.size
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return x, rng.integers(-n, n, draw(st.sampled_from((0, 1, 4)))).astype(np.int32) if n else np.zeros(0, np.int32), None
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = [draw(st.sampled_from((1, d))) for d in x.shape]  # broadcast the other axes
    shape[axis] = draw(st.sampled_from((0, 1, 3)))
    n = x.shape[axis]
    if n == 0:
        shape[axis] = 0
    return x, rng.integers(-n, n, shape).astype(np.int32) if n else np.zeros(shape, np.int32), axis


def _gather_property(backend: str):
    @settings(max_examples=3 * EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(case=gathers())
    def test(case, request) -> None:
        request.getfixturevalue(backend)
        x, idx, axis = case
        expected = np.take_along_axis(x, idx, axis)
        got = tt.jit(lambda a, i: np.take_along_axis(a, i, axis) if axis is None else tt.take_along_axis(a, i, axis))(x, idx)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)

    return test


test_take_along_axis = _gather_property("simulator")
test_take_along_axis_on_gpu = pytest.mark.gpu(_gather_property("gpu"))


def test_take_along_axis_out_of_range_is_the_bounds_error_of_take(simulator) -> None:
    """An index outside [-n, n) reads outside the array (never another row's element): the simulator's
    out-of-bounds error, as for `tt.take`."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    program = tt.jit(lambda a, i: tt.take_along_axis(a, i, 1))
    np.testing.assert_array_equal(program(x, np.array([[-1], [0], [3]], np.int32)), [[3], [4], [11]])
    with pytest.raises(DeviceAssertionError, match=r"index out of bounds .* \(IndexError in NumPy\)"):
        program(x, np.array([[4], [0], [0]], np.int32))  # row 0 index 4 would be row 1's first element


# ---- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program, args, message",
    [
        (lambda x: x.argmax(axis=1), [np.zeros((3, 0), np.float32)],
         "argmax: attempt to get argmax of an empty sequence (float32 array of shape (3, 0), axis 1)"),
        (lambda x: np.argmin(x), [np.zeros((0,), np.float32)], "attempt to get argmin of an empty sequence"),
        (lambda x: x.argmax(axis=(0, 1)), [np.zeros((3, 2), np.float32)], "axis must be one int or None"),
        (lambda x: tt.var(x, axis=2), [np.zeros((3, 2), np.float32)], "axis 2 is out of bounds for array of dimension 2"),
        (lambda x, i: tt.take_along_axis(x, i, 1), [np.zeros((3, 2), np.float32), np.zeros((3, 1), np.float32)],
         "take_along_axis: `indices` must be an integer array, got float32 of shape (3, 1)"),
        (lambda x, i: tt.take_along_axis(x, i, 1), [np.zeros((3, 2), np.float32), np.zeros((3,), np.int32)],
         "`indices` and `arr` must have the same number of dimensions, got shapes (3,) and (3, 2)"),
        (lambda x, i: tt.take_along_axis(x, i, 1), [np.zeros((3, 2), np.float32), np.zeros((2, 1), np.int32)],
         "shape mismatch: `arr` (3, 2) and `indices` (2, 1) do not broadcast together outside axis 1"),
        (lambda x: x.cumsum(), [np.zeros((3, 2), np.uint8)], "cumsum of a uint8 array: NumPy's result is uint64"),
        (lambda x: np.prod(x, out=x), [np.zeros((3, 2), np.float32)], "prod: `out=` is not supported in array programs"),
    ],
)
def test_errors_name_the_op_and_the_fix(program, args, message) -> None:
    with pytest.raises(CompilationError, match=".*") as info:
        tt.jit(program)(*args)
    text = str(info.value)
    assert message in text and "test_numpy_reductions.py" in text, text


# ---- fusion: launches ---------------------------------------------------------------------------------


def softmax(x):
    e = tt.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@tt.jit
def sample(logits, u):
    """Top-p style sampling: softmax, running sum, count below the draw."""
    return (tt.cumsum(softmax(logits), -1) < u).sum(-1)


@tt.jit
def layernorm(x, w, b):
    return (x - x.mean(-1, keepdims=True)) / tt.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b


@tt.jit
def cross_entropy(logits, labels):
    logp = logits - tt.logsumexp(logits, -1, keepdims=True)
    return -tt.take_along_axis(logp, labels[:, None], -1).mean()


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


SHAPES = [(64, 1000), (3, 40000), (2, 131072 + 3)]
"""Whole rows, looped rows, and a 128k vocabulary row (few rows: one looped program per row, not split)."""


def _fusion_cases(backend: str):
    @pytest.mark.parametrize("rows, length", SHAPES)
    def test(rows: int, length: int, request) -> None:
        request.getfixturevalue(backend)
        rng = np.random.default_rng(rows)
        logits = rng.standard_normal((rows, length)).astype(np.float32)
        u = rng.random((rows, 1)).astype(np.float32)
        assert sample.compile(logits, u).num_launches == 1
        expected = (np.cumsum(np_softmax(logits), -1) < u).sum(-1)
        assert np.abs(sample(logits, u) - expected).max() <= 1  # a draw within rounding of a running sum

        w, b = rng.standard_normal(length).astype(np.float32), rng.standard_normal(length).astype(np.float32)
        assert layernorm.compile(logits, w, b).num_launches == 1
        expected = (logits - logits.mean(-1, keepdims=True)) / np.sqrt(logits.var(-1, keepdims=True) + 1e-5) * w + b
        np.testing.assert_allclose(layernorm(logits, w, b), expected, rtol=1e-4, atol=1e-4)

        labels = rng.integers(0, length, rows).astype(np.int32)
        assert cross_entropy.compile(logits, labels).num_launches <= 2
        lse = scipy_logsumexp(logits, -1, keepdims=True)
        expected = -np.take_along_axis(logits - lse, labels[:, None], -1).mean()
        np.testing.assert_allclose(cross_entropy(logits, labels), expected, rtol=1e-5)

    return test


test_fused_programs = _fusion_cases("simulator")
test_fused_programs_on_gpu = pytest.mark.gpu(_fusion_cases("gpu"))


def _long_axis_cases(backend: str):
    @pytest.mark.parametrize("shape, axis", [((2, 131072 + 3), -1), ((3, 40000), 1), ((300, 128), 0), ((5, 70, 3), 1)])
    def test(shape: tuple[int, ...], axis: int, request) -> None:
        """argmax/argmin and scans over looped rows (chunks carry the best value and index, or the running
        total) and over a looped inner axis, with NaN and ties in late chunks."""
        request.getfixturevalue(backend)
        rng = np.random.default_rng(len(shape))
        x = rng.standard_normal(shape).astype(np.float32)
        x[(0,) * (len(shape) - 1) + (-1,) if axis in (-1, len(shape) - 1) else (-1,) * len(shape)] = np.nan
        x[1:2] = np.float32(0.5)  # ties everywhere: the first index wins
        program = tt.jit(lambda a: (a.argmax(axis), a.argmin(axis), np.cumsum(a, axis), (a > 0).cumsum(axis)))
        got = program(x)
        assert program.compile(x).num_launches <= 2
        np.testing.assert_array_equal(got[0], x.argmax(axis))
        np.testing.assert_array_equal(got[1], x.argmin(axis))
        np.testing.assert_allclose(got[2], np.cumsum(x, axis), rtol=1e-4, atol=1e-2)
        np.testing.assert_array_equal(got[3], np.cumsum(x > 0, axis))

    return test


test_long_axes = _long_axis_cases("simulator")
test_long_axes_on_gpu = pytest.mark.gpu(_long_axis_cases("gpu"))


@tt.jit
def scaled_sums(x, axes, keepdims):
    return tt.sum(x * 2.0, axis=axes, keepdims=keepdims)


@pytest.mark.parametrize("axes, kernels", [((0, 1), 1), ((1, 2), 1), ((0, 2), 2), ((0, 1, 2), 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_adjacent_axes_are_one_reduction(axes, kernels, keepdims):
    """A reduction over a run of adjacent axes (a norm weight's gradient, summed over batch and sequence) is one
    reduction of the axes merged, one kernel; axes apart are one reduction each."""
    x = np.random.default_rng(0).standard_normal((3, 8, 20)).astype(np.float32)
    program = scaled_sums.compile(x, axes, keepdims)
    assert len(program.steps) == kernels
    np.testing.assert_allclose(program(x, axes, keepdims), np.sum(x * 2.0, axis=axes, keepdims=keepdims),
                               rtol=1e-5, atol=1e-5)
