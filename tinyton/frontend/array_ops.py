"""The `tt.*` builtins on traced arrays (NumPy semantics), registered in `traced.ARRAY_IMPLS`.

`tinyton/language.py` forwards a builtin call whose arguments include a traced value to
`ARRAY_IMPLS[name](*args, **kwargs)`; this module provides those implementations. Each one normalises
its arguments the NumPy way (negative axes, `axis=None`, 1-D matmul operands, dtype promotion) and
emits the few canonical `tta` ops the fusion passes know about.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np
from xdsl.dialects.builtin import Float16Type, Signedness, i1, i32

from tinyton.dialects import tta
from tinyton.dialects.tt import is_float, is_int
from tinyton.errors import error
from tinyton.frontend import ufunc_math, ufuncs
from tinyton.frontend.promotion import FLOAT8, element_of
from tinyton.frontend.traced import ARRAY_IMPLS, Traced, as_traced, current_tracer

Axis = int | Sequence[int] | None
f16 = Float16Type()


def _one(x: Any) -> Traced:
    """`x` as a traced array (shape ops take any dtype, float8 included)."""
    return x if isinstance(x, Traced) else as_traced([x])[0]


def _normalize_axis(axis: int, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise error(f"axis must be an int (or for reductions a tuple of ints, or None), got {type(axis).__name__} {axis!r}")
    try:
        return tta.normalize_axis(int(axis), ndim)
    except tta.ShapeError as e:
        raise error(str(e)) from None


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


# ---- elementwise: NumPy's ufuncs (tinyton/frontend/ufuncs.py, ufunc_math.py) -----------------------

ELEMENTWISE = (ufuncs, ufunc_math)
"""The modules that register NumPy's elementwise functions in `ARRAY_IMPLS` as they are imported."""

# The most used of them by name here too: code tracing with this module as `tt` (the tests) calls them.
exp, log, sqrt, rsqrt, abs, maximum, minimum, relu, where = (
    ARRAY_IMPLS[name] for name in ("exp", "log", "sqrt", "rsqrt", "abs", "maximum", "minimum", "relu", "where")
)


# ---- reductions ---------------------------------------------------------------------------------


