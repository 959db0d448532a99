"""Types of the `tt` dialect and the helpers every stage uses to read them.

Tiles are builtin ranked tensors (`tensor<64xf32>`, `tensor<32x64x!tt.ptr<f16>>`); scalars are plain
types. These helpers let verifiers, the frontend, the simulator and the lowering treat both alike.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from functools import lru_cache

from xdsl.dialects.builtin import AnyFloat, Float8E4M3FNType, Float8E5M2Type, IntegerType, TensorType
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from tinyton.limits import MAX_TILE_ELEMENTS

FLOAT8_TYPES = (Float8E4M3FNType, Float8E5M2Type)
"""float8 element types (e4m3fn, e5m2): `tt.dot` operands accumulating in f32 (wgmma's e4m3/e5m2 on sm_90a;
widened to f16 by the lowering elsewhere); `a @ b` of float8 arrays gives float32, as NumPy's."""


@irdl_attr_definition
class PointerType(ParametrizedAttribute, TypeAttribute):
    """`!tt.ptr<f32>`: a pointer to global memory holding elements of `pointee`."""

    name = "tt.ptr"
    pointee: Attribute

    def __init__(self, pointee: Attribute):
        super().__init__(pointee)


# ---------------------------------------------------------------------------------------------
# Type helpers shared by the verifiers, the frontend, the simulator and the lowering.
# ---------------------------------------------------------------------------------------------


def shape_of(t: Attribute) -> tuple[int, ...]:
    """Shape of a tile type; `()` for a scalar."""
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def element_type(t: Attribute) -> Attribute:
    """Element type of a tile type; the type itself for a scalar."""
    return t.element_type if isinstance(t, TensorType) else t


def tile_type(element: Attribute, shape: Sequence[int]) -> Attribute:
    """The tile type of `shape` (a scalar type when `shape` is empty)."""
    return _tensor_type(element, tuple(shape)) if shape else element


@lru_cache(maxsize=4096)
def _tensor_type(element: Attribute, shape: tuple[int, ...]) -> TensorType:
    """Types are immutable: build (and verify) each one once, not once per op."""
    return TensorType(element, list(shape))


def is_float(t: Attribute) -> bool:
    return isinstance(element_type(t), AnyFloat)


def is_int(t: Attribute) -> bool:
    return isinstance(element_type(t), IntegerType)


def is_pointer(t: Attribute) -> bool:
    return isinstance(element_type(t), PointerType)


INT, FLOAT = "int", "float"
"""The element kinds an elementwise op may accept (ints include i1)."""


def element_kind(t: Attribute) -> str | None:
    """`INT` or `FLOAT` for the element type of `t`; None for pointers and other non-numbers."""
    return FLOAT if is_float(t) else INT if is_int(t) else None


def type_name(t: Attribute) -> str:
    out = io.StringIO()
    Printer(stream=out).print_attribute(t)
    return out.getvalue()


def verify_tile_shape(t: Attribute, what: str) -> None:
    """Tiles have power-of-two dimensions and at most MAX_TILE_ELEMENTS elements."""
    shape = shape_of(t)
    size = 1
    for dim in shape:
        if dim < 1 or dim & (dim - 1):
            raise VerifyException(f"{what} has dimension {dim}; tile dimensions must be powers of two")
        size *= dim
    if size > MAX_TILE_ELEMENTS:
        raise VerifyException(f"{what} has {size} elements; a tile holds at most {MAX_TILE_ELEMENTS}")


def require(cond: bool, message: str | Callable[[], str]) -> None:
    """Raise a VerifyException unless `cond`; a message that prints types is passed as a function,
    built only on failure (verifiers run for every op of every kernel)."""
    if not cond:
        raise VerifyException(message if isinstance(message, str) else message())
