"""Kernel semantics of the builtins and operators: `TileBuilder` emits tt ops at an insertion point.

It applies the rules of values.py (weak Python numbers, promotion, NumPy broadcasting) by inserting the
explicit `tt.cast` / `tt.splat` / `tt.expand_dims` / `tt.broadcast` ops the dialect requires, folds
operations on Python numbers at compile time, and raises `CompilationError` (without a location: the
code generator adds the user's line) for anything the dialect cannot express. Every op is verified as
it is inserted, so an xDSL `VerifyException` never escapes.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, i1, i32, i64
from xdsl.ir import Attribute, Block, Operation
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects import tt
from tinyton.dtypes import dtype_of
from tinyton.errors import CompilationError
from tinyton.frontend.atomic_ops import AtomicOps
from tinyton.frontend.block_pointers import BlockPointerOps
from tinyton.frontend.random_ops import RandomOps
from tinyton.frontend.combine_ops import CombineOps
from tinyton.frontend.debug_ops import DebugOps
from tinyton.frontend.indexing_ops import IndexingOps
from tinyton.frontend.math_ops import MathOps
from tinyton.frontend.memory_ops import MemoryOps
from tinyton.frontend.reduce_ops import ReduceOps
from tinyton.frontend.shape_ops import ShapeOps
from tinyton.frontend.sort_ops import SortOps
from tinyton.frontend.values import (
    ARITH,
    BITWISE,
    DIV,
    FLOAT8,
    INT,
    SELECT,
    Tile,
    broadcast_shapes,
    check_block_shape,
    describe,
    element,
    f16,
    f32,
    int_range,
    is_number,
    natural_element,
    promote,
    shape,
)

BINARY: dict[str, tuple[Callable[..., Operation], str, Callable[[Any, Any], Any]]] = {
    "+": (tt.AddOp, ARITH, operator.add),
    "-": (tt.SubOp, ARITH, operator.sub),
    "*": (tt.MulOp, ARITH, operator.mul),
    "/": (tt.DivOp, DIV, operator.truediv),
    "//": (tt.DivOp, INT, operator.floordiv),
    "%": (tt.RemOp, ARITH, operator.mod),
    "&": (tt.AndOp, BITWISE, operator.and_),
    "|": (tt.OrOp, BITWISE, operator.or_),
    "^": (tt.XorOp, BITWISE, operator.xor),
    "<<": (tt.ShlOp, INT, operator.lshift),
    ">>": (tt.ShrOp, INT, operator.rshift),
    "maximum": (tt.MaximumOp, ARITH, max),
    "minimum": (tt.MinimumOp, ARITH, min),
    **{
        sym: (functools.partial(tt.CmpOp, pred), SELECT, fold)
        for sym, pred, fold in (
            ("<", "lt", operator.lt), ("<=", "le", operator.le), (">", "gt", operator.gt),
            (">=", "ge", operator.ge), ("==", "eq", operator.eq), ("!=", "ne", operator.ne),
        )
    },
}
"""Binary operator or builtin -> (op builder, promotion rule, compile-time fold on Python numbers).

