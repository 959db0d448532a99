"""The NumPy reference of a fuzzed array program, with a per-element error bound.

The generated program's own source runs a third time with `tt` bound to `SHIM`: every value is a `Ref`
holding (a) the element values, computed in float64 and rounded to the dtype NumPy gives the operation on
the program's dtypes (array programs give NumPy's dtypes), and (b) `err`, a bound on how far a correct float32/float16 implementation may be from those
values, propagated op by op (first-order error analysis plus a few ulps of each op's own rounding).
`err` is inf where the result is not determined (a comparison or a cast within `err` of its threshold,
a value within `err` of overflowing, implementation-defined NumPy cases); those elements are not checked.
Exact results (ints, bools, specials such as inf - inf) have err 0 and must match exactly, NaN positions
included.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

F64 = np.dtype(np.float64)
INF = np.inf
OWN_ULPS = 4.0
"""Ulps of its own result dtype that one op may be off by (approximate GPU exp/log/rsqrt/division)."""
ACC_EPS = float(np.finfo(np.float32).eps)
"""Reductions and matmuls accumulate in float32 for float16/float32 elements (float64 in float64)."""


def compute_eps(dtype: np.dtype) -> float:
    """Unit roundoff of the type an op of `dtype` computes in: float32 for float16/float32, float64's (4x:
    libdevice's float64 transcendentals are within a few ulps) for float64."""
    return 4 * float(np.finfo(np.float64).eps) if dtype == np.float64 else ACC_EPS


def _eps(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).eps)


def _tiny(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).tiny)


