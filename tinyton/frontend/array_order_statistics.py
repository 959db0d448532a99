"""NumPy's order statistics on traced arrays: `median`, `quantile`, `percentile`, their NaN-ignoring forms
`nanmedian`, `nanquantile`, `nanpercentile`, and `partition`/`argpartition`; registered in `traced.ARRAY_IMPLS`.

Each reads rows sorted by tinyton/frontend/array_sorting.py (NaN last). The axes reduced (an int, a tuple, or None:
all) are moved last and merged into one row, as NumPy's `_ureduce` does; `keepdims` puts them back as 1s, and the
shape of `q` goes first.

- `median`, `quantile`, `percentile`: the row length n is static and `q` a constant, so NumPy's virtual indexes and
  interpolation weights are NumPy's own arithmetic on `q` while tracing; the program reads the sorted rows at those
  indexes and interpolates with NumPy's `_lerp` (`a + (b - a) * t`, from `b`'s side for t >= 0.5) in NumPy's types,
  so the results are NumPy's to the last bit; a row holding a NaN (its last sorted element) gives NaN. A median is
  NumPy's mean of the middle one or two elements (float16 summed in float32, integers in float64).
- `nanmedian`, `nanquantile`, `nanpercentile`: a row's n is its count of non-NaN elements (sorted first), so the
  same formulas run in the program, in NumPy's types, and `take_along_axis` reads the rows; an all-NaN row gives
  NaN. Arrays without NaN (integers, bools) take the plain forms.
- `partition`, `argpartition`: the sorted row (its argsort) is a valid partition for every `kth`; within each side
  the order is the sorted one (NumPy's is unspecified).

Where NumPy's result depends on the data or on ml_dtypes, array programs keep their static rule: a 0-d quantile of a
NaN row is NaN in the result's type (NumPy returns the row's NaN in the array's type), and bfloat16 NaN rows give
NaN (NumPy does not see ml_dtypes' NaN in its median and quantile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyton.dialects.tt import is_float
from tinyton.errors import error
from tinyton.frontend.array_ops import Axis, _normalize_axis, _one, full, reshape, sum, transpose
from tinyton.frontend.array_reductions import _axes, _kept_shape, _no_out, take_along_axis
from tinyton.frontend.array_reshaping import stack
from tinyton.frontend.array_sorting import argsort, sort
from tinyton.frontend.promotion import common_dtype
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS, Traced

Index = Any
"""A virtual index, an element index or a weight: a NumPy value while tracing (rows of static length) or a traced
array (one per row, for the nan* forms); NumPy's functions (`np.floor`, `np.where`) compute either."""

VIRTUAL_INDEX: dict[str, Callable[[Index], Index]] = {
    "linear": lambda v: v,
    "lower": lambda v: np.floor(v).astype(np.intp),
    "higher": lambda v: np.ceil(v).astype(np.intp),
    "nearest": lambda v: np.around(v).astype(np.intp),
    "midpoint": lambda v: 0.5 * (np.floor(v) + np.ceil(v)),
}
"""NumPy's `_QuantileMethods` that array programs have: the virtual index from `(n - 1) * q`. An integer one reads
one element; a float one interpolates between its neighbours."""


class Rows:
    """Rows sorted along their last axis (NaN last) and each row's count of elements taken: the static length, or
    (for the nan* forms) a traced count of the non-NaN ones, which sort first."""

    def __init__(self, rows: Traced, skip_nan: bool):
        self.sorted = sort(rows, -1)
        self.length = rows.shape[-1]
        self.count: int | Traced = sum(self.sorted == self.sorted, -1) if skip_nan else self.length
        self.has_nan = is_float(rows.element) and not skip_nan

    def at(self, index: Index) -> Traced:
        """Each row's sorted element at `index` (-1: its last counted one)."""
        if not isinstance(index, Traced):
            return self.sorted[..., int(index)]
        index = np.where(index < 0, index + self.count, index)
        return reshape(take_along_axis(self.sorted, reshape(index, (*index.shape, 1)), -1), index.shape)

    def nan_checked(self, value: Traced) -> Traced:
        """`value`, NaN where the row holds a NaN (NumPy's `_median_nancheck`); the nan* forms skip them."""
        if not self.has_nan:
            return value
        last = self.sorted[..., -1]
        return np.where(last != last, last, value)


def _rows(a: Any, axis: Axis) -> tuple[Traced, tuple[int, ...]]:
    """`a` with the axes reduced moved last and merged into one (the rows), and the result's shape with keepdims."""
    x = _one(a)
    axes = _axes(x, axis)
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    moved = x if kept + axes == tuple(range(x.ndim)) else transpose(x, kept + axes)
    length = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    return reshape(moved, (*(x.shape[i] for i in kept), length)), _kept_shape(x, axes, True)


