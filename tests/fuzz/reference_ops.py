"""The reference's ops beyond elementwise ones and sums (fuzz/reference.py): NumPy's other reductions, scans,
gathers and shape ops on `Ref` values, each with its error bound, and `SHIM`, the `tt` namespace of the
reference run.

Shape ops move values and their bounds alike (padding is exact). Products bound `|prod(x + dx) - prod(x)|`
by `prod(|x| + e) - prod(|x|)`; cumulative sums take the bound of a sum of the whole axis at every position
(a scan's tree or chunks may add in any order); argmax/argmin are unchecked where another element may be the
extreme within the bounds; logsumexp and variance by first-order analysis of their float64 formulas.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
from fuzz.reference import (
    F64,
    INF,
    Ref,
    acc_eps,
    accumulation_steps,
    compute_eps,
    elementwise,
    finish_float,
    is_robust,
    matmul,
    normalize_axes,
    reduce_,
)  # fmt: skip


def _ref(x: Any) -> Ref:
    return x if isinstance(x, Ref) else Ref(np.asarray(x), 0.0)


def _limits(dtype: np.dtype) -> tuple[float, float]:
    """Largest and smallest normal magnitude of the type `dtype`'s products accumulate in."""
    info = np.finfo(np.float64 if dtype == np.float64 else np.float32)
    return float(info.max), float(info.tiny)


