"""Program geometry, constants, tile construction and reshaping, reductions and `tt.dot`.

Tile dimensions are addressed from the end (a value may carry a leading program dimension, see `values`).
Float sums accumulate in float32 along a butterfly tree (pairs of halves, like the GPU's shuffle reduction;
the GPU first sums each thread's registers in sequence, so low bits may differ), then round to the element
type; int sums wrap; max/min propagate NaN.
`tt.dot` computes `acc + a @ b` as the tensor cores do: f16/bf16 operands widen exactly, products and sums in
float32; with `input_precision="tf32"` f32 operands first round to TF32 (10-bit mantissa, to nearest, ties
away from zero: `cvt.rna.tf32.f32`); with `"tf32x3"` each f32 operand is split into TF32 parts exactly as the
lowering splits it (`split_tf32x3`) and the three exact products of parts are summed in float32; an f16
accumulator rounds to f16 after each 16-deep step of K (one `mma.m16n8k16` with f16 C/D).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Attribute, Operation

from tinyton.dialects import tt

from .errors import SimulatorError
from .state import SimFunctions
from .values import kind, map_offsets, np_dtype, rank, scalar, splat


def constant(value: Attribute, result_type: Attribute) -> Any:
    """The NumPy value of an integer, float or dense constant of `result_type`."""
    dtype, shape = np_dtype(result_type), tt.shape_of(result_type)
    if isinstance(value, DenseIntOrFPElementsAttr):
        values = value.get_values()
        if len(values) != 1:
            return np.array(values, dtype=dtype).reshape(shape)
        number = values[0]
    elif isinstance(value, IntegerAttr | FloatAttr):
        number = value.value.data
    else:
        raise SimulatorError(f"the simulator cannot evaluate the constant {value}")
    x = dtype.type(bool(number) if dtype.kind == "b" else number)
    return splat(x, shape) if shape else x


def _sum(x: Any, axis: int) -> Any:
    if x.dtype.kind == "b":
        return np.bitwise_xor.reduce(x, axis=axis)
    if kind(x) != "f":
        return np.sum(x, axis=axis, dtype=x.dtype)
    # A butterfly tree over the power-of-two axis, in float32 (float64 in float64): the same rounding whatever
    # the batch shape (NumPy's own order depends on the memory layout), and the shape of the GPU's shuffle reduction.
    wide = np.float64 if x.dtype == np.float64 else np.float32
    acc = np.moveaxis(x, axis, -1).astype(wide)
    if acc.shape[-1] & (acc.shape[-1] - 1):  # not a power of two (tiles always are)
        return scalar(np.sum(acc, axis=-1, dtype=wide).astype(x.dtype))
    while acc.shape[-1] > 1:
        half = acc.shape[-1] // 2
        acc = acc[..., :half] + acc[..., half:]
    return scalar(acc[..., 0].astype(x.dtype))


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32 (10 explicit mantissa bits), to nearest with ties away from zero."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


TF32_MASK = np.uint32(0xFFFFE000)
"""The bits a TF32 value keeps of a float32: sign, exponent and the top 10 mantissa bits."""


def split_tf32x3(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hi, lo, hi_cross) of float32 `x` for `input_precision="tf32x3"`, as the lowering computes them
    (lowering/tt_to_llvm/tf32.py): `hi` is `x` rounded to TF32 to nearest, ties away, except where that
    overflows (within 2^-12 of float32's largest value: truncated instead), with infinities kept and NaNs
    made the canonical NaN; `lo` is `x - hi` (exact in float32) rounded to TF32; for a non-finite `x`, `lo`
    and `hi_cross` are 0, else `hi_cross` is `hi`. `hi*hi` carries infinities and NaN, and the cross
    products `hi_cross*lo` never make a NaN out of an infinity (`inf * 0`). Every part has 13 zero low bits."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    magnitude = bits & np.uint32(0x7FFFFFFF)
    finite = magnitude < 0x7F800000
    nearest = (bits + np.uint32(0x1000)) & TF32_MASK
    hi_finite = np.where((nearest & np.uint32(0x7FFFFFFF)) < 0x7F800000, nearest, bits & TF32_MASK).astype(np.uint32)
    hi = np.where(magnitude > 0x7F800000, np.uint32(0x7FC00000), hi_finite).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        rest = (bits.view(np.float32) - hi_finite.view(np.float32)).view(np.uint32)
    lo = np.where(finite, (rest + np.uint32(0x1000)) & TF32_MASK, np.uint32(0)).astype(np.uint32)
    cross = np.where(finite, hi_finite, np.uint32(0)).astype(np.uint32)
    return hi.view(np.float32), lo.view(np.float32), cross.view(np.float32)


def dot(a: Any, b: Any, acc: Any, input_precision: str = "ieee") -> Any:
    """`acc + a @ b` (see the module docstring); values may carry a leading program dimension."""
    if acc.dtype == np.float64:  # f64 operands: f64 products and sums
        return acc + np.matmul(a.astype(np.float64), b.astype(np.float64))
    a, b = a.astype(np.float32), b.astype(np.float32)
    if input_precision == "tf32":
        a, b = round_tf32(a), round_tf32(b)
    elif input_precision == "tf32x3":  # f32 operands, f32 accumulator (the frontend's)
        (a_hi, a_lo, a_cross), (b_hi, b_lo, b_cross) = split_tf32x3(a), split_tf32x3(b)
        small = np.matmul(a_lo, b_cross) + np.matmul(a_cross, b_lo)  # as the mmas run: small parts first
        return acc + small + np.matmul(a_hi, b_hi)
    if acc.dtype != np.float16:
        return (acc.astype(np.float32) + np.matmul(a, b)).astype(acc.dtype)
    for k in range(0, a.shape[-1], 16):
        acc = (acc.astype(np.float32) + np.matmul(a[..., k : k + 16], b[..., k : k + 16, :])).astype(np.float16)
    return acc


REDUCTIONS: dict[type[Operation], Callable[[Any, int], Any]] = {
    tt.ReduceSumOp: _sum,
    tt.ReduceMaxOp: np.max,
    tt.ReduceMinOp: np.min,
}


def _reduce_impl(fn: Callable[[Any, int], Any]) -> Callable[..., PythonValues]:
    def run(self: TileFunctions, interpreter: Interpreter, op: tt.ReduceOp, args: PythonValues) -> PythonValues:
        return (fn(args[0], op.axis.value.data - rank(op.input.type)),)

    return run


class TileFunctions(SimFunctions):
    """Program ids, constants, arange, splat/broadcast/expand_dims, reductions and dot."""

    @impl(tt.ProgramIdOp)
    def run_program_id(self, interpreter: Interpreter, op: tt.ProgramIdOp, args: PythonValues) -> PythonValues:
        return (self.launch(interpreter).pid[op.axis.value.data],)

    @impl(tt.NumProgramsOp)
    def run_num_programs(self, interpreter: Interpreter, op: tt.NumProgramsOp, args: PythonValues) -> PythonValues:
        return (np.int32(self.launch(interpreter).grid[op.axis.value.data]),)

    @impl(tt.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: tt.ConstantOp, args: PythonValues) -> PythonValues:
        return (constant(op.value, op.result.type),)

    @impl(arith.ConstantOp)
    def run_arith_constant(self, interpreter: Interpreter, op: arith.ConstantOp, args: PythonValues) -> PythonValues:
        return (constant(op.value, op.result.type),)

    @impl(tt.ArangeOp)
    def run_arange(self, interpreter: Interpreter, op: tt.ArangeOp, args: PythonValues) -> PythonValues:
        return (np.arange(op.start.value.data, op.end.value.data, dtype=np.int32),)

    @impl(tt.SplatOp)
    def run_splat(self, interpreter: Interpreter, op: tt.SplatOp, args: PythonValues) -> PythonValues:
        return (splat(args[0], tt.shape_of(op.result.type)),)

    @impl(tt.BroadcastOp)
    def run_broadcast(self, interpreter: Interpreter, op: tt.BroadcastOp, args: PythonValues) -> PythonValues:
        shape, r = tt.shape_of(op.result.type), rank(op.input.type)
        return (map_offsets(args[0], lambda x: np.broadcast_to(x, np.shape(x)[: np.ndim(x) - r] + shape)),)

    @impl(tt.ExpandDimsOp)
    def run_expand_dims(self, interpreter: Interpreter, op: tt.ExpandDimsOp, args: PythonValues) -> PythonValues:
        axis = op.axis.value.data - rank(op.input.type) - 1
        return (map_offsets(args[0], lambda x: np.expand_dims(x, axis)),)

    @impl(tt.DotOp)
    def run_dot(self, interpreter: Interpreter, op: tt.DotOp, args: PythonValues) -> PythonValues:
        return (dot(*args, op.input_precision.data),)


for _op, _fn in REDUCTIONS.items():
    setattr(TileFunctions, f"run_{_op.name[3:]}", impl(_op)(_reduce_impl(_fn)))
register_impls(TileFunctions)
