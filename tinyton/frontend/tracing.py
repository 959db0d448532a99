"""Trace a Python array program into `tta` IR by running it on `Traced` values.

`trace(fn, args)` calls `fn` with one `Traced` per array argument (other arguments are baked in as
compile-time constants); every operator or `tt.*` builtin applied to a `Traced` appends a `tta` op to
one `func.func`. Python control flow therefore runs at trace time, like jax.jit: the IR is the
straight-line dataflow graph that the fusion passes want.

NumPy semantics: implicit broadcasting, weak Python scalars (`x * 2` keeps `x`'s dtype, `i32 * 0.5`
is float32), promotion to the wider of two array dtypes, true division giving floats. Errors are
`CompilationError`s naming the user's `file:line` and worded like NumPy's.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    FileLineColLoc,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i1,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float, is_int, shape_of
from tinyton.frontend.errors import CompilationError

_TINYTON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NUMPY_TO_ELEMENT: dict[np.dtype, Attribute] = {
    np.dtype(np.float32): Float32Type(),
    np.dtype(np.float16): Float16Type(),
    np.dtype(np.int32): i32,
    np.dtype(np.bool_): i1,
}
ELEMENT_TO_NUMPY: dict[Attribute, np.dtype] = {v: k for k, v in NUMPY_TO_ELEMENT.items()}
_PROMOTION_RANK = {i1: 0, i32: 1, Float16Type(): 2, Float32Type(): 3}
_KIND = {i1: 0, i32: 1, Float16Type(): 2, Float32Type(): 2}
"""bool < int < float: a weak Python scalar only changes the type when it is of a higher kind."""


def element_of(dtype: Any) -> Attribute:
    """The tta element type of a NumPy/torch dtype, a `tt.float32`-like object, a name or an xDSL type."""
    dtype = getattr(dtype, "ir", dtype)  # tt.float32 and friends carry their xDSL type
    if dtype in _PROMOTION_RANK:
        return dtype
    for candidate in (dtype, getattr(dtype, "name", None), str(dtype).rsplit(".", 1)[-1]):
        try:
            np_dtype = np.dtype(candidate)
        except TypeError:
            continue
        if np_dtype in NUMPY_TO_ELEMENT:
            return NUMPY_TO_ELEMENT[np_dtype]
    raise TypeError(f"unsupported dtype {dtype}; array programs use float32, float16, int32 or bool")


def user_location() -> tuple[str, int, int]:
    """`(file, line, column)` of the innermost frame outside the tinyton package: the user's code.

    The column (1-based, 0 when unknown) is the start of the expression being evaluated."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_TINYTON_DIR + os.sep) and not filename.startswith("<frozen"):
            col = 0
            if hasattr(frame.f_code, "co_positions"):  # Python >= 3.11
                positions = list(frame.f_code.co_positions())
                if 0 <= frame.f_lasti // 2 < len(positions):
                    col = (positions[frame.f_lasti // 2][2] or -1) + 1
            return frame.f_code.co_filename, frame.f_lineno, col
        frame = frame.f_back
    return "<unknown>", 0, 0


def error(message: str) -> CompilationError:
    """A CompilationError at the user's current line: `softmax.py:3:9: operands could not ...`."""
    return CompilationError(message, *user_location())


_TRACER: ContextVar[Tracer | None] = ContextVar("tinyton_tracer", default=None)


def is_tracing() -> bool:
    """True while an array program is being traced (`tt.zeros(...)` then builds IR, not an array)."""
    return _TRACER.get() is not None


def current_tracer() -> Tracer:
    tracer = _TRACER.get()
    if tracer is None:
        raise error("this tinyton builtin needs an array program being traced")
    return tracer


class Tracer:
    """Appends `tta` ops, each with the user's file:line as its location, to one block."""

    def __init__(self) -> None:
        self.block = Block()
        self.constants: dict[tuple[Attribute, Any], Traced] = {}

    def emit(self, make: Callable[..., Operation], *args: Any, **kwargs: Any) -> Traced:
        """Build and verify one op; its NumPy-style errors become CompilationErrors at the user's line."""
        try:
            op = make(*args, **kwargs)
            op.verify()
        except (tta.ShapeError, VerifyException) as e:
            raise error(str(e)) from None
        filename, line, col = user_location()
        op.location = FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(col))
        self.block.add_op(op)
        return Traced(self, op.results[0])

    def constant(self, value: bool | int | float, element: Attribute) -> Traced:
        """A scalar `tta.constant`, one per distinct (type, value) in the program."""
        if element == i1:
            attr = IntegerAttr(int(bool(value)), i1)
        elif is_int(element):
            attr = IntegerAttr(int(value), element)
        else:
            attr = FloatAttr(float(value), element)
        key = (element, repr(attr.value.data))  # repr keeps -0.0 apart from 0.0
        if key not in self.constants:
            self.constants[key] = self.emit(tta.ConstantOp, attr)
        return self.constants[key]


def _weak_element(value: Any) -> Attribute:
    """The element type a Python scalar would have on its own."""
    if isinstance(value, (bool, np.bool_)):
        return i1
    if isinstance(value, (int, np.integer)):
        return i32
    return Float32Type()


def promote(a: Attribute, b: Attribute) -> Attribute:
    """NumPy's promotion restricted to bool < int32 < float16 < float32 (int32 with float16 gives float32)."""
    if {a, b} == {i32, Float16Type()}:
        return Float32Type()
    return a if _PROMOTION_RANK[a] >= _PROMOTION_RANK[b] else b


def is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def as_traced(values: Sequence[Any], tracer: Tracer | None = None) -> list[Traced]:
    """Operands of one elementwise op, converted to a common element type with NumPy's rules.

    Arrays decide the type; Python scalars are "weak" and only widen it by kind (an int array times
    0.5 becomes float32, a float16 array plus 1.0 stays float16)."""
    traced = [v for v in values if isinstance(v, Traced)]
    tracer = tracer or (traced[0].tracer if traced else current_tracer())
    for v in values:
        if not isinstance(v, Traced) and not is_scalar(v):
            raise error(
                f"cannot mix a {type(v).__name__} with traced arrays; pass arrays as arguments of the program"
            )
    element = None
    for v in traced:
        element = v.element if element is None else promote(element, v.element)
    for v in values:
        if not isinstance(v, Traced):
            weak = _weak_element(v)
            if element is None or _KIND[weak] > _KIND[element]:
                element = weak if element is None else promote(element, weak)
    assert element is not None
    return [
        (v.to(element) if isinstance(v, Traced) else tracer.constant(v, element)) for v in values
    ]


class Traced:
    """A traced array: an SSA value of the program being traced, with NumPy's operators."""

    __tt_traced__ = True
    __array_ufunc__ = None  # `np_array + traced` defers to Traced.__radd__ (which then reports the mix)

    def __init__(self, tracer: Tracer, value: SSAValue):
        self.tracer = tracer
        self.value = value

    # ---- metadata --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value.type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def element(self) -> Attribute:
        return element_type(self.value.type)

    @property
    def dtype(self) -> np.dtype:
        return ELEMENT_TO_NUMPY[self.element]

    def __repr__(self) -> str:
        return f"Traced(shape={self.shape}, dtype={self.dtype})"

    # ---- conversions -----------------------------------------------------------------------
    def to(self, dtype: Any) -> Traced:
        """`x.to(tt.float16)` / `x.astype(np.float32)`: a no-op when the type already matches."""
        try:
            element = element_of(dtype)
        except TypeError as e:
            raise error(str(e)) from None
        return self if element == self.element else self.tracer.emit(tta.CastOp, self.value, element)

    astype = to

    def reshape(self, *shape: Any) -> Traced:
        from tinyton.frontend.array_ops import reshape

        return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)

    def transpose(self, *axes: Any) -> Traced:
        from tinyton.frontend.array_ops import transpose

        return transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))

    @property
    def T(self) -> Traced:
        return self.transpose()

    def sum(self, axis: Any = None, keepdims: bool = False) -> Traced:
        from tinyton.frontend.array_ops import sum

        return sum(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Traced:
        from tinyton.frontend.array_ops import max

        return max(self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Traced:
        from tinyton.frontend.array_ops import min

        return min(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Traced:
        from tinyton.frontend.array_ops import mean

        return mean(self, axis, keepdims)

    def __getitem__(self, key: Any) -> Traced:
        from tinyton.frontend.array_ops import getitem

        return getitem(self, key)

    # ---- Python protocols that would need a concrete value ----------------------------------
    def _no_value(self, what: str) -> Exception:
        return error(
            f"{what} needs the value of a traced array, which is unknown while compiling; "
            "use tt.where for data-dependent choices"
        )

    def __bool__(self) -> bool:
        raise self._no_value("Python control flow on an array (if/while/and/or/not)")

    def __float__(self) -> float:
        raise self._no_value("float()")

    def __int__(self) -> int:
        raise self._no_value("int()")

    def __index__(self) -> int:
        raise self._no_value("using an array as an index")

    def __iter__(self):
        raise error("iterating over a traced array is not supported; use array operations")

    def __len__(self) -> int:
        if not self.shape:
            raise error("len() of a 0-d array")
        return self.shape[0]

    def __hash__(self) -> int:  # `==` is elementwise, so keep identity hashing explicitly
        return id(self)

    # ---- operators ---------------------------------------------------------------------------
    def _binary(self, other: Any, op: type[Operation], reverse: bool = False) -> Traced:
        a, b = as_traced([other, self] if reverse else [self, other], self.tracer)
        return self.tracer.emit(op, a.value, b.value)

    def _int_binary(self, other: Any, op: type[Operation], symbol: str, reverse: bool = False) -> Traced:
        a, b = as_traced([other, self] if reverse else [self, other], self.tracer)
        if not is_int(a.element):
            raise error(f"ufunc '{symbol}' not supported for the input types ({a.dtype}); it needs int32 or bool")
        return self.tracer.emit(op, a.value, b.value)

    def _cmp(self, other: Any, predicate: str) -> Traced:
        a, b = as_traced([self, other], self.tracer)
        return self.tracer.emit(tta.CmpOp, predicate, a.value, b.value)

    def __add__(self, o: Any) -> Traced: return self._binary(o, tta.AddOp)  # noqa: E704
    def __radd__(self, o: Any) -> Traced: return self._binary(o, tta.AddOp, True)  # noqa: E704
    def __sub__(self, o: Any) -> Traced: return self._binary(o, tta.SubOp)  # noqa: E704
    def __rsub__(self, o: Any) -> Traced: return self._binary(o, tta.SubOp, True)  # noqa: E704
    def __mul__(self, o: Any) -> Traced: return self._binary(o, tta.MulOp)  # noqa: E704
    def __rmul__(self, o: Any) -> Traced: return self._binary(o, tta.MulOp, True)  # noqa: E704
    def __mod__(self, o: Any) -> Traced: return self._binary(o, tta.ModOp)  # noqa: E704
    def __rmod__(self, o: Any) -> Traced: return self._binary(o, tta.ModOp, True)  # noqa: E704
    def __and__(self, o: Any) -> Traced: return self._int_binary(o, tta.AndOp, "&")  # noqa: E704
    def __rand__(self, o: Any) -> Traced: return self._int_binary(o, tta.AndOp, "&", True)  # noqa: E704
    def __or__(self, o: Any) -> Traced: return self._int_binary(o, tta.OrOp, "|")  # noqa: E704
    def __ror__(self, o: Any) -> Traced: return self._int_binary(o, tta.OrOp, "|", True)  # noqa: E704
    def __xor__(self, o: Any) -> Traced: return self._int_binary(o, tta.XorOp, "^")  # noqa: E704
    def __rxor__(self, o: Any) -> Traced: return self._int_binary(o, tta.XorOp, "^", True)  # noqa: E704
    def __lshift__(self, o: Any) -> Traced: return self._int_binary(o, tta.ShlOp, "<<")  # noqa: E704
    def __rlshift__(self, o: Any) -> Traced: return self._int_binary(o, tta.ShlOp, "<<", True)  # noqa: E704
    def __rshift__(self, o: Any) -> Traced: return self._int_binary(o, tta.ShrOp, ">>")  # noqa: E704
    def __rrshift__(self, o: Any) -> Traced: return self._int_binary(o, tta.ShrOp, ">>", True)  # noqa: E704
    def __floordiv__(self, o: Any) -> Traced: return self._int_binary(o, tta.FloorDivOp, "//")  # noqa: E704
    def __rfloordiv__(self, o: Any) -> Traced: return self._int_binary(o, tta.FloorDivOp, "//", True)  # noqa: E704
    def __lt__(self, o: Any) -> Traced: return self._cmp(o, "lt")  # noqa: E704
    def __le__(self, o: Any) -> Traced: return self._cmp(o, "le")  # noqa: E704
    def __gt__(self, o: Any) -> Traced: return self._cmp(o, "gt")  # noqa: E704
    def __ge__(self, o: Any) -> Traced: return self._cmp(o, "ge")  # noqa: E704
    def __eq__(self, o: Any) -> Traced: return self._cmp(o, "eq")  # type: ignore[override]  # noqa: E704
    def __ne__(self, o: Any) -> Traced: return self._cmp(o, "ne")  # type: ignore[override]  # noqa: E704

    def _true_div(self, other: Any, reverse: bool) -> Traced:
        a, b = as_traced([other, self] if reverse else [self, other], self.tracer)
        if not is_float(a.element):  # NumPy's true division of ints gives floats
            a, b = a.to(np.float32), b.to(np.float32)
        return self.tracer.emit(tta.DivOp, a.value, b.value)

    def __truediv__(self, o: Any) -> Traced: return self._true_div(o, False)  # noqa: E704
    def __rtruediv__(self, o: Any) -> Traced: return self._true_div(o, True)  # noqa: E704

    def __pow__(self, exponent: Any) -> Traced:
        """Small integer powers multiply (as NumPy's fast paths do); others need floats."""
        if is_scalar(exponent) and float(exponent) in (1.0, 2.0, 3.0, 4.0):
            result = self
            for _ in range(int(exponent) - 1):
                result = result * self
            return result
        if is_scalar(exponent) and float(exponent) == 0.5 and is_float(self.element):
            return self.tracer.emit(tta.SqrtOp, self.value)
        return self._float_binary(exponent, tta.PowOp, "**")

    def __rpow__(self, base: Any) -> Traced:
        return self._float_binary(base, tta.PowOp, "**", reverse=True)

    def _float_binary(self, other: Any, op: type[Operation], symbol: str, reverse: bool = False) -> Traced:
        a, b = as_traced([other, self] if reverse else [self, other], self.tracer)
        if not is_float(a.element):
            raise error(f"'{symbol}' on {a.dtype} arrays is only supported with exponents 1 to 4; cast to float32")
        return self.tracer.emit(op, a.value, b.value)

    def __matmul__(self, o: Any) -> Traced:
        from tinyton.frontend.array_ops import matmul

        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> Traced:
        from tinyton.frontend.array_ops import matmul

        return matmul(o, self)

    def __neg__(self) -> Traced:
        if self.element == i1:
            raise error("the numpy boolean negative, the `-` operator, is not supported, use the `~` operator")
        return self.tracer.emit(tta.NegOp, self.value)

    def __pos__(self) -> Traced:
        return self

    def __abs__(self) -> Traced:
        return self.tracer.emit(tta.AbsOp, self.value)

    def __invert__(self) -> Traced:
        if not is_int(self.element):
            raise error(f"ufunc 'invert' not supported for the input types ({self.dtype})")
        return self ^ (True if self.element == i1 else -1)


def _argument_type(name: str, value: Any) -> Attribute:
    shape, dtype = tuple(getattr(value, "shape")), getattr(value, "dtype")
    try:
        element = element_of(dtype)
    except TypeError:
        raise error(
            f"argument '{name}' has dtype {dtype}; array programs support float32, float16, int32 and bool "
            f"(convert with {name}.astype(np.float32))"
        ) from None
    return tta.array_type(element, shape)


def is_array(value: Any) -> bool:
    """Array-like arguments (NumPy, torch, cupy, device arrays) become traced inputs; the rest constants."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and not is_scalar(value)


def trace(fn: Callable[..., Any], args: Sequence[Any], name: str | None = None) -> ModuleOp:
    """Trace `fn(*args)` into a module holding one `func.func` of tta ops.

    Array arguments become function arguments (named after the Python parameters); other arguments
    are compile-time constants. The function returns one array or a tuple of arrays."""
    from tinyton.frontend import array_ops

    array_ops.install()
    fn = getattr(fn, "fn", fn)  # a JITFunction wraps the Python function
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    tracer = Tracer()
    call_args: list[Any] = []
    for i, value in enumerate(args):
        if not is_array(value):
            call_args.append(value)
            continue
        pname = params[i] if i < len(params) else f"arg{i}"
        arg = tracer.block.insert_arg(_argument_type(pname, value), len(tracer.block.args))
        arg.name_hint = pname
        call_args.append(Traced(tracer, arg))

    token = _TRACER.set(tracer)
    try:
        out = fn(*call_args)
    finally:
        _TRACER.reset(token)

    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outputs:
        if not isinstance(o, Traced) or o.tracer is not tracer:
            raise CompilationError(
                f"array program '{fn.__name__}' must return arrays computed from its array arguments "
                f"(or a tuple of them), got {type(o).__name__}",
                fn.__code__.co_filename,
                fn.__code__.co_firstlineno,
            )
    results = [o.value for o in outputs]
    tracer.block.add_op(func.ReturnOp(*results))
    function = func.FuncOp(
        name or fn.__name__,
        ([a.type for a in tracer.block.args], [r.type for r in results]),
        Region(tracer.block),
    )
    if isinstance(out, (tuple, list)):
        function.attributes[RETURNS_TUPLE] = UnitAttr()
    module = ModuleOp([function])
    try:
        module.verify()
    except VerifyException as e:  # a tracer bug, not a user error: keep the IR in the message
        raise CompilationError(f"internal error: traced IR does not verify: {e}\n{module}") from e
    return module


RETURNS_TUPLE = "tta.returns_tuple"
"""Unit attribute on the traced func when the Python function returned a tuple (even of one array)."""


def returns_tuple(module: ModuleOp) -> bool:
    return any(RETURNS_TUPLE in op.attributes for op in module.body.block.ops)
