"""NumPy's indexing and shape functions on traced arrays, registered in `traced.ARRAY_IMPLS`.

Basic indexing (slices with any step, ints, `...`, `None`), `np.flip` and `np.pad` are one `tta.slice`
(a strided window, padded where it leaves the array) plus a reshape; integer-array indexing is a
`tta.take` (several index arrays are broadcast and flattened into one, placed where NumPy puts the
advanced dims); `concatenate` is `tta.concatenate`; `stack`, `split`, `repeat`, `tile`, ... are built
from those. Index arrays that are Python or NumPy constants become traced int32 arrays (`_constant_indices`).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, i1, i32

from tinyton.dialects import tta
from tinyton.dialects.tt import is_int
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.errors import error
from tinyton.frontend.array_ops import broadcast_to, index_array, reshape, take, transpose, where
from tinyton.frontend.promotion import is_scalar
from tinyton.frontend.traced import (
    ARRAY_IMPLS,
    NUMPY_FUNCTIONS,
    Traced,
    as_traced,
    current_tracer,
)

Window = tuple[int, int, int]
"""(start, step, size) of one dim of a `tta.slice`."""

MAX_CONSTANT_RUNS = 256
"""Constant index arrays are built from this many arithmetic runs at most (each a select in the kernel)."""
MAX_WINDOWS = 16
"""A gather by a constant index of at most this many arithmetic runs is a concatenation of strided windows
(views: no gather, fused like any slice); longer ones gather through a computed index array."""


def _one(x: Any) -> Traced:
    return as_traced([x])[0]


def _axis(axis: Any, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise error(f"axis must be an int, got {type(axis).__name__} {axis!r}")
    try:
        return tta.normalize_axis(int(axis), ndim)
    except tta.ShapeError as e:
        raise error(str(e)) from None


def _axes(axis: Any, ndim: int) -> list[int]:
    """An int or a tuple of axes, normalised; NumPy's error for a repeated one."""
    axes = [_axis(a, ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise error("repeated axis")
    return axes


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _fill(value: Any, element: Any) -> IntegerAttr | FloatAttr:
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
    attr = None if fill is None else _fill(fill, x.element)
    return x.tracer.emit(tta.SliceOp, x.value, [w[0] for w in windows], [w[1] for w in windows],
                         [w[2] for w in windows], attr)


def _slice_window(k: slice, n: int) -> Window:
    """Python's slice of a length-n sequence (clamped; negative steps from the end) as a window."""
    for part in (k.start, k.stop, k.step):
        if part is not None and not _is_int(part):
            raise error(
                f"slice indices must be integers or None, got {type(part).__name__} {part!r} (in array programs "
                "they are compile-time Python ints)"
            )
    if k.step == 0:
        raise error("slice step cannot be zero")
    start, stop, step = k.indices(n)
    count = len(range(start, stop, step))
    return (start if count else 0, step, count)


# ---- constant index arrays ------------------------------------------------------------------------


def _runs(values: Sequence[int]) -> list[tuple[int, int, int]]:
    """Maximal arithmetic runs (first position, first value, step) covering `values`."""
    runs: list[tuple[int, int, int]] = []
    i = 0
    while i < len(values):
        step = values[i + 1] - values[i] if i + 1 < len(values) else 0
        j = i + 1
        while j < len(values) and values[j] - values[j - 1] == step:
            j += 1
        runs.append((i, values[i], step))
        i = j
    return runs


def _constant_indices(values: np.ndarray) -> Traced:
    """A constant int array as a traced int32 array: `arange` arithmetic, one select per arithmetic run."""
    tracer = current_tracer()
    flat = [int(v) for v in values.reshape(-1)]
    runs = _runs(flat)
    if len(runs) > MAX_CONSTANT_RUNS:
        raise error(
            f"a constant index array of {len(flat)} elements in {len(runs)} arithmetic runs is too irregular to "
            "build in the kernel; pass it as an int32 array argument of the program"
        )
    if not flat:
        return broadcast_to(tracer.constant(0, i32), values.shape)
    position = tracer.emit(tta.ArangeOp, 0, len(flat))
    result = None
    for at, first, step in reversed(runs):
        run = (position - at) * step + first if step else tracer.constant(first, i32)
        result = run if result is None else where(position < at + _run_end(runs, at, flat), run, result)
    return reshape(broadcast_to(result, (len(flat),)), values.shape)


def take_constant(x: Traced, indices: Sequence[int], axis: int) -> Traced:
    """`np.take(x, indices, axis)` for constant, non-negative in-range indices: one strided window per
    arithmetic run of the indices, concatenated (a step-0 window repeats one element)."""
    flat = [int(i) for i in indices]
    runs = _runs(flat)
    if not flat or len(runs) > MAX_WINDOWS:
        return take(x, _constant_indices(np.asarray(flat, dtype=np.int64)), axis)
    parts = []
    for at, first, step in runs:
        windows = [(0, 1, n) for n in x.shape]
        windows[axis] = (first, step, _run_end(runs, at, flat))
        parts.append(window_slice(x, windows))
    return concatenate(parts, axis)


def _run_end(runs: Sequence[tuple[int, int, int]], at: int, flat: Sequence[int]) -> int:
    """Length of the run starting at `at`."""
    starts = [r[0] for r in runs] + [len(flat)]
    return starts[starts.index(at) + 1] - at


# ---- indexing -------------------------------------------------------------------------------------


def _index_array(k: Any, x: Traced, dim: int) -> Traced | list[Traced]:
    """An advanced index as traced int arrays (`index_array`; a constant bool mask gives one per dim it covers)."""
    if isinstance(k, Traced):
        if k.element == i1:
            raise error(
                f"indexing with a bool array (shape {k.shape}) gives a data-dependent shape (the number of True "
                "elements), which an array program cannot have: use tt.where(mask, x, 0), or pass the indices "
                "(np.nonzero(mask)) as an int32 array argument"
            )
        if not is_int(k.element):
            raise error(
                f"arrays used as indices must be of integer (or boolean) type, got {k.dtype} (shape {k.shape}); "
                "cast the index array with .astype(tt.int32)"
            )
        return index_array(k)
    array = np.asarray(k)
    if array.dtype == np.bool_:
        if array.shape != x.shape[dim : dim + array.ndim]:
            raise error(f"boolean index did not match indexed array along axis {dim}; size of axis is "
                        f"{x.shape[dim]} but size of corresponding boolean axis is {array.shape[0]}")
        return [_constant_indices(i) for i in np.nonzero(array)]
    return _constant_indices(_checked_constant(array, x.shape[dim], dim))


def _expand_key(x: Traced, key: Any) -> list[Any]:
    """The index as a list of items, `...` expanded and missing trailing dims given `:`; bool masks stay
    one item (they cover `mask.ndim` dims)."""
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in items) > 1:
        raise error("an index can only have a single ellipsis ('...')")

    def width(k: Any) -> int:
        if k is None or k is Ellipsis:
            return 0
        if isinstance(k, Traced) and k.element == i1 or (
            not isinstance(k, Traced) and not is_scalar(k) and not isinstance(k, slice) and np.asarray(k).dtype == np.bool_
        ):
            return builtins.max(np.ndim(k) if not isinstance(k, Traced) else k.ndim, 1)
        return 1

    used = builtins.sum(width(k) for k in items)
    if used > x.ndim:
        raise error(f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed")
    rest = [slice(None)] * (x.ndim - used)
    at = next((i for i, k in enumerate(items) if k is Ellipsis), None)  # `is`: `==` of an array is elementwise
    return items + rest if at is None else items[:at] + rest + items[at + 1 :]


def getitem(x: Traced, key: Any) -> Traced:
    """`x[key]` with NumPy's rules: slices (any step, clamped), ints (negative from the end), `...`, `None`,
    and integer index arrays (broadcast together; their dims replace the indexed ones where they are
    adjacent, else go first)."""
    items = _expand_key(x, key)
    for k in items:
        if isinstance(k, (float, np.floating, bool, np.bool_)):
            raise error(
                "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                f"arrays are valid indices, got {type(k).__name__} {k!r}"
            )
    advanced = [i for i, k in enumerate(items) if not (k is None or isinstance(k, slice) or _is_int(k))]
    windows: list[Window] = []
    shape: list[int] = []  # after the slice: None -> 1, ints dropped (unless advanced), arrays keep their dim
    arrays: list[tuple[int, Traced]] = []  # (dim of the reshaped value, index array)
    constant = None  # (dim, indices): the one index is a 1-D constant
    dim = 0
    for k in items:
        if k is None:
            shape.append(1)
            continue
        n = x.shape[dim]
        if isinstance(k, slice):
            windows.append(_slice_window(k, n))
            shape.append(windows[-1][2])
        elif _is_int(k):
            if not -n <= int(k) < n:
                raise error(f"index {int(k)} is out of bounds for axis {dim} with size {n}")
            if advanced:  # NumPy: an int among index arrays is an index array of shape ()
                windows.append((0, 1, n))
                arrays.append((len(shape), x.tracer.constant(int(k), i32)))
                shape.append(n)
            else:
                windows.append((int(k) % n, 1, 1))
        else:
            if len(advanced) == 1 and not isinstance(k, Traced) and np.ndim(k) == 1 and np.asarray(k).dtype != np.bool_:
                windows.append((0, 1, x.shape[dim]))
                constant = (len(shape), _checked_constant(k, x.shape[dim], dim))
                shape.append(x.shape[dim])
                dim += 1
                continue
            index = _index_array(k, x, dim)
            for one in index if isinstance(index, list) else [index]:
                windows.append((0, 1, x.shape[dim]))
                arrays.append((len(shape), one))
                shape.append(x.shape[dim])
                dim += 1
            continue
        dim += 1
    y = reshape(window_slice(x, windows), tuple(shape))
    if constant is not None:
        return take_constant(y, constant[1], constant[0])
    return _gather(y, arrays) if arrays else y


def _checked_constant(k: Any, n: int, dim: int) -> np.ndarray:
    """A constant int index array, bounds-checked (NumPy's IndexError) and with negative indices wrapped."""
    array = np.asarray(k)
    if array.size and array.dtype.kind not in "iu":
        raise error(f"arrays used as indices must be of integer (or boolean) type, got {array.dtype}")
    array = array.astype(np.int64)
    bad = array[(array < -n) | (array >= n)]
    if bad.size:
        raise error(f"index {int(bad[0])} is out of bounds for axis {dim} with size {n}")
    return array % builtins.max(n, 1)


def _gather(y: Traced, arrays: list[tuple[int, Traced]]) -> Traced:
    """`y` indexed by integer arrays along their dims: one `tta.take` of a flattened index."""
    dims = [d for d, _ in arrays]
    try:
        index_shape = tta.broadcast_shapes(*(a.shape for _, a in arrays))
    except tta.ShapeError:
        shapes = " ".join(str(a.shape) for _, a in arrays)
        raise error(f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}") from None
    if len(arrays) == 1:
        return take(y, arrays[0][1], dims[0])
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if not adjacent:  # NumPy puts the index dims first
        rest = [d for d in range(y.ndim) if d not in dims]
        y = transpose(y, dims + rest)
        dims = list(range(len(dims)))
    at, sizes = dims[0], [y.shape[d] for d in dims]
    flat_shape = (*y.shape[:at], int(np.prod(sizes)), *y.shape[at + len(dims) :])
    table = reshape(y, flat_shape)
    flat, inside = None, None
    for (_, index), size, inner in zip(arrays, sizes, [int(np.prod(sizes[j + 1 :])) for j in range(len(sizes))]):
        ok = (index >= -size) & (index < size)
        inside = ok if inside is None else inside & ok
        term = where(index < 0, index + size, index) * inner
        flat = term if flat is None else flat + term
    # an index out of its own dim's range must fail as NumPy's IndexError: give the flat index an
    # out-of-range value, which the gather refuses (it never reads it)
    flat = where(inside, flat, -(int(np.prod(sizes)) + 1))
    return take(table, broadcast_to(flat, index_shape), at)


def take_any(x: Any, indices: Any, axis: int | None = None) -> Traced:
    """`np.take`: gather along `axis` (None: of the flattened array) by an int array, or by constant indices
    (a list or NumPy array: strided windows, bounds checked while compiling)."""
    x = _one(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _axis(axis, x.ndim)
    if isinstance(indices, Traced) or is_scalar(indices):
        return take(x, indices, axis)
    constant = _checked_constant(indices, x.shape[axis], axis)
    if constant.ndim == 1:
        return take_constant(x, constant, axis)
    return take(x, _constant_indices(constant), axis)


# ---- joining and splitting ------------------------------------------------------------------------


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
    axis = _axis(axis, values[0].ndim)
    try:
        tta.concatenate_shape([v.shape for v in values], axis)
    except tta.ShapeError as e:
        shapes = ", ".join(str(v.shape) for v in values)
        raise error(f"concatenate: {e} (shapes {shapes}, axis {axis}); only the sizes along the axis may differ: "
                    "reshape, slice or broadcast the inputs to match") from None
    if len(values) == 1:
        return values[0]
    return values[0].tracer.emit(tta.ConcatenateOp, [v.value for v in values], axis)


def stack(arrays: Sequence[Any], axis: int = 0) -> Traced:
    """`np.stack`: join arrays of one shape along a new axis."""
    if isinstance(arrays, Traced) or not isinstance(arrays, (list, tuple)) or not arrays:
        raise error("need at least one array to stack")
    values = as_traced(list(arrays))
    shapes = {v.shape for v in values}
    if len(shapes) > 1:
        raise error(f"stack: all input arrays must have the same shape, got {', '.join(str(v.shape) for v in values)}; "
                    "reshape or broadcast them to one shape")
    axis = _axis(axis, values[0].ndim + 1)
    return concatenate([expand_dims(v, axis) for v in values], axis)


def _split_points(n: int, sections: Any, equal: bool) -> list[int]:
    """Where `split` / `array_split` cut an axis of length n."""
    if _is_int(sections):
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
    if isinstance(sections, Traced) or not all(_is_int(p) for p in sections):
        raise error("split points must be Python ints (an int number of sections or a list of indices)")
    return [int(p) for p in sections]


def _split(x: Any, sections: Any, axis: int, equal: bool) -> list[Traced]:
    x = _one(x)
    axis = _axis(axis, x.ndim)
    n = x.shape[axis]
    bounds = [0, *_split_points(n, sections, equal), n]
    parts = []
    for lo, hi in pairwise(bounds):
        windows = [(0, 1, d) for d in x.shape]
        windows[axis] = _slice_window(slice(lo, hi), n)
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
    x = _one(x)
    axes = range(x.ndim) if axis is None else _axes(axis, x.ndim)
    windows = [((n - 1, -1, n) if n and d in axes else (0, 1, n)) for d, n in enumerate(x.shape)]
    return window_slice(x, windows)


def squeeze(x: Any, axis: Any = None) -> Traced:
    """`np.squeeze`: remove size-1 dims (all of them, or those of `axis`)."""
    x = _one(x)
    axes = [d for d, n in enumerate(x.shape) if n == 1] if axis is None else _axes(axis, x.ndim)
    if any(x.shape[a] != 1 for a in axes):
        raise error("cannot select an axis to squeeze out which has size not equal to one")
    return reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in axes))


def expand_dims(x: Any, axis: Any) -> Traced:
    """`np.expand_dims`: insert size-1 dims at `axis` (int or tuple) of the result."""
    x = _one(x)
    axes = _axes(axis, x.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1))
    it = iter(x.shape)
    return reshape(x, tuple(1 if d in axes else next(it) for d in range(x.ndim + len(axes))))


def moveaxis(x: Any, source: Any, destination: Any) -> Traced:
    """`np.moveaxis`: move axes to new positions, the others keep their order."""
    x = _one(x)
    src, dst = _axes(source, x.ndim), _axes(destination, x.ndim)
    if len(src) != len(dst):
        raise error("`source` and `destination` arguments must have the same number of elements")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def ravel(x: Any) -> Traced:
    """`np.ravel` / `x.flatten()`: the elements as a 1-D array (row-major)."""
    x = _one(x)
    return reshape(x, (x.size,))


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Traced:
    """`np.repeat`: repeat each element (an int, or per-element counts as a constant sequence) along
    `axis` (None: of the flattened array)."""
    x = _one(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _axis(axis, x.ndim)
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
    x = _one(x)
    reps = (int(reps),) if _is_int(reps) else tuple(int(r) for r in reps)
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
    x = _one(x)
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


FUNCTIONS = {
    "getitem": getitem,
    "take": take_any,
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
NUMPY_FUNCTIONS.update(name for name in FUNCTIONS if name not in ("getitem", "flatten"))
NUMPY_FUNCTIONS.update(("where", "reshape", "transpose", "swapaxes", "broadcast_to"))
