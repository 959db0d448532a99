"""`Traced`: the value an array program computes with while it is traced, and the `Tracer` recording it.

Every operator or `tt.*` builtin applied to a `Traced` appends a `tta` op (verified, located at the user's
line) to the tracer's block and returns a new `Traced`; NumPy's promotion rules decide the operands'
common element type. The entry point, `trace`, is in tinyton/frontend/tracing.py.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    i1,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, is_int, shape_of
from tinyton.dtypes import ELEMENT_TO_NUMPY, constant_key
from tinyton.errors import error, user_location
from tinyton.frontend.promotion import element_of, is_scalar, result_element

ARRAY_IMPLS: dict[str, Callable[..., Any]] = {}
"""The array-program implementation of each `tt.*` builtin and `Traced` method, by name; filled by
tinyton/frontend/array_ops.py, which builds on this module."""

NUMPY_FUNCTIONS: set[str] = set()
"""NumPy functions that run on traced arrays (`np.concatenate([x, y])` calls `ARRAY_IMPLS["concatenate"]`);
any other is an error naming the builtin to use."""

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
        self.reductions: dict[tuple, Traced] = {}
        """Each reduction and scan by its name, operand and properties: the same one spelled twice
        (`x.mean(-1)` in a layer norm and inside `x.var(-1)`) is one value, so it costs no second pass. Other
        ops stay as written (views and elementwise ops are free to repeat, and the patterns match them
        per use: a `k.T` per attention)."""
        self.stale: dict[SSAValue, str] = {}
        """Views taken of an array before an assignment into it (tinyton/frontend/array_assign.py), each with
        the error that reading it raises."""
        self._arrays: list[weakref.ref[Traced]] = []

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this the tracer that `current_tracer()` returns (builtins called with no array use it)."""
        token = _TRACER.set(self)
        try:
            yield
        finally:
            _TRACER.reset(token)

    def emit(self, make: Callable[..., Operation], *args: Any, **kwargs: Any) -> Traced:
        """Build and verify one op; its NumPy-style errors become CompilationErrors at the user's line."""
        try:
            op = make(*args, **kwargs)
            op.verify()
        except (tta.ShapeError, VerifyException) as e:
            raise error(str(e)) from None
        if self.stale:
            self.check_fresh(op.operands)
        key = (op.name, tuple(op.operands), tuple(op.properties.items()))
        if isinstance(op, (tta.ReduceOp, tta.ScanOp)) and key in self.reductions:
            op.erase()
            return Traced(self, self.reductions[key].value)  # the same values, a new array
        filename, line, col = user_location()
        op.location = FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(col))
        self.block.add_op(op)
        traced = Traced(self, op.results[0])
        if isinstance(op, (tta.ReduceOp, tta.ScanOp)):
            self.reductions[key] = traced
        return traced

    def check_fresh(self, values: Sequence[SSAValue]) -> None:
        """Refuse to read a view of an array assigned into after the view was taken."""
        for v in values:
            if v in self.stale:
                raise error(self.stale[v])

    def register(self, array: Traced) -> None:
        self._arrays.append(weakref.ref(array))

    def live_arrays(self) -> list[Traced]:
        """The traced arrays some Python name or container still holds."""
        alive = [a for ref in self._arrays if (a := ref()) is not None]
        self._arrays = [weakref.ref(a) for a in alive]
        return alive

    def constant(self, value: bool | int | float, element: Attribute) -> Traced:
        """A scalar `tta.constant`, one per distinct (type, value) in the program."""
        if element == i1:
            attr = IntegerAttr(int(bool(value)), i1)
        elif is_int(element):
            info = np.iinfo(ELEMENT_TO_NUMPY[element])
            if not info.min <= int(value) <= info.max:
                raise error(f"Python integer {int(value)} out of bounds for {ELEMENT_TO_NUMPY[element]}")
            attr = IntegerAttr(int(value), element)
        else:  # NumPy converts a weak float scalar to the array's type: 1e6 in float16 is inf
            with np.errstate(over="ignore"):
                attr = FloatAttr(float(np.asarray(value, ELEMENT_TO_NUMPY[element])), element)
        key = constant_key(attr.value.data, element)
        if key not in self.constants:
            self.constants[key] = self.emit(tta.ConstantOp, attr)
        return Traced(self, self.constants[key].value)


