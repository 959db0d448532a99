"""NumPy's indexing in array programs against NumPy itself (hypothesis): basic slicing (any step, clamped,
ints, `...`, `None`), integer-array indexing (several arrays, mixed with slices, NumPy's placement of the
index dims), constant index lists and bool masks, of inputs and of computed values; the same cases on
the GPU (`-m gpu`). Bad indices are CompilationErrors at the user's line; a runtime index out of range
stops the kernel (NumPy's IndexError), never reads outside the array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tinyton as tt
from tinyton.runtime import driver
from tinyton.runtime.simulator import DeviceAssertionError

BACKENDS = [pytest.param("sim"), pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = [np.float32, np.float16, np.int32, np.bool_]
SIZES = [0, 1, 2, 3, 5, 8]
NO_SHRINKING = (Phase.explicit, Phase.reuse, Phase.generate)
"""Failures print their draws; shrinking them recompiles programs for minutes."""
ON_GPU = driver.is_available()


def examples(n: int) -> settings:
    """`n` examples on the simulator; a quarter on a GPU host (each example compiles PTX: the GPU runs
    are shared and short)."""
    return settings(max_examples=max(n // 4, 8) if ON_GPU else n, deadline=None, phases=NO_SHRINKING,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


EXAMPLES = examples(60)


def values(shape, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(-50, 50, size=shape).astype(dtype)


def computed(x):
    """An elementwise op of x, so that indexing applies to a value computed in the program."""
    return x & x if x.dtype == np.bool_ else x + x


@st.composite
def arrays(draw, min_rank: int = 1, max_rank: int = 3):
    shape = tuple(draw(st.lists(st.sampled_from(SIZES), min_size=min_rank, max_size=max_rank)))
    return values(shape, draw(st.sampled_from(DTYPES)), draw(st.integers(0, 99)))


@st.composite
def slices(draw, n: int) -> slice:
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
    step = st.one_of(st.none(), st.sampled_from([-3, -2, -1, 1, 2, 3]))
    return slice(draw(bound), draw(bound), draw(step))


@st.composite
def basic_keys(draw, shape):
    """A basic index of `shape`: slices, in-range ints, None and at most one `...`."""
    items, dim = [], 0
    ellipsis = draw(st.booleans())
    after_ellipsis = False  # the items after `...` index the trailing dims, every one of them
    while dim < len(shape) and (after_ellipsis or draw(st.integers(0, 3))):
        n = shape[dim]
        kind = draw(st.sampled_from(["slice", "int", "none", "ellipsis"] if n else ["slice", "none", "ellipsis"]))
        if kind == "none":
            items.append(None)
            continue
        if kind == "ellipsis":
            if ellipsis:
                items.append(Ellipsis)
                ellipsis, after_ellipsis = False, True
                dim = len(shape) - draw(st.integers(0, len(shape) - dim))
            continue
        items.append(draw(slices(n)) if kind == "slice" else draw(st.integers(-n, n - 1)))
        dim += 1
    return tuple(items) if len(items) != 1 or draw(st.booleans()) else items[0]


def run(monkeypatch, backend: str, fn, *args):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    return tt.jit(fn)(*args)


def same(got, want) -> None:
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_basic_indexing(monkeypatch, backend, data) -> None:
    x = data.draw(arrays())
    key = data.draw(basic_keys(x.shape))
    got = run(monkeypatch, backend, lambda x: (x[key], computed(x)[key]), x)
    same(got[0], x[key])
    same(got[1], computed(x)[key])


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_integer_array_indexing(monkeypatch, backend, data) -> None:
    """1-3 index arrays (broadcast together), mixed with slices and ints: adjacent index dims stay in
    place, separated ones go first."""
    x = data.draw(arrays(min_rank=1, max_rank=3).filter(lambda a: 0 not in a.shape))
    positions = sorted(data.draw(st.sets(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim)))
    index_shape = data.draw(st.sampled_from([(), (1,), (4,), (2, 3)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    key, arrays_ = [], []
    for d, n in enumerate(x.shape):
        if d in positions:
            shape = index_shape[data.draw(st.integers(0, len(index_shape))):]  # broadcastable shapes
            arrays_.append(rng.integers(-n, n, size=shape).astype(np.int32))
            key.append(len(arrays_) - 1)
        else:
            key.append(data.draw(st.one_of(slices(n), st.integers(-n, n - 1))))

    def index(x, *ids):
        return x[tuple(ids[k] if isinstance(k, int) and d in positions else k for d, k in enumerate(key))]

    got = run(monkeypatch, backend, lambda x, *ids: (index(x, *ids), index(computed(x), *ids)), x, *arrays_)
    same(got[0], index(x, *arrays_))
    same(got[1], index(computed(x), *arrays_))


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(data=st.data())
def test_constant_index_lists_and_masks(monkeypatch, backend, data) -> None:
    x = data.draw(arrays(min_rank=1, max_rank=2).filter(lambda a: a.shape[0] > 0))
    n = x.shape[0]
    key = data.draw(st.one_of(
        st.lists(st.integers(-n, n - 1), min_size=0, max_size=6),
        st.lists(st.booleans(), min_size=n, max_size=n).map(np.array),
    ))
    same(run(monkeypatch, backend, lambda x: x[key], x), x[key])


@pytest.mark.parametrize("backend", BACKENDS)
def test_flip_of_a_computed_value_is_one_kernel(monkeypatch, backend) -> None:
    x = values((3, 7), np.float32)
    monkeypatch.setenv("TINYTON_BACKEND", backend)

    @tt.jit
    def program(x):
        y = x * 2.0
        return y[::-1, 1:-1] + y[:, None, 2:-1:2].sum(axis=-1)

    want = (x * 2)[::-1, 1:-1] + (x * 2)[:, None, 2:-1:2].sum(axis=-1)
    np.testing.assert_allclose(program(x), want)


def test_indexing_errors_name_the_index_and_the_fix() -> None:
    x = values((3, 4), np.float32)
    cases = [
        (lambda x: x[5], r"index 5 is out of bounds for axis 0 with size 3"),
        (lambda x: x[:, -5], r"index -5 is out of bounds for axis 1 with size 4"),
        (lambda x: x[0, 0, 0], r"too many indices for array: array is 2-dimensional, but 3 were indexed"),
        (lambda x: x[..., ...], r"an index can only have a single ellipsis"),
        (lambda x: x[1.5], r"only integers, slices"),
        (lambda x: x[::0], r"slice step cannot be zero"),
        (lambda x: x[x > 0], r"bool array .* data-dependent shape .* tt.where"),
        (lambda x: x[x], r"arrays used as indices must be of integer \(or boolean\) type, got float32 .*astype"),
        (lambda x: tt.where(x > 0), r"where\(condition\) with one argument .* data"),
    ]
    for fn, message in cases:
        with pytest.raises(tt.CompilationError, match=message) as info:
            tt.jit(fn)(x)
        assert "test_numpy_indexing.py" in str(info.value)


def test_out_of_range_index_array_stops_the_kernel() -> None:
    """NumPy raises IndexError; the gather asserts (a trap on the GPU) and never reads the element."""
    table = values((3, 4), np.float32)
    for ids, fn in (
        (np.array([0, 3], np.int32), lambda t, i: t[i]),
        (np.array([-4], np.int32), lambda t, i: t[i]),
        (np.array([1, 4], np.int32), lambda t, i: t[:, i]),
        (np.array([0, 5], np.int32), lambda t, i: t[i, i]),
    ):
        with pytest.raises(DeviceAssertionError, match="out of bounds"):
            run_sim(fn, table, ids)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int8, np.uint8, np.int16])
def test_indices_of_every_int_type_gather_as_numpy(dtype) -> None:
    """np.take, x[i] and x[i, j] with the index types NumPy takes (int64 is torch's and NumPy's default; NumPy
    casts uint64 to intp, so 2**64 - 1 is -1, the last row)."""
    table = values((5, 4), np.float32)
    ids = np.array([[4, 0], [2, 3]], dtype) if dtype != np.uint64 else np.array([[4, 0], [2**64 - 1, 3]], dtype)
    for fn in (lambda t, i: np.take(t, i, axis=0), lambda t, i: t[i], lambda t, i: t[:, i % 4], lambda t, i: t[i, i % 4]):
        np.testing.assert_array_equal(run_sim(fn, table, ids), fn(table, ids))


@pytest.mark.parametrize("ids", [np.array([1, 2**32 + 1], np.int64), np.array([-(2**32) + 1], np.int64),
                                 np.array([2**63], np.uint64)],
                         ids=["int64-past-2**32", "int64-below--2**32", "uint64-2**63"])
def test_wide_index_out_of_range_is_not_wrapped_into_range(ids) -> None:
    """2**32 + 1 narrowed to int32 is 1, a valid row: the bounds are checked before the narrowing, so these
    are NumPy's IndexError (the gather's assertion), never a read of another row."""
    table = values((3, 4), np.float32)
    for fn in (lambda t, i: np.take(t, i, axis=0), lambda t, i: t[i], lambda t, i: t[i, 0 * i]):
        with pytest.raises(IndexError):
            fn(table, ids)
        with pytest.raises(DeviceAssertionError, match="out of bounds"):
            run_sim(fn, table, ids)


def run_sim(fn, *args):
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("TINYTON_BACKEND", "sim")
        return tt.jit(fn)(*args)
    finally:
        mp.undo()


def test_numpy_functions_on_traced_arrays() -> None:
    """`np.concatenate`, `np.flip`, ... on traced arrays run as the builtins (NumPy's dispatch)."""
    x = values((4, 6), np.float32)

    def program(x):
        return (np.concatenate([x, -x], axis=1), np.flip(x, 0), np.pad(x, 1), np.where(x > 0, x, 0.5),
                np.moveaxis(x[None], 0, -1), np.squeeze(x[None]), np.ravel(x), x.flatten(), np.stack([x, x], 1),
                x.take([1, 0], axis=1), x.swapaxes(0, 1)[::2], np.take(x, [5, -1]), x[None].squeeze(0).repeat(2, 1))

    want = program(x)
    for got, expected in zip(tt.jit(program)(x), want):
        same(got, expected)
