"""`tt.scaled_matmul` in array programs: `torch._scaled_mm`'s float8 matmul with scales, NumPy-style.

`(a @ b) * scale_a * scale_b` in float32, then cast to `out_dtype`: float8 operands multiply with float32
accumulation (wgmma's e4m3/e5m2 on sm_90a, each instruction's ~13-bit partial sum added in f32, as cuBLAS
without `use_fast_accum`: `lowering/fusion/matmul.py`), and the scales and the cast are ordinary elementwise ops on the
product, so the fusion runs them in the matmul kernel's epilogue (one kernel, one write of the result).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type

from tinyton.errors import error
from tinyton.frontend.array_ops import matmul, reshape
from tinyton.frontend.promotion import FLOAT8, element_of, is_scalar
from tinyton.frontend.traced import ARRAY_IMPLS, Traced

OUT_ELEMENTS = (Float32Type(), BFloat16Type(), Float16Type())


def _scale(scale: Any, name: str, per: str, shape: tuple[int, int]) -> Traced | float:
    """A scale as a factor of the `shape` product: a Python float, a one-element float32 array (per
    tensor), or a float32 array of `shape` (per row: (M, 1); per column: (1, N))."""
    if is_scalar(scale) and not isinstance(scale, bool):
        return float(scale)
    if not isinstance(scale, Traced) or scale.element != Float32Type():
        what = f"a {scale.dtype} array" if isinstance(scale, Traced) else f"a {type(scale).__name__}"
        raise error(f"scaled_matmul: {name} must be a Python float or a float32 array, got {what}")
    if scale.size == 1:
        return reshape(scale, (1, 1))
    if scale.shape != shape:
        raise error(
            f"scaled_matmul: {name} has shape {scale.shape}; give one value (per tensor) or shape {shape} ({per})"
        )
    return scale


def scaled_matmul(a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: Any = None) -> Traced:
    """`(a @ b) * scale_a * scale_b` as `out_dtype` (float32 by default, float16 or bfloat16), as
    `torch._scaled_mm`: `a` [M, K] and `b` [K, N] float8 arrays (e4m3fn or e5m2, `b` may be a transposed
    view: `w.T`), accumulated in float32; `scale_a` one value or per row [M, 1], `scale_b` one value or per
    column [1, N] (Python floats or float32 arrays)."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Traced) or x.element not in FLOAT8 or x.ndim != 2:
            what = f"a {x.ndim}-D {x.dtype} array" if isinstance(x, Traced) else f"a {type(x).__name__}"
            raise error(f"scaled_matmul: {name} must be a 2-D float8 (e4m3fn or e5m2) array, got {what}")
    (m, _), (_, n) = a.shape, b.shape
    try:
        out = Float32Type() if out_dtype is None else element_of(out_dtype)
    except TypeError:
        out = None
    if out not in OUT_ELEMENTS:
        raise error(f"scaled_matmul: out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
    product = matmul(a, b)
    for factor in (_scale(scale_a, "scale_a", "per row", (m, 1)), _scale(scale_b, "scale_b", "per column", (1, n))):
        if isinstance(factor, Traced) or factor != 1.0:
            product = product * factor
    return product.to(out)


ARRAY_IMPLS["scaled_matmul"] = scaled_matmul
