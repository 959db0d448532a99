"""`tt.umulhi`, `tt.cos` and `tt.sin` in the simulator (the ops of tl.rand/tl.randn beyond the core set).

`tt.umulhi` is exact (the high word of the 64-bit unsigned product), so Philox streams match the GPU bit for
bit; cos and sin compute in float32 (the GPU's reduction and polynomials, lowering/tt_to_llvm/trig.py, may
differ in the last bit or two).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Operation

from tinyton.dialects import tt

from .state import SimFunctions


def umulhi(a: Any, b: Any) -> Any:
    """High 32 bits of the unsigned product of two int32 (bit patterns), as int32."""
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    product = np.asarray(a).astype(unsigned).astype(np.uint64) * np.asarray(b).astype(unsigned).astype(np.uint64)
    high = (product >> np.uint64(8 * a.dtype.itemsize)).astype(unsigned).astype(a.dtype)
    return high[()] if high.ndim == 0 else high


def _in_f32(fn: Any, x: Any) -> Any:
    """`fn` in float32 (float64 in float64), rounded back to x's dtype."""
    return fn(x) if x.dtype == np.float64 else fn(x.astype(np.float32)).astype(x.dtype)


@register_impls
class RandomFunctions(SimFunctions):
    @impl(tt.UmulhiOp)
    def run_umulhi(self, interpreter: Interpreter, op: Operation, args: PythonValues) -> PythonValues:
        return (umulhi(*args),)

    @impl(tt.CosOp)
    def run_cos(self, interpreter: Interpreter, op: Operation, args: PythonValues) -> PythonValues:
        return (_in_f32(np.cos, args[0]),)

    @impl(tt.SinOp)
    def run_sin(self, interpreter: Interpreter, op: Operation, args: PythonValues) -> PythonValues:
        return (_in_f32(np.sin, args[0]),)
