"""Pieces of traced arrays: strided windows (`tta.slice`, padded where they leave the array) and their
concatenation (`tta.concatenate`), which NumPy's indexing and shape functions are built from
(array_indexing.py, array_reshaping.py); with the argument checks those functions share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, i1

from tinyton.dialects import tta
from tinyton.dialects.tt import is_int
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.errors import error
from tinyton.frontend.array_ops import reshape
from tinyton.frontend.traced import Traced, as_traced

Window = tuple[int, int, int]
"""(start, step, size) of one dim of a `tta.slice`."""


def as_array(x: Any) -> Traced:
    """`x` (a traced array, or a Python or NumPy value) as a traced array."""
    return as_traced([x])[0]


def axis_index(axis: Any, ndim: int) -> int:
    """`axis` of an `ndim`-d array, normalised (negative from the end); NumPy's error for a bad one."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise error(f"axis must be an int, got {type(axis).__name__} {axis!r}")
    try:
        return tta.normalize_axis(int(axis), ndim)
    except tta.ShapeError as e:
        raise error(str(e)) from None


def axis_indices(axis: Any, ndim: int) -> list[int]:
    """An int or a tuple of axes, normalised; NumPy's error for a repeated one."""
    axes = [axis_index(a, ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise error("repeated axis")
    return axes


def is_index(k: Any) -> bool:
    """Whether `k` is an int index (Python or NumPy; bools are masks, not indices)."""
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def element_constant(value: Any, element: Any) -> IntegerAttr | FloatAttr:
    """A constant of the array's element type, converted as NumPy assigns it (1.7 into int32 is 1)."""
    if element == i1:
        return IntegerAttr(int(bool(value)), i1)
    if is_int(element):
        info = np.iinfo(ELEMENT_TO_NUMPY[element]) if element in ELEMENT_TO_NUMPY else None
        if info is not None and isinstance(value, (int, np.integer)) and not info.min <= int(value) <= info.max:
            raise error(f"Python integer {int(value)} out of bounds for {np.dtype(info.dtype)}")
        return IntegerAttr(int(value), element)
    with np.errstate(over="ignore"):
        return FloatAttr(float(np.asarray(value, dtype=np.float64)), element)


def window_slice(x: Traced, windows: Sequence[Window], fill: Any = None) -> Traced:
    """`tta.slice` of `x` (nothing when the windows are the whole array and nothing is filled)."""
    if fill is None and all(w == (0, 1, n) for w, n in zip(windows, x.shape)):
        return x
    attr = None if fill is None else element_constant(fill, x.element)
    return x.tracer.emit(tta.SliceOp, x.value, [w[0] for w in windows], [w[1] for w in windows],
                         [w[2] for w in windows], attr)


def slice_window(k: slice, n: int) -> Window:
    """Python's slice of a length-n sequence (clamped; negative steps from the end) as a window."""
    for part in (k.start, k.stop, k.step):
        if part is not None and not is_index(part):
            raise error(
                f"slice indices must be integers or None, got {type(part).__name__} {part!r} (in array programs "
                "they are compile-time Python ints)"
            )
    if k.step == 0:
        raise error("slice step cannot be zero")
    start, stop, step = k.indices(n)
    count = len(range(start, stop, step))
    return (start if count else 0, step, count)


def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Traced:
    """`np.concatenate`: join arrays along an existing axis (`axis=None`: flattened first)."""
    if isinstance(arrays, Traced) or not isinstance(arrays, (list, tuple)):
        raise error("concatenate takes a list or tuple of arrays")
    if not arrays:
        raise error("need at least one array to concatenate")
    values = as_traced(list(arrays))
    if axis is None:
        values = [ravel(v) for v in values]
        axis = 0
    if any(v.ndim == 0 for v in values):
        raise error("zero-dimensional arrays cannot be concatenated")
    axis = axis_index(axis, values[0].ndim)
    try:
        tta.concatenate_shape([v.shape for v in values], axis)
    except tta.ShapeError as e:
        shapes = ", ".join(str(v.shape) for v in values)
        raise error(f"concatenate: {e} (shapes {shapes}, axis {axis}); only the sizes along the axis may differ: "
                    "reshape, slice or broadcast the inputs to match") from None
    if len(values) == 1:
        return values[0]
    return values[0].tracer.emit(tta.ConcatenateOp, [v.value for v in values], axis)


def ravel(x: Any) -> Traced:
    """`np.ravel` / `x.flatten()`: the elements as a 1-D array (row-major)."""
    x = as_array(x)
    return reshape(x, (x.size,))