def _shaped(value: Traced, rows: Traced, kept: tuple[int, ...], keepdims: bool, lead: tuple[int, ...] = ()) -> Traced:
    return reshape(value, lead + (kept if keepdims else rows.shape[:-1]))


# ---- median ---------------------------------------------------------------------------------------


def _median(name: str, a: Any, axis: Axis, out: Any, keepdims: bool, skip_nan: bool) -> Traced:
    """NumPy's median (of the non-NaN elements with `skip_nan`): the middle element, or the mean of the middle two,
    in the type of NumPy's `mean` (float64 for integers and bools; float16 summed in float32 and rounded back)."""
    _no_out(name, out)
    rows, kept = _rows(a, axis)
    result = np.dtype(np.float64) if rows.dtype.kind in "biu" else rows.dtype
    acc = np.dtype(np.float32) if result == np.float16 else result
    if rows.shape[-1] == 0:  # NumPy's mean of nothing
        return full(kept if keepdims else rows.shape[:-1], np.nan, result)
    r = Rows(rows, skip_nan and is_float(rows.element))
    low = r.at((r.count - 1) // 2)
    if isinstance(r.count, int) and r.count % 2:
        value = low.astype(result)
    else:
        mean = ((low.astype(acc) + r.at(r.count // 2).astype(acc)) / 2).astype(result)
        value = np.where(r.count % 2 == 1, low.astype(result), mean) if isinstance(r.count, Traced) else mean
    return _shaped(r.nan_checked(value), rows, kept, keepdims)


def median(a: Any, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's median along `axis` (int, tuple or None: all): the mean of the two middle values of an even row,
    NaN for a row holding a NaN; float64 for integers and bools, float16 stays float16."""
    return _median("median", a, axis, out, keepdims, False)


def nanmedian(a: Any, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's nanmedian: the median of each row's non-NaN values (NaN for an all-NaN row), as `median` computes
    it."""
    return _median("nanmedian", a, axis, out, keepdims, True)


# ---- quantile, percentile -------------------------------------------------------------------------


def _quantiles(name: str, q: Any, percent: bool) -> tuple[np.ndarray, bool]:
    """`q` as NumPy's function makes it (an array; percentile's divided by 100), checked in [0, 1], and whether it
    is weak (a Python int or float: the result keeps a float array's type, as NumPy's `weak_q`)."""
    if isinstance(q, Traced):
        raise error(f"{name}: q must be a constant (a Python number, a sequence or a NumPy array), not a traced "
                    "array: the indexes it picks are computed while compiling")
    weak = type(q) in (int, float)
    qs = np.asanyarray(np.true_divide(q, 100) if percent else q)
    if qs.dtype.kind not in "iuf" or qs.size == 0:
        raise error(f"{name}: q must be a number or a non-empty sequence of numbers (got {q!r})")
    if not (qs.min() >= 0 and qs.max() <= 1):
        raise error(f"{name}: {'Percentiles' if percent else 'Quantiles'} must be in the range "
                    f"{'[0, 100]' if percent else '[0, 1]'} (got q={q!r})")
    return qs, weak


def _neighbours(virtual: Index, count: int | Traced) -> tuple[Index, Index]:
    """NumPy's `_get_indexes`: the elements on either side of each virtual index, both the last (-1) at or past it,
    both the first before the first."""
    below, above = virtual < 0, virtual >= count - 1
    previous = np.floor(virtual)
    return tuple(np.where(below, 0, np.where(above, -1, i)).astype(np.intp) for i in (previous, previous + 1))


def _gamma(virtual: Index, previous: Index, method: str) -> Index:
    """NumPy's `_get_gamma`: the weight of the next element, in the virtual index's type (midpoint: 0.5 between two
    elements, 0 on one)."""
    gamma = np.where(virtual % 1 == 0, 0.0, 0.5) if method == "midpoint" else virtual - previous
    return gamma.astype(virtual.dtype)


def _lerp(a: Traced, b: Traced, t: Index, weak: bool) -> Traced:
    """NumPy's `_lerp`: `a + (b - a) * t`, or `b - (b - a) * (1 - t)` where t >= 0.5 (t = 1 gives b exactly); a weak
    t (a Python float to NumPy) takes the differences' float type first."""
    diff = b - a
    if not isinstance(t, Traced):
        t = float(t) if weak else t[()]
        return b - diff * (1 - t) if t >= 0.5 else a + diff * t
    upper = t >= 0.5
    t, rest = (t, 1 - t) if not weak else (v.astype(common_dtype([diff.dtype, float])) for v in (t, 1 - t))
    return np.where(upper, b - diff * rest, a + diff * t)


def _quantile_at(r: Rows, q: np.generic, method: str, weak: bool) -> Traced:
    """One quantile `q` (a NumPy scalar) of every row, by NumPy's `_quantile`."""
    scale = r.count - 1
    virtual = VIRTUAL_INDEX[method]((scale.astype(q.dtype) if isinstance(scale, Traced) else scale) * q)
    if virtual.dtype.kind in "iu":
        return r.at(virtual)
    previous, following = _neighbours(virtual, r.count)
    return _lerp(r.at(previous), r.at(following), _gamma(virtual, previous, method), weak)


def _quantile(name: str, a: Any, q: Any, axis: Axis, out: Any, method: str, keepdims: bool, skip_nan: bool,
              percent: bool) -> Traced:
    """NumPy's quantile (percentile: q in percent; of the non-NaN elements with `skip_nan`), q's shape first."""
    _no_out(name, out)
    if method not in VIRTUAL_INDEX:
        raise error(f"{name}: method {method!r} is not supported in array programs; use one of "
                    f"{', '.join(map(repr, VIRTUAL_INDEX))}")
    qs, weak = _quantiles(name, q, percent)
    rows, kept = _rows(a, axis)
    if rows.shape[-1] == 0:
        raise error(f"{name}: cannot take a quantile of an empty row (rows of shape {rows.shape})")
    r = Rows(rows, skip_nan and is_float(rows.element))
    values = [_quantile_at(r, v, method, weak) for v in qs.reshape(-1)]
    value = values[0] if qs.ndim == 0 else stack(values)
    return _shaped(r.nan_checked(value), rows, kept, keepdims, qs.shape)


def quantile(a: Any, q: Any, axis: Axis = None, out: Any = None, method: str = "linear",
             keepdims: bool = False) -> Traced:
    """NumPy's quantile: `q` (a constant in [0, 1]: a number, a sequence or an array, whose shape goes first) along
    `axis`, `method` one of linear (NumPy's `_lerp`, to the last bit), lower, higher, nearest, midpoint; NaN for a
    row holding a NaN."""
    return _quantile("quantile", a, q, axis, out, method, keepdims, False, False)


def percentile(a: Any, q: Any, axis: Axis = None, out: Any = None, method: str = "linear",
               keepdims: bool = False) -> Traced:
    """NumPy's percentile: `quantile` of `q / 100` (q a constant in [0, 100])."""
    return _quantile("percentile", a, q, axis, out, method, keepdims, False, True)


def nanquantile(a: Any, q: Any, axis: Axis = None, out: Any = None, method: str = "linear",
                keepdims: bool = False) -> Traced:
    """NumPy's nanquantile: `quantile` of each row's non-NaN values (NaN for an all-NaN row)."""
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, True, False)


def nanpercentile(a: Any, q: Any, axis: Axis = None, out: Any = None, method: str = "linear",
                  keepdims: bool = False) -> Traced:
    """NumPy's nanpercentile: `percentile` of each row's non-NaN values (NaN for an all-NaN row)."""
    return _quantile("nanpercentile", a, q, axis, out, method, keepdims, True, True)


# ---- partition ------------------------------------------------------------------------------------


def _check_partition(name: str, a: Any, kth: Any, axis: int | None, kind: str, order: Any) -> None:
    """NumPy's errors for `kth` (integers in [-n, n) of the partitioned axis), `kind` and `order`."""
    if order is not None:
        raise error(f"{name}: `order` names fields of structured arrays, which array programs do not have; drop it")
    if kind != "introselect":
        raise error(f"{name}: select kind must be 'introselect' (got {kind!r})")
    x = _one(a)
    n = x.size if axis is None else x.shape[_normalize_axis(axis, x.ndim)]
    ks = np.asarray(kth)
    if isinstance(kth, Traced) or ks.dtype.kind not in "iu":
        raise error(f"{name}: kth must be an integer or a sequence of integers (got {kth!r})")
    for k in ks.reshape(-1).tolist():
        if not -n <= k < n:
            raise error(f"{name}: kth(={k}) out of bounds ({n})")


def partition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Traced:
    """NumPy's partition: every `kth` element in its sorted place, the smaller before it, the larger after; array
    programs return the sorted row (`sort`: a valid partition for every kth, each side in sorted order, NaN last)."""
    _check_partition("partition", a, kth, axis, kind, order)
    return sort(a, axis)


def argpartition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Traced:
    """NumPy's argpartition: the int64 indices that partition `a` at `kth`; array programs return `argsort`'s
    (stable: a valid partition for every kth, each side in sorted order, NaN last)."""
    _check_partition("argpartition", a, kth, axis, kind, order)
    return argsort(a, axis)


FUNCTIONS = {f.__name__: f for f in (median, nanmedian, quantile, percentile, nanquantile, nanpercentile, partition,
                                     argpartition)}  # fmt: skip
ARRAY_IMPLS.update(FUNCTIONS)
NUMPY_FUNCTIONS.update(FUNCTIONS)
