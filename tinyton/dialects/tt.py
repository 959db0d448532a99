"""The `tt` dialect: tinyton's tile-level kernel IR.

A kernel is a `func.func` whose body computes on *tiles*: builtin ranked tensors of any rank
(`tensor<64xf32>`, `tensor<32x64x!tt.ptr<f16>>`) held by one program (one CUDA block), plus scalars
(`i32`, `f32`, `f16`, `i1`, `!tt.ptr<f32>`). Loops and branches are `scf.for` / `scf.if`.

Design rules, so that every consumer (simulator, lowering, fusion codegen) stays simple:
- elementwise ops take operands of one identical type; the frontend inserts `tt.splat` /
  `tt.broadcast` / `tt.expand_dims` explicitly, so no op broadcasts implicitly;
- every tile dimension is a power of two (the lowering spreads tiles over threads by bit tricks);
- reductions, `tt.dot` and layout changes are the only ops that move data between threads.

This module holds the program-geometry, reduction and dot ops and the dialect itself; the types are in
`tt_types`, pointer arithmetic, loads and stores in `tt_memory`, the elementwise ops in `tt_elementwise`,
`tt_math` and `tt_libm`, shape ops in `tt_shapes`, reductions and scans with a combine region in `tt_combine`,
debugging ops in `tt_debug`, and the atomic, random, indexing, shared-memory, TMA and warp-specialisation ops in
their own modules (all re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I32, BFloat16Type, Float8E4M3FNType, Float8E5M2Type, Float16Type, Float32Type, Float64Type, FloatAttr, IntegerAttr,
    StringAttr, TensorType, i32,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

# The elementwise ops and the type helpers live in their own modules; `tt.<name>` reaches all of them.
from tinyton.dialects.tt_elementwise import (
    AbsOp, AddOp, AndOp, BinaryOp, BitcastOp, CastOp, CmpOp, DivOp, ExpOp, FloorDivOp, LogOp,
    MaximumOp, MinimumOp, ModOp, MulOp, NegOp, OrOp, RemOp, RsqrtOp, SelectOp, ShlOp, ShrOp, SqrtOp, SubOp, UnaryOp,
    XorOp,
)
from tinyton.dialects.tt_shared import (
    ASYNC_DOT_ATTR, SHARED_OPS, AsyncCommitOp, AsyncCopyOp, AsyncWaitOp, DotWaitOp, LocalAllocOp, LocalLoadOp,
    NUM_STAGES_ATTR, PromotedDotOp, buffer_parts, slot_type,
)
from tinyton.dialects.tt_tma import (
    TMA_OPS, BarrierAllocOp, BarrierInitOp, DescriptorLoadOp, DescriptorReduceOp, DescriptorStoreOp,
    DescriptorWriteBase, TmaArriveOp, TmaCopyOp, TmaWaitOp,
)
from tinyton.dialects.tt_warps import (
    PINGPONG_ATTR, PRODUCER_WARPS, REGISTER_FILE, WARP_OPS, WARP_SPECIALIZE_ATTR, BarrierArriveOp, BarrierWaitOp,
    WarpgroupTurnOp, WarpSpecializeOp,
)
from tinyton.dialects.tt_grid import (
    GRID_OPS,
    OVERLAP_ATTR,
    READ_ONLY_ATTR,
    TRIGGER_ATTR,
    GridDependencyWaitOp,
    LaunchDependentsOp,
)
from tinyton.dialects.tt_atomics import ATOMIC_OPS, AtomicCASOp, AtomicRMWOp, DebugBarrierOp, GridBarrierOp
from tinyton.dialects.tt_random import RANDOM_OPS, CosOp, SinOp, UmulhiOp
from tinyton.dialects.tt_combine import COMBINE_OPS, CombineYieldOp, ScanOp
from tinyton.dialects.tt_combine import ReduceOp as CombineReduceOp
from tinyton.dialects.tt_debug import DEBUG_OPS, AssertOp, PrintOp
from tinyton.dialects.tt_indexing import INDEXING_OPS, GatherOp, HistogramOp, InlineAsmOp
from tinyton.dialects.tt_memory import MEMORY_OPS, AddPtrOp, LoadEffects, LoadOp, StoreOp
from tinyton.dialects.tt_math import (
    MATH_OPS, CeilOp, DivRnOp, ErfOp, Exp2Op, FloorOp, FmaOp, Log2Op, SqrtRnOp,
)
from tinyton.dialects.tt_libm import (
    LIBM_OPS, Atan2Op, CopysignOp, Expm1Op, FmaxOp, FminOp, HypotOp, Log1pOp, Log10Op, RintOp, TanhOp, TanOp, TruncOp,
)
from tinyton.dialects.tt_shapes import SHAPE_OPS, HintOp, JoinOp, ReshapeOp, SplitOp, TransOp
from tinyton.dialects.tt_types import (
    FLOAT8_TYPES, MAX_TILE_ELEMENTS, PointerType, element_type, is_float, is_int, is_pointer, require, shape_of,
    tile_type, type_name, verify_tile_shape,
)

# ---------------------------------------------------------------------------------------------
# Program geometry and tile construction
# ---------------------------------------------------------------------------------------------


class _GridQueryOp(IRDLOperation):
    axis = prop_def(IntegerAttr[I32])
    result = result_def(i32)
    traits = traits_def(Pure())
    assembly_format = "$axis attr-dict `:` type($result)"

    def __init__(self, axis: int):
        super().__init__(properties={"axis": IntegerAttr(axis, 32)}, result_types=[i32])

    def verify_(self) -> None:
        require(self.axis.value.data in (0, 1, 2), f"axis must be 0, 1 or 2, got {self.axis.value.data}")


@irdl_op_definition
class ProgramIdOp(_GridQueryOp):
    """Index of this program along a grid axis (CUDA's blockIdx)."""

    name = "tt.program_id"


@irdl_op_definition
class NumProgramsOp(_GridQueryOp):
    """Number of programs along a grid axis (CUDA's gridDim)."""

    name = "tt.num_programs"


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar constant, or a tile filled with it: `tt.constant 1.0 : f32 -> tensor<64xf32>`."""

    name = "tt.constant"
    value = prop_def(IntegerAttr | FloatAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `->` type($result)"

    def __init__(self, value: IntegerAttr | FloatAttr, result_type: Attribute):
        super().__init__(properties={"value": value}, result_types=[result_type])

    def verify_(self) -> None:
        verify_tile_shape(self.result.type, "constant")
        require(
            self.value.type == element_type(self.result.type),
            lambda: f"value of type {type_name(self.value.type)} cannot fill {type_name(self.result.type)}",
        )


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """`[start, start+1, ..., end-1]` as an i32 tile; `end - start` must be a power of two."""

    name = "tt.arange"
    start = prop_def(IntegerAttr[I32])
    end = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$start `to` $end attr-dict `:` type($result)"

    def __init__(self, start: int, end: int):
        super().__init__(
            properties={"start": IntegerAttr(start, 32), "end": IntegerAttr(end, 32)},
            result_types=[TensorType(i32, [end - start])],
        )

    def verify_(self) -> None:
        n = self.end.value.data - self.start.value.data
        require(shape_of(self.result.type) == (n,), f"arange of {n} elements must have type tensor<{n}xi32>")
        require(self.result.type.element_type == i32, "arange produces i32 elements")
        verify_tile_shape(self.result.type, "arange")


@irdl_op_definition
class SplatOp(IRDLOperation):
    """Fill a tile with a scalar."""

    name = "tt.splat"
    input = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        scalar = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[TensorType(scalar, list(shape))])

    def verify_(self) -> None:
        require(not isinstance(self.input.type, TensorType), "splat takes a scalar")
        require(self.result.type.element_type == self.input.type, "splat must keep the element type")
        verify_tile_shape(self.result.type, "splat result")


@irdl_op_definition
class BroadcastOp(IRDLOperation):
    """Repeat a tile along its size-1 dimensions: `tensor<64x1xf32> -> tensor<64x32xf32>`."""

    name = "tt.broadcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        src, dst = shape_of(self.input.type), shape_of(self.result.type)
        require(len(src) == len(dst), f"broadcast cannot change the rank ({len(src)} to {len(dst)})")
        for s, d in zip(src, dst):
            require(s in (1, d), f"cannot broadcast shape {list(src)} to {list(dst)}")
        require(element_type(self.input.type) == element_type(self.result.type), "broadcast keeps the element type")
        verify_tile_shape(self.result.type, "broadcast result")


@irdl_op_definition
class ExpandDimsOp(IRDLOperation):
    """Insert a size-1 dimension at `axis`: `x[:, None]` is axis 1, `x[None, :]` axis 0."""

    name = "tt.expand_dims"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int):
        t = SSAValue.get(input).type
        shape = list(shape_of(t))
        shape.insert(axis, 1)
        super().__init__(
            operands=[input],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[TensorType(t.element_type, shape)],
        )

    def verify_(self) -> None:
        shape = list(shape_of(self.input.type))
        axis = self.axis.value.data
        require(0 <= axis <= len(shape), f"axis {axis} out of range for rank {len(shape)}")
        shape.insert(axis, 1)
        require(shape_of(self.result.type) == tuple(shape), f"expand_dims result must have shape {shape}")
        verify_tile_shape(self.result.type, "expand_dims result")


# ---------------------------------------------------------------------------------------------
# Reductions and dot
# ---------------------------------------------------------------------------------------------


class ReduceOp(IRDLOperation):
    """Reduce a tile along `axis`; a rank-1 tile reduces to a scalar."""

    KIND: ClassVar[str]
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int):
        t = SSAValue.get(input).type
        shape = [d for i, d in enumerate(shape_of(t)) if i != axis]
        super().__init__(
            operands=[input],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[tile_type(t.element_type, shape)],
        )

    def verify_(self) -> None:
        shape = shape_of(self.input.type)
        axis = self.axis.value.data
        require(0 <= axis < len(shape), f"axis {axis} out of range for a rank-{len(shape)} tile")
        expected = tile_type(element_type(self.input.type), [d for i, d in enumerate(shape) if i != axis])
        require(self.result.type == expected, lambda: f"{self.name} result must be {type_name(expected)}")
        require(is_float(self.input.type) or is_int(self.input.type), f"{self.name} needs numbers")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "tt.reduce_sum"
    KIND: ClassVar[str] = "sum"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "tt.reduce_max"
    KIND: ClassVar[str] = "max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "tt.reduce_min"
    KIND: ClassVar[str] = "min"


INPUT_PRECISIONS = ("ieee", "tf32", "tf32x3")
"""Triton's `input_precision` of f32 operands: exact FMA, TF32 tensor cores (10-bit mantissas), or three
TF32 products of hi and lo parts that keep f32 accuracy on the tensor cores (lowering/tt_to_llvm/tf32.py)."""

DOT_MIN = 16
"""Smallest tile side of a dot (the MMA instruction shape m16n8k16, as in Triton)."""


@irdl_op_definition
class DotOp(IRDLOperation):
    """`acc + a @ b` for 2-D tiles `a: MxK`, `b: KxN`, `acc: MxN`; the accumulator's type is the result's.

    Operands f16 or bf16 accumulate in f32 (an f16 accumulator is Triton's `out_dtype=float16` for f16
    operands), float8 ones (e4m3fn, e5m2, which may mix) in f32; f32 operands accumulate in f32 with `input_precision` "ieee" (exact) or "tf32"/"tf32x3"
    (an attribute that matters only for f32 operands, as in Triton).

    `max_num_imprecise_acc` (Triton's, float8 dots only): Hopper's float8 wgmma keeps about 13 fraction bits of
    its running sum, so at most this many products of K are summed inside one chain of wgmmas before the chain's
    partial sum is added to the f32 accumulator on the CUDA cores (rounded up to whole k32 instructions; 0 or 32:
    after every instruction). Absent: the whole K is accumulated in the chain (Triton's default on sm_90, fast).
    """

    name = "tt.dot"
    T: ClassVar = VarConstraint("T", base(TensorType))
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    acc = operand_def(T)
    input_precision = prop_def(StringAttr, default_value=StringAttr("ieee"))
    max_num_imprecise_acc = opt_prop_def(IntegerAttr[I32])
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = (
        "$a `,` $b `,` $acc (`input_precision` `=` $input_precision^)? "
        "(`max_num_imprecise_acc` `=` $max_num_imprecise_acc^)? attr-dict `:` type($a) `,` type($b) `->` type($result)"
    )

    def __init__(
        self,
        a: SSAValue | Operation,
        b: SSAValue | Operation,
        acc: SSAValue | Operation,
        input_precision: str = "ieee",
        max_num_imprecise_acc: int | None = None,
    ):
        properties: dict[str, Attribute] = {"input_precision": StringAttr(input_precision)}
        if max_num_imprecise_acc is not None:
            properties["max_num_imprecise_acc"] = IntegerAttr(max_num_imprecise_acc, 32)
        super().__init__(operands=[a, b, acc], properties=properties, result_types=[SSAValue.get(acc).type])

    def verify_(self) -> None:
        sa, sb, sc = shape_of(self.a.type), shape_of(self.b.type), shape_of(self.acc.type)
        require(len(sa) == 2 and len(sb) == 2, "dot takes 2-D tiles")
        require(sa[1] == sb[0], f"dot inner dimensions differ: {list(sa)} @ {list(sb)}")
        require(sc == (sa[0], sb[1]), f"dot accumulator must have shape {[sa[0], sb[1]]}, got {list(sc)}")
        require(self.result.type == self.acc.type, "dot result has the accumulator's type")
        operand, acc = element_type(self.a.type), element_type(self.acc.type)
        both_float8 = isinstance(operand, FLOAT8_TYPES) and isinstance(element_type(self.b.type), FLOAT8_TYPES)
        require(
            operand == element_type(self.b.type) or both_float8,
            "dot operands must have one element type (or both be float8: e4m3 and e5m2 may mix)",
        )
        require(is_float(self.a.type) and is_float(self.acc.type), "dot takes float tiles")
        allowed = DOT_ACCUMULATORS.get(operand, ())
        require(
            acc in allowed,
            f"dot of {type_name(operand)} operands accumulates in {' or '.join(map(type_name, allowed))}, "
            f"got {type_name(acc)}",
        )
        precision = self.input_precision.data
        require(precision in INPUT_PRECISIONS, f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}")
        for d in (*sa, *sb):
            require(d >= DOT_MIN, f"dot tiles must be at least {DOT_MIN} in every dimension")
        if self.max_num_imprecise_acc is not None:
            limit = self.max_num_imprecise_acc.value.data
            require(0 <= limit <= sa[1], f"max_num_imprecise_acc must be between 0 and K ({sa[1]}), got {limit}")


DOT_ACCUMULATORS: dict[Attribute, tuple[Attribute, ...]] = {
    Float8E4M3FNType(): (Float32Type(),),
    Float8E5M2Type(): (Float32Type(),),
    Float16Type(): (Float32Type(), Float16Type()),
    BFloat16Type(): (Float32Type(),),
    Float32Type(): (Float32Type(),),
    Float64Type(): (Float64Type(),),
}
"""Accumulator (= result) element types of `tt.dot` per operand element type (Triton's `out_dtype`)."""


Tt = Dialect(
    "tt",
    [
        ProgramIdOp,
        NumProgramsOp,
        ConstantOp,
        ArangeOp,
        SplatOp,
        BroadcastOp,
        ExpandDimsOp,
        *MEMORY_OPS,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        FloorDivOp,
        ModOp,
        RemOp,
        MaximumOp,
        MinimumOp,
        AndOp,
        OrOp,
        XorOp,
        ShlOp,
        ShrOp,
        CmpOp,
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        SelectOp,
        CastOp,
        BitcastOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        DotOp,
        *SHARED_OPS,
        *TMA_OPS,
        *WARP_OPS,
        *ATOMIC_OPS,
        *GRID_OPS,
        *RANDOM_OPS,
        *MATH_OPS,
        *LIBM_OPS,
        *SHAPE_OPS,
        *COMBINE_OPS,
        *DEBUG_OPS,
        *INDEXING_OPS,
    ],
    [PointerType],
)

__all__ = [  # `tt.<name>`: this module's ops and those of the op modules it gathers
    "AbsOp", "AddOp", "AddPtrOp", "AndOp", "ArangeOp", "AssertOp", "ASYNC_DOT_ATTR", "AsyncCommitOp", "AsyncCopyOp",
    "AsyncWaitOp", "Atan2Op", "ATOMIC_OPS", "AtomicCASOp", "AtomicRMWOp", "BarrierAllocOp", "BarrierInitOp",
    "BinaryOp", "BitcastOp", "BroadcastOp", "CastOp", "CeilOp", "CmpOp", "COMBINE_OPS", "CombineReduceOp",
    "CombineYieldOp", "ConstantOp", "CopysignOp", "CosOp", "DEBUG_OPS", "DebugBarrierOp", "DescriptorLoadOp",
    "DivOp", "DivRnOp", "DOT_MIN", "DotOp", "DotWaitOp", "element_type", "ErfOp", "Exp2Op", "ExpandDimsOp",
    "Expm1Op", "ExpOp", "FLOAT8_TYPES", "FloorDivOp", "FloorOp", "FmaOp", "FmaxOp", "FminOp", "GatherOp",
    "GRID_OPS", "GridBarrierOp", "GridDependencyWaitOp", "HintOp", "HistogramOp", "HypotOp", "INDEXING_OPS", "InlineAsmOp", "LaunchDependentsOp", "INPUT_PRECISIONS",
    "is_float", "is_int", "is_pointer", "JoinOp", "LIBM_OPS", "LoadEffects", "LoadOp", "LocalAllocOp",
    "LocalLoadOp", "DescriptorReduceOp", "DescriptorStoreOp", "DescriptorWriteBase", "buffer_parts", "slot_type", "Log10Op", "Log1pOp", "Log2Op", "LogOp", "MATH_OPS", "MAX_TILE_ELEMENTS", "MaximumOp", "MEMORY_OPS",
    "MinimumOp", "ModOp", "MulOp", "NegOp", "NUM_STAGES_ATTR", "OVERLAP_ATTR", "READ_ONLY_ATTR", "TRIGGER_ATTR", "NumProgramsOp", "OrOp", "PointerType", "PrintOp",
    "ProgramIdOp", "PromotedDotOp", "RANDOM_OPS", "ReduceMaxOp", "ReduceMinOp", "ReduceOp", "ReduceSumOp", "RemOp", "require",
    "ReshapeOp", "RintOp", "RsqrtOp", "ScanOp", "SelectOp", "shape_of", "SHAPE_OPS", "SHARED_OPS", "ShlOp", "ShrOp",
    "SinOp", "SplatOp", "SplitOp", "SqrtOp", "SqrtRnOp", "StoreOp", "SubOp", "TanhOp", "TanOp", "tile_type",
    "TMA_OPS", "WARP_OPS", "WARP_SPECIALIZE_ATTR", "PINGPONG_ATTR", "PRODUCER_WARPS", "REGISTER_FILE", "BarrierArriveOp", "BarrierWaitOp", "WarpSpecializeOp", "WarpgroupTurnOp", "TmaArriveOp", "TmaCopyOp", "TmaWaitOp", "TransOp", "TruncOp", "Tt", "type_name", "UmulhiOp",
    "UnaryOp", "verify_tile_shape", "XorOp",
]  # fmt: skip
