"""NumPy's elementwise functions (ufuncs) on traced arrays: type resolution and the arithmetic, comparison,
logical and bitwise ufuncs; the math functions are in tinyton/frontend/ufunc_math.py.

Every ufunc resolves its operands' types exactly as NumPy does, by asking NumPy (`ufunc.resolve_dtypes`, with
Python ints and floats as weak scalars, NEP 50): the operands are cast to the loop's input types and the
result has its output type (`int32 / int32` is float64, `bool + bool` bool, `np.exp(bool)` float16). A type
NumPy has no loop for is a CompilationError worded like NumPy's, with the cast that fixes it. Each function
is registered in `ARRAY_IMPLS` under its NumPy name (`tt.<name>`, `np.<name>(traced)`, and the operators).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, IntegerType, Signedness, i1
from xdsl.ir import Attribute, Operation

from tinyton.dialects import tta
from tinyton.dialects.tt import is_float, is_int
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.errors import error
from tinyton.frontend.promotion import common_dtype, element_of, is_scalar, numpy_key, refuse_float8
from tinyton.frontend.traced import ARRAY_IMPLS, Traced, as_traced, current_tracer

Operand = Any
"""A traced array or a scalar (Python's are weak, NumPy's typed)."""

_INT_ONLY = "it takes integer and bool arrays; cast floats first, e.g. x.astype(tt.int32)"
_FIXES = {
    **dict.fromkeys(("bitwise_and", "bitwise_or", "bitwise_xor", "invert", "bitwise_not", "left_shift",
                     "right_shift", "gcd", "lcm"), _INT_ONLY),
    "negative": "the numpy boolean negative, the `-` operator, is not supported, use the `~` operator or the "
    "logical_not function instead",
    "subtract": "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, the `^` operator, "
    "or the logical_xor function instead",
    "sign": "cast bools first, e.g. x.astype(tt.int8)",
}
"""The fix each refusal suggests beyond casting."""


def _dtype_names(keys: Sequence[Any]) -> str:
    return ", ".join(k.__name__ if isinstance(k, type) else str(k) for k in keys)


def _no_loop(name: str, keys: Sequence[Any]) -> Exception:
    """NumPy's refusal (`ufunc 'x' not supported for the input types`), with the fix."""
    fix = _FIXES.get(name, "cast the operands with x.astype(...) to a type it accepts (e.g. tt.float32)")
    return error(f"ufunc '{name}' not supported for the input types ({_dtype_names(keys)}); {fix}")


def resolve(name: str, operands: Sequence[Operand], ufunc: np.ufunc | None = None) -> tuple[list[Traced], Attribute]:
    """NumPy's loop of ufunc `name` (or `ufunc`) for these operands: the operands converted to its input
    types, and its output element type. bfloat16 (NumPy knows it through ml_dtypes, without NEP 50's weak
    scalars) takes float16's loop, the results bfloat16 again."""
    ufunc = ufunc or getattr(np, name)
    traced = [o for o in operands if isinstance(o, Traced)]
    tracer = traced[0].tracer if traced else current_tracer()
    for o in operands:
        if not isinstance(o, Traced) and not is_scalar(o):
            raise error(f"cannot mix a {type(o).__name__} with traced arrays; pass arrays as arguments of the program")
    refuse_float8(o.element for o in traced)
    keys = [numpy_key(o.element) if isinstance(o, Traced) else numpy_key(o) for o in operands]
    try:
        dtypes = _resolve_dtypes(ufunc, keys)
    except TypeError:
        raise _no_loop(name, keys) from None
    elements = [element_of(d) for d in dtypes]
    inputs = [
        o.to(el) if isinstance(o, Traced) else tracer.constant(o, el) for o, el in zip(operands, elements)
    ]
    return inputs, elements[-1]


