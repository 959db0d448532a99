"""NumPy's assignment `x[key] = value` on traced arrays, registered in `traced.ARRAY_IMPLS` as "setitem".

The assignment is a `tta.put` (tinyton/dialects/tta_put.py) whose result the Python object `x` holds from
then on, so later reads of `x` see the new values; when `x` is an input of the program, the program updates
that input in place (tracing.py lists it in the function's `tta.updates`), writing only the assigned
elements: `cache[:, :, pos] = row` stores one row, not a copy of the cache.

Keys: ints, slices (any step), `None`, `...`, and at most one integer index array (1-d or a scalar array),
whose positions must differ (with repeats one of the values is stored; NumPy stores the last). The value is
cast to `x`'s dtype (NumPy's unsafe assignment cast) and broadcast to the shape of `x[key]`.

NumPy views share memory with the array they view; traced arrays are values. So two assignments that NumPy
would see through a view are refused, never silently different: assigning into a view of another array
(`x[0][1] = v`, `x.T[0] = v`), and reading, after `x[...] = v`, a view of `x` taken before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import i1
from xdsl.ir import OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.errors import error, user_location
from tinyton.frontend.array_indexing import expand_key, key_index_array
from tinyton.frontend.array_windows import element_constant, is_index, slice_window
from tinyton.frontend.array_ops import broadcast_to, reshape
from tinyton.frontend.promotion import is_scalar
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS, Traced

VIEW_OPS = (tta.SliceOp, tta.ReshapeOp, tta.TransposeOp, tta.BroadcastToOp)
"""Ops whose result NumPy would give as a view of their input."""


def setitem(x: Traced, key: Any, value: Any) -> None:
    """`x[key] = value` with NumPy's keys (ints, slices, `...`, `None`, one 1-d integer index array) and
    assignment cast; an input of the program assigned into is updated in place, only the assigned elements
    written (a view NumPy would write through is refused).

    `x` holds the array with those elements replaced from then on."""
    _refuse_view_of_live_array(x)
    starts, steps, sizes, shape, index, axis = _window(x, key)
    if 0 in sizes:
        return  # nothing assigned (NumPy's empty slice)
    v = _value(x, value, tuple(shape))
    v = reshape(v, tuple(sizes))
    new = x.tracer.emit(tta.PutOp, x.value, v.value, starts, steps, None if index is None else index.value, axis)
    _mark_stale_views(x)
    x.value = new.value


def _window(x: Traced, key: Any) -> tuple[list[int], list[int], list[int], list[int], Traced | None, int | None]:
    """Per dim of `x` the window's start, step and size; the shape of `x[key]`; the index array and its dim."""
    starts, steps, sizes, shape = [], [], [], []
    index, axis = None, None
    dim = 0
    for k in expand_key(x, key):
        if k is None:
            shape.append(1)
            continue
        n = x.shape[dim]
        if isinstance(k, slice):
            start, step, count = slice_window(k, n)
            starts.append(start), steps.append(step), sizes.append(count), shape.append(count)
        elif is_index(k):
            if not -n <= int(k) < n:
                raise error(f"index {int(k)} is out of bounds for axis {dim} with size {n}")
            starts.append(int(k) % n), steps.append(1), sizes.append(1)
        elif isinstance(k, (float, np.floating, bool, np.bool_)):
            raise error(
                "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer arrays are valid "
                f"indices, got {type(k).__name__} {k!r}"
            )
        else:
            if index is not None:
                raise error("assigning through several index arrays is not supported in array programs; "
                            "index one dim with an array and the others with ints or slices")
            if isinstance(k, Traced) and k.element == i1 or not isinstance(k, Traced) and np.asarray(k).dtype == np.bool_:
                raise error("assigning through a bool mask gives a data-dependent set of elements; use "
                            "x = tt.where(mask, value, x)")
            found = key_index_array(k, x, dim)
            if isinstance(found, list) or found.ndim > 1:
                raise error(f"assigning through an index array of {found.ndim} dims is not supported in array "
                            "programs; flatten the indices to 1-d")
            index, axis = reshape(found, (found.size,)), dim
            starts.append(0), steps.append(1), sizes.append(found.size)
            if found.ndim:
                shape.append(found.size)
        dim += 1
    return starts, steps, sizes, shape, index, axis


def _value(x: Traced, value: Any, shape: tuple[int, ...]) -> Traced:
    """`value` in `x`'s dtype (NumPy's assignment cast), broadcast to `shape` (NumPy's message if it cannot)."""
    if isinstance(value, Traced):
        v = value.to(x.element)
    elif is_scalar(value):
        v = x.tracer.constant(element_constant(value, x.element).value.data, x.element)
    else:
        raise error(f"cannot assign a {type(value).__name__} in an array program; assign a traced array or a "
                    "Python number")
    have = v.shape
    while len(have) > len(shape) and have[0] == 1:  # NumPy drops leading size-1 dims of the value
        have = have[1:]
    try:
        ok = tta.broadcast_shapes(have, shape) == shape
    except tta.ShapeError:
        ok = False
    if not ok:
        raise error(f"could not broadcast input array from shape {tta.format_shape(v.shape)} into shape "
                    f"{tta.format_shape(shape)}")
    return broadcast_to(reshape(v, have), shape)


def _refuse_view_of_live_array(x: Traced) -> None:
    """`x` made by slicing, reshaping or transposing an array some Python name still holds: NumPy would
    write through to that array, which a traced value cannot."""
    upstream: set[SSAValue] = set()
    value = x.value
    while isinstance(value, OpResult) and isinstance(value.op, VIEW_OPS):
        value = value.op.input
        upstream.add(value)
    if any(t.value in upstream and t.ndim for t in x.tracer.live_arrays() if t is not x):
        raise error("assigning into a view of another array (made by slicing, reshape or transpose) is not "
                    "supported: NumPy would change that array too. Assign into the array itself with one index "
                    "(`x[0, 1] = v`, not `x[0][1] = v`), or take a copy first (`y = x[0].copy()`)")


def _mark_stale_views(x: Traced) -> None:
    """The views taken of `x` so far no longer show its values (NumPy's would): reading one is an error."""
    line = user_location()
    pending = [x.value]
    while pending:
        for use in pending.pop().uses:
            if isinstance(use.operation, VIEW_OPS):
                view = use.operation.results[0]
                x.tracer.stale[view] = (
                    f"this array is a view of an array assigned into at {line[0]}:{line[1]}; NumPy's view would show "
                    "the assignment, a traced array does not: take the view after the assignment, or a copy "
                    "before it (`.copy()`)"
                )
                pending.append(view)


def copy(x: Any) -> Traced:
    """`np.copy` / `x.copy()`: the same values in a new array (assigning into it leaves `x` as it was)."""
    if not isinstance(x, Traced):
        raise error(f"copy() takes a traced array, got {type(x).__name__}")
    return Traced(x.tracer, x.value)


ARRAY_IMPLS["setitem"] = setitem
ARRAY_IMPLS["copy"] = copy
NUMPY_FUNCTIONS.add("copy")