def _product_error(a: np.ndarray, e: np.ndarray, r: np.ndarray, dtype: np.dtype, n: int,
                   product: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Bound of a (cumulative) product of |a| +- e with n roundings, and where a partial product may
    overflow or underflow the accumulator (the order of the products is the implementation's: even an
    infinite float64 result is then not certain)."""
    finite = np.isfinite(a)
    a0, e0 = np.where(finite, np.abs(a), 0.0), np.where(finite, e, 0.0)
    growth = (1 + acc_eps(dtype)) ** (n + 4)
    err = product(a0 + e0) * growth - product(a0)
    big, tiny = _limits(dtype)
    # the exact product's size, its exponents summed apart (a product that underflows in NumPy's order, r = 0,
    # may not in tinyton's tree order: seed 53 case 2313, float64 -3.2e-34 where NumPy gave -0.0)
    mantissa, exponent = np.frexp(a0)
    exact_log2 = np.log2(product(mantissa)) + 1024 * np.log2(product(np.exp2(exponent / 1024)))
    underflows = product(np.minimum(np.maximum(a0 - e0, 0), 1.0)) < tiny
    risky = (product(np.maximum(a0 + e0, 1.0)) >= big) | (underflows & ((r != 0) | (exact_log2 >= np.log2(tiny))))
    return np.where(risky, INF, err), risky


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Ref:
    x = _ref(x)
    v, e = x.val, x.err
    axes = normalize_axes(axis, v.ndim) if v.ndim else None
    with np.errstate(all="ignore"):
        raw = np.asarray(np.prod(v, axis=axes, keepdims=keepdims))
        unsure = np.any(e > 0, axis=axes, keepdims=keepdims)
        if raw.dtype.kind != "f":
            return Ref(raw, np.where(unsure, INF, 0.0))
        r = np.asarray(np.prod(v.astype(F64), axis=axes, keepdims=keepdims))
        n = v.size // max(r.size, 1) if v.size else 1
        err, risky = _product_error(v.astype(F64), e, r, raw.dtype, n, lambda m: np.prod(m, axis=axes, keepdims=keepdims))
        robust = np.all(is_robust(v.astype(F64), e), axis=axes, keepdims=keepdims)
        return finish_float(r, err, raw.dtype, robust & ~risky)


def _flat(x: Ref, axis: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    if axis is None:
        return x.val.ravel(), np.ravel(x.err), 0
    return x.val, np.asarray(x.err), axis


def _arg(kind: str, x: Any, axis: int | None = None, keepdims: bool = False) -> Ref:
    """argmax/argmin: NumPy's index; unchecked where another element is within the bounds of the extreme."""
    x = _ref(x)
    raw = np.asarray(getattr(np, kind)(x.val, axis=axis, keepdims=keepdims))
    v, e, ax = _flat(x, axis)
    if v.ndim == 0:
        return Ref(raw, 0.0)
    with np.errstate(all="ignore"):
        hi = v.astype(F64) * (1 if kind == "argmax" else -1)
        best = np.nanmax(np.where(np.isnan(hi), -INF, hi - e), axis=ax, keepdims=True)
        candidates = (hi + e >= best) & ~np.isnan(hi)
        inexact = np.any(candidates & (e > 0), axis=ax) & (np.sum(candidates, axis=ax) > 1)
        unsure = (inexact & ~np.any(np.isnan(hi), axis=ax)) | np.any(~np.isfinite(e), axis=ax)
    if axis is None:
        return Ref(raw, np.where(unsure, INF, 0.0).reshape(()))
    if keepdims:
        unsure = np.expand_dims(unsure, ax)
    return Ref(raw, np.where(unsure, INF, 0.0))


def var(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Ref:
    """`mean(|x - mean(x)|**2)`: each deviation is off by its element's bound plus the mean's (the mean's
    rounding included); the squares and their sum round as a sum does."""
    x = _ref(x)
    v, e = x.val, x.err
    axes = normalize_axes(axis, v.ndim) if v.ndim else None
    with np.errstate(all="ignore"):
        raw = np.asarray(np.var(v, axis=axes, ddof=ddof, keepdims=keepdims))
        dtype = raw.dtype
        hi = v.astype(F64)
        r = np.asarray(np.var(hi, axis=axes, ddof=ddof, keepdims=keepdims))
        n = v.size // max(r.size, 1) if v.size else 1
        acc = accumulation_steps(n) * max(acc_eps(dtype), compute_eps(dtype) / 4)
        mean_err = np.mean(e, axis=axes, keepdims=True) + acc * np.mean(np.abs(hi), axis=axes, keepdims=True)
        d = hi - np.mean(hi, axis=axes, keepdims=True)
        dd = e + mean_err
        total = np.sum(2 * np.abs(d) * dd + dd * dd + acc * d * d, axis=axes, keepdims=keepdims)
        err = total / max(n - ddof, 1)
        robust = np.all(is_robust(hi, e), axis=axes, keepdims=keepdims)
        return finish_float(r, err, dtype, robust)


def std(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Ref:
    return elementwise("sqrt", var(x, axis, ddof, keepdims))


def _truth(x: Any, fn: Callable[..., Any], axis: Any = None, keepdims: bool = False) -> Ref:
    """any/all: unchecked where an element's truth (nonzero) is not determined by its bound."""
    x = _ref(x)
    v, e = x.val, x.err
    axes = normalize_axes(axis, v.ndim) if v.ndim else None
    raw = np.asarray(fn(v, axis=axes, keepdims=keepdims))
    with np.errstate(all="ignore"):
        unsure_element = ~np.isfinite(e) | ((e > 0) & ~(np.abs(v.astype(F64)) > e))
    return Ref(raw, np.where(np.any(unsure_element, axis=axes, keepdims=keepdims), INF, 0.0))


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Ref:
    """scipy's logsumexp: 1-Lipschitz in the max norm; the shifted exps' argument
    rounding (weighted by their share of the sum), the sum's rounding and the final add's; +inf where the sum
    overflows the dtype (scipy sums in it)."""
    x = _ref(x)
    v, e = x.val, x.err
    axes = normalize_axes(axis, v.ndim) if v.ndim else None
    dtype = v.dtype if v.dtype.kind == "f" else np.dtype(np.float64)  # scipy >= 1.15: ints and bools as float64
    with np.errstate(all="ignore"):
        hi = v.astype(F64)
        m = np.max(hi, axis=axes, keepdims=True)
        shift = np.where(np.isfinite(m), m, 0.0)
        w = np.exp(hi - shift)
        total = np.sum(w, axis=axes, keepdims=True)
        r = np.log(total) + shift
        n = v.size // max(r.size, 1) if v.size else 1
        # each step rounds to the dtype (scipy's and tinyton's float16 row: its exps, sum and log are float16;
        # seed 20261203 case 1534: log(s) ~ 0.69 rounded to float16 beside a shift of -0.68)
        ceps = max(compute_eps(dtype), float(np.finfo(dtype).eps))
        spread = np.sum(w * np.where(np.isfinite(hi), np.abs(hi - shift), 0), axis=axes, keepdims=True) / total
        steps = np.abs(np.log(total)) + np.abs(shift) + spread + 2
        err = np.max(e, axis=axes, keepdims=True) + 2 * ceps * steps + accumulation_steps(n) * max(acc_eps(dtype), ceps)
        robust = np.all(is_robust(hi, e), axis=axes, keepdims=True)
        # scipy sums the shifted exps in the input dtype: a float16 row past 65504 near-maxima overflows to inf
        big, slack = float(np.finfo(dtype).max), accumulation_steps(n) * acc_eps(dtype) + 4 * ceps
        over = total * (1 - slack) > big
        err = np.where(over, 0.0, np.where(total * (1 + slack) > big, INF, err))
        r = np.where(over, INF, r)
        if not keepdims:
            r, err, robust = (np.squeeze(a, axis=axes) for a in (r, err, robust))
        return finish_float(r, err, dtype, robust)


def _scan(kind: str, x: Any, axis: int | None = None) -> Ref:
    x = _ref(x)
    v, e, ax = _flat(x, axis)
    if v.ndim == 0:
        v, e = v.reshape(1), e.reshape(1)
    fn = np.cumsum if kind == "cumsum" else np.cumprod
    with np.errstate(all="ignore"):
        raw = np.asarray(fn(v, axis=ax))
        if raw.dtype.kind != "f":
            return Ref(raw, np.where(np.logical_or.accumulate(e > 0, axis=ax), INF, 0.0))
        hi = v.astype(F64)
        r = fn(hi, axis=ax)
        n = v.shape[ax]
        robust = np.logical_and.accumulate(is_robust(hi, e), axis=ax)
        if kind == "cumprod":
            err, risky = _product_error(hi, e, r, raw.dtype, n, lambda m: np.cumprod(m, axis=ax))
            return finish_float(r, err, raw.dtype, robust & ~risky)
        magnitude = np.cumsum(np.where(np.isfinite(hi), np.abs(hi), 0), axis=ax)
        # a float64 scan's reference is itself a float64 sum, in NumPy's sequential order: its own roundings
        # (up to n of them) count too (seed 69 case 1450: 2,048 prefix sums 1.1e-11 apart, bound 1.12e-11)
        steps = accumulation_steps(n) + (n if raw.dtype == F64 else 0)
        err = np.cumsum(e, axis=ax) + steps * acc_eps(raw.dtype) * magnitude
        overflow = magnitude + err >= _limits(raw.dtype)[0]
        return finish_float(r, np.where(overflow, INF, err), raw.dtype, robust & ~overflow)


def _row_bound(x: Ref, axis: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """(values, bounds broadcast to them, the axis) of `x` sorted along `axis` (None: flattened)."""
    val, err = x.val, np.broadcast_to(np.asarray(x.err, F64), x.val.shape)
    if axis is None:
        return val.reshape(-1), err.reshape(-1), 0
    return val, err, axis


def sort(x: Any, axis: int | None = -1) -> Ref:
    """NumPy's stable sort; each sorted element is off by at most the largest bound of its row (sorting moves no
    value more than the most any element moved)."""
    val, err, ax = _row_bound(_ref(x), axis)
    if val.ndim == 0:
        return Ref(val, err)
    return Ref(np.sort(val, axis=ax, kind="stable"), np.broadcast_to(np.max(err, axis=ax, keepdims=True), val.shape))


def argsort(x: Any, axis: int | None = -1) -> Ref:
    """NumPy's stable argsort: exact on rows of exact values, unchecked on a row with any inexact one (its order
    may differ within the bounds)."""
    val, err, ax = _row_bound(_ref(x), axis)
    if val.ndim == 0:
        return Ref(np.asarray(0, np.int64), 0.0)
    unsure = np.broadcast_to(np.any(err > 0, axis=ax, keepdims=True), val.shape)
    return Ref(np.argsort(val, axis=ax, kind="stable"), np.where(unsure, INF, 0.0))


def take_along_axis(arr: Any, indices: Ref, axis: int | None = -1) -> Ref:
    arr = _ref(arr)
    idx = indices.val
    val = np.take_along_axis(arr.val, idx, axis)
    err = np.take_along_axis(np.ravel(arr.err) if axis is None else np.asarray(arr.err), idx, axis)
    unsure = np.broadcast_to(indices.err > 0, val.shape) if indices.err.ndim == val.ndim or indices.err.size == 1 else False
    return Ref(val, np.where(unsure, INF, err))


def _moved(fn: Callable[..., np.ndarray]) -> Callable[..., Ref]:
    """A shape op: the values and their bounds move alike."""
    return lambda x, *args, **kw: Ref(fn(_ref(x).val, *args, **kw), fn(np.asarray(_ref(x).err), *args, **kw))


def _joined(fn: Callable[..., np.ndarray]) -> Callable[..., Ref]:
    def join(arrays: Any, axis: int | None = 0) -> Ref:
        refs = [_ref(a) for a in arrays]
        return Ref(fn([r.val for r in refs], axis=axis), fn([np.asarray(r.err) for r in refs], axis=axis))

    return join


def split(x: Any, sections: Any, axis: int = 0) -> list[Ref]:
    x = _ref(x)
    return [Ref(v, e) for v, e in zip(np.split(x.val, sections, axis), np.split(np.asarray(x.err), sections, axis))]


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Ref:
    x = _ref(x)
    return Ref(np.pad(x.val, pad_width, mode, constant_values=constant_values), np.pad(np.asarray(x.err), pad_width, mode, constant_values=0))


def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Ref:
    """minimum(maximum(x, a_min), a_max), as tinyton computes it; a case where np.clip's type differs is
    not drawn."""
    expected = np.clip(_ref(x).val, a_min.val if isinstance(a_min, Ref) else a_min, a_max.val if isinstance(a_max, Ref) else a_max)
    out = _ref(x)
    out = out if a_min is None else elementwise("maximum", out, a_min)
    out = out if a_max is None else elementwise("minimum", out, a_max)
    if out.dtype != expected.dtype:
        raise TypeError(f"np.clip gives {expected.dtype}, its minimum/maximum {out.dtype}")
    return out


def _unary(name: str) -> Callable[[Any], Ref]:
    return lambda x: elementwise(name, x)


def _binary(name: str) -> Callable[[Any, Any], Ref]:
    return lambda a, b: elementwise(name, a, b)


UNARY = ("exp", "log", "sqrt", "rsqrt", "abs", "exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
         "erf", "sigmoid", "floor", "ceil", "trunc", "rint", "sign", "square", "reciprocal", "isnan", "isinf",
         "isfinite", "logical_not")  # fmt: skip
BINARY = ("maximum", "minimum", "fmax", "fmin", "hypot", "logaddexp", "copysign", "arctan2", "logical_and",
          "logical_or", "logical_xor")  # fmt: skip
DTYPES = ("float64", "float32", "float16", "int64", "int32", "int8", "uint8")


def _reduction(kind: str) -> Callable[..., Ref]:
    return lambda x, axis=None, keepdims=False: reduce_(kind, x, axis, keepdims)


SHIM = SimpleNamespace(
    **{name: _unary(name) for name in UNARY}, **{name: _binary(name) for name in BINARY},
    **{name: getattr(np, name) for name in DTYPES}, int1=np.bool_,
    negative=_unary("neg"), positive=_unary("positive"), absolute=_unary("abs"), relu=lambda x: elementwise("maximum", x, 0),
    where=lambda condition, x, y: elementwise("where", condition, x, y), clip=clip,
    sum=_reduction("sum"), max=_reduction("max"), min=_reduction("min"), mean=_reduction("mean"),
    prod=prod, argmax=lambda x, axis=None, keepdims=False: _arg("argmax", x, axis, keepdims),
    argmin=lambda x, axis=None, keepdims=False: _arg("argmin", x, axis, keepdims), var=var, std=std,
    any=lambda x, axis=None, keepdims=False: _truth(x, np.any, axis, keepdims),
    all=lambda x, axis=None, keepdims=False: _truth(x, np.all, axis, keepdims), logsumexp=logsumexp,
    cumsum=lambda x, axis=None: _scan("cumsum", x, axis), cumprod=lambda x, axis=None: _scan("cumprod", x, axis),
    sort=sort, argsort=argsort,
    take_along_axis=take_along_axis, matmul=matmul, transpose=lambda x, axes=None: _ref(x).transpose(axes),
    concatenate=_joined(np.concatenate), stack=_joined(np.stack), split=split, pad=pad,
    flip=_moved(np.flip), squeeze=_moved(np.squeeze), expand_dims=_moved(np.expand_dims), moveaxis=_moved(np.moveaxis),
    ravel=_moved(np.ravel), repeat=_moved(np.repeat), tile=_moved(np.tile),
)  # fmt: skip
"""What a generated program's `tt.` names mean in the reference run."""
