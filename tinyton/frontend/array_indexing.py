"""NumPy's indexing (`x[...]`, `np.take`) on traced arrays, registered in `traced.ARRAY_IMPLS`.

Basic indexing (slices with any step, ints, `...`, `None`) is one `tta.slice` (a strided window:
array_windows.py) plus a reshape; integer-array indexing is a `tta.take` (several index arrays are broadcast
and flattened into one, placed where NumPy puts the advanced dims). Index arrays that are Python or NumPy
constants become traced int32 arrays (`_constant_indices`), or strided windows where they run in few
arithmetic runs (`take_constant`, which `np.repeat` and `np.tile` use too: array_reshaping.py).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import i1, i32

from tinyton.dialects import tta
from tinyton.dialects.tt import is_int
from tinyton.errors import error
from tinyton.frontend.array_ops import broadcast_to, index_array, reshape, take, transpose, where
from tinyton.frontend.array_windows import (
    Window, as_array, axis_index, concatenate, is_index, ravel, slice_window, window_slice,
)
from tinyton.frontend.promotion import is_scalar
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS, Traced, current_tracer

MAX_CONSTANT_RUNS = 256
"""Constant index arrays are built from this many arithmetic runs at most (each a select in the kernel)."""
MAX_WINDOWS = 16
"""A gather by a constant index of at most this many arithmetic runs is a concatenation of strided windows
(views: no gather, fused like any slice); longer ones gather through a computed index array."""


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


def key_index_array(k: Any, x: Traced, dim: int) -> Traced | list[Traced]:
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


def expand_key(x: Traced, key: Any) -> list[Any]:
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
    items = expand_key(x, key)
    for k in items:
        if isinstance(k, (float, np.floating, bool, np.bool_)):
            raise error(
                "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                f"arrays are valid indices, got {type(k).__name__} {k!r}"
            )
    advanced = [i for i, k in enumerate(items) if not (k is None or isinstance(k, slice) or is_index(k))]
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
            windows.append(slice_window(k, n))
            shape.append(windows[-1][2])
        elif is_index(k):
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
            index = key_index_array(k, x, dim)
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
    x = as_array(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = axis_index(axis, x.ndim)
    if isinstance(indices, Traced) or is_scalar(indices):
        return take(x, indices, axis)
    constant = _checked_constant(indices, x.shape[axis], axis)
    if constant.ndim == 1:
        return take_constant(x, constant, axis)
    return take(x, _constant_indices(constant), axis)


FUNCTIONS = {"getitem": getitem, "take": take_any}
ARRAY_IMPLS.update(FUNCTIONS)
NUMPY_FUNCTIONS.add("take")
NUMPY_FUNCTIONS.update(("where", "reshape", "transpose", "swapaxes", "broadcast_to"))