def _resolve_dtypes(ufunc: np.ufunc, keys: list[Any]) -> tuple[np.dtype, ...]:
    bf16 = ELEMENT_TO_NUMPY[BFloat16Type()]
    if bf16 not in keys:
        return ufunc.resolve_dtypes((*keys, None))
    common = common_dtype(keys)  # NEP 50 for bfloat16 too (`promotion.bfloat16_keys`)
    arrays = [common if isinstance(k, np.dtype) else k for k in keys]
    if common != bf16:  # bfloat16 with float32, float16 or a wide int: their common type's loop
        return ufunc.resolve_dtypes((*arrays, None))
    as_half = [np.dtype(np.float16) if k == bf16 else k for k in arrays]  # float16's loop, in bfloat16
    return tuple(bf16 if d == np.float16 else d for d in ufunc.resolve_dtypes((*as_half, None)))


def emit(op: type[Operation], *operands: Traced) -> Traced:
    return operands[0].tracer.emit(op, *(o.value for o in operands))


def scalar(x: Traced, value: bool | int | float) -> Traced:
    """A scalar constant of `x`'s element type (elementwise ops broadcast it)."""
    return x.tracer.constant(value, x.element)


def full_like(x: Traced, value: bool | int | float, element: Attribute | None = None) -> Traced:
    """A constant of `x`'s shape (of `x`'s element type unless given): a result that does not depend on x."""
    c = x.tracer.constant(value, element or x.element)
    return c if not x.shape else x.tracer.emit(tta.BroadcastToOp, c.value, x.shape)


def where(cond: Traced, a: Traced, b: Traced) -> Traced:
    return emit(tta.WhereOp, cond, a, b)


def cmp(predicate: str, a: Traced, b: Traced) -> Traced:
    return a.tracer.emit(tta.CmpOp, predicate, a.value, b.value)


def register(name: str, doc: str, *aliases: str) -> Callable[[Callable[..., Traced]], Callable[..., Traced]]:
    """Register `fn` as `ARRAY_IMPLS[name]` (and its NumPy aliases) with a one-line docstring."""

    def add(fn: Callable[..., Traced]) -> Callable[..., Traced]:
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = doc
        for key in (name, *aliases):
            ARRAY_IMPLS[key] = fn
        return fn

    return add


def binary_ufunc(name: str, op: type[Operation], doc: str, *aliases: str,
                 on_bool: type[Operation] | None = None) -> None:
    """A ufunc that is one tta op on the resolved operands (`on_bool` for bool operands)."""

    def impl(a: Operand, b: Operand) -> Traced:
        (x, y), _ = resolve(name, [a, b])
        return emit(on_bool if on_bool is not None and x.element == i1 else op, x, y)

    register(name, doc, *aliases)(impl)


binary_ufunc("add", tta.AddOp, "`a + b` (of bools: or).", on_bool=tta.OrOp)
binary_ufunc("subtract", tta.SubOp, "`a - b`.")
binary_ufunc("multiply", tta.MulOp, "`a * b` (of bools: and).", on_bool=tta.AndOp)
binary_ufunc("true_divide", tta.DivOp, "`a / b`; ints divide as float64.", "divide")
binary_ufunc("floor_divide", tta.FloorDivOp, "`a // b`, rounding toward minus infinity; an int divided by 0 is 0.")
binary_ufunc("remainder", tta.ModOp, "`a % b`, with the sign of b; an int remainder by 0 is 0.", "mod")
binary_ufunc("fmod", tta.FmodOp, "The remainder with the sign of a (C's `%`), exact for floats; an int remainder by 0 is 0.")


@register("divmod", "`(a // b, a % b)`: NumPy's floor_divide and remainder (of one exact fmod) in one call.")
def divmod_(a: Operand, b: Operand) -> tuple[Traced, Traced]:
    return ARRAY_IMPLS["floor_divide"](a, b), ARRAY_IMPLS["remainder"](a, b)


binary_ufunc("maximum", tta.MaximumOp, "Elementwise maximum; NaN propagates.", on_bool=tta.OrOp)
binary_ufunc("minimum", tta.MinimumOp, "Elementwise minimum; NaN propagates.", on_bool=tta.AndOp)
binary_ufunc("bitwise_and", tta.AndOp, "`a & b` of ints and bools.")
binary_ufunc("bitwise_or", tta.OrOp, "`a | b` of ints and bools.")
binary_ufunc("bitwise_xor", tta.XorOp, "`a ^ b` of ints and bools.")

