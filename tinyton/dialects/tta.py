"""The `tta` dialect: whole-array programs with NumPy semantics, the input of fusion.

`@tt.jit` functions called with arrays are traced (tinyton/frontend/tracing.py) into one `func.func` of
`tta` ops on builtin ranked tensors of any rank with static shapes (`tensor<4096x1000xf32>`) and
scalars (`f32`, `f16`, `bf16`, `i32`, `i1`; a rank-0 value is always a scalar type, as in `tt`).

Design rules:
- ops follow NumPy: elementwise ops broadcast implicitly, reductions take `axis` (normalised to be
  non-negative) and `keepdims`; verifiers report shape errors in NumPy's words;
- there is no type promotion inside the IR: operands share one element type and the tracer inserts
  `tta.cast` where NumPy would promote;
- `tta.fusion` groups a subgraph that becomes exactly one kernel; it is isolated from above (its
  body sees its inputs only as block arguments), so codegen can treat it as a function.

This module holds the matmul, data-movement and fusion ops and the dialect itself; the shape
rules (`broadcast_shapes`, `reduced_shape`, ..., raising `ShapeError`) are in `tta_shapes`, the
elementwise ops in `tta_elementwise`, slices and concatenation in `tta_index`, reductions and scans in
`tta_reductions` (all re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    I32,
    I64,
    DenseArrayBase,
    Float32Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects.tt_types import FLOAT8_TYPES, element_type, is_float, require, shape_of

# The shape rules and the elementwise ops live in their own modules; `tta.<name>` reaches all of them.
from tinyton.dialects.tta_elementwise import (
    AbsOp, AddOp, AndOp, BinaryOp, CastOp, CheckIndexOp, CmpOp, ConstantOp, DivOp, ExpOp, FloorDivOp, LogOp,
    MaximumOp, MinimumOp, ModOp, FmodOp, MulOp, NegOp, OrOp, PowOp, RsqrtOp, ShlOp, ShrOp, SqrtOp, SubOp, UnaryOp,
    WhereOp, XorOp,
)
from tinyton.dialects.tta_index import ConcatenateOp, SliceOp, concatenate_shape, inside_range
from tinyton.dialects.tta_put import UPDATES, PutOp
from tinyton.dialects.tta_math import (
    MATH_OPS, Atan2Op, CeilOp, CopysignOp, CosOp, ErfOp, Exp2Op, Expm1Op,
    FloorOp, FmaxOp, FminOp, HypotOp, Log1pOp, Log2Op, Log10Op, RintOp, SinOp, TanhOp, TanOp, TruncOp,
)
from tinyton.dialects.tta_reductions import (
    INDEX_ELEMENT, ArgMaxOp, ArgMinOp, ArgReduceOp, CumProdOp, CumSumOp, ReduceMaxOp, ReduceMeanOp, ReduceMinOp,
    ReduceOp, ReduceProdOp, ReduceSumOp, ScanOp, SortingOp, SortOp, ArgSortOp,
)
from tinyton.dialects.tta_shapes import (
    ShapeError, array_type, broadcast_shapes, check_broadcast_to, check_reshape, checked, dtype_name,
    expect_result, format_shape, matmul_shape, normalize_axis, reduced_shape, take_shape, transposed_shape,
    type_str, verify_axis, verify_value,
)

# ---------------------------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------------------------


def matmul_element(lhs: Attribute, rhs: Attribute) -> Attribute:
    """The element type of `lhs @ rhs` (element types), NumPy's (ml_dtypes'): float8 operands (e4m3fn, e5m2,
    mixed or not) give float32, others their own type."""
    if isinstance(lhs, FLOAT8_TYPES) and isinstance(rhs, FLOAT8_TYPES):
        return Float32Type()
    return lhs


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """`a @ b` for rank >= 2 float arrays; leading (batch) dimensions broadcast; float8 operands accumulate in
    and give float32 (`matmul_element`)."""

    name = "tta.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lt, rt = SSAValue.get(lhs).type, SSAValue.get(rhs).type
        shape = matmul_shape(shape_of(lt), shape_of(rt))
        element = matmul_element(lt.element_type, rt.element_type)
        super().__init__(operands=[lhs, rhs], result_types=[array_type(element, shape)])

    def verify_(self) -> None:
        lt, rt = self.lhs.type, self.rhs.type
        element = matmul_element(element_type(lt), element_type(rt))
        same = element_type(lt) == element_type(rt) or element != element_type(lt)
        require(same, f"matmul operands differ: {dtype_name(lt)} and {dtype_name(rt)}")
        require(is_float(lt), f"matmul needs float arrays, got {dtype_name(lt)}")
        expect_result(self, array_type(element, checked(matmul_shape, shape_of(lt), shape_of(rt))))


# ---------------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """`np.transpose(x, permutation)`: result dim i is input dim permutation[i]."""

    name = "tta.transpose"
    input = operand_def(TensorType)
    permutation = prop_def(DenseArrayBase[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, permutation: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(
            operands=[input],
            properties={"permutation": DenseArrayBase.from_list(i64, list(permutation))},
            result_types=[array_type(t.element_type, transposed_shape(shape_of(t), permutation))],
        )

    @property
    def perm(self) -> tuple[int, ...]:
        return tuple(self.permutation.get_values())

    def verify_(self) -> None:
        shape = checked(transposed_shape, shape_of(self.input.type), self.perm)
        expect_result(self, array_type(element_type(self.input.type), shape))


class _ShapeOp(IRDLOperation):
    """Same elements, new shape: `$input : type -> type`."""

    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[array_type(element_type(t), shape)])

    def verify_(self) -> None:
        verify_value("input", self.input.type, moved=True)
        require(
            element_type(self.input.type) == element_type(self.result.type),
            f"{self.name} keeps the element type ({dtype_name(self.input.type)})",
        )


@irdl_op_definition
class ReshapeOp(_ShapeOp):
    """`x.reshape(shape)` in row-major order."""

    name = "tta.reshape"

    def verify_(self) -> None:
        super().verify_()
        checked(check_reshape, shape_of(self.input.type), shape_of(self.result.type))


@irdl_op_definition
class BroadcastToOp(_ShapeOp):
    """`np.broadcast_to(x, shape)`: materialises implicit broadcasting (and fills arrays with scalars)."""

    name = "tta.broadcast_to"

    def verify_(self) -> None:
        super().verify_()
        checked(check_broadcast_to, shape_of(self.input.type), shape_of(self.result.type))


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """`np.arange(start, end)` as int32: the index arrays that causal masks and `tt.tril` are built from."""

    name = "tta.arange"
    start = prop_def(IntegerAttr[I32])
    end = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$start `to` $end attr-dict `:` type($result)"

    def __init__(self, start: int, end: int):
        super().__init__(
            properties={"start": IntegerAttr(start, 32), "end": IntegerAttr(end, 32)},
            result_types=[array_type(i32, (max(end - start, 0),))],
        )

    def verify_(self) -> None:
        start, end = self.start.value.data, self.end.value.data
        expect_result(self, array_type(i32, (max(end - start, 0),)))


@irdl_op_definition
class TakeOp(IRDLOperation):
    """`np.take(table, indices, axis)`: gather rows (an embedding lookup for axis 0); indices of any integer
    type (int64 ones are torch's and NumPy's default), checked against the axis before kernels narrow them to
    the i32 they index with."""

    name = "tta.take"
    table = operand_def(TensorType)
    indices = operand_def()
    axis = prop_def(IntegerAttr[I32])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = (
        "$table `,` $indices `axis` `=` $axis attr-dict `:` type($table) `,` type($indices) `->` type($result)"
    )

    def __init__(self, table: SSAValue | Operation, indices: SSAValue | Operation, axis: int = 0):
        tt_, it = SSAValue.get(table).type, SSAValue.get(indices).type
        shape = take_shape(shape_of(tt_), shape_of(it), axis)
        super().__init__(
            operands=[table, indices],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[array_type(tt_.element_type, shape)],
        )

    def verify_(self) -> None:
        verify_value("table", self.table.type, moved=True)
        indices = self.indices.type
        index = element_type(indices)
        require(isinstance(index, IntegerType) and index.bitwidth > 1,
                f"take indices must be integers, got {dtype_name(indices)}")
        table, axis = shape_of(self.table.type), self.axis.value.data
        verify_axis(axis, len(table))
        expected = array_type(element_type(self.table.type), take_shape(table, shape_of(self.indices.type), axis))
        expect_result(self, expected)


# ---------------------------------------------------------------------------------------------
# Fusion regions
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class FusionOp(IRDLOperation):
    """A fused subgraph that becomes exactly one kernel.

    Operands are the subgraph's external inputs; the single block has one argument per operand and
    ends with `tta.yield` of the results. `kind` ("elementwise", "row_reduction", "softmax", ...)
    names the codegen template.
    """

    name = "tta.fusion"
    kind = prop_def(StringAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    assembly_format = "$kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(
        self,
        kind: str,
        inputs: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
        body: Region | Block | None = None,
    ):
        """Without `body`, the block gets one argument per input and stays empty for the caller to fill."""
        if body is None:
            body = Block(arg_types=[SSAValue.get(v).type for v in inputs])
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            properties={"kind": StringAttr(kind)},
            regions=[body],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        return last

    def verify_(self) -> None:
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        if arg_types != in_types:  # messages print types: built on failure only
            raise VerifyException(
                f"fusion block arguments ({type_str(arg_types)}) must match its inputs ({type_str(in_types)})"
            )
        last = block.last_op
        require(isinstance(last, YieldOp), "fusion body must end with tta.yield")
        yielded = [v.type for v in last.values]
        out = [r.type for r in self.outputs]
        if yielded != out:
            raise VerifyException(f"fusion yields ({type_str(yielded)}) but its results are ({type_str(out)})")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `tta.fusion`: the values the fused kernel writes out."""

    name = "tta.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(FusionOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