def as_traced(values: Sequence[Any], tracer: Tracer | None = None) -> list[Traced]:
    """Values converted to their common element type by NumPy's rules (`promotion.result_element`: NEP 50,
    Python scalars weak)."""
    traced = [v for v in values if isinstance(v, Traced)]
    tracer = tracer or (traced[0].tracer if traced else current_tracer())
    for v in values:
        if not isinstance(v, Traced) and not is_scalar(v):
            raise error(
                f"cannot mix a {type(v).__name__} with traced arrays; pass arrays as arguments of the program"
            )
    try:
        element = result_element([v.element for v in traced], [v for v in values if not isinstance(v, Traced)])
    except TypeError as e:
        raise error(str(e)) from None
    return [
        (v.to(element) if isinstance(v, Traced) else tracer.constant(v, element)) for v in values
    ]


class Traced:
    """A traced array: an SSA value of the program being traced, with NumPy's operators."""

    __tt_traced__ = True

    def __init__(self, tracer: Tracer, value: SSAValue):
        self.tracer = tracer
        self.value = value
        tracer.register(self)

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
        if element == self.element:  # NumPy's astype copies: a new array of the same values
            return Traced(self.tracer, self.value)
        return self.tracer.emit(tta.CastOp, self.value, element)

    astype = to

    def copy(self) -> Traced:
        return ARRAY_IMPLS["copy"](self)

    def reshape(self, *shape: Any) -> Traced:
        return ARRAY_IMPLS["reshape"](self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)

    def transpose(self, *axes: Any) -> Traced:
        return ARRAY_IMPLS["transpose"](self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))

    @property
    def T(self) -> Traced:
        return self.transpose()

    @property
    def mT(self) -> Traced:
        """The transpose of the last two axes (NumPy's `mT`): `q @ k.mT` in batched attention."""
        return ARRAY_IMPLS["swapaxes"](self, -1, -2)

    # NumPy's signatures (`x.sum(axis, dtype, out, keepdims)`); `out=` has no place in a traced program
    def sum(self, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False) -> Traced:
        return ARRAY_IMPLS["sum"](self, axis, _no_out("sum", out, keepdims), dtype)

    def max(self, axis: Any = None, out: None = None, keepdims: bool = False) -> Traced:
        return ARRAY_IMPLS["max"](self, axis, _no_out("max", out, keepdims))

    def min(self, axis: Any = None, out: None = None, keepdims: bool = False) -> Traced:
        return ARRAY_IMPLS["min"](self, axis, _no_out("min", out, keepdims))

    def mean(self, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False) -> Traced:
        return ARRAY_IMPLS["mean"](self, axis, _no_out("mean", out, keepdims), dtype)

    # NumPy's other reduction, scan and sort methods take NumPy's arguments (frontend/array_reductions.py,
    # array_sorting.py; `x.sort()` sorts in place in NumPy: array programs write `np.sort(x)`)
    def prod(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["prod"](self, *args, **kwargs)  # noqa: E704
    def argmax(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["argmax"](self, *args, **kwargs)  # noqa: E704
    def argmin(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["argmin"](self, *args, **kwargs)  # noqa: E704
    def var(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["var"](self, *args, **kwargs)  # noqa: E704
    def std(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["std"](self, *args, **kwargs)  # noqa: E704
    def any(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["any"](self, *args, **kwargs)  # noqa: E704
    def all(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["all"](self, *args, **kwargs)  # noqa: E704
    def cumsum(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["cumsum"](self, *args, **kwargs)  # noqa: E704
    def cumprod(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["cumprod"](self, *args, **kwargs)  # noqa: E704
    def argsort(self, *args: Any, **kwargs: Any) -> Traced: return ARRAY_IMPLS["argsort"](self, *args, **kwargs)  # noqa: E704

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Traced:
        return ARRAY_IMPLS["searchsorted"](self, v, side, sorter)

    def flatten(self) -> Traced:
        return ARRAY_IMPLS["flatten"](self)

    def ravel(self) -> Traced:
        return ARRAY_IMPLS["ravel"](self)

    def squeeze(self, axis: Any = None) -> Traced:
        return ARRAY_IMPLS["squeeze"](self, axis)

    def repeat(self, repeats: Any, axis: Any = None) -> Traced:
        return ARRAY_IMPLS["repeat"](self, repeats, axis)

    def take(self, indices: Any, axis: Any = None) -> Traced:
        return ARRAY_IMPLS["take"](self, indices, axis)

    def swapaxes(self, axis1: int, axis2: int) -> Traced:
        return ARRAY_IMPLS["swapaxes"](self, axis1, axis2)

    def __getitem__(self, key: Any) -> Traced:
        return ARRAY_IMPLS["getitem"](self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        ARRAY_IMPLS["setitem"](self, key, value)

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

    # ---- NumPy's protocols: NumPy itself never sees a traced array's values ---------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """`np.exp(x)`, `np.float32(2) * x`: the ufunc's array-program implementation (tinyton/frontend/
        ufuncs.py); its methods (`np.add.reduce`) and keywords (`out=`) are errors naming what to use."""
        # NumPy passes a scalar on the left of a comparison as a 0-d array
        inputs = tuple(v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v for v in inputs)
        arrays = [v for v in inputs if not isinstance(v, Traced) and not is_scalar(v)]
        if arrays:
            raise error(
                f"cannot mix a {type(arrays[0]).__name__} with traced arrays; pass arrays as arguments of the program"
            )
        if method == "__call__" and not kwargs and ufunc.__name__ in ARRAY_IMPLS:
            return ARRAY_IMPLS[ufunc.__name__](*inputs)
        name = f"np.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
        if method == "__call__" and kwargs:
            raise error(f"{name}: keyword arguments ({', '.join(kwargs)}) are not supported in array programs")
        raise _numpy_error(name, _REDUCE_BUILTINS.get(ufunc.__name__) if method == "reduce" else ufunc.__name__)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """`np.concatenate`, `np.sum(x, axis=1)`, `np.where`, ... (`NUMPY_FUNCTIONS`) run as the builtins of
        the same meaning, with the arguments as NumPy binds them; any other NumPy function is an error naming
        the builtin or method to use."""
        name = _NUMPY_NAMES.get(func.__name__, func.__name__)
        if func.__name__ not in NUMPY_FUNCTIONS:
            raise _numpy_error(f"np.{func.__name__}", func.__name__)
        impl = ARRAY_IMPLS[name]
        try:
            signature = inspect.signature(func)
        except ValueError:  # a C function without a signature: its arguments as given
            return impl(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise error(f"np.{func.__name__}: {e}") from None
        (_, array), *rest = bound.arguments.items()
        passed: dict[str, Any] = {}
        for key, value in rest:  # a `**kwargs` parameter of NumPy's (np.pad's) spreads into its keywords
            kind = signature.parameters[key].kind
            passed.update(value if kind is inspect.Parameter.VAR_KEYWORD else {key: value})
        unsupported = [k for k in passed if k not in inspect.signature(impl).parameters]
        if unsupported:
            raise error(f"np.{func.__name__}: {', '.join(unsupported)}= is not supported in array programs; drop it")
        return impl(array, **passed)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._no_value("converting to a NumPy array (np.asarray, np.array)")

    # ---- operators: NumPy's ufuncs (tinyton/frontend/ufuncs.py) -------------------------------------
    def _ufunc(self, name: str, other: Any, reverse: bool = False) -> Traced:
        return ARRAY_IMPLS[name](other, self) if reverse else ARRAY_IMPLS[name](self, other)

    def __add__(self, o: Any) -> Traced: return self._ufunc("add", o)  # noqa: E704
    def __radd__(self, o: Any) -> Traced: return self._ufunc("add", o, True)  # noqa: E704
    def __sub__(self, o: Any) -> Traced: return self._ufunc("subtract", o)  # noqa: E704
    def __rsub__(self, o: Any) -> Traced: return self._ufunc("subtract", o, True)  # noqa: E704
    def __mul__(self, o: Any) -> Traced: return self._ufunc("multiply", o)  # noqa: E704
    def __rmul__(self, o: Any) -> Traced: return self._ufunc("multiply", o, True)  # noqa: E704
    def __truediv__(self, o: Any) -> Traced: return self._ufunc("true_divide", o)  # noqa: E704
    def __rtruediv__(self, o: Any) -> Traced: return self._ufunc("true_divide", o, True)  # noqa: E704
    def __floordiv__(self, o: Any) -> Traced: return self._ufunc("floor_divide", o)  # noqa: E704
    def __rfloordiv__(self, o: Any) -> Traced: return self._ufunc("floor_divide", o, True)  # noqa: E704
    def __mod__(self, o: Any) -> Traced: return self._ufunc("remainder", o)  # noqa: E704
    def __rmod__(self, o: Any) -> Traced: return self._ufunc("remainder", o, True)  # noqa: E704
    def __divmod__(self, o: Any) -> Traced: return self._ufunc("divmod", o)  # noqa: E704
    def __rdivmod__(self, o: Any) -> Traced: return self._ufunc("divmod", o, True)  # noqa: E704
    def __pow__(self, o: Any) -> Traced: return self._ufunc("power", o)  # noqa: E704
    def __rpow__(self, o: Any) -> Traced: return self._ufunc("power", o, True)  # noqa: E704
    def __and__(self, o: Any) -> Traced: return self._ufunc("bitwise_and", o)  # noqa: E704
    def __rand__(self, o: Any) -> Traced: return self._ufunc("bitwise_and", o, True)  # noqa: E704
    def __or__(self, o: Any) -> Traced: return self._ufunc("bitwise_or", o)  # noqa: E704
    def __ror__(self, o: Any) -> Traced: return self._ufunc("bitwise_or", o, True)  # noqa: E704
    def __xor__(self, o: Any) -> Traced: return self._ufunc("bitwise_xor", o)  # noqa: E704
    def __rxor__(self, o: Any) -> Traced: return self._ufunc("bitwise_xor", o, True)  # noqa: E704
    def __lshift__(self, o: Any) -> Traced: return self._ufunc("left_shift", o)  # noqa: E704
    def __rlshift__(self, o: Any) -> Traced: return self._ufunc("left_shift", o, True)  # noqa: E704
    def __rshift__(self, o: Any) -> Traced: return self._ufunc("right_shift", o)  # noqa: E704
    def __rrshift__(self, o: Any) -> Traced: return self._ufunc("right_shift", o, True)  # noqa: E704
    def __lt__(self, o: Any) -> Traced: return self._ufunc("less", o)  # noqa: E704
    def __le__(self, o: Any) -> Traced: return self._ufunc("less_equal", o)  # noqa: E704
    def __gt__(self, o: Any) -> Traced: return self._ufunc("greater", o)  # noqa: E704
    def __ge__(self, o: Any) -> Traced: return self._ufunc("greater_equal", o)  # noqa: E704
    def __eq__(self, o: Any) -> Traced: return self._ufunc("equal", o)  # type: ignore[override]  # noqa: E704
    def __ne__(self, o: Any) -> Traced: return self._ufunc("not_equal", o)  # type: ignore[override]  # noqa: E704
    def __neg__(self) -> Traced: return ARRAY_IMPLS["negative"](self)  # noqa: E704
    def __pos__(self) -> Traced: return ARRAY_IMPLS["positive"](self)  # noqa: E704
    def __abs__(self) -> Traced: return ARRAY_IMPLS["absolute"](self)  # noqa: E704
    def __invert__(self) -> Traced: return ARRAY_IMPLS["invert"](self)  # noqa: E704

    def __matmul__(self, o: Any) -> Traced:
        return ARRAY_IMPLS["matmul"](self, o)

    def __rmatmul__(self, o: Any) -> Traced:
        return ARRAY_IMPLS["matmul"](o, self)

    # ---- NumPy's array methods over the ufuncs ----------------------------------------------------
    def clip(self, min: Any = None, max: Any = None) -> Traced:
        return ARRAY_IMPLS["clip"](self, min, max)

    def round(self, decimals: int = 0) -> Traced:
        return ARRAY_IMPLS["round"](self, decimals)

    def __round__(self, ndigits: int | None = None) -> Traced:
        return ARRAY_IMPLS["round"](self, ndigits or 0)


NUMPY_FUNCTIONS.update((
    "clip", "round", "around", "where", "sum", "max", "amax", "min", "amin", "mean", "prod", "argmax", "argmin",
    "var", "std", "any", "all", "cumsum", "cumprod", "take_along_axis",
))  # fmt: skip


def _no_out(name: str, out: Any, keepdims: bool) -> bool:
    """`keepdims`, after refusing NumPy's `out=` (array programs return new arrays)."""
    if out is not None:
        raise error(f"{name}: `out=` is not supported in array programs (they return new arrays); drop it")
    return keepdims


_REDUCE_BUILTINS = {"add": "sum", "maximum": "max", "minimum": "min"}
_NUMPY_NAMES = {"absolute": "abs", "amax": "max", "amin": "min", "dot": "matmul"}
"""NumPy spellings whose tinyton builtin has another name."""


def _numpy_error(what: str, name: str | None) -> Exception:
    """`np.exp on a traced array: ... use tt.exp(...)`: the builtin of the same meaning, when there is one."""
    name = _NUMPY_NAMES.get(name, name)
    if name in ARRAY_IMPLS:
        advice = f"use tt.{name}(...) instead"
    else:
        advice = "use the tt.* builtins (tt.exp, tt.sum, tt.where, ...), array methods and operators instead"
    return error(
        f"{what} cannot run on a traced array: an array program is compiled, and NumPy never sees its values; {advice}"
    )