def _compare_out_of_range(name: str, a: Operand, b: Operand) -> Traced | None:
    """An int array compared with a Python int outside its type's range: NumPy 2 compares by value, so the
    result is the same for every element (`uint8 <= -1` is all False)."""
    for array, value, flipped in ((a, b, False), (b, a, True)):
        if isinstance(array, Traced) and type(value) is int and isinstance(array.element, IntegerType) and array.element != i1:
            info = np.iinfo(array.dtype)
            if not info.min <= value <= info.max:
                sample = np.array([info.min], array.dtype)
                result = getattr(np, name)(value, sample) if flipped else getattr(np, name)(sample, value)
                return full_like(array, bool(result[0]), i1)
    return None


for _name, _predicate, _symbol in (
    ("less", "lt", "<"), ("less_equal", "le", "<="), ("greater", "gt", ">"), ("greater_equal", "ge", ">="),
    ("equal", "eq", "=="), ("not_equal", "ne", "!="),
):  # fmt: skip

    def _compare(a: Operand, b: Operand, _name: str = _name, _predicate: str = _predicate) -> Traced:
        constant = _compare_out_of_range(_name, a, b)
        if constant is not None:
            return constant
        (x, y), _ = resolve(_name, [a, b])
        return cmp(_predicate, x, y) if x.element == y.element else _mixed_compare(_predicate, x, y)

    register(_name, f"`a {_symbol} b` elementwise (bool array); NaN compares unequal.")(_compare)


def _beyond_range(predicate: str, a: Operand, b: Operand) -> Traced | None:
    """NumPy 2 compares an int array with a Python int outside its dtype's range exactly (`int8 != 1000` is
    all True) rather than refusing the int as other ufuncs do: the answer is a constant."""
    if isinstance(b, Traced) and not isinstance(a, Traced):
        return _beyond_range(_SWAPPED[predicate], b, a)
    if not (isinstance(a, Traced) and isinstance(b, int) and not isinstance(b, bool)) or not is_int(a.element) \
            or a.element == i1:
        return None
    info = np.iinfo(a.dtype)
    if info.min <= b <= info.max:
        return None
    above = b > info.max  # then every element is below b
    truth = {"lt": above, "le": above, "gt": not above, "ge": not above, "eq": False, "ne": True}[predicate]
    return full_like(a, truth, i1)


_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _mixed_compare(predicate: str, x: Traced, y: Traced) -> Traced:
    """NumPy's exact comparison of int64 with uint64 (its loop takes both as they are): a negative int64
    is below every uint64, the others compare as uint64."""
    if _signed(y):
        return _mixed_compare(_SWAPPED[predicate], y, x)
    negative = cmp("lt", x, scalar(x, 0))
    as_unsigned = cmp(predicate, x.to(y.element), y)
    return where(negative, x.tracer.constant(predicate in ("lt", "le", "ne"), i1), as_unsigned)


def _all_ones(element: Attribute) -> int:
    """The int whose bits are all set (-1, or the largest unsigned value)."""
    assert isinstance(element, IntegerType)
    unsigned = element.signedness.data == Signedness.UNSIGNED
    return True if element == i1 else (2**element.bitwidth - 1 if unsigned else -1)


@register("invert", "`~x`: bitwise not of ints, logical not of bools.", "bitwise_not")
def invert(x: Operand) -> Traced:
    (x,), _ = resolve("invert", [x])
    return emit(tta.XorOp, x, scalar(x, _all_ones(x.element)))


def _shift_in_range(x: Traced, y: Traced) -> Traced:
    """0 <= y < bits: the shifts C defines (NumPy gives 0, or -1 for a negative x shifted right, beyond)."""
    inside = cmp("lt", y, scalar(y, x.element.bitwidth))
    return emit(tta.AndOp, inside, cmp("ge", y, scalar(y, 0))) if _signed(x) else inside