def _reduce(op: type[tta.ReduceOp], x: Any, axis: Axis, keepdims: bool) -> Traced:
    """Reduce over `axis` (int, tuple or None = all), one `tta.reduce_*` per run of adjacent axes (merged by a
    reshape: a norm weight's gradient, summed over batch and sequence, is one reduction, not two kernels), or
    one over the flattened array for `axis=None` (the shape the row-reduction templates expect)."""
    x = _one(x)
    if op is tta.ReduceMeanOp and not is_float(x.element):
        x = x.to(np.float64)  # NumPy's mean of ints and bools
    elif op in (tta.ReduceMaxOp, tta.ReduceMinOp) and x.element == i1:  # False < True: as unsigned ints
        return _reduce(op, x.to(np.int32), axis, keepdims).to(np.bool_)
    elif op is tta.ReduceSumOp and is_int(x.element) and x.element.bitwidth < 64:
        x = x.to(np.uint64 if x.dtype.kind == "u" else np.int64)  # NumPy sums narrower ints in (u)int64
    if x.ndim == 0:
        return x
    if axis is None and op in (tta.ReduceMaxOp, tta.ReduceMinOp) and x.size == 0:
        axis = tuple(range(x.ndim))  # the zero-size check below
    if axis is None:
        axes = list(range(x.ndim))
    else:
        axes = [_normalize_axis(a, x.ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise error("duplicate value in 'axis'")
    if op in _NO_IDENTITY and any(x.shape[a] == 0 for a in axes):
        raise error(f"zero-size array to reduction operation {_NO_IDENTITY[op]} which has no identity")
    element = x.element
    if axis is None and x.ndim > 1:
        flat = reshape(x, (x.size,))
        result = flat.tracer.emit(op, flat.value, 0, False)
        result = reshape(result, (1,) * x.ndim) if keepdims else result
        return result.to(element)
    if len(axes) > 1 and op in (tta.ReduceSumOp, tta.ReduceMeanOp) and element == f16:
        x = x.to(np.float32)  # float16: NumPy rounds once, so keep the partial results in float32
    for first, last in reversed(_runs(sorted(axes))):
        shape = x.shape
        if last > first:
            x = reshape(x, (*shape[:first], prod(shape[first : last + 1]), *shape[last + 1 :]))
        x = x.tracer.emit(op, x.value, first, keepdims)
        if keepdims and last > first:
            x = reshape(x, (*shape[:first], *(1,) * (last + 1 - first), *shape[last + 1 :]))
    return x.to(element)


def _runs(axes: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct axes as runs of adjacent ones, (first, last) each."""
    runs: list[tuple[int, int]] = []
    for a in axes:
        if runs and runs[-1][1] == a - 1:
            runs[-1] = (runs[-1][0], a)
        else:
            runs.append((a, a))
    return runs


_NO_IDENTITY = {tta.ReduceMaxOp: "maximum", tta.ReduceMinOp: "minimum"}
"""Reductions NumPy refuses over zero elements (its message names the ufunc)."""


def sum(x: Any, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Traced:
    """NumPy's sum over `axis` (an int, a tuple or None: all); bools and narrower ints accumulate in int64; `dtype` casts first."""
    return _reduce(tta.ReduceSumOp, x if dtype is None else _one(x).to(dtype), axis, keepdims)


def max(x: Any, axis: Axis = None, keepdims: bool = False) -> Traced:
    """NumPy's max over `axis` (NaN propagates; an empty axis is NumPy's error)."""
    return _reduce(tta.ReduceMaxOp, x, axis, keepdims)


def min(x: Any, axis: Axis = None, keepdims: bool = False) -> Traced:
    """NumPy's min over `axis` (NaN propagates; an empty axis is NumPy's error)."""
    return _reduce(tta.ReduceMinOp, x, axis, keepdims)


def mean(x: Any, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Traced:
    """NumPy's mean over `axis` (ints and bools in float32); `dtype` casts first."""
    return _reduce(tta.ReduceMeanOp, x if dtype is None else _one(x).to(dtype), axis, keepdims)


# ---- matmul -------------------------------------------------------------------------------------


def matmul(a: Any, b: Any) -> Traced:
    """`a @ b` with NumPy's rules for 1-D operands (promoted to a matrix, the added axis removed); float8
    operands (e4m3 and e5m2 may mix, or meet a 16- or 32-bit float) give float32.

    ml_dtypes' NumPy widens a float8 operand for a product with another float type: `p @ v` of float32
    probabilities and a float8 `v` is a float32 product."""
    if not all(isinstance(x, Traced) and x.element in FLOAT8 for x in (a, b)):
        a, b = (x.to(np.float32) if isinstance(x, Traced) and x.element in FLOAT8 else x for x in (a, b))
        a, b = as_traced([a, b])
    if a.ndim == 0 or b.ndim == 0:
        raise error(f"matmul: Input operand {0 if a.ndim == 0 else 1} does not have enough dimensions")
    if not is_float(a.element):
        raise error(f"matmul of {a.dtype} arrays is not supported; cast to float32")
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    result = a.tracer.emit(tta.MatmulOp, a2.value, b2.value)
    shape = list(result.shape)
    if b.ndim == 1:
        shape.pop(-1)
    if a.ndim == 1:
        shape.pop(-2 if b.ndim > 1 else -1)
    return reshape(result, tuple(shape))


def dot(a: Any, b: Any, acc: Any = None) -> Traced:
    """`acc + a @ b` (Triton's signature; `acc` optional)."""
    result = matmul(a, b)
    return result if acc is None else result + acc


# ---- creation and data movement ----------------------------------------------------------------


def full(shape: int | Sequence[int], fill_value: bool | int | float, dtype: Any = None) -> Traced:
    """`np.full`: `fill_value` broadcast to `shape` (a constant, never stored)."""
    tracer = current_tracer()
    value = tracer.constant(fill_value, element_of(dtype)) if dtype is not None else as_traced([fill_value], tracer)[0]
    return broadcast_to(value, _shape(shape))


def zeros(shape: int | Sequence[int], dtype: Any = np.float32) -> Traced:
    """`np.zeros`, float32 by default (NumPy's default is float64)."""
    return full(shape, 0, dtype)


def ones(shape: int | Sequence[int], dtype: Any = np.float32) -> Traced:
    """`np.ones`, float32 by default (NumPy's default is float64)."""
    return full(shape, 1, dtype)


def broadcast_to(x: Any, shape: int | Sequence[int]) -> Traced:
    """`np.broadcast_to`: a view, read with stride 0 along the broadcast axes."""
    x, shape = _one(x), _shape(shape)
    return x if x.shape == shape else x.tracer.emit(tta.BroadcastToOp, x.value, shape)


def reshape(x: Any, shape: int | Sequence[int]) -> Traced:
    """`x.reshape(shape)`, with at most one -1 dimension inferred."""
    x, shape = _one(x), _shape(shape)
    if shape.count(-1) > 1:
        raise error("can only specify one unknown dimension")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise error(f"cannot reshape array of size {x.size} into shape {tta.format_shape(shape)}")
        shape = tuple(x.size // known if d == -1 else d for d in shape)
    return x if x.shape == shape else x.tracer.emit(tta.ReshapeOp, x.value, shape)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Traced:
    """`np.transpose` (`x.T`): a view of an input, a copy of a computed value."""
    x = _one(x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(_normalize_axis(a, x.ndim) for a in axes)
    if perm == tuple(range(x.ndim)) and len(perm) == x.ndim:
        return x
    return x.tracer.emit(tta.TransposeOp, x.value, perm)


def arange(start: int, end: int | None = None) -> Traced:
    """`np.arange(start, end)` as int32 (`tt.arange(n)` is `0..n-1`): row and column indices for masks."""
    start, end = (0, start) if end is None else (start, end)
    if not all(isinstance(v, (int, np.integer)) for v in (start, end)):
        raise error(f"arange bounds are Python ints in array programs, got {start!r} and {end!r}")
    return current_tracer().emit(tta.ArangeOp, int(start), int(end))


def _triangle(x: Any, k: int, lower: bool) -> Traced:
    x = _one(x)
    if x.ndim < 2:
        raise error(f"{'tril' if lower else 'triu'} needs an array of rank >= 2, got rank {x.ndim}")
    rows, cols = x.shape[-2:]
    i, j = reshape(arange(rows), (rows, 1)), reshape(arange(cols), (1, cols))
    keep = (j - i <= k) if lower else (j - i >= k)
    return where(keep, x, x.tracer.constant(False if x.element == i1 else 0, x.element))  # keeps x's dtype


def tril(x: Any, k: int = 0) -> Traced:
    """`np.tril`: zero above the k-th diagonal of the last two axes."""
    return _triangle(x, k, lower=True)


def triu(x: Any, k: int = 0) -> Traced:
    """`np.triu`: zero below the k-th diagonal of the last two axes."""
    return _triangle(x, k, lower=False)


def swapaxes(x: Any, axis1: int, axis2: int) -> Traced:
    """`np.swapaxes`: `tt.swapaxes(k, -1, -2)` is the batched transpose attention wants (`k.mT` too)."""
    x = _one(x)
    perm = list(range(x.ndim))
    a, b = _normalize_axis(axis1, x.ndim), _normalize_axis(axis2, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def index_array(idx: Traced) -> Traced:
    """Integer indices in a signed type that their arithmetic (`idx + n`, `idx < 0`) keeps exact: ints narrower
    than 32 bits widen to int32, int32 and int64 stay (`tta.take` checks int64 ones before narrowing), wider
    unsigned ones become int64 as NumPy casts them to intp (uint64 2**64 - 1 is -1, the last element)."""
    if idx.element.bitwidth < 32:
        return idx.to(np.int32)
    return idx.to(np.int64) if idx.element.signedness.data == Signedness.UNSIGNED else idx


def take(table: Any, indices: Any, axis: int | None = 0) -> Traced:
    """`np.take`: gather along `axis` (an embedding lookup for axis 0); indices of any integer type
    (`index_array`): int64 ones are bounds-checked before the kernel narrows them to the i32 it indexes with,
    so an index past 2**31 is NumPy's IndexError, never a wrapped row."""
    table = _one(table)
    if axis is None:
        table, axis = reshape(table, (table.size,)), 0
    if isinstance(indices, (list, tuple)):
        raise error("take: pass the indices as an int32 array argument of the program, not a Python list")
    idx = indices if isinstance(indices, Traced) else table.tracer.constant(indices, i32)
    if not is_int(idx.element) or idx.element == i1:
        raise error("arrays used as indices must be of integer type")
    idx = index_array(idx)
    return table.tracer.emit(tta.TakeOp, table.value, idx.value, _normalize_axis(axis, table.ndim))


ARRAY_IMPLS.update(
    {
        "sum": sum,
        "reduce_sum": sum,
        "max": max,
        "reduce_max": max,
        "min": min,
        "reduce_min": min,
        "mean": mean,
        "reduce_mean": mean,
        "dot": dot,
        "matmul": matmul,
        "zeros": zeros,
        "ones": ones,
        "full": full,
        "broadcast_to": broadcast_to,
        "reshape": reshape,
        "transpose": transpose,
        "swapaxes": swapaxes,
        "arange": arange,
        "tril": tril,
        "triu": triu,
        "take": take,
    }
)
