"""Elementwise tt ops, table-driven: one NumPy function per op and element kind.

Semantics (the GPU's): i32 arithmetic wraps (the driver runs under `np.errstate(all="ignore")`); `tt.div`
truncates ints toward zero and `tt.rem` takes the dividend's sign (C's, Triton's; `fmod` for floats),
`tt.floordiv`/`tt.mod` follow NumPy (floor; remainder has the divisor's sign), for floats too. An integer
division by zero gives what the lowering guarantees on the GPU: `tt.div` -1, `tt.rem` the dividend,
`tt.floordiv`/`tt.mod` 0 (NumPy's); maximum/minimum propagate
NaN; `tt.fma` rounds once; comparisons are signed, and
ordered except `ne` (true when either side is NaN, like Python, NumPy and
Triton's `!=`); exp/log/sqrt/rsqrt compute in float32 (f16 rounds back); i1 arithmetic wraps at one bit.
bf16 arithmetic computes in float32 and rounds to nearest even, as Triton's lowering does (for + - * /
that is the correctly rounded bf16 result). Float-to-int casts truncate and saturate, NaN gives 0 (PTX
`cvt.rzi`); casts to i1 test `!= 0`; casts to and from bf16 go through float32 (one rounding); casts to
float8 round to nearest even and saturate to the largest finite value (PTX `cvt.rn.satfinite`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Operation

from tinyton.dialects import tt
from tinyton.dtypes import BF16

from .state import SimFunctions
from .values import choose, kind, np_dtype, scalar

Fn = Callable[..., Any]


def _trunc_div(a: Any, b: Any) -> Any:
    """C's integer division (toward zero) from NumPy's floor division; -1 for a zero divisor."""
    q = np.floor_divide(a, b)
    q = q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return scalar(np.where(b == 0, np.array(-1).astype(q.dtype), q))  # unsigned: all ones, as the GPU's


def _trunc_rem(a: Any, b: Any) -> Any:
    """C's integer remainder (the dividend's sign); the dividend for a zero divisor."""
    return scalar(np.where(b == 0, a, np.fmod(a, b)))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _in_f32(fn: Fn) -> Fn:
    """`fn` evaluated in float32 (float64 in float64), rounded back to the operand's dtype (exact for neg/abs)."""
    return lambda x: fn(x) if x.dtype == np.float64 else fn(x.astype(np.float32)).astype(x.dtype)


@dataclass(frozen=True)
class Binary:
    """NumPy functions of a binary op for float, int and i1 operands."""

    float_fn: Fn | None
    int_fn: Fn | None
    bool_fn: Fn | None = None

    def for_kind(self, kind: str) -> Fn:
        if kind == "f":
            fn = self.float_fn
        else:
            fn = (self.bool_fn or self.int_fn) if kind == "b" else self.int_fn
        assert fn is not None, f"no {kind} implementation"
        return fn


BINARY: dict[type[Operation], Binary] = {
    tt.AddOp: Binary(np.add, np.add, np.logical_xor),
    tt.SubOp: Binary(np.subtract, np.subtract, np.logical_xor),
    tt.MulOp: Binary(np.multiply, np.multiply, np.logical_and),
    tt.DivOp: Binary(np.true_divide, _trunc_div),
    tt.RemOp: Binary(np.fmod, _trunc_rem),
    tt.FloorDivOp: Binary(np.floor_divide, np.floor_divide),
    tt.ModOp: Binary(np.remainder, np.remainder),
    tt.MaximumOp: Binary(np.maximum, np.maximum),
    tt.MinimumOp: Binary(np.minimum, np.minimum),
    tt.AndOp: Binary(None, np.bitwise_and),
    tt.OrOp: Binary(None, np.bitwise_or),
    tt.XorOp: Binary(None, np.bitwise_xor),
    tt.ShlOp: Binary(None, np.left_shift),
    tt.ShrOp: Binary(None, np.right_shift),
    tt.DivRnOp: Binary(np.true_divide, None),
    tt.CopysignOp: Binary(np.copysign, None),
    tt.Atan2Op: Binary(np.arctan2, None),
    tt.HypotOp: Binary(np.hypot, None),
    tt.FmaxOp: Binary(np.fmax, None),
    tt.FminOp: Binary(np.fmin, None),
}