def _signed(x: Traced) -> bool:
    return isinstance(x.element, IntegerType) and x.element.signedness.data != Signedness.UNSIGNED


@register("left_shift", "`a << b` of ints; shifting by the width or more (or a negative amount) gives 0.")
def left_shift(a: Operand, b: Operand) -> Traced:
    (x, y), _ = resolve("left_shift", [a, b])
    return where(_shift_in_range(x, y), emit(tta.ShlOp, x, y), scalar(x, 0))


@register("right_shift", "`a >> b` of ints (arithmetic for signed); beyond the width: 0, or -1 for negative a.")
def right_shift(a: Operand, b: Operand) -> Traced:
    (x, y), _ = resolve("right_shift", [a, b])
    beyond = scalar(x, 0)
    if _signed(x):
        beyond = where(cmp("lt", x, scalar(x, 0)), scalar(x, -1), beyond)
    return where(_shift_in_range(x, y), emit(tta.ShrOp, x, y), beyond)


def truth(x: Traced) -> Traced:
    """`x != 0` as bools (NaN is True), as NumPy's logical loops read their operands."""
    return x if x.element == i1 else cmp("ne", x, scalar(x, 0))


def _logical(name: str, op: type[Operation], doc: str) -> None:
    def impl(a: Operand, b: Operand) -> Traced:
        (x, y), _ = resolve(name, [a, b])
        return emit(op, truth(x), truth(y))

    register(name, doc)(impl)


_logical("logical_and", tta.AndOp, "Truth of `a and b` elementwise (nonzero is True).")
_logical("logical_or", tta.OrOp, "Truth of `a or b` elementwise (nonzero is True).")
_logical("logical_xor", tta.XorOp, "Truth of `a != b` taken as bools (nonzero is True).")


@register("logical_not", "Truth of `not x` elementwise (nonzero is True).")
def logical_not(x: Operand) -> Traced:
    (x,), _ = resolve("logical_not", [x])
    return emit(tta.XorOp, truth(x), x.tracer.constant(True, i1))


@register("negative", "`-x` (NumPy refuses bools: use `~`).")
def negative(x: Operand) -> Traced:
    (x,), _ = resolve("negative", [x])
    return emit(tta.NegOp, x)


@register("positive", "`+x`: a copy (NumPy refuses bools).")
def positive(x: Operand) -> Traced:
    (x,), _ = resolve("positive", [x])
    return x


@register("absolute", "`abs(x)`; of the most negative int it wraps, as NumPy's.", "abs")
def absolute(x: Operand) -> Traced:
    (x,), _ = resolve("absolute", [x])
    return x if x.element == i1 else emit(tta.AbsOp, x)


@register("square", "`x * x`.")
def square(x: Operand) -> Traced:
    (x,), _ = resolve("square", [x])
    return emit(tta.MulOp, x, x)


@register("reciprocal", "`1 / x`; of ints C's truncated quotient (1 for 1, -1 for -1, else 0; 0 for 0).")
def reciprocal(x: Operand) -> Traced:
    (x,), _ = resolve("reciprocal", [x])
    if is_float(x.element):
        return emit(tta.DivOp, scalar(x, 1.0), x)
    unit = cmp("eq", x, scalar(x, 1))
    if _signed(x):  # not `x * x == 1`: the square wraps to 1 for the largest ints too (127 * 127 in int8)
        unit = emit(tta.OrOp, unit, cmp("eq", x, scalar(x, -1)))
    return where(unit, x, scalar(x, 0))


@register("sign", "-1, 0 or 1 by the sign of x (NaN stays NaN, -0.0 gives 0.0).")
def sign(x: Operand) -> Traced:
    (x,), _ = resolve("sign", [x])
    zero = scalar(x, 0)
    result = where(cmp("eq", x, zero), zero, x) if is_float(x.element) else zero  # NaN stays NaN
    if is_float(x.element) or _signed(x):
        result = where(cmp("lt", x, zero), scalar(x, -1), result)
    return where(cmp("gt", x, zero), scalar(x, 1), result)


