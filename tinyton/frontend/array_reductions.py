"""NumPy's reductions and scans beyond sum/max/min/mean on traced arrays, registered in `traced.ARRAY_IMPLS`.

`argmax`/`argmin`, `prod` and `cumsum`/`cumprod` are ops of their own (tinyton/dialects/tta_reductions.py);
`var`, `std`, `any`, `all` and `logsumexp` are composed of the ops fusion knows, written so that the paired
walks of `lowering/fusion/pairs.py` recognise them: a variance is `mean((x - mean(x))**2)` (Chan's merge of
count, mean and M2 in one walk), a logsumexp `log(sum(exp(x - max(x)))) + max(x)` (the online max and sum of
softmax). `take_along_axis` is a `tta.take` of the flattened array at computed flat indices.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
from xdsl.dialects.builtin import i1

from tinyton.dialects import tta
from tinyton.dialects.tt import is_float, is_int
from tinyton.errors import error
from tinyton.frontend.array_ops import (
    Axis,
    _normalize_axis,
    _one,
    _reduce,
    arange,
    exp,
    full,
    index_array,
    log,
    max,
    mean,
    min,
    reshape,
    sqrt,
    sum,
    take,
    where,
)
from tinyton.frontend.traced import ARRAY_IMPLS, Traced


def _axes(x: Traced, axis: Axis) -> tuple[int, ...]:
    """`axis` (int, tuple or None) as sorted non-negative axes of `x`; NumPy's errors otherwise."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = [_normalize_axis(a, x.ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise error("duplicate value in 'axis'")
    return tuple(sorted(axes))


def _kept_shape(x: Traced, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    return tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keepdims or a not in axes)


def _no_out(what: str, out: Any) -> None:
    if out is not None:
        raise error(f"{what}: `out=` is not supported in array programs (they return new arrays); drop it")


def _float(x: Traced, dtype: Any = None) -> Traced:
    """`x` in the float type NumPy computes a statistic in (`dtype`, else float64 for ints and bools)."""
    if dtype is not None:
        return x.to(dtype)
    return x if is_float(x.element) else x.to(np.float64)


def _exact_ints(x: Traced, what: str, dtype: Any) -> Traced:
    """Bools and ints narrower than 64 bits count (multiply) in int64, as NumPy's do; uint8 (NumPy: uint64,
    which array programs do not have) only with an explicit `dtype`."""
    if dtype is not None:
        return x.to(dtype)
    if x.dtype == np.uint8:
        raise error(
            f"{what} of a uint8 array: NumPy's result is uint64, which array programs do not have; pass "
            f"dtype=np.int64 or cast first, x.astype(tt.int64)"
        )
    if is_float(x.element):
        return x
    return x.to(np.int64) if x.element.bitwidth < 64 else x


# ---- reductions ---------------------------------------------------------------------------------


