"""NumPy's `sort`, `argsort` and `searchsorted` on traced arrays, registered in `traced.ARRAY_IMPLS`.

A sort is a row op (tinyton/dialects/tta_reductions.py `tta.sort`/`tta.argsort`): its kernel holds each row whole
and sorts it in registers with the bitonic network of `tl.sort` on (value, index) pairs
(tinyton/lowering/fusion/sorting.py); a longer row than that holds (`limits.max_sorted_row`) is sorted in chunks,
merged pairwise (`tinyton-split-long-sorts`, tinyton/rewrites/long_sorts.py). The order is NumPy's `kind="stable"` one whatever
`kind` asks for: NaN after every number, equal values in index order; so `argsort` gives NumPy's stable indices, and
`sort` NumPy's values for every kind. The ops sort along the last axis: another axis is moved there and back
(`moveaxis`), and `axis=None` sorts the flattened array. `searchsorted` counts, per value, the elements before it (a
compare and a sum, which fuse).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import i1

from tinyton.dialects import tta
from tinyton.dialects.tt import is_float
from tinyton.errors import error
from tinyton.frontend.array_ops import _normalize_axis, _one, reshape, sum, take
from tinyton.frontend.array_reshaping import moveaxis
from tinyton.frontend.promotion import FLOAT8
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS, Traced

KINDS = "qhms"
"""First letters of NumPy's sort kinds (quicksort, heapsort, mergesort, stable): all give the stable order."""


def _check_kind(name: str, kind: Any, order: Any) -> None:
    if order is not None:
        raise error(f"{name}: `order` names fields of structured arrays, which array programs do not have; drop it")
    if kind is not None and not (isinstance(kind, str) and kind[:1].lower() in KINDS):
        raise error(f"{name}: sort kind must be one of 'quick', 'heap', or 'stable' (got {kind!r})")


def _sorted(op: type[tta.SortingOp], a: Any, axis: int | None, descending: bool) -> Traced:
    """`op` (`tta.sort` or `tta.argsort`) of `a` along `axis` (None: flattened): bools sorted as int8 and float8 as
    float32 (the same order, cast back exactly), another axis than the last moved there and back."""
    x = _one(a)
    if axis is None:
        x, axis = reshape(x, (x.size,)), 0
    axis = _normalize_axis(axis, x.ndim)
    if axis != x.ndim - 1:
        return moveaxis(_sorted(op, moveaxis(x, axis, -1), -1, descending), -1, axis)
    wide = np.int8 if x.element == i1 else np.float32 if x.element in FLOAT8 else None
    if wide is not None:
        out = _sorted(op, x.to(wide), axis, descending)
        return out.to(x.dtype) if op is tta.SortOp else out
    return x.tracer.emit(op, x.value, axis, descending)


def sort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: bool | None = None,
         descending: bool = False) -> Traced:
    """NumPy's sort: `a` sorted along `axis` (None: flattened), NaN last; every `kind` gives the stable order
    (a row of up to 8192 elements, 4096 of 64-bit values, sorted whole in registers, a longer one in chunks
    merged pairwise); `descending=True` (torch's) reverses it, NaN first."""
    _check_kind("sort", kind, order)
    return _sorted(tta.SortOp, a, axis, descending)


def argsort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: bool | None = None,
            descending: bool = False) -> Traced:
    """NumPy's argsort: the int64 indices that sort `a` along `axis` (None: flattened), equal values in index order
    (NumPy's `kind="stable"` result, given for every `kind`), NaN last; `descending=True` (torch's) reverses the
    values' order, NaN first, ties still in index order."""
    _check_kind("argsort", kind, order)
    return _sorted(tta.ArgSortOp, a, axis, descending)


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Traced:
    """NumPy's searchsorted: the int64 index where each of `v` would go in the sorted 1-d `a` (`side="right"`: after
    the elements equal to it), NaN sorting last; `sorter` is argsort's indices of an unsorted `a`."""
    x = _one(a)
    if x.ndim != 1:
        raise error(f"searchsorted: `a` must be 1-d (NumPy's), got shape {x.shape}; pass a row, a[i]")
    if side not in ("left", "right"):
        raise error(f"searchsorted: side must be 'left' or 'right' (got {side!r})")
    if sorter is not None:
        x = take(x, sorter, 0)
    values = _one(v if isinstance(v, Traced) else np.asarray(v)[()])  # a Python scalar as NumPy's: not weak
    column = reshape(values, (*values.shape, 1))
    row = reshape(x, (1,) * values.ndim + x.shape)
    before = row < column if side == "left" else row <= column
    if is_float(x.element) or is_float(values.element):  # NaN after every number
        nan = column != column
        before = before | (nan & (row == row)) if side == "left" else before | nan
    return sum(before, -1)


ARRAY_IMPLS.update({"sort": sort, "argsort": argsort, "searchsorted": searchsorted})
NUMPY_FUNCTIONS.update(("sort", "argsort", "searchsorted"))
