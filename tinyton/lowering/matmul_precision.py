"""How array programs multiply float32 matrices: `TINYTON_FP32_MATMUL`, read when a program is compiled.

NumPy's float32 `a @ b` is float32 arithmetic, so its default here is `tf32x3`: the tensor cores' TF32
products, three per product of the operands' hi and lo parts, which keep float32's accuracy (within 2^-21
per product, below the float32 sum's rounding; lowering/tt_to_llvm/tf32.py) at tensor-core speed. `ieee`
multiplies with float32 FMAs (exact products, every rounding the sum's); `tf32` is one TF32 product (10-bit
mantissas, torch's `allow_tf32`): faster, and less accurate than NumPy, so only on request.
"""

from __future__ import annotations

import os

from tinyton.dialects.tt import INPUT_PRECISIONS
from tinyton.errors import CompilationError

ENV = "TINYTON_FP32_MATMUL"
DEFAULT = "tf32x3"


def fp32_matmul_precision() -> str:
    """The `tt.dot` `input_precision` of float32 array-program matmuls: `$TINYTON_FP32_MATMUL`, checked, or
    `tf32x3`."""
    value = os.environ.get(ENV, "").strip().lower() or DEFAULT
    if value not in INPUT_PRECISIONS:
        raise CompilationError(
            f"{ENV}={value!r} is not a float32 matmul precision; use tf32x3 (the default: float32 accuracy on "
            "tensor cores), ieee (float32 FMAs) or tf32 (one TF32 product, 10-bit mantissas)"
        )
    return value