RETURNS_TUPLE = "tta.returns_tuple"
"""Unit attribute on a traced program's func when the Python function returned a tuple (even of one array)."""


def program_function(module: ModuleOp) -> func.FuncOp:
    """An array program's `func.func` (the one function the tracer puts in its module)."""
    return next(op for op in module.body.block.ops if isinstance(op, func.FuncOp))


def returns_tuple(module: ModuleOp) -> bool:
    """Whether the traced Python function returned a tuple rather than one array."""
    return any(RETURNS_TUPLE in op.attributes for op in module.body.block.ops)


Tta = Dialect(
    "tta",
    [
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        FloorDivOp,
        ModOp,
        FmodOp,
        MaximumOp,
        MinimumOp,
        AndOp,
        OrOp,
        XorOp,
        ShlOp,
        ShrOp,
        PowOp,
        CmpOp,
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        *MATH_OPS,
        WhereOp,
        CastOp,
        CheckIndexOp,
        ConstantOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceMeanOp,
        ReduceProdOp,
        ArgMaxOp,
        ArgMinOp,
        CumSumOp,
        CumProdOp,
        SortOp,
        ArgSortOp,
        MatmulOp,
        TransposeOp,
        ReshapeOp,
        BroadcastToOp,
        TakeOp,
        ArangeOp,
        SliceOp,
        ConcatenateOp,
        PutOp,
        FusionOp,
        YieldOp,
    ],
    [],
)

