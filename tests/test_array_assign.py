"""`x[key] = value` in array programs (tinyton/frontend/array_assign.py): NumPy's results, an input assigned
into is updated in place (only the assigned elements are written), and what NumPy would show through a
view is refused rather than silently different."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime.simulator import DeviceAssertionError


@tt.jit
def write_row(cache, row, pos):
    cache[:, :, pos] = row
    return cache.astype(np.float32).sum(axis=2)


def test_a_row_is_written_into_the_input_in_place():
    rng = np.random.default_rng(0)
    cache, row = rng.standard_normal((2, 3, 16, 4)).astype(np.float32), rng.standard_normal((2, 3, 1, 4)).astype(np.float32)
    want = cache.copy()
    want[:, :, 5] = row[:, :, 0]
    program = write_row.compile(cache, row, np.array([5], np.int32))
    assert program.num_launches == 2  # the row's store, the sum
    got = program(cache, row, np.array([5], np.int32))
    np.testing.assert_array_equal(cache, want)  # the caller's array, updated
    np.testing.assert_allclose(got, want.sum(axis=2), rtol=1e-5, atol=1e-5)


def test_negative_and_out_of_range_positions():
    cache, row = np.zeros((1, 1, 8, 2), np.float32), np.ones((1, 1, 1, 2), np.float32)
    write_row(cache, row, np.array([-1], np.int32))
    assert cache[0, 0, 7].tolist() == [1.0, 1.0] and cache[0, 0, :7].sum() == 0
    with pytest.raises(DeviceAssertionError, match="out of bounds"):
        write_row(cache, row, np.array([8], np.int32))


@tt.jit
def windows(x, v):
    x[1:, ::2] = v  # broadcast along the first dim
    x[0, -1] = 7.9  # cast as NumPy assigns: truncated into int32
    x[..., 0] = x[..., 1]
    return x


def test_basic_windows_broadcast_and_cast():
    x = np.arange(24, dtype=np.int32).reshape(3, 8)
    v = np.array([-1, -2, -3, -4], np.int32)
    want = x.copy()
    want[1:, ::2] = v
    want[0, -1] = 7.9
    want[..., 0] = want[..., 1]
    got = windows(x, v)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, want)


@tt.jit
def computed(x):
    y = x * 2.0
    y[1:3] = 0.0
    return y


def test_assigning_into_a_computed_array():
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(computed(x), [0, 0, 0, 6, 8])
    np.testing.assert_array_equal(x, np.arange(5))


@tt.jit
def copies(x):
    y = x.copy()
    y[0] = 5.0
    z = x.astype(np.float32)
    z[1] = 6.0
    return y, z


def test_copies_are_new_arrays():
    x = np.zeros(3, np.float32)
    y, z = copies(x)
    assert x.tolist() == [0, 0, 0] and y.tolist() == [5, 0, 0] and z.tolist() == [0, 6, 0]


@tt.jit
def old_and_new(x):
    before = x.copy()
    total = x.sum()
    x[0] = 100.0
    return before, total, before + x


@pytest.mark.parametrize("fuse", [True, False])
def test_readers_of_the_old_value_see_it(fuse):
    """The sum and the copy read x before the assignment; `before + x` reads both."""
    x = np.arange(4, dtype=np.float32)
    program = old_and_new.compile(x, fuse=fuse)
    before, total, both = program(x)
    assert before.tolist() == [0, 1, 2, 3] and float(total) == 6.0
    assert both.tolist() == [100, 2, 4, 6] and x.tolist() == [100, 1, 2, 3]


@tt.jit
def strided_input(x, v):
    x[:, 1] = v
    return x.sum()


def test_a_copied_input_is_written_back():
    base = np.zeros((4, 6), np.float32)
    x = base[:, ::2]  # not contiguous: the call makes a contiguous copy, then copies it back
    strided_input(x, np.float32(3.0))
    assert base[:, 2].tolist() == [3.0] * 4 and base.sum() == 12.0


def test_a_read_only_input_is_refused():
    x = np.zeros((2, 6), np.float32)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        strided_input(x, np.float32(1.0))


def _first(x):
    return x[0]


@pytest.mark.parametrize("body, message", [
    (lambda x: x[0].__setitem__(1, 5.0), "view of another array"),
    (lambda x: (v := _first(x), x.__setitem__((0, 0), 1.0), v + 1)[-1], "view of an array assigned into"),
    (lambda x: x.__setitem__(x > 0, 1.0), "bool mask"),
    (lambda x: x.__setitem__((np.array([0]), np.array([1])), 1.0), "several index arrays"),
    (lambda x: x.__setitem__(0, np.float32(1) * x[:2, :2].sum(axis=0)), "could not broadcast"),
])  # fmt: skip
def test_what_numpy_would_show_through_a_view_is_refused(body, message):
    @tt.jit
    def program(x):
        out = body(x)
        return x if out is None else out

    with pytest.raises(tt.CompilationError, match=message):
        program(np.ones((3, 4), np.float32))
