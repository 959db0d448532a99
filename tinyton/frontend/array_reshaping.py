"""NumPy's joining, splitting and reordering functions on traced arrays, registered in `traced.ARRAY_IMPLS`.

`concatenate` is one `tta.concatenate`; `split`, `flip` and `pad` are strided windows (`tta.slice`);
`squeeze`, `expand_dims` and `ravel` are reshapes; `repeat` and `tile` gather by constant indices
(`take_constant`: windows where the indices run in few arithmetic runs); `stack` and `moveaxis` are built
from those.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from tinyton.dialects import tta
from tinyton.errors import error
from tinyton.frontend.array_indexing import MAX_WINDOWS, take_constant
from tinyton.frontend.array_ops import reshape, take, transpose
from tinyton.frontend.array_windows import (
    as_array, axis_index, axis_indices, concatenate, is_index, ravel, slice_window, window_slice,
)
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS, Traced, as_traced, current_tracer

# ---- joining and splitting ------------------------------------------------------------------------


def stack(arrays: Sequence[Any], axis: int = 0) -> Traced:
    """`np.stack`: join arrays of one shape along a new axis."""
    if isinstance(arrays, Traced) or not isinstance(arrays, (list, tuple)) or not arrays:
        raise error("need at least one array to stack")
    values = as_traced(list(arrays))
    shapes = {v.shape for v in values}
    if len(shapes) > 1:
        raise error(f"stack: all input arrays must have the same shape, got {', '.join(str(v.shape) for v in values)}; "
                    "reshape or broadcast them to one shape")
    axis = axis_index(axis, values[0].ndim + 1)
    return concatenate([expand_dims(v, axis) for v in values], axis)


def _split_points(n: int, sections: Any, equal: bool) -> list[int]:
    """Where `split` / `array_split` cut an axis of length n."""
    if is_index(sections):
        count = int(sections)
        if count <= 0:
            raise error("number sections must be larger than 0.")
        if equal and n % count:
            raise error("array split does not result in an equal division")
        size, extra = divmod(n, count)
        points, at = [], 0
        for i in range(count - 1):
            at += size + (1 if i < extra else 0)
            points.append(at)
        return points
    if isinstance(sections, Traced) or not all(is_index(p) for p in sections):
        raise error("split points must be Python ints (an int number of sections or a list of indices)")
    return [int(p) for p in sections]


def _split(x: Any, sections: Any, axis: int, equal: bool) -> list[Traced]:
    x = as_array(x)
    axis = axis_index(axis, x.ndim)
    n = x.shape[axis]
    bounds = [0, *_split_points(n, sections, equal), n]
    parts = []
    for lo, hi in pairwise(bounds):
        windows = [(0, 1, d) for d in x.shape]
        windows[axis] = slice_window(slice(lo, hi), n)
        parts.append(window_slice(x, windows))
    return parts


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Traced]:
    """`np.split`: equal sections (an int) or pieces between the given indices."""
    return _split(x, indices_or_sections, axis, equal=True)


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Traced]:
    """`np.array_split`: as `split`, an int number of sections need not divide the axis."""
    return _split(x, indices_or_sections, axis, equal=False)


# ---- reordering and reshaping ---------------------------------------------------------------------


def flip(x: Any, axis: Any = None) -> Traced:
    """`np.flip`: reverse the order along `axis` (int, tuple, or None for all)."""
    x = as_array(x)
    axes = range(x.ndim) if axis is None else axis_indices(axis, x.ndim)
    windows = [((n - 1, -1, n) if n and d in axes else (0, 1, n)) for d, n in enumerate(x.shape)]
    return window_slice(x, windows)


def squeeze(x: Any, axis: Any = None) -> Traced:
    """`np.squeeze`: remove size-1 dims (all of them, or those of `axis`)."""
    x = as_array(x)
    axes = [d for d, n in enumerate(x.shape) if n == 1] if axis is None else axis_indices(axis, x.ndim)
    if any(x.shape[a] != 1 for a in axes):
        raise error("cannot select an axis to squeeze out which has size not equal to one")
    return reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in axes))


def expand_dims(x: Any, axis: Any) -> Traced:
    """`np.expand_dims`: insert size-1 dims at `axis` (int or tuple) of the result."""
    x = as_array(x)
    axes = axis_indices(axis, x.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1))
    it = iter(x.shape)
    return reshape(x, tuple(1 if d in axes else next(it) for d in range(x.ndim + len(axes))))


def moveaxis(x: Any, source: Any, destination: Any) -> Traced:
    """`np.moveaxis`: move axes to new positions, the others keep their order."""
    x = as_array(x)
    src, dst = axis_indices(source, x.ndim), axis_indices(destination, x.ndim)
    if len(src) != len(dst):
        raise error("`source` and `destination` arguments must have the same number of elements")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Traced:
    """`np.repeat`: repeat each element (an int, or per-element counts as a constant sequence) along
    `axis` (None: of the flattened array)."""
    x = as_array(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = axis_index(axis, x.ndim)
    n = x.shape[axis]
    if isinstance(repeats, Traced):
        raise error("repeat counts give a data-dependent shape unless they are constants: pass a Python int or list")
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iub" and counts.size or counts.ndim > 1:
        raise error(f"repeats must be an int or a 1-D sequence of ints, got {repeats!r}")
    if counts.ndim == 1 and counts.size not in (1, n):
        raise error(f"operands could not be broadcast together with shape ({n},) ({counts.size},)")
    counts = np.broadcast_to(counts.reshape(-1), (n,)).astype(np.int64)
    if (counts < 0).any():
        raise error("repeats may not contain negative values.")
    if len(set(counts.tolist())) == 1 and n > MAX_WINDOWS:  # uniform: element i // k (no long constant)
        k = int(counts[0])
        return take(x, current_tracer().emit(tta.ArangeOp, 0, n * k) // k, axis) if k else take_constant(x, [], axis)
    return take_constant(x, np.repeat(np.arange(n), counts), axis)


def tile(x: Any, reps: Any) -> Traced:
    """`np.tile`: `x` repeated `reps` times along each axis (leading axes added as needed)."""
    x = as_array(x)
    reps = (int(reps),) if is_index(reps) else tuple(int(r) for r in reps)
    if any(r < 0 for r in reps):
        raise error("negative dimensions are not allowed")
    if len(reps) > x.ndim:
        x = reshape(x, (1,) * (len(reps) - x.ndim) + x.shape)
    reps = (1,) * (x.ndim - len(reps)) + reps
    for axis, r in enumerate(reps):
        n = x.shape[axis]
        if r != 1 and (r <= MAX_WINDOWS or n <= 1):
            x = take_constant(x, np.tile(np.arange(n), r), axis)
        elif r != 1:  # element i % n
            x = take(x, current_tracer().emit(tta.ArangeOp, 0, n * r) % n, axis)
    return x


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Traced:
    """`np.pad` with mode="constant": `pad_width` and `constant_values` in NumPy's forms (a number, (before,
    after), or one pair per axis)."""
    x = as_array(x)
    if mode != "constant":
        raise error(f"pad: mode {mode!r} is not supported in array programs (only mode='constant')")
    if isinstance(pad_width, Traced) or isinstance(constant_values, Traced):
        raise error("pad widths and constant values are compile-time Python numbers in array programs")
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise error("`pad_width` must be of integral type.")
    try:
        widths = np.broadcast_to(widths, (x.ndim, 2)).astype(np.int64)
        values = np.broadcast_to(np.asarray(constant_values), (x.ndim, 2))
    except ValueError:
        raise error(f"pad: pad_width {pad_width!r} and constant_values {constant_values!r} must be a number, a pair "
                    f"or one pair per axis of the {x.ndim}-d array") from None
    if (widths < 0).any():
        raise error("index can't contain negative values")
    if x.ndim == 0 or not widths.any():
        return x  # nothing to pad: NumPy returns the array (and never converts the constant)
    values = _stored_values(constant_values, x.ndim, x.dtype)
    if len({v.item() for v in values.reshape(-1)}) <= 1:  # one value: one padded window
        windows = [(-int(lo), 1, int(lo) + n + int(hi)) for (lo, hi), n in zip(widths, x.shape)]
        return window_slice(x, windows, values.reshape(-1)[0].item() if values.size else 0)
    for axis, ((lo, hi), (before, after)) in enumerate(zip(widths, values)):  # NumPy pads axis by axis
        n = x.shape[axis]
        for width, value, at in ((int(lo), before.item(), 0), (int(hi), after.item(), 1)):
            windows = [(0, 1, d) for d in x.shape]
            windows[axis] = (-width, 1, n + width) if at == 0 else (0, 1, n + width)
            x = window_slice(x, windows, value) if width else x
            n = x.shape[axis]
    return x


def _stored_values(constant_values: Any, ndim: int, dtype: np.dtype) -> np.ndarray:
    """The `(ndim, 2)` pad values as np.pad stores them into an array of `dtype` (-1.5 into uint8 is 255, 2.7 into
    int32 is 2; a Python int out of range is an error): read back from np.pad of a one-element array."""
    try:
        with np.errstate(invalid="ignore"):
            probe = np.pad(np.zeros((1,) * ndim, dtype), 1, constant_values=constant_values)
    except (OverflowError, ValueError) as e:
        raise error(f"pad: constant_values {constant_values!r} do not fit the {dtype} array ({e})") from None
    stored = np.empty((ndim, 2), dtype)
    for axis in range(ndim):
        for side in (0, 1):
            stored[axis, side] = probe[tuple(2 * side if a == axis else 1 for a in range(ndim))]
    return stored


FUNCTIONS = {
    "concatenate": concatenate,
    "stack": stack,
    "split": split,
    "array_split": array_split,
    "flip": flip,
    "squeeze": squeeze,
    "expand_dims": expand_dims,
    "moveaxis": moveaxis,
    "ravel": ravel,
    "flatten": ravel,
    "repeat": repeat,
    "tile": tile,
    "pad": pad,
}
ARRAY_IMPLS.update(FUNCTIONS)
NUMPY_FUNCTIONS.update(name for name in FUNCTIONS if name != "flatten")