__all__ = [  # `tta.<name>`: this module's ops and those of the op modules it gathers
    "AbsOp", "AddOp", "AndOp", "ArangeOp", "ArgMaxOp", "ArgMinOp", "ArgReduceOp", "ArgSortOp", "array_type",
    "Atan2Op",
    "BinaryOp", "broadcast_shapes", "BroadcastToOp", "CastOp", "CeilOp", "check_broadcast_to", "CheckIndexOp",
    "check_reshape",
    "checked", "CmpOp", "concatenate_shape", "ConcatenateOp", "ConstantOp", "CopysignOp", "CosOp", "CumProdOp",
    "CumSumOp", "DivOp", "dtype_name", "element_type", "ErfOp", "Exp2Op", "expect_result", "Expm1Op", "ExpOp",
    "FLOAT8_TYPES", "FloorDivOp", "FloorOp", "FmaxOp", "FminOp", "format_shape", "FusionOp", "HypotOp",
    "INDEX_ELEMENT", "inside_range", "is_float", "Log10Op", "Log1pOp", "Log2Op", "LogOp", "MATH_OPS",
    "matmul_element", "matmul_shape", "MatmulOp", "MaximumOp", "MinimumOp", "ModOp", "FmodOp", "MulOp", "NegOp",
    "normalize_axis", "OrOp", "PowOp", "program_function", "PutOp", "reduced_shape", "ReduceMaxOp", "ReduceMeanOp",
    "ReduceMinOp", "ReduceOp", "ReduceProdOp", "ReduceSumOp", "require", "ReshapeOp", "RETURNS_TUPLE",
    "returns_tuple", "RintOp", "RsqrtOp", "ScanOp", "shape_of", "ShapeError", "ShlOp", "ShrOp", "SinOp", "SliceOp",
    "SortingOp", "SortOp", "SqrtOp", "SubOp", "take_shape", "TakeOp", "TanhOp", "TanOp", "transposed_shape",
    "TransposeOp", "TruncOp",
    "Tta", "type_str", "UnaryOp", "UPDATES", "verify_axis", "verify_value", "WhereOp", "XorOp", "YieldOp",
]  # fmt: skip
