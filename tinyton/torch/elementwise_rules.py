"""ATen's elementwise ops as array-program builtins: one short rule per op (torch eager's semantics).

Result dtypes need no care here: the interpreter casts every result to the dtype torch's own trace gave the
node (tinyton/torch/interpret.py), so NumPy's promotion inside a rule only decides the precision of the
arithmetic, never the result type. Half-precision inputs of transcendental compositions are computed in
float32, as torch's kernels do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from xdsl.ir import OpResult

import tinyton.language as tt
from tinyton.dialects import tta
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, array_dtype, prefer

aten = torch.ops.aten
prims = torch.ops.prims


def _f32(x: Any) -> Any:
    """`x` in float32 when it is a 16-bit float array (torch computes those functions in float32)."""
    return x.astype(np.float32) if isinstance(x, Traced) and x.dtype.itemsize == 2 and x.dtype.kind not in "iub" else x


def add(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a + (b if alpha == 1 else b * alpha)


def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a - (b if alpha == 1 else b * alpha)


def rsub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return sub(b, a, alpha)


def mul(a: Any, b: Any) -> Any:
    return a * b


def div(a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    """`a / b`, or rounded down: `a // b`, for floats too torch's (and NumPy's) `(a - fmod(a, b)) / b` rounded, not
    `floor(a / b)`, whose division rounds first (`1.0 // 0.1` is 9, `floor(1.0 / 0.1)` 10); or toward zero: torch's
    `trunc(a / b)` of floats, and of ints the rounded-down quotient, one more where it is negative and inexact."""
    if rounding_mode is None:
        return a / b
    if rounding_mode == "floor":
        return a // b
    if rounding_mode == "trunc":
        if not (_is_int(a) and _is_int(b)):
            return tt.trunc(a / b)
        quotient = a // b
        return tt.where((quotient < 0) & (quotient * b != a), quotient + 1, quotient)
    raise Unsupported(f"div with rounding_mode={rounding_mode!r}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) or (isinstance(x, Traced) and x.dtype.kind in "iub")


def neg(x: Traced) -> Traced:
    return -x


def reciprocal(x: Traced) -> Traced:
    return 1.0 / x


def pow_(a: Any, b: Any) -> Any:
    return a**b


def _sigmoid(x: Traced) -> Traced:
    """1 / (1 + e^-x): exact limits (e^-x overflows to inf for very negative x, giving 0)."""
    return 1.0 / (1.0 + tt.exp(-_f32(x)))


def _tanh(x: Traced) -> Traced:
    """1 - 2 / (e^2x + 1): exact limits at both ends."""
    return 1.0 - 2.0 / (tt.exp(2.0 * _f32(x)) + 1.0)


sigmoid, tanh = prefer("sigmoid", _sigmoid), prefer("tanh", _tanh)


def silu(x: Traced) -> Traced:
    x = _f32(x)
    return x * sigmoid(x)


def gelu(x: Traced, approximate: str = "none") -> Traced:
    x = _f32(x)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + tt.erf(x * (1.0 / math.sqrt(2.0))))


def gelu_backward(grad: Traced, x: Traced, approximate: str = "none") -> Traced:
    x = _f32(x)
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = tanh(k * (x + 0.044715 * x * x * x))
        return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x))
    cdf = 0.5 * (1.0 + tt.erf(x * (1.0 / math.sqrt(2.0))))
    return grad * (cdf + x * tt.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi)))


def silu_backward(grad: Traced, x: Traced) -> Traced:
    s = sigmoid(_f32(x))
    return grad * s * (1.0 + _f32(x) * (1.0 - s))


def elu(x: Traced, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Traced:
    """torch's ELU, which SELU and CELU decompose into: `scale * x` above 0, else
    `scale * alpha * (exp(input_scale * x) - 1)`."""
    x = _f32(x)
    return tt.where(x > 0, x * scale, tt.expm1(x * input_scale) * (alpha * scale))


def elu_backward(grad: Traced, alpha: float, scale: float, input_scale: float, is_result: bool,
                 x_or_result: Traced) -> Traced:
    """Where `x_or_result` is at most 0, `input_scale` times the result plus `alpha * scale` (given the result) or
    `alpha * scale * input_scale * exp(input_scale * x)` (given x); else `scale`; times `grad`."""
    v = _f32(x_or_result)
    slope = input_scale * (v + alpha * scale) if is_result else alpha * scale * input_scale * tt.exp(v * input_scale)
    return tt.where(v <= 0, grad * slope, grad * scale)


def leaky_relu(x: Traced, negative_slope: float = 0.01) -> Traced:
    return tt.where(x > 0, x, x * negative_slope)


def leaky_relu_backward(grad: Traced, x: Traced, negative_slope: float, is_result: bool) -> Traced:
    return tt.where(x > 0, grad, grad * negative_slope)


def hardtanh_backward(grad: Traced, x: Traced, low: float, high: float) -> Traced:
    return tt.where((x <= low) | (x >= high), 0, grad)


def atan2(y: Traced, x: Traced) -> Traced:
    return tt.arctan2(_f32(y), _f32(x))


def sigmoid_backward(grad: Traced, out: Traced) -> Traced:
    return grad * out * (1.0 - out)


def tanh_backward(grad: Traced, out: Traced) -> Traced:
    return grad * (1.0 - out * out)


def threshold_backward(grad: Traced, x: Traced, threshold: Any) -> Traced:
    return tt.where(x <= threshold, 0, grad)


def _unary(name: str) -> Any:
    """`tt.<name>(x)` on float32 for 16-bit inputs (the interpreter rounds the result back)."""

    def rule(x: Traced) -> Traced:
        return getattr(tt, name)(_f32(x))

    rule.__name__ = name
    return rule


def round_decimals(x: Traced, decimals: int = 0) -> Traced:
    """`torch.round(x, decimals=d)` as eager computes it: `rint(x * 10**d) / 10**d` (d < 0: `rint(x / 10**-d) *
    10**-d`), halves to even, 16-bit floats in float32; integers (eager has no kernel) run in torch, its error."""
    if x.dtype.kind != "f":
        raise Unsupported(f"round with decimals of {x.dtype} (eager's error)")
    scale = 10.0 ** abs(decimals)
    x = _f32(x)
    return tt.rint(x / scale) * scale if decimals < 0 else tt.rint(x * scale) / scale


def clamp(x: Traced, min: Any = None, max: Any = None) -> Traced:
    if min is not None:
        x = tt.maximum(x, min)
    return x if max is None else tt.minimum(x, max)


def where(condition: Traced, a: Any, b: Any) -> Traced:
    return tt.where(condition, a, b)


def masked_fill(x: Traced, mask: Traced, value: Any) -> Traced:
    return tt.where(mask, value, x)


def _truth(x: Any) -> Any:
    """`x != 0`, or `x` itself when it is already bool."""
    return x if isinstance(x, bool) or (isinstance(x, Traced) and x.dtype == np.bool_) else x != 0


def logical_not(x: Traced) -> Traced:
    return ~_truth(x)


def bitwise_not(x: Traced) -> Traced:
    return ~x


def _constant(x: Any) -> Any:
    """The value of a Python scalar or of a traced array that is one constant everywhere (`tt.full`), else None."""
    if not isinstance(x, Traced):
        return x
    value = x.value
    while isinstance(value, OpResult) and isinstance(value.op, (tta.BroadcastToOp, tta.ReshapeOp)):
        value = value.op.input
    return value.op.value.value.data if isinstance(value, OpResult) and isinstance(value.op, tta.ConstantOp) else None


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Traced) else ()


def logical_and(a: Any, b: Any) -> Any:
    """`a and b`; `and True` is dropped, so that masks made with `torch.ones(..., dtype=bool)` stay index masks."""
    shape = np.broadcast_shapes(_shape(a), _shape(b))
    for x, y in ((a, b), (b, a)):
        if _constant(x) is not None and isinstance(y, Traced) and bool(_constant(x)):
            return tt.broadcast_to(_truth(y), shape)
    return _truth(a) & _truth(b)


def logical_or(a: Any, b: Any) -> Any:
    return _truth(a) | _truth(b)


def isnan(x: Traced) -> Traced:
    return x != x  # noqa: PLR0124 - NaN is the one value unequal to itself


def to_copy(x: Traced, dtype: Any = None, layout: Any = None, device: Any = None, **_: Any) -> Traced:
    if device is not None and torch.device(device).type != "cpu" and torch.device(device) != torch.device("cuda", 0):
        raise Unsupported(f"copy to {device}")
    return x if dtype is None else x.astype(array_dtype(dtype))


def convert_element_type(x: Traced, dtype: torch.dtype) -> Traced:
    return x.astype(array_dtype(dtype))


def _comparison(method: str) -> Any:
    def rule(a: Any, b: Any) -> Any:
        return getattr(a, method)(b)

    rule.__name__ = method.strip("_")
    return rule


RULES = {
    **{op: add for op in (aten.add.Tensor, aten.add.Scalar)},
    **{op: sub for op in (aten.sub.Tensor, aten.sub.Scalar)},
    **{op: rsub for op in (aten.rsub.Tensor, aten.rsub.Scalar)},
    **{op: mul for op in (aten.mul.Tensor, aten.mul.Scalar)},
    **{op: div for op in (aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode,
                          aten.true_divide.Tensor, aten.true_divide.Scalar)},
    **{op: pow_ for op in (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)},
    **{op: _comparison(m) for ops, m in (
        ((aten.eq.Tensor, aten.eq.Scalar), "__eq__"), ((aten.ne.Tensor, aten.ne.Scalar), "__ne__"),
        ((aten.lt.Tensor, aten.lt.Scalar), "__lt__"), ((aten.le.Tensor, aten.le.Scalar), "__le__"),
        ((aten.gt.Tensor, aten.gt.Scalar), "__gt__"), ((aten.ge.Tensor, aten.ge.Scalar), "__ge__"),
        ((aten.bitwise_and.Tensor, aten.bitwise_and.Scalar), "__and__"),
        ((aten.bitwise_or.Tensor, aten.bitwise_or.Scalar), "__or__"),
        ((aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar), "__xor__"),
    ) for op in ops},
    aten.neg.default: neg,
    aten.reciprocal.default: reciprocal,
    **{getattr(aten, name).default: _unary(name) for name in (
        "exp", "log", "sqrt", "rsqrt", "abs", "erf", "sin", "cos", "exp2", "log2", "log1p", "expm1", "floor", "ceil",
        "sign", "trunc",
    )},
    aten.round.default: _unary("round"),
    aten.round.decimals: round_decimals,
    aten.sigmoid.default: sigmoid,
    aten.tanh.default: tanh,
    aten.silu.default: silu,
    aten.relu.default: tt.relu,
    aten.gelu.default: gelu,
    aten.gelu_backward.default: gelu_backward,
    aten.silu_backward.default: silu_backward,
    aten.sigmoid_backward.default: sigmoid_backward,
    aten.tanh_backward.default: tanh_backward,
    aten.threshold_backward.default: threshold_backward,
    aten.elu.default: elu,
    aten.elu_backward.default: elu_backward,
    aten.leaky_relu.default: leaky_relu,
    aten.leaky_relu_backward.default: leaky_relu_backward,
    aten.hardtanh.default: lambda x, low=-1.0, high=1.0: clamp(x, low, high),
    aten.hardtanh_backward.default: hardtanh_backward,
    aten.atan2.default: atan2,
    aten.erfinv.default: tt.erfinv,
    **{op: tt.fmod for op in (aten.fmod.Tensor, aten.fmod.Scalar)},
    **{op: tt.remainder for op in (aten.remainder.Tensor, aten.remainder.Scalar)},
    aten.maximum.default: tt.maximum,
    aten.minimum.default: tt.minimum,
    **{op: clamp for op in (aten.clamp.default, aten.clamp.Tensor)},
    aten.clamp_min.default: lambda x, m: clamp(x, min=m),
    aten.clamp_max.default: lambda x, m: clamp(x, max=m),
    aten.where.self: where,
    **{op: masked_fill for op in (aten.masked_fill.Scalar, aten.masked_fill.Tensor)},
    aten.logical_not.default: logical_not,
    aten.logical_and.default: logical_and,
    aten.logical_or.default: logical_or,
    aten.bitwise_not.default: bitwise_not,
    aten.isnan.default: isnan,
    aten._to_copy.default: to_copy,
    prims.convert_element_type.default: convert_element_type,
}  # fmt: skip
"""ATen overload -> rule, for the elementwise ops."""
