"""The xDSL element type of each tinyton dtype, by name: loaded with xDSL on first use of a dtype's `ir`
(tinyton/dtypes.py reaches it through tinyton/lazy.py, so `import tinyton` stays free of xDSL)."""

from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

__all__ = ["ELEMENTS", "AnyFloat"]


def _unsigned(width: int) -> IntegerType:
    return IntegerType(width, Signedness.UNSIGNED)


ELEMENTS: dict[str, Attribute] = {
    "int1": i1, "int8": i8, "int16": i16, "int32": i32, "int64": i64,
    "uint8": _unsigned(8), "uint16": _unsigned(16), "uint32": _unsigned(32), "uint64": _unsigned(64),
    "float8e4nv": Float8E4M3FNType(), "float8e5": Float8E5M2Type(), "float16": Float16Type(),
    "bfloat16": BFloat16Type(), "float32": Float32Type(), "float64": Float64Type(),
}  # fmt: skip
