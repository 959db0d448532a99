"""Values of a kernel being compiled and the frontend's pure type rules (promotion, broadcasting).

A kernel value is either a `Tile` (an SSA value: a scalar or a tile, with its tt type) or a
plain Python value: a constexpr (int, float, bool, None, a tuple of them), a dtype, a module, a function.
Python numbers are *weak*, as in Triton: combined with a tile they adopt its element type when they are
of its kind (`x_f16 * 2.0` stays f16, `i * 2` stays i32) and only widen it across kinds (`i * 0.5` is f32).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    IntegerType,
    Signedness,
    i1,
    i32,
)
from xdsl.ir import Attribute, SSAValue

from tinyton import dtypes
from tinyton.dialects.tt import (
    MAX_TILE_ELEMENTS,
    element_type,
    is_float,
    is_pointer,
    shape_of,
)
from tinyton.dtypes import block_type, dtype_of, pointer_type
from tinyton.errors import CompilationError

f16, bf16, f32 = Float16Type(), BFloat16Type(), Float32Type()
FLOAT8 = (Float8E4M3FNType(), Float8E5M2Type())


KERNEL_BUILDERS: list[Any] = []
"""Stack of active `TileBuilder`s: non-empty while the code generator compiles a kernel (the builtins of
tinyton/language.py forward to the top one)."""


@dataclass(frozen=True, slots=True)
class Tile:
    """An SSA value of the kernel with tensor-like helpers (`x.to(dtype)`, `x.shape`, `x.dtype`)."""

    value: SSAValue

    @property
    def type(self) -> Attribute:
        return self.value.type

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value.type)

    @property
    def element(self) -> Attribute:
        return element_type(self.value.type)

    @property
    def is_pointer(self) -> bool:
        return is_pointer(self.value.type)

    @property
    def dtype(self) -> dtypes.dtype | pointer_type:
        """The element's dtype; for pointers a `pointer_type` (`p.dtype.element_ty`)."""
        if self.is_pointer:
            return pointer_type(dtype_of(self.element.pointee))
        return dtype_of(self.element)

    @property
    def triton_type(self) -> dtypes.dtype | pointer_type | block_type:
        """Triton's `x.type` (spelt so in kernels): a scalar's dtype, a tile's `block_type`; both have
        `element_ty` for pointers (`Out.type.element_ty`)."""
        return block_type(self.dtype, self.shape) if self.shape else self.dtype

    def to(self, dtype: Any, fp_downcast_rounding: str | None = None, bitcast: bool = False) -> Tile:
        """Convert the elements to `dtype` (floats to ints truncate); `bitcast` reinterprets the bits."""
        return KERNEL_BUILDERS[-1].cast(self, dtype, bitcast)

    cast = to

    @property
    def T(self) -> Tile:
        """The transpose of a 2-D tile."""
        return KERNEL_BUILDERS[-1].permute(self, (), "x.T")

    def trans(self, *dims: Any) -> Tile:
        """`tl.trans(x, *dims)`."""
        return KERNEL_BUILDERS[-1].permute(self, dims, "x.trans")

    permute = trans

    def reshape(self, *shape: Any) -> Tile:
        """`tl.reshape(x, shape)`."""
        return KERNEL_BUILDERS[-1].reshape(self, shape, "x.reshape")

    view = reshape

    def expand_dims(self, axis: Any) -> Tile:
        """`tl.expand_dims(x, axis)`."""
        return KERNEL_BUILDERS[-1].expand_dims(self, axis)

    def broadcast_to(self, *shape: Any) -> Tile:
        """`tl.broadcast_to(x, shape)`."""
        return KERNEL_BUILDERS[-1].broadcast_to(self, shape)


TILE_METHODS = frozenset({Tile.to, Tile.trans, Tile.reshape, Tile.expand_dims, Tile.broadcast_to})
TILE_ATTRIBUTES = frozenset(
    {"to", "cast", "shape", "dtype", "type", "T", "trans", "permute", "reshape", "view", "expand_dims",
     "broadcast_to"}
)
TILE_ATTRIBUTE_ALIASES = {"type": "triton_type"}
"""Kernel spellings whose Python attribute has another name (`Tile.type` is the IR type)."""


def builtin_name(fn: Any) -> str | None:
    """The name of a `tt.*` builtin (`"dot"`, `"static_range"`), None for any other value.

    The code generator recognises the builtins it treats specially by this mark, not by importing the
    language module, which sits above the frontend."""
    return getattr(fn, "__tt_builtin__", None)


def is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float))


def describe(x: Any) -> str:
    """A value for error messages: its type for tiles, its repr for Python values."""
    return f"a {x.type}" if isinstance(x, Tile) else f"{type(x).__name__} {x!r}"


def shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tile) else ()


def element(x: Any) -> Any:
    """The element type of a tile, or the Python type (`bool`, `int`, `float`) of a weak number; an int
    beyond int32 is a concrete i64 (u64) as in Triton, so `2**35 + n` computes in 64 bits."""
    if isinstance(x, Tile):
        return x.element
    if isinstance(x, int) and not isinstance(x, bool) and not -(2**31) <= x < 2**31:
        return natural_element(x)
    return type(x)