UNARY: dict[type[Operation], Fn] = {
    tt.NegOp: lambda x: _in_f32(np.negative)(x) if x.dtype == BF16 else np.negative(x),
    tt.AbsOp: lambda x: _in_f32(np.abs)(x) if x.dtype == BF16 else np.abs(x),
    tt.ExpOp: _in_f32(np.exp),
    tt.LogOp: _in_f32(np.log),
    tt.SqrtOp: _in_f32(np.sqrt),
    tt.RsqrtOp: _in_f32(lambda x: np.float32(1) / np.sqrt(x)),
    tt.Exp2Op: _in_f32(np.exp2),
    tt.Log2Op: _in_f32(np.log2),
    tt.FloorOp: np.floor,
    tt.CeilOp: np.ceil,
    tt.ErfOp: _in_f32(lambda x: scalar(_erf(x).astype(x.dtype))),
    tt.SqrtRnOp: _in_f32(np.sqrt),
    tt.TanhOp: _in_f32(np.tanh),
    tt.TanOp: _in_f32(np.tan),
    tt.Log10Op: _in_f32(np.log10),
    tt.Log1pOp: _in_f32(np.log1p),
    tt.Expm1Op: _in_f32(np.expm1),
    tt.TruncOp: np.trunc,
    tt.RintOp: np.rint,
}

COMPARE: dict[str, Fn] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


FLOAT8_MAX = {np.dtype(ml_dtypes.float8_e4m3fn): 448.0, np.dtype(ml_dtypes.float8_e5m2): 57344.0}
"""Largest finite float8 values: conversions saturate to them (PTX `cvt.rn.satfinite`), NaN stays NaN."""


def cast(x: Any, dtype: np.dtype) -> Any:
    """Convert `x` to `dtype` as the GPU does (see the module docstring)."""
    if dtype == x.dtype:
        return x
    if dtype.kind == "b":
        return x != 0
    if x.dtype in FLOAT8_MAX:
        x = x.astype(np.float32)
    if dtype in FLOAT8_MAX:
        limit = FLOAT8_MAX[dtype]
        return scalar(np.clip(np.asarray(x, dtype=np.float32), -limit, limit).astype(dtype))
    if BF16 in (x.dtype, dtype) and np.float32 not in (x.dtype, dtype):
        return cast(cast(x, np.dtype(np.float32)), dtype)
    if kind(x) == "f" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        wide = np.clip(np.trunc(x.astype(np.float64)), info.min, info.max)
        return scalar(np.where(np.isnan(wide), 0, wide).astype(dtype))
    return x.astype(dtype)


def _binary_impl(spec: Binary) -> Fn:
    def run(self: ElementwiseFunctions, interpreter: Interpreter, op: Operation, args: PythonValues) -> PythonValues:
        lhs, rhs = args
        fn = spec.for_kind(kind(lhs))
        if lhs.dtype == BF16:
            return (fn(lhs.astype(np.float32), rhs.astype(np.float32)).astype(BF16),)
        return (fn(lhs, rhs),)

    return run


def _unary_impl(fn: Fn) -> Fn:
    def run(self: ElementwiseFunctions, interpreter: Interpreter, op: Operation, args: PythonValues) -> PythonValues:
        return (fn(args[0]),)

    return run


class ElementwiseFunctions(SimFunctions):
    """Arithmetic, comparisons, `tt.select` and `tt.cast`; the table-driven impls are added below."""

    @impl(tt.CmpOp)
    def run_cmp(self, interpreter: Interpreter, op: tt.CmpOp, args: PythonValues) -> PythonValues:
        lhs, rhs = args
        if lhs.dtype == BF16:  # exact in float32
            lhs, rhs = lhs.astype(np.float32), rhs.astype(np.float32)
        return (COMPARE[op.predicate.data](lhs, rhs),)

    @impl(tt.SelectOp)
    def run_select(self, interpreter: Interpreter, op: tt.SelectOp, args: PythonValues) -> PythonValues:
        return (choose(*args),)

    @impl(tt.FmaOp)
    def run_fma(self, interpreter: Interpreter, op: tt.FmaOp, args: PythonValues) -> PythonValues:
        a, b, c = args  # exact product in float64, then one rounding (f32/f16 products fit in 53 bits)
        return (scalar((np.float64(1) * a * b + c).astype(np.asarray(a).dtype)),)

    @impl(tt.BitcastOp)
    def run_bitcast(self, interpreter: Interpreter, op: tt.BitcastOp, args: PythonValues) -> PythonValues:
        return (scalar(np.asarray(args[0]).view(np_dtype(op.result.type))),)

    @impl(tt.CastOp)
    def run_cast(self, interpreter: Interpreter, op: tt.CastOp, args: PythonValues) -> PythonValues:
        return (cast(args[0], np_dtype(op.result.type)),)


for _op, _spec in BINARY.items():
    setattr(ElementwiseFunctions, f"run_{_op.name[3:]}", impl(_op)(_binary_impl(_spec)))
for _op, _fn in UNARY.items():
    setattr(ElementwiseFunctions, f"run_{_op.name[3:]}", impl(_op)(_unary_impl(_fn)))
register_impls(ElementwiseFunctions)