class Ref:
    """One value of the reference run: `val` (program dtype) and `err` (float64, same shape)."""

    __array_ufunc__ = None  # keep NumPy from swallowing `ndarray op Ref`

    def __init__(self, val: Any, err: Any):
        self.val = np.asarray(val)
        self.err = np.broadcast_to(np.asarray(err, F64), self.val.shape)

    shape = property(lambda self: self.val.shape)
    ndim = property(lambda self: self.val.ndim)
    dtype = property(lambda self: self.val.dtype)
    size = property(lambda self: self.val.size)

    def astype(self, dtype: Any) -> Ref:
        return _cast(self, np.dtype(dtype))

    def transpose(self, *axes: Any) -> Ref:
        perm = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
        return Ref(np.transpose(self.val, perm), np.transpose(self.err, perm))

    T = property(lambda self: self.transpose())

    def reshape(self, *shape: Any) -> Ref:
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return Ref(self.val.reshape(shape), self.err.reshape(shape))

    def __getitem__(self, key: Any) -> Ref:
        """Basic and advanced indexing; an index array that is not exact makes the whole result unchecked."""
        items = key if isinstance(key, tuple) else (key,)
        plain = tuple(k.val if isinstance(k, Ref) else k for k in items)
        plain_key = plain if isinstance(key, tuple) else plain[0]
        unsure = any(isinstance(k, Ref) and bool((k.err > 0).any()) for k in items)
        val = self.val[plain_key]
        return Ref(val, INF if unsure else self.err[plain_key])

    def sum(self, axis: Any = None, keepdims: bool = False) -> Ref:
        return reduce_("sum", self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Ref:
        return reduce_("max", self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Ref:
        return reduce_("min", self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Ref:
        return reduce_("mean", self, axis, keepdims)

    def __matmul__(self, o: Any) -> Ref:
        return matmul(self, o)

    def __neg__(self) -> Ref:
        return elementwise("neg", self)

    def __pos__(self) -> Ref:
        return elementwise("positive", self)

    def __abs__(self) -> Ref:
        return elementwise("abs", self)

    def __invert__(self) -> Ref:
        return elementwise("invert", self)

    def __bool__(self) -> bool:
        raise TypeError("a reference value has no truth value (the program uses Python control flow)")


def _binary_method(name: str, reverse: bool = False) -> Callable[[Ref, Any], Ref]:
    if reverse:
        return lambda self, o: elementwise(name, o, self)
    return lambda self, o: elementwise(name, self, o)


_OPERATORS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift,
}  # fmt: skip
for _name in _OPERATORS:
    setattr(Ref, f"__{_name}__", _binary_method(_name))
    setattr(Ref, f"__r{_name}__", _binary_method(_name, reverse=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Ref, f"__{_name}__", _binary_method(_name))
Ref.__hash__ = object.__hash__  # type: ignore[method-assign]

MONOTONE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp2": np.exp2, "expm1": np.expm1, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "tanh": np.tanh,
    "erf": np.vectorize(math.erf, otypes=[F64]), "sigmoid": lambda x: 0.5 * (1 + np.tanh(x / 2)), "tan": np.tan,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "sign": np.sign, "square": np.square,
}  # fmt: skip
"""Float functions bounded by their values at the ends of the argument's interval: monotone ones, and tan and
square piecewise (an interval across a pole of tan or across 0 for square is handled below)."""
_UFUNCS: dict[str, Callable[..., Any]] = {
    **_OPERATORS,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
    "ne": np.not_equal, "neg": np.negative, "abs": np.absolute, "invert": np.invert, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "maximum": np.maximum,
    "minimum": np.minimum, "where": np.where, "sin": np.sin, "cos": np.cos, "reciprocal": np.reciprocal,
    "fmax": np.fmax, "fmin": np.fmin, "hypot": np.hypot, "logaddexp": np.logaddexp, "copysign": np.copysign,
    "arctan2": np.arctan2, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "logical_not": np.logical_not, "positive": np.positive,
}  # fmt: skip


def _typed_as_exp(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], np.ndarray]:
    """A function NumPy lacks (erf, sigmoid), typed as np.exp types its argument."""
    return lambda x: np.asarray(fn(np.asarray(x, F64))).astype(np.exp(x).dtype)


_UFUNCS.update({name: fn for name, fn in MONOTONE.items() if name not in ("erf", "sigmoid")})
_UFUNCS.update(erf=_typed_as_exp(MONOTONE["erf"]), sigmoid=_typed_as_exp(MONOTONE["sigmoid"]))


# ---- error propagation of float results ---------------------------------------------------------


def _guard(bound: np.ndarray, unsafe: np.ndarray) -> np.ndarray:
    return np.where(unsafe, INF, bound)


def _float_error(name: str, r: np.ndarray, x: list[np.ndarray], e: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """First-order bound of |f(x + dx) - f(x)| for |dx| <= e, plus the op's own approximation error
    beyond rounding (float32 ulps of the arguments of exp/pow, absolute error of log)."""
    a, ea = x[0], e[0]
    b, eb = (x[1], e[1]) if len(x) > 1 else (None, None)
    f32 = compute_eps(dtype)
    if name in MONOTONE:
        return _monotone_error(name, r, a, ea, f32)
    if name in ("add", "sub"):
        return ea + eb
    if name == "mul":
        return np.abs(a) * eb + np.abs(b) * ea + ea * eb
    if name == "truediv":
        near_zero = (eb > 0) & (np.abs(b) <= eb)
        return _guard((ea + np.abs(r) * eb) / (np.abs(b) - eb), near_zero)
    if name in ("neg", "abs", "maximum", "minimum", "positive"):
        return np.maximum(ea, eb) if b is not None else ea
    if name == "exp":
        return np.abs(r) * (np.expm1(ea) + 2 * f32 * np.abs(a))
    if name == "log":
        return _guard(ea / (a - ea), (ea > 0) & (a <= ea)) + 4 * f32
    if name == "sqrt":
        tight = ea / (np.sqrt(np.maximum(a - ea, 0)) + np.sqrt(np.abs(a)))
        # where [a - ea, a + ea] holds both signs, NaN and a small root are both right (seed 56 case 3150)
        return _guard(np.minimum(np.sqrt(ea), tight), (ea > 0) & (a - ea < 0) & (a + ea >= 0))
    if name == "rsqrt":
        return _guard(np.abs(r) * (np.sqrt(a / (a - ea)) - 1), (ea > 0) & (a <= ea))
    if name == "pow":
        exact = (ea == 0) & (eb == 0)
        log_a = np.log(np.abs(a))
        moved = np.abs(log_a) * eb + np.abs(b) * ea / (np.abs(a) - ea)
        bound = np.abs(r) * (np.expm1(moved) + 4 * f32 * (1 + np.abs(b * log_a)))
        risky = ~exact & ((np.abs(a) <= ea) | ((a < 0) & (eb > 0)))
        return _guard(np.where(exact, np.abs(r) * 4 * f32 * (1 + np.abs(b * log_a)), bound), risky)
    if name == "mod":
        q = a / b
        slack = (ea + np.abs(q) * eb) / np.abs(b) + 8 * f32 * (1 + np.abs(q))
        frac = q - np.floor(q)
        risky = (np.abs(b) <= eb) | (frac <= slack) | (1 - frac <= slack) | ~np.isfinite(q)
        return _guard(ea + (np.abs(q) + 1) * eb + 8 * f32 * (np.abs(a) + np.abs(b)), risky & np.isfinite(a))
    if name == "where":
        return np.where(x[0] != 0, e[1], e[2])
    if name in ("sin", "cos"):
        return np.minimum(ea + 2 * f32 * (1 + np.abs(a)), 2.0)  # 1-Lipschitz; the argument's reduction
    if name == "reciprocal":
        return _guard(np.abs(r) * eb / (np.abs(b) - eb) if b is not None else np.abs(r) * ea / (np.abs(a) - ea), (ea > 0) & (np.abs(a) <= ea))
    if name in ("fmax", "fmin"):
        return np.maximum(ea, eb)
    if name == "hypot":
        return ea + eb + 2 * f32 * r
    if name == "logaddexp":
        return np.maximum(ea, eb) + 4 * f32 * (1 + np.where(np.isfinite(r), np.abs(r), 0))
    if name == "copysign":  # a NaN's sign bit is the hardware's (x86 makes -NaN, the GPU +NaN: seed 20261203 case 147)
        return _guard(ea, (~is_robust(b, eb) | np.isnan(b)) & (np.abs(a) + ea > 0))
    if name == "arctan2":  # |grad| = 1 / hypot(a, b); the branch cut on the negative b axis
        radius = np.hypot(a, b)
        cut = ~is_robust(a, ea) & (b - eb < 0)
        return _guard((ea + eb) / (radius - ea - eb) + 4 * f32, (radius <= ea + eb) | cut)
    raise KeyError(name)


_EXACT = ("floor", "ceil", "trunc", "rint", "sign", "square")


def _monotone_error(name: str, r: np.ndarray, a: np.ndarray, ea: np.ndarray, f32: float) -> np.ndarray:
    """max |f(y) - f(a)| over |y - a| <= ea widened by 2 compute ulps of a (a transcendental's argument
    rounding), plus 2 compute ulps absolute (approximations near a zero of f)."""
    fn = MONOTONE[name]
    exact = name in _EXACT
    wide = ea if exact else ea + 2 * f32 * np.abs(a)
    lo, hi = fn(a - wide), fn(a + wide)
    err = np.maximum(np.abs(lo - r), np.abs(hi - r))
    if name == "square":
        err = np.where(np.abs(a) <= wide, np.maximum(err, np.abs(r)), err)
    if name == "tan":
        err = _guard(err, np.floor((a - wide) / np.pi + 0.5) != np.floor((a + wide) / np.pi + 0.5))
    err = np.where((ea == 0) & ~np.isfinite(a), 0.0, err)  # an exact special argument
    return err if exact else err + 2 * f32


def is_robust(v: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Operand elements that cannot change sign, or exact ones: a special result built from them is certain."""
    return (e == 0) | (np.isfinite(v) & (np.abs(v) > e))


def finish_float(r: np.ndarray, err: np.ndarray, dtype: np.dtype, robust: np.ndarray) -> Ref:
    """Round `r` to `dtype` and add the op's own rounding; settle specials and overflow."""
    with np.errstate(all="ignore"):
        err = np.where(np.isnan(err), INF, err)
        err = err + OWN_ULPS * _eps(dtype) * np.abs(r) + _tiny(dtype)
        special = ~np.isfinite(r)
        err = np.where(special, np.where(robust, 0.0, INF), err)
        big = float(np.finfo(dtype).max)
        over = np.isfinite(r) & (np.abs(r) - err > big * (1 + 2 * _eps(dtype)))
        near = np.isfinite(r) & ~over & (np.abs(r) + err >= big)
        err = np.where(over, 0.0, np.where(near, INF, err))
        return Ref(np.asarray(r).astype(dtype), err)


# ---- elementwise ----------------------------------------------------------------------------------


def _parts(args: Sequence[Any]) -> tuple[list[Any], list[np.ndarray]]:
    typed = [a.val if isinstance(a, Ref) else a for a in args]
    errs = [a.err if isinstance(a, Ref) else np.zeros((), F64) for a in args]
    return typed, errs


def elementwise(name: str, *args: Any) -> Ref:
    typed, errs = _parts(args)
    fn = _UFUNCS[name]
    if name == "where" and np.asarray(typed[0]).dtype != np.bool_:  # np.where's truthiness, with its bound
        cond = elementwise("ne", args[0], 0)
        return elementwise("where", cond, *args[1:])
    with np.errstate(all="ignore"):
        raw = np.asarray(fn(*typed))
        dtype = raw.dtype
        shape = raw.shape
        errs = [np.broadcast_to(e, shape) for e in errs]
        if dtype.kind != "f":
            return Ref(raw.astype(dtype), np.where(_int_uncertain(name, typed, errs), INF, 0.0))
        # A Python scalar is converted to the result type first, as NumPy does (1e6 in float16 is inf).
        hi = [np.broadcast_to(np.asarray(t if isinstance(t, np.ndarray) else np.asarray(t, raw.dtype), F64), shape) for t in typed]
        r = np.asarray(fn(*hi), F64)
        err = _float_error(name, r, hi, errs, dtype)
        if name == "where":
            err = np.where(errs[0] > 0, INF, err)
            robust = np.where(hi[0] != 0, is_robust(hi[1], errs[1]), is_robust(hi[2], errs[2])) & (errs[0] == 0)
        else:  # an undetermined operand (err inf: it may be NaN) leaves a bounded sign, tanh or sin of it so too
            err = np.where(np.logical_or.reduce([np.isinf(e) for e in errs]), INF, err)
            robust = np.logical_and.reduce([is_robust(v, e) for v, e in zip(hi, errs)])
        return finish_float(r, err, dtype, robust)


def _int_uncertain(name: str, typed: list[Any], errs: list[np.ndarray]) -> np.ndarray:
    """Elements of a bool/int result that are not determined by the bounded operands."""
    unc = np.logical_or.reduce([e > 0 for e in errs]) if name not in _COMPARISONS else None
    if name in ("isnan", "isinf", "isfinite"):
        unc = ~np.isfinite(errs[0])  # a bounded value's NaN/inf-ness is determined (overflow has err inf)
    if name in _COMPARISONS:
        a, b = (np.asarray(t, F64) for t in typed)
        slack = errs[0] + errs[1]
        unc = (slack > 0) & ~(np.abs(a - b) > slack)  # NaN differences stay uncertain only with slack
        unc |= ~np.isfinite(slack)
    if name in ("floordiv", "mod") and np.asarray(typed[0]).dtype.kind in "iub":
        a, b = (np.asarray(t, np.int64) for t in typed)
        unc = unc | (b == 0) | ((a == np.iinfo(np.int32).min) & (b == -1))  # NumPy warns; backends differ
    if name == "reciprocal" and np.asarray(typed[0]).dtype.kind in "iu":
        unc = unc | (np.asarray(typed[0]) == 0)  # NumPy's 1 // 0 is the platform's (INT_MIN on x86); tinyton's 0
    return unc


_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _cast(x: Ref, dtype: np.dtype) -> Ref:
    v, e = x.val, x.err
    with np.errstate(all="ignore"):
        if dtype.kind == "f":
            r = v.astype(F64)
            return finish_float(r, e if v.dtype.kind == "f" else np.where(e > 0, INF, 0.0), dtype, is_robust(r, e))
        out = v.astype(dtype)
        if v.dtype.kind != "f":
            return Ref(out, e)
        if dtype == np.bool_:
            return Ref(out, np.where((e > 0) & (np.abs(v) <= e), INF, 0.0))
        limit = float(np.iinfo(dtype).max)
        lo, hi = np.trunc(v.astype(F64) - e), np.trunc(v.astype(F64) + e)
        unc = ~np.isfinite(v) | (np.abs(v) >= limit) | (lo != hi) | ~np.isfinite(e)
        if dtype.kind == "u":
            unc |= v.astype(F64) <= -1  # C leaves a negative float's conversion to unsigned undefined
        return Ref(out, np.where(unc, INF, 0.0))


# ---- reductions and matmul ------------------------------------------------------------------------


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))


def acc_eps(dtype: np.dtype) -> float:
    return float(np.finfo(np.float64).eps) if dtype == np.float64 else ACC_EPS


def accumulation_steps(n: int) -> float:
    """Roundings one accumulated element may see: a tree within a chunk, chunks one after another."""
    return float(np.log2(max(n, 1)) + n / 1024 + 4)


def reduce_(kind: str, x: Any, axis: Any = None, keepdims: bool = False) -> Ref:
    x = x if isinstance(x, Ref) else Ref(np.asarray(x), 0.0)
    v, e = x.val, x.err
    fn = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}[kind]
    axes = normalize_axes(axis, v.ndim) if v.ndim else None
    with np.errstate(all="ignore"):
        raw = np.asarray(fn(v, axis=axes, keepdims=keepdims))
        dtype = raw.dtype
        errs_inf = np.any(~np.isfinite(e), axis=axes, keepdims=keepdims)
        if dtype.kind != "f":
            return Ref(raw.astype(dtype), np.where(np.any(e > 0, axis=axes, keepdims=keepdims), INF, 0.0))
        hi = v.astype(F64)
        r = np.asarray(fn(hi, axis=axes, keepdims=keepdims), F64)
        n = max(v.size // max(r.size, 1), 1) if v.size else 1
        if kind in ("max", "min"):
            err = np.max(e, axis=axes, keepdims=keepdims, initial=0.0)
        else:
            magnitude = np.sum(np.where(np.isfinite(hi), np.abs(hi), 0), axis=axes, keepdims=keepdims)
            steps = accumulation_steps(n)
            err = np.sum(e, axis=axes, keepdims=keepdims) + steps * acc_eps(dtype) * magnitude
            overflow = magnitude + err >= np.finfo(np.float64 if dtype == np.float64 else np.float32).max  # inf - inf
            err = np.where(overflow, INF, err / n if kind == "mean" else err)
            errs_inf |= overflow
        return finish_float(r, err, dtype, ~errs_inf)


def matmul(a: Any, b: Any) -> Ref:
    (va, vb), (ea, eb) = _parts([a, b])
    with np.errstate(all="ignore"):
        raw = np.matmul(va, vb)
        dtype = raw.dtype
        A, B = va.astype(F64), vb.astype(F64)
        r = np.asarray(np.matmul(A, B), F64)
        k = va.shape[-1]
        finite = lambda m: np.where(np.isfinite(m), m, 0)
        err = np.abs(finite(A)) @ eb + ea @ np.abs(finite(B)) + ea @ eb
        magnitude = np.abs(finite(A)) @ np.abs(finite(B))
        err = err + (np.log2(max(k, 1)) + k / 16 + 4) * acc_eps(dtype) * magnitude
        overflow = magnitude >= np.finfo(np.float32).max  # a product or partial sum may overflow (inf - inf)
        spread = lambda ma, mb: (ma.astype(F64) @ np.ones_like(B) + np.ones_like(A) @ mb.astype(F64)) > 0
        unsure = spread(np.isinf(ea), np.isinf(eb))
        robust = ~spread(~is_robust(A, ea), ~is_robust(B, eb))  # a special row or column times a sign-certain one
        return finish_float(r, np.where(unsure | overflow, INF, err), dtype, robust & ~overflow)


def compare(got: Any, ref: Ref) -> str | None:
    """None when `got` matches the reference (shape, dtype, NaN positions, values within `err`)."""
    got = np.asarray(got) if isinstance(got, np.ndarray) else got
    if not isinstance(got, np.ndarray):
        return f"returned a {type(got).__name__}, not a NumPy array"
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype}, expected {ref.dtype}"
    g, r, e = got.astype(F64), ref.val.astype(F64), ref.err
    checked = np.isfinite(e)
    with np.errstate(all="ignore"):
        bad = checked & ((np.isnan(g) != np.isnan(r)) | (~np.isnan(r) & ~(g == r) & ~(np.abs(g - r) <= e)))
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} elements differ (checked {int(checked.sum())}); first at {at}: "
        f"got {g[at]!r}, expected {r[at]!r} +- {e[at]:.3g}"
    )