`//` and `%` on tiles and runtime scalars are Triton's (C's): `tt.div` truncates toward zero and `tt.rem`
takes the dividend's sign. On two compile-time values they fold with Python's floor semantics, as Triton's
`constexpr` arithmetic does (`constexpr(a // b)`), so verbatim Triton code computes what it does in Triton."""

UNARY: dict[str, tuple[type[Operation], bool, Callable[[Any], Any]]] = {
    "neg": (tt.NegOp, False, operator.neg),
    "abs": (tt.AbsOp, False, abs),
    "exp": (tt.ExpOp, True, math.exp),
    "log": (tt.LogOp, True, math.log),
    "sqrt": (tt.SqrtOp, True, math.sqrt),
    "rsqrt": (tt.RsqrtOp, True, lambda v: 1 / math.sqrt(v)),
    "exp2": (tt.Exp2Op, True, lambda v: 2.0**v),
    "log2": (tt.Log2Op, True, math.log2),
    "sin": (tt.SinOp, True, math.sin),
    "cos": (tt.CosOp, True, math.cos),
    "floor": (tt.FloorOp, True, math.floor),
    "ceil": (tt.CeilOp, True, math.ceil),
    "erf": (tt.ErfOp, True, math.erf),
    "sqrt_rn": (tt.SqrtRnOp, True, math.sqrt),
    "tanh": (tt.TanhOp, True, math.tanh),
    "tan": (tt.TanOp, True, math.tan),
    "log10": (tt.Log10Op, True, math.log10),
    "log1p": (tt.Log1pOp, True, math.log1p),
    "expm1": (tt.Expm1Op, True, math.expm1),
    "trunc": (tt.TruncOp, True, math.trunc),
    "rint": (tt.RintOp, True, round),
}
"""Unary op -> (op class, floats only (ints become f32), compile-time fold)."""


def _fold(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (ArithmeticError, ValueError, TypeError) as e:
        raise CompilationError(f"constant expression failed: {e}") from None


class TileBuilder(
    MemoryOps, ReduceOps, AtomicOps, RandomOps, BlockPointerOps, ShapeOps, SortOps, IndexingOps, MathOps, CombineOps,
    DebugOps,
):
    """Appends verified tt ops to `block`; `at_end` temporarily redirects them (loop and branch bodies).

    The mixins hold the builtins of one concept each (loads and stores, reductions, atomics, random numbers,
    block pointers, shapes, sorting, indexing, math, combine reductions, debugging)."""

    def __init__(self, block: Block):
        self.block = block

    @contextmanager
    def at_end(self, block: Block) -> Iterator[None]:
        outer, self.block = self.block, block
        try:
            yield
        finally:
            self.block = outer

    def insert(self, op: Operation) -> Operation:
        try:
            op.verify()  # before inserting: a block's last op is checked as its terminator
        except VerifyException as e:
            raise CompilationError(f"invalid {op.name}: {e}") from None
        self.block.add_op(op)
        return op

    def emit(self, op: Operation) -> Tile:
        """Insert an op with one result and return that result."""
        return Tile(self.insert(op).results[0])

    # ---- conversions ------------------------------------------------------------------------

    def constant(self, value: Any, elem: Attribute, shape: Sequence[int] = ()) -> Tile:
        if elem == i1:
            attr: Attribute = IntegerAttr(int(bool(value)), i1)
        elif isinstance(elem, IntegerType):
            low, high = int_range(elem)
            if not low <= int(value) <= high:
                raise CompilationError(f"integer constant {value} does not fit in {dtype_of(elem).name}")
            attr = IntegerAttr(int(value), elem)
        else:
            attr = FloatAttr(float(value), elem)
        return self.emit(tt.ConstantOp(attr, tt.tile_type(elem, shape)))

    def tile(self, x: Any, what: str) -> Tile:
        """`x` as a Tile: Python numbers become constants of their natural type."""
        if isinstance(x, Tile):
            return x
        if not is_number(x):
            raise CompilationError(f"`{what}` needs a number or a tile, got {describe(x)}")
        return self.constant(x, natural_element(x))

    def cast(self, x: Any, dtype: Any, bitcast: bool = False) -> Tile:
        """`x` converted to `dtype`; with `bitcast` its bits reinterpreted (same width)."""
        elem = dtype_of(dtype).ir
        if bitcast:
            x = self.tile(x, "bitcast")
            if x.element == elem:
                return x
            width = [getattr(e, "bitwidth", 0) for e in (x.element, elem)]
            if x.is_pointer or width[0] != width[1] or elem == i1:
                raise CompilationError(f"cannot bitcast {x.type} to {dtype_of(dtype)}: the widths differ")
            return self.emit(tt.BitcastOp(x.value, elem))
        x = self.constant(x, elem) if is_number(x) else self.tile(x, "cast")
        if x.element == elem:
            return x
        if x.is_pointer:
            raise CompilationError(f"cannot convert pointers ({x.type}) to {dtype_of(dtype)}")
        return self.emit(tt.CastOp(x.value, elem))

    def broadcast(self, x: Tile, to: tuple[int, ...]) -> Tile:
        if x.shape == to:
            return x
        if not x.shape:
            return self.emit(tt.SplatOp(x.value, to))
        if broadcast_shapes([x.shape, to], "broadcast") != to:
            raise CompilationError(f"cannot broadcast a tile of shape {list(x.shape)} to {list(to)}")
        while len(x.shape) < len(to):
            x = self.emit(tt.ExpandDimsOp(x.value, 0))
        return x if x.shape == to else self.emit(tt.BroadcastOp(x.value, to))

    def operand(self, x: Any, elem: Attribute, to: tuple[int, ...]) -> Tile:
        """`x` converted to `elem` and broadcast to `to` (a Python number becomes a constant tile)."""
        if is_number(x):
            return self.constant(x, elem, to)
        return self.broadcast(self.cast(x, elem), to)

    def truth(self, x: Any, what: str) -> Tile:
        """`x` as i1 (`x != 0` for numbers)."""
        x = self.tile(x, what)
        return x if x.element == i1 else self.binary("!=", x, 0)

    # ---- operators --------------------------------------------------------------------------

    def binary(self, op: str, a: Any, b: Any) -> Any:
        """`a <op> b` with promotion and broadcasting; folded when both are Python numbers."""
        make, rule, fold = BINARY[op]
        if not isinstance(a, Tile) and not isinstance(b, Tile):
            return _fold(fold, a, b)
        for x in (a, b):
            if not (isinstance(x, Tile) or is_number(x)):
                raise CompilationError(f"`{op}` needs numbers or tiles, got {describe(x)}")
        if any(isinstance(x, Tile) and x.is_pointer for x in (a, b)):
            return self._pointer_arith(op, a, b)
        elem = promote(rule, [element(a), element(b)], op)
        to = broadcast_shapes([shape(a), shape(b)], op)
        return self.emit(make(self.operand(a, elem, to).value, self.operand(b, elem, to).value))

    def _pointer_arith(self, op: str, a: Any, b: Any) -> Tile:
        ptr, offset = (a, b) if isinstance(a, Tile) and a.is_pointer else (b, a)
        if op not in ("+", "-") or (op == "-" and ptr is b) or (isinstance(offset, Tile) and offset.is_pointer):
            raise CompilationError(f"pointers support only `ptr + offsets` and `ptr - offsets`, not `{op}`")
        wide = promote(INT, [element(offset)], "pointer offset").bitwidth == 64
        to = broadcast_shapes([ptr.shape, shape(offset)], op)
        offset = self.operand(offset if op == "+" else self.unary("neg", offset), i64 if wide else i32, to)
        return self.emit(tt.AddPtrOp(self.broadcast(ptr, to).value, offset.value))

    def unary(self, op: str, x: Any) -> Any:
        cls, floats_only, fold = UNARY[op]
        if is_number(x):
            return _fold(fold, x)
        x = self.tile(x, op)
        if x.is_pointer:
            raise CompilationError(f"`{op}` needs numbers, got {x.type}")
        if (floats_only and not tt.is_float(x.type)) or (op == "neg" and x.element == i1):
            x = self.cast(x, f32 if floats_only else i32)
        return self.emit(cls(x.value))

    def logical_not(self, x: Any) -> Any:
        return self.binary("^", self.truth(x, "not"), True) if isinstance(x, Tile) else not x

    def invert(self, x: Any) -> Any:
        if is_number(x):
            return _fold(operator.invert, x)
        return self.binary("^", x, True if self.tile(x, "~").element == i1 else -1)

    def where(self, condition: Any, x: Any, y: Any) -> Any:
        if is_number(condition):
            return x if condition else y
        condition = self.truth(condition, "tt.where")
        elem = promote(SELECT, [element(x), element(y)], "tt.where")
        to = broadcast_shapes([condition.shape, shape(x), shape(y)], "tt.where")
        operands = [self.broadcast(condition, to), self.operand(x, elem, to), self.operand(y, elem, to)]
        return self.emit(tt.SelectOp(*(o.value for o in operands)))

    def subscript(self, x: Tile, key: Any) -> Tile:
        """`x[:, None]` / `x[None, :]`: insert size-1 dimensions where the key holds None."""
        items = key if isinstance(key, tuple) else (key,)
        if any(k is not None and k != slice(None) for k in items) or sum(k is not None for k in items) > len(x.shape):
            raise CompilationError(
                "tiles can only be indexed with `:` and None (x[:, None], x[None, :]); read elements "
                "through pointers with tt.load"
            )
        for axis, k in enumerate(items):
            if k is None:
                x = self.emit(tt.ExpandDimsOp(x.value, axis)) if x.shape else self.broadcast(x, (1,))
        return x

    # ---- builtins ---------------------------------------------------------------------------

    def program_id(self, axis: Any) -> Tile:
        return self.emit(tt.ProgramIdOp(self._axis(axis, "tt.program_id")))

    def num_programs(self, axis: Any) -> Tile:
        return self.emit(tt.NumProgramsOp(self._axis(axis, "tt.num_programs")))

    @staticmethod
    def _axis(axis: Any, what: str) -> int:
        if not isinstance(axis, int) or axis not in (0, 1, 2):
            raise CompilationError(f"{what} takes a constexpr axis 0, 1 or 2, got {describe(axis)}")
        return axis

    def arange(self, start: Any, end: Any) -> Tile:
        for bound in (start, end):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise CompilationError(
                    f"tt.arange bounds must be constexpr ints, got {describe(bound)}; "
                    "make the block size a `tt.constexpr` parameter"
                )
        if end <= start:
            raise CompilationError(f"tt.arange({start}, {end}) is empty")
        check_block_shape([end - start], f"tt.arange({start}, {end})")
        return self.emit(tt.ArangeOp(start, end))

    def full(self, shape_: Any, value: Any, dtype: Any) -> Tile:
        dims = check_block_shape((shape_,) if isinstance(shape_, int) else tuple(shape_), "block shape")
        elem = dtype_of(dtype).ir
        if isinstance(value, Tile) and value.shape:
            raise CompilationError(f"tt.full needs a scalar value, got {describe(value)}")
        return self.operand(value, elem, dims)

    def dot(self, a: Any, b: Any, acc: Any, input_precision: Any, out_dtype: Any, max_num_imprecise_acc: Any = None) -> Tile:
        """Triton's `tt.dot`: f16/bf16 operands accumulate in f32 (or f16 for f16 operands), f32 operands
        with `input_precision` "ieee" (the default, exact), "tf32" or "tf32x3". An accumulator of another
        float type accumulates in f32 and rounds back (a correct fallback, never a silent wrong type).
        Two float8 operands (e4m3 and e5m2 may mix) accumulate in f32 (wgmma's e4m3/e5m2 on sm_90a; the
        lowering widens them to f16 elsewhere, exactly: every float8 value is an f16), at most
        `max_num_imprecise_acc` products at a time in wgmma's narrower accumulator (`tt.DotOp`; None: all of
        K, Triton's sm_90 default); a float8 operand with another float type is widened to f16 first."""
        if not all(isinstance(x, Tile) and len(x.shape) == 2 for x in (a, b)):
            raise CompilationError(f"tt.dot multiplies 2-D tiles, got {describe(a)} and {describe(b)}")
        float8 = a.element in FLOAT8 and b.element in FLOAT8
        if not float8:
            a, b = (self.cast(x, f16) if x.element in FLOAT8 else x for x in (a, b))
        elem = a.element if float8 else promote(ARITH, [a.element, b.element], "tt.dot")
        if not tt.is_float(elem):
            raise CompilationError("tt.dot multiplies float tiles; convert the operands with .to(tt.float32)")
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2:
            raise CompilationError(f"tt.dot inner dimensions differ: {[m, k]} @ {[k2, n]}")
        if min(m, k, n) < tt.DOT_MIN:
            raise CompilationError(
                f"tt.dot needs blocks of at least {tt.DOT_MIN} in every dimension, got {[m, k]} @ {[k2, n]}; "
                "use larger blocks and mask the edges"
            )
        precision = "ieee" if input_precision is None else input_precision
        if precision not in tt.INPUT_PRECISIONS:
            raise CompilationError(
                f"tt.dot input_precision must be one of {', '.join(map(repr, tt.INPUT_PRECISIONS))}, "
                f"got {describe(input_precision)}"
            )
        out = dtype_of(out_dtype).ir
        if isinstance(acc, Tile):
            if not tt.is_float(acc.type):
                raise CompilationError(f"tt.dot accumulates in floats, got an accumulator of {acc.type}")
            out = acc.element
        imprecise = _imprecise_acc_limit(max_num_imprecise_acc, k) if float8 else None
        if out not in tt.DOT_ACCUMULATORS[elem]:
            if not tt.is_float(out):
                raise CompilationError(f"tt.dot out_dtype must be a float type, got {dtype_of(out_dtype)}")
            wide = self.dot(a, b, None if acc is None else self.cast(acc, f32), input_precision, f32, imprecise)
            return self.cast(wide, out)
        acc = self.operand(0 if acc is None else acc, out, (m, n))
        if not float8:
            a, b = self.cast(a, elem), self.cast(b, elem)
        op = tt.DotOp(a.value, b.value, acc.value, precision if elem == f32 else "ieee", imprecise)
        return self.emit(op)


def _imprecise_acc_limit(limit: Any, k: int) -> int | None:
    """Triton's `max_num_imprecise_acc` of a float8 dot with K = `k`: None or a constexpr int in [0, k]."""
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= k:
        raise CompilationError(
            f"tt.dot max_num_imprecise_acc must be a constexpr int between 0 and K ({k}), got {describe(limit)}"
        )
    return limit