def prod(a: Any, axis: Axis = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's prod: the product over `axis` (bools count as 0/1; empty axes give 1)."""
    _no_out("prod", out)
    x = _exact_ints(_one(a), "prod", dtype)
    if x.ndim == 0:
        return x
    element = x.element
    if is_float(element) and x.dtype.itemsize == 2 and len(_axes(x, axis)) > 1:
        x = x.to(np.float32)  # float16/bfloat16: one rounding at the end, as NumPy's pairwise product nearly does
    return _reduce(tta.ReduceProdOp, x, axis, keepdims).to(element)


def _arg(op: type[tta.ArgReduceOp], a: Any, axis: int | None, out: Any, keepdims: bool) -> Traced:
    name = op.name.removeprefix("tta.")
    _no_out(name, out)
    x = _one(a)
    if isinstance(axis, (tuple, list)):
        raise error(f"{name}: axis must be one int or None (NumPy's {name} takes no tuple of axes), got {axis!r}")
    if x.element == i1:
        x = x.to(np.int32)  # False < True
    if (x.size == 0 and axis is None) or (axis is not None and x.ndim and x.shape[_normalize_axis(axis, x.ndim)] == 0):
        raise error(
            f"{name}: attempt to get {name} of an empty sequence ({x.dtype} array of shape {x.shape}, "
            f"axis {axis}); reduce an axis of nonzero length"
        )
    if x.ndim == 0:
        return x.tracer.constant(0, tta.INDEX_ELEMENT).to(np.int64)
    if axis is None:
        flat = reshape(x, (x.size,))
        result = flat.tracer.emit(op, flat.value, 0, False).to(np.int64)  # NumPy's intp
        return reshape(result, (1,) * x.ndim) if keepdims else result
    return x.tracer.emit(op, x.value, _normalize_axis(axis, x.ndim), keepdims).to(np.int64)


def argmax(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's argmax: the index of the first maximum (of the first NaN, if any) along `axis` (None: flattened)."""
    return _arg(tta.ArgMaxOp, a, axis, out, keepdims)


def argmin(a: Any, axis: int | None = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's argmin: the index of the first minimum (of the first NaN, if any) along `axis` (None: flattened)."""
    return _arg(tta.ArgMinOp, a, axis, out, keepdims)


def _over_all(x: Traced, axis: Axis, keepdims: bool, statistic: Any) -> Traced | None:
    """`statistic(flat, (0,), False)` of the flattened `x` for `axis=None` (one reduction, the form the row
    kernels take), reshaped for `keepdims`; None for other axes."""
    if axis is not None or x.ndim < 2:
        return None
    result = statistic(reshape(x, (x.size,)), (0,), False)
    return reshape(result, (1,) * x.ndim) if keepdims else result


def var(a: Any, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False) -> Traced:
    """NumPy's var: `mean(|x - x.mean()|**2)` over `axis`, divided by `n - ddof` instead of `n`; 16-bit floats
    in float32, rounded once (NumPy's float16 squares overflow past 256: inf where the variance fits)."""
    _no_out("var", out)
    x = _float(_one(a), dtype)
    if x.dtype.itemsize == 2:  # as the fused long-row walk (Chan's merge, in float32) computes it anyway
        return var(x.to(np.float32), axis, None, None, ddof, keepdims).to(x.element)
    flat = _over_all(x, axis, keepdims, lambda f, axes, keep: var(f, axes, None, None, ddof, keep))
    if flat is not None:
        return flat
    axes = _axes(x, axis)
    d = x - mean(x, axes, keepdims=True)
    squares = d * d  # one operand twice: the form the paired walk (Chan's merge) recognises
    if ddof == 0:
        return mean(squares, axes, keepdims)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    return sum(squares, axes, keepdims) / float(builtins.max(n - ddof, 0))


def std(a: Any, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False) -> Traced:
    """NumPy's std: the square root of `var` (same arguments)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims))


def _logical(name: str, a: Any, axis: Axis, out: Any, keepdims: bool) -> Traced:
    _no_out(name, out)
    x = _one(a)
    b = x if x.element == i1 else x != 0  # NaN counts as true, as in NumPy
    if b.ndim == 0:
        return b
    axes = _axes(b, axis)
    if builtins.any(b.shape[i] == 0 for i in axes):  # the identity: any() of nothing is False, all() True
        return full(_kept_shape(b, axes, keepdims), name == "all", np.bool_)
    return (max if name == "any" else min)(b, axes if axis is not None else None, keepdims)


def any(a: Any, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's any: whether any element along `axis` is true (nonzero; NaN counts)."""
    return _logical("any", a, axis, out, keepdims)


def all(a: Any, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Traced:
    """NumPy's all: whether every element along `axis` is true (nonzero; NaN counts)."""
    return _logical("all", a, axis, out, keepdims)


def logsumexp(a: Any, axis: Axis = None, keepdims: bool = False) -> Traced:
    """scipy's logsumexp: `log(sum(exp(x)))` over `axis`, shifted by the max (rows of -inf give -inf, a +inf gives +inf;
    float16 sums in float16 as scipy does, so a row summing past 65504 gives inf)."""
    x = _float(_one(a))
    flat = _over_all(x, axis, keepdims, logsumexp)
    if flat is not None:
        return flat
    axes = _axes(x, axis)
    if builtins.any(x.shape[i] == 0 for i in axes):
        return full(_kept_shape(x, axes, keepdims), float("-inf"), x.dtype)
    if x.ndim == 0:
        return x
    m = max(x, axes, keepdims=True)
    s = sum(exp(x - m), axes, keepdims=True)  # with `m` the online max+sum walk of softmax
    inf = float("inf")
    result = where(m == inf, inf, where(m == -inf, -inf, log(s) + m))
    return result if keepdims else reshape(result, _kept_shape(x, axes, False))


# ---- scans --------------------------------------------------------------------------------------


def _scan(op: type[tta.ScanOp], a: Any, axis: int | None, dtype: Any, out: Any) -> Traced:
    name = op.name.removeprefix("tta.")
    _no_out(name, out)
    x = _one(a)
    x = x.to(dtype) if dtype is not None else _exact_ints(x, name, None) if is_int(x.element) else x
    if axis is None or x.ndim == 0:
        x, axis = reshape(x, (x.size,)), 0
    if isinstance(axis, (tuple, list)):
        raise error(f"{name}: axis must be one int or None, got {axis!r}")
    return x.tracer.emit(op, x.value, _normalize_axis(axis, x.ndim))


def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Traced:
    """NumPy's cumsum: running sums along `axis` (None: of the flattened array); bools count in int32."""
    return _scan(tta.CumSumOp, a, axis, dtype, out)


def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Traced:
    """NumPy's cumprod: running products along `axis` (None: of the flattened array)."""
    return _scan(tta.CumProdOp, a, axis, dtype, out)


# ---- gathers ------------------------------------------------------------------------------------


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1) -> Traced:
    """NumPy's take_along_axis: `arr` gathered at `indices` along `axis` (other axes broadcast together;
    negative indices wrap; an index out of range is the out-of-bounds error of `tt.take`)."""
    x = _one(arr)
    if not isinstance(indices, Traced):
        raise error("take_along_axis: pass the indices as an int32 array argument of the program")
    idx = indices
    if not is_int(idx.element) or idx.element == i1:
        raise error(
            f"take_along_axis: `indices` must be an integer array, got {idx.dtype} of shape {idx.shape}; "
            "cast it, indices.astype(np.int32)"
        )
    idx = index_array(idx)  # uint8/int8 indices: `idx + n` must not wrap
    if axis is None:
        if idx.ndim != 1:
            raise error(f"take_along_axis: when axis=None, `indices` must have a single dimension, got shape {idx.shape}")
        x, axis = reshape(x, (x.size,)), 0
    if idx.ndim != x.ndim:
        raise error(
            f"take_along_axis: `indices` and `arr` must have the same number of dimensions, got shapes "
            f"{idx.shape} and {x.shape}; add axes with indices[..., None]"
        )
    axis = _normalize_axis(axis, x.ndim)
    others = [(d, e) for i, (d, e) in enumerate(zip(x.shape, idx.shape)) if i != axis]
    if builtins.any(d != e and 1 not in (d, e) for d, e in others):
        raise error(
            f"take_along_axis: shape mismatch: `arr` {x.shape} and `indices` {idx.shape} do not broadcast "
            f"together outside axis {axis}"
        )
    shape = tuple(idx.shape[i] if i == axis or x.shape[i] == 1 else x.shape[i] for i in range(x.ndim))
    n = x.shape[axis]
    if n == 0 and 0 not in shape:
        raise error(f"take_along_axis: cannot take from an empty axis: axis {axis} of `arr` {x.shape} has no elements")
    strides = [int(np.prod(x.shape[i + 1 :], dtype=np.int64)) for i in range(x.ndim)]
    flat = where(idx < 0, idx + n, idx)
    flat = flat * strides[axis] if strides[axis] != 1 else flat
    for i in range(x.ndim):
        if i != axis and x.shape[i] != 1 and shape[i] != 1:
            coord = reshape(arange(shape[i]), tuple(shape[i] if j == i else 1 for j in range(x.ndim)))
            flat = flat + coord * strides[i]
    # An index outside [-n, n) reads past the flattened array (x.size), never another row's element.
    flat = where((idx < -n) | (idx >= n), x.size, flat)
    flat = flat if flat.dtype == np.int32 else flat.to(np.int32)  # < 2**31: arrays are i32-indexed
    return take(reshape(x, (x.size,)), flat, 0)


ARRAY_IMPLS.update(
    {
        "prod": prod,
        "argmax": argmax,
        "argmin": argmin,
        "var": var,
        "std": std,
        "any": any,
        "all": all,
        "logsumexp": logsumexp,
        "cumsum": cumsum,
        "cumprod": cumprod,
        "take_along_axis": take_along_axis,
    }
)