def natural_element(x: bool | float) -> Attribute:
    """The type of a Python number on its own (Triton's): bool -> i1, int -> i32 (i64 beyond int32, u64
    beyond int64), float -> f32."""
    if isinstance(x, bool):
        return i1
    if isinstance(x, int):
        return i32 if -(2**31) <= x < 2**31 else IntegerType(64) if -(2**63) <= x < 2**63 else IntegerType(64, Signedness.UNSIGNED)
    return f32


def _floatish(e: Any) -> bool:
    return e is float or (isinstance(e, Attribute) and is_float(e))


def _boolish(e: Any) -> bool:
    return e is bool or e == i1


def _name(e: Any) -> str:
    return e.__name__ if isinstance(e, type) else str(e)


ARITH, DIV, INT, BITWISE, SELECT = "arith", "div", "int", "bitwise", "select"
"""Promotion rules: arithmetic, true division, integer-only (`//` `<<` `>>`), `& | ^`, where/compare."""


def promote(rule: str, elements: Sequence[Any], what: str) -> Attribute:
    """The common element type of operands with `elements` under `rule` (Triton's promotion).

    Any float makes the result the widest concrete float (f16 with f32 gives f32, a weak float alone gives
    f32; two different floats of one width give f32); ints give the widest concrete int, unsigned if one of
    that width is (weak Python ints and booleans adopt it; none at all gives i32); true division of ints
    gives f32; bitwise ops and selections of booleans stay i1. float8 is storage only."""
    for e in elements:
        if isinstance(e, Attribute) and not (is_float(e) or isinstance(e, IntegerType)):
            raise CompilationError(f"`{what}` needs numbers, got {_name(e)} operands")
        if isinstance(e, Attribute) and e in FLOAT8:
            raise CompilationError(f"`{what}`: float8 tiles are for storage; convert them first with .to(tl.float32)")
    floats = [e for e in elements if _floatish(e)]
    if floats and rule in (INT, BITWISE):
        raise CompilationError(
            f"`{what}` needs integer operands, got {', '.join(_name(e) for e in elements)}; "
            "convert with .to(tt.int32)" + ("" if what != "//" else " or use / for floats")
        )
    if rule in (BITWISE, SELECT) and all(_boolish(e) for e in elements):
        return i1
    if floats:
        concrete = list(dict.fromkeys(e for e in floats if e is not float))
        if not concrete:
            return f32
        widest = max(e.bitwidth for e in concrete)
        ties = [e for e in concrete if e.bitwidth == widest]
        return ties[0] if len(ties) == 1 else f32
    if rule == DIV:
        return f32
    ints = [e for e in elements if isinstance(e, IntegerType) and e != i1]
    if not ints:
        return i32
    width = max(e.bitwidth for e in ints)
    unsigned = any(e.bitwidth == width and e.signedness.data == Signedness.UNSIGNED for e in ints)
    return IntegerType(width, Signedness.UNSIGNED) if unsigned else IntegerType(width)


def int_range(elem: Attribute) -> tuple[int, int]:
    """The values an integer element type holds."""
    width = elem.bitwidth
    if elem == i1:
        return 0, 1
    if elem.signedness.data == Signedness.UNSIGNED:
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def broadcast_shapes(shapes: Sequence[tuple[int, ...]], what: str) -> tuple[int, ...]:
    """NumPy's broadcast of tile shapes (align trailing dims; a dim of 1 stretches)."""
    rank = max(len(s) for s in shapes)
    result = []
    for dims in zip(*[(1,) * (rank - len(s)) + s for s in shapes]):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            listed = " and ".join(str(list(s)) for s in shapes)
            raise CompilationError(
                f"cannot broadcast tiles of shapes {listed} in `{what}`: sizes differ along a dimension and "
                "neither is 1; use blocks of one size (or x[:, None] / x[None, :] for 2-D)"
            )
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def check_block_shape(shape: Sequence[Any], what: str) -> tuple[int, ...]:
    """Validate a constexpr block shape: power-of-two dims, at most MAX_TILE_ELEMENTS elements."""
    if any(not isinstance(d, int) or isinstance(d, bool) for d in shape):
        raise CompilationError(f"{what}: block shapes must be constexpr ints, got {list(shape)}")
    size = 1
    for d in shape:
        if d < 1 or d & (d - 1):
            raise CompilationError(
                f"{what}: block dimension {d} is not a power of two; round it up with tt.next_power_of_2 "
                "and mask the extra lanes"
            )
        size *= d
    if size > MAX_TILE_ELEMENTS:
        raise CompilationError(
            f"{what}: a block of {size} elements is too large; a tile holds at most {MAX_TILE_ELEMENTS} "
            "(tt.MAX_TILE_ELEMENTS): split the work over more programs or loop over smaller blocks"
        )
    return tuple(shape)
