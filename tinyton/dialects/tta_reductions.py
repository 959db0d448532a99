"""Reductions, scans and sorts of the `tta` dialect: `tta.reduce_*`, `tta.argmax`/`tta.argmin`,
`tta.cumsum`/`tta.cumprod`, `tta.sort`/`tta.argsort`.

Each reduces (scans, sorts) one non-negative `axis`; the tracer turns NumPy's tuple axes and `axis=None` into
several ops or a flattening reshape, and composes `var`, `std`, `logsumexp`, `any` and `all` from these
(so the fusion rules and the paired walks of `lowering/fusion/pairs.py` see the ops they know).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I32, IntegerAttr, TensorType, UnitAttr, i1, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from tinyton.dialects.tt_types import FLOAT, INT, element_kind, element_type, require, shape_of
from tinyton.dialects.tta_shapes import (
    array_type,
    dtype_name,
    expect_result,
    reduced_shape,
    verify_axis,
    verify_value,
)

INDEX_ELEMENT: Attribute = i64
"""Element type of `argmax`/`argmin` results: int64, NumPy's."""


class ReduceOp(IRDLOperation):
    """Reduce `axis` (non-negative); `keepdims` keeps it with size 1. Rank 0 results are scalars."""

    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    keepdims = opt_prop_def(UnitAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis (`keepdims` $keepdims^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int, keepdims: bool = False):
        t = SSAValue.get(input).type
        props: dict[str, Attribute] = {"axis": IntegerAttr(axis, 32)}
        if keepdims:
            props["keepdims"] = UnitAttr()
        super().__init__(
            operands=[input],
            properties=props,
            result_types=[array_type(self.result_element(t), reduced_shape(shape_of(t), axis, keepdims))],
        )

    @classmethod
    def result_element(cls, input_type: Attribute) -> Attribute:
        return element_type(input_type)

    @property
    def keeps_dims(self) -> bool:
        return self.keepdims is not None

    def verify_(self) -> None:
        verify_value("reduction input", self.input.type)
        shape, axis = shape_of(self.input.type), self.axis.value.data
        verify_axis(axis, len(shape))
        expected = array_type(self.result_element(self.input.type), reduced_shape(shape, axis, self.keeps_dims))
        expect_result(self, expected)
        require(
            element_kind(self.input.type) in self.KINDS,
            f"{self.name} needs float input, got {dtype_name(self.input.type)}",
        )


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "tta.reduce_sum"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "tta.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "tta.reduce_min"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Arithmetic mean (the tracer casts integer inputs to float32)."""

    name = "tta.reduce_mean"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    """Product of the elements (floats multiply in f32, as sums accumulate; the tracer casts bools to int32)."""

    name = "tta.reduce_prod"


class ArgReduceOp(ReduceOp):
    """Index of the first maximum (minimum) along `axis`, NumPy's: a NaN wins over every number, the first
    NaN over later ones; the result is `INDEX_ELEMENT`."""

    @classmethod
    def result_element(cls, input_type: Attribute) -> Attribute:
        return INDEX_ELEMENT

    def verify_(self) -> None:
        super().verify_()
        require(shape_of(self.input.type)[self.axis.value.data] > 0,
                f"{self.name}: attempt to get {self.name.removeprefix('tta.')} of an empty sequence")


@irdl_op_definition
class ArgMaxOp(ArgReduceOp):
    name = "tta.argmax"


@irdl_op_definition
class ArgMinOp(ArgReduceOp):
    name = "tta.argmin"


class ScanOp(IRDLOperation):
    """Inclusive running combination along `axis`; the result has the input's shape and type."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], properties={"axis": IntegerAttr(axis, 32)}, result_types=[t])

    def verify_(self) -> None:
        verify_value("scan input", self.input.type)
        verify_axis(self.axis.value.data, len(shape_of(self.input.type)))
        expect_result(self, self.input.type)
        require(element_type(self.input.type) != i1,
                f"{self.name} takes numbers (the tracer counts bools in int32)")


@irdl_op_definition
class CumSumOp(ScanOp):
    name = "tta.cumsum"


@irdl_op_definition
class CumProdOp(ScanOp):
    name = "tta.cumprod"


class SortingOp(IRDLOperation):
    """The rows along `axis` (the last: the tracer moves another axis there) in NumPy's order: ascending, NaN
    after every number, ties in index order (NumPy's `kind="stable"`); `descending` reverses the order of the
    values (NaN first, as torch's), ties still in index order. `tta.sort` gives the sorted values,
    `tta.argsort` their int64 indices (`INDEX_ELEMENT`). Rows of any length: a kernel sorts a row whole in registers
    (up to `limits.max_sorted_row`), and `tinyton-split-long-sorts` makes longer ones chunks of that, merged."""

    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    descending = opt_prop_def(UnitAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axis` `=` $axis (`descending` $descending^)? attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, axis: int, descending: bool = False):
        t = SSAValue.get(input).type
        props: dict[str, Attribute] = {"axis": IntegerAttr(axis, 32)}
        if descending:
            props["descending"] = UnitAttr()
        super().__init__(operands=[input], properties=props, result_types=[self.result_type(t)])

    @classmethod
    def result_type(cls, input_type: Attribute) -> Attribute:
        return input_type

    @property
    def is_descending(self) -> bool:
        return self.descending is not None

    def verify_(self) -> None:
        verify_value("sort input", self.input.type)
        shape, axis = shape_of(self.input.type), self.axis.value.data
        verify_axis(axis, len(shape))
        require(axis == len(shape) - 1, f"{self.name} sorts along the last axis (the tracer moves the axis there)")
        expect_result(self, self.result_type(self.input.type))
        require(element_type(self.input.type) != i1, f"{self.name} takes numbers (the tracer sorts bools as int8)")


@irdl_op_definition
class SortOp(SortingOp):
    name = "tta.sort"


@irdl_op_definition
class ArgSortOp(SortingOp):
    name = "tta.argsort"

    @classmethod
    def result_type(cls, input_type: Attribute) -> Attribute:
        return array_type(INDEX_ELEMENT, shape_of(input_type))