def _integer_power(x: Traced, n: int) -> Traced:
    """x ** n for a non-negative int n by square-and-multiply (NumPy's wrapping products)."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else emit(tta.MulOp, result, base)
        n >>= 1
        if n:
            base = emit(tta.MulOp, base, base)
    return result if result is not None else full_like(x, 1)


@register("power", "`a ** b`; integer exponents multiply (x**3 is x*x*x), ints to negative int powers are an error.",
          "pow")
def power(a: Operand, b: Operand) -> Traced:
    (x, y), out = resolve("power", [a, b])
    if isinstance(b, Traced) or not isinstance(x, Traced):
        return emit(tta.PowOp, x, y)
    exponent = float(b)
    if not is_float(out):
        if exponent < 0:
            raise error("Integers to negative integer powers are not allowed.")
        return _integer_power(x, int(b))
    if exponent in (0.0, 1.0, 2.0, 3.0, 4.0):  # NumPy's fast paths (and cheap products); x**0 is 1, NaN too
        return _integer_power(x, int(exponent))
    if exponent == 0.5:
        return emit(tta.SqrtOp, x)
    if exponent == -1.0:
        return emit(tta.DivOp, scalar(x, 1.0), x)
    return emit(tta.PowOp, x, y)


@register("clip", "`np.clip(x, a_min, a_max)`: minimum(maximum(x, a_min), a_max); None leaves a side open.")
def clip(x: Operand, a_min: Operand = None, a_max: Operand = None) -> Traced:
    if a_min is None and a_max is None:
        return ARRAY_IMPLS["positive"](x) if isinstance(x, Traced) and x.element != i1 else as_traced([x])[0]
    if a_max is None:
        return ARRAY_IMPLS["maximum"](x, a_min)
    if a_min is None:
        return ARRAY_IMPLS["minimum"](x, a_max)
    (x, lo, hi), _ = resolve("clip", [x, a_min, a_max], ufunc=np._core.umath.clip)  # NumPy's clip loop's types
    return ARRAY_IMPLS["minimum"](ARRAY_IMPLS["maximum"](x, lo), hi)


def _wrapped_for_where(value: Operand, other: Operand) -> Operand:
    """A Python int beside an int array, as np.where stores it: cast to the array's dtype, wrapping where it is
    out of range (uint8 -1 is 255; NumPy's ufuncs refuse such ints, its `where` does not: numpy#27006)."""
    if not (type(value) is int and isinstance(other, Traced) and is_int(other.element) and other.element != i1):
        return value
    dtype = ELEMENT_TO_NUMPY[other.element]
    info = np.iinfo(dtype)
    if info.min <= value <= info.max or not np.iinfo(np.int64).min <= value <= np.iinfo(np.uint64).max:
        return value
    return int(np.asarray(value, np.uint64 if value > 0 else np.int64).astype(dtype))


@register("where", "`np.where(condition, a, b)`: a where condition (nonzero) holds, else b.")
def where_(condition: Operand, x: Operand | None = None, y: Operand | None = None) -> Traced:
    if x is None and y is None:
        raise error(
            "where(condition) with one argument is np.nonzero: its shape depends on the data, which an array "
            "program cannot have; use tt.where(condition, x, y), or pass the indices as an int32 array argument"
        )
    if x is None or y is None:
        raise error("either both or neither of x and y should be given")
    a, b = as_traced([_wrapped_for_where(x, y), _wrapped_for_where(y, x)])
    cond = condition if isinstance(condition, Traced) else as_traced([condition], a.tracer)[0]  # a NumPy array: refused
    if cond.element != i1:
        cond = cmp("ne", cond, scalar(cond, 0))
    return emit(tta.WhereOp, cond, a, b)


@register("astype", "`x.astype(dtype)`: NumPy's cast (float to int truncates; NaN, inf and out of range saturate).")
def astype(x: Operand, dtype: Any) -> Traced:
    (x,) = as_traced([x])
    return x.to(dtype)
