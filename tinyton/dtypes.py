"""The element types tinyton knows, and how they map between the language, xDSL and NumPy.

`tt.float32` and friends are `dtype` objects: the name users write, the xDSL element type the dialects
use, and the NumPy dtype the runtime allocates. Everything above the dialects converts through here.
Both foreign types load on first use (tinyton/elements.py, tinyton/numpy_dtypes.py): a dtype's name, kind
and width need neither, so `import tinyton` and `@tt.jit` load neither xDSL nor NumPy.
NumPy has no bfloat16: `tt.bfloat16` is `ml_dtypes.bfloat16` (the type JAX uses), whose NumPy kind is
"V", not "f"; code that asks "is this a float array" uses `is_float_dtype`, never `dtype.kind == "f"`.
Unsigned ints are xDSL's unsigned integer types (`ui32`; the LLVM lowering makes them signless and picks
unsigned instructions). NumPy has no float8 either: `tt.float8e4nv` / `tt.float8e5` are `ml_dtypes`'
(storage and casts only, as in Triton). A pointer's `dtype` is a `pointer_type` with `element_ty`.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import TYPE_CHECKING, Any

from tinyton.errors import CompilationError
from tinyton.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    from xdsl.ir import Attribute

_elements = lazy_module("tinyton.elements")
_numpy = lazy_module("tinyton.numpy_dtypes")


class dtype:
    """An element type of tiles and arrays: `tt.float32`, `tt.float16`, `tt.bfloat16`, `tt.int32`, `tt.int1`."""

    __slots__ = ("_kind", "name", "primitive_bitwidth")

    def __init__(self, name: str, kind: str, primitive_bitwidth: int):
        """`kind`: "b" (int1), "i" (signed), "u" (unsigned) or "f" (floats, bfloat16 and float8 included)."""
        self.name, self._kind, self.primitive_bitwidth = name, kind, primitive_bitwidth

    @property
    def ir(self) -> Attribute:
        """The xDSL element type (xDSL loads on the first such question: tinyton/lazy.py)."""
        return _elements.ELEMENTS[self.name]

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype (NumPy and ml_dtypes load on the first such question: tinyton/lazy.py)."""
        return _numpy.NUMPY[self.name]

    def __repr__(self) -> str:
        return f"tt.{self.name}"

    def is_floating(self) -> bool:
        return self._kind == "f"

    def is_int(self) -> bool:
        return self._kind in "iub"

    def is_int_signed(self) -> bool:
        return self._kind in "ib"  # int1 is a signless i1, as in Triton

    def is_int_unsigned(self) -> bool:
        return self._kind == "u"

    def is_bool(self) -> bool:
        return self._kind == "b"

    def is_ptr(self) -> bool:
        return False


class pointer_type:
    """The `dtype` of a pointer: `x_ptr.dtype.element_ty` is the element's dtype, as in Triton."""

    __slots__ = ("element_ty",)

    def __init__(self, element_ty: dtype):
        self.element_ty = element_ty

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, pointer_type) and other.element_ty is self.element_ty

    def __hash__(self) -> int:
        return hash(("ptr", self.element_ty.name))

    def is_ptr(self) -> bool:
        return True


class block_type:
    """Triton's `x.type` of a tile: `element_ty` (a dtype or `pointer_type`) and `shape`."""

    __slots__ = ("element_ty", "shape")

    def __init__(self, element_ty: dtype | pointer_type, shape: tuple[int, ...]):
        self.element_ty, self.shape = element_ty, shape

    def __repr__(self) -> str:
        return f"<{list(self.shape)}, {self.element_ty!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, block_type) and (other.element_ty, other.shape) == (self.element_ty, self.shape)

    def __hash__(self) -> int:
        return hash(("block", self.element_ty, self.shape))

    def is_ptr(self) -> bool:
        return False


int1 = dtype("int1", "b", 1)
int8 = dtype("int8", "i", 8)
int16 = dtype("int16", "i", 16)
int32 = dtype("int32", "i", 32)
int64 = dtype("int64", "i", 64)
uint8 = dtype("uint8", "u", 8)
uint16 = dtype("uint16", "u", 16)
uint32 = dtype("uint32", "u", 32)
uint64 = dtype("uint64", "u", 64)
float8e4nv = dtype("float8e4nv", "f", 8)
float8e5 = dtype("float8e5", "f", 8)
float16 = dtype("float16", "f", 16)
bfloat16 = dtype("bfloat16", "f", 16)
float32 = dtype("float32", "f", 32)
float64 = dtype("float64", "f", 64)
DTYPES = (
    int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float8e4nv, float8e5, float16, bfloat16, float32, float64,
)
FLOAT8 = (float8e4nv, float8e5)
"""Storage-only types: kernels load, store and convert them, arithmetic needs a cast first."""
ALIASES = {
    "bool": int1, "fp8e4nv": float8e4nv, "fp8e5": float8e5, "fp16": float16, "bf16": bfloat16, "fp32": float32,
    "fp64": float64,
}
_BY_KEY: dict[Any, dtype] = {**ALIASES, **{k: d for d in DTYPES for k in (d, d.name)}}


@cache
def _element_tables() -> dict[str, dict[Any, Any]]:
    """The tables keyed by or giving xDSL element types, built on first use (tinyton/lazy.py)."""
    return {
        "BY_ELEMENT": {d.ir: d for d in DTYPES},
        "NUMPY_TO_ELEMENT": {d.np: d.ir for d in DTYPES},
        "ELEMENT_TO_NUMPY": {d.ir: d.np for d in DTYPES},
    }


def __getattr__(name: str) -> Any:
    """`NUMPY_TO_ELEMENT` (NumPy dtype -> xDSL element type), `ELEMENT_TO_NUMPY` and `BF16` (NumPy's view of
    bfloat16, `ml_dtypes.bfloat16`), served lazily (PEP 562)."""
    if name in ("NUMPY_TO_ELEMENT", "ELEMENT_TO_NUMPY"):
        return _element_tables()[name]
    if name == "BF16":
        return bfloat16.np
    raise AttributeError(f"module 'tinyton.dtypes' has no attribute {name!r}")


def dtype_of(x: Any) -> dtype:
    """The tinyton dtype of `x`: a tt dtype, an xDSL type, or a NumPy/torch dtype (or its name)."""
    found = _BY_KEY.get(x)
    if found is None and "xdsl" in sys.modules:  # an xDSL element type exists only once xDSL is loaded
        found = _element_tables()["BY_ELEMENT"].get(x)
    candidates = (x, str(getattr(x, "name", x)).rsplit(".", 1)[-1])  # torch.float32 -> float32
    while found is None and candidates:
        candidate, *candidates = candidates
        found = _BY_KEY.get(_numpy.name_of(candidate))
    if found is None:
        name = getattr(x, "__name__", x)
        names = ", ".join(d.name for d in DTYPES)
        raise CompilationError(f"unsupported dtype {name}; tinyton supports {names}")
    return found


def is_float_dtype(np_dtype: np.dtype) -> bool:
    """True for NumPy float dtypes, bfloat16 and float8 included (their NumPy kind is "V")."""
    return np_dtype.kind == "f" or np_dtype == bfloat16.np or any(np_dtype == d.np for d in FLOAT8)


def constant_key(value: float | int | bool, element: Attribute) -> tuple[object, Attribute]:
    """A dict key for a constant of `element` type: floats by their repr, since -0.0 == 0.0 in Python but
    they are different divisors (x / -0.0 is -inf), and one NaN never equals another."""
    return (repr(float(value)) if isinstance(element, _elements.AnyFloat) else value, element)
