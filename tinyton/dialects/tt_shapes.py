"""Shape ops of the `tt` dialect: transposition, reshaping, joining and splitting tiles.

`tt.trans` permutes dimensions (`order[i]` is the input dimension that becomes dimension i); `tt.reshape`
keeps the row-major order of the elements; `tt.join` stacks two tiles of one type along a new last
dimension of size 2 and `tt.split` takes such a tile apart. `tt.hint` passes a value through unchanged
and records what the user promised about it (`tl.multiple_of`, `max_contiguous`, `max_constancy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import I32, DenseArrayBase, IntegerAttr, TensorType, i32
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_types import (
    element_type,
    require,
    shape_of,
    tile_type,
    verify_tile_shape,
)


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, list(values))


@irdl_op_definition
class TransOp(IRDLOperation):
    """Permute the dimensions of a tile: `tt.trans %x {order = array<i32: 1, 0>}` transposes a 2-D tile."""

    name = "tt.trans"
    input = operand_def(TensorType)
    order = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue | Operation, order: Sequence[int]):
        t = SSAValue.get(input).type
        shape = [shape_of(t)[d] for d in order]
        super().__init__(
            operands=[input], properties={"order": _ints(order)}, result_types=[TensorType(t.element_type, shape)]
        )

    def verify_(self) -> None:
        order, src = list(self.order.get_values()), shape_of(self.input.type)
        require(sorted(order) == list(range(len(src))), f"order {order} is not a permutation of the dimensions")
        expected = tile_type(element_type(self.input.type), [src[d] for d in order])
        require(self.result.type == expected, "trans result must have the permuted shape")


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """The same elements, in row-major order, as a tile of another shape."""

    name = "tt.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        src, dst = shape_of(self.input.type), shape_of(self.result.type)
        require(prod(src) == prod(dst), f"cannot reshape {list(src)} ({prod(src)} elements) to {list(dst)}")
        require(element_type(self.input.type) == element_type(self.result.type), "reshape keeps the element type")
        verify_tile_shape(self.result.type, "reshape result")


@irdl_op_definition
class JoinOp(IRDLOperation):
    """Stack two tiles of one type along a new last dimension of size 2."""

    name = "tt.join"
    T: ClassVar = VarConstraint("T", AnyAttr())
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        t = SSAValue.get(lhs).type
        super().__init__(operands=[lhs, rhs], result_types=[TensorType(element_type(t), [*shape_of(t), 2])])

    def verify_(self) -> None:
        expected = tile_type(element_type(self.lhs.type), [*shape_of(self.lhs.type), 2])
        require(self.result.type == expected, "join result must add a last dimension of 2")
        verify_tile_shape(self.result.type, "join result")


@irdl_op_definition
class SplitOp(IRDLOperation):
    """The two halves of a tile whose last dimension is 2 (the inverse of `tt.join`)."""

    name = "tt.split"
    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(TensorType)
    lhs = result_def(T)
    rhs = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($lhs)"

    def __init__(self, input: SSAValue | Operation):
        t = SSAValue.get(input).type
        half = tile_type(t.element_type, shape_of(t)[:-1])
        super().__init__(operands=[input], result_types=[half, half])

    def verify_(self) -> None:
        shape = shape_of(self.input.type)
        require(shape[-1] == 2, f"split needs a last dimension of 2, got shape {list(shape)}")
        expected = tile_type(element_type(self.input.type), shape[:-1])
        require(self.lhs.type == expected == self.rhs.type, "split results drop the last dimension")


@irdl_op_definition
class HintOp(IRDLOperation):
    """`input` unchanged, with what the user promises about it (`tl.multiple_of` and friends)."""

    name = "tt.hint"
    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(T)
    divisibility = opt_prop_def(IntegerAttr[I32])
    """The value (each element, or each first of a contiguous run) is a multiple of this."""
    contiguity = opt_prop_def(IntegerAttr[I32])
    """Runs of this many elements along the last dimension are consecutive."""
    constancy = opt_prop_def(IntegerAttr[I32])
    """Runs of this many elements along the last dimension are equal."""
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue | Operation, **facts: int):
        props = {k: IntegerAttr(v, 32) for k, v in facts.items()}
        super().__init__(operands=[input], properties=props, result_types=[SSAValue.get(input).type])

    def verify_(self) -> None:
        for attr in (self.divisibility, self.contiguity, self.constancy):
            if attr is not None:
                n = attr.value.data
                require(n >= 1 and not n & (n - 1), f"hints are powers of two, got {n}")


SHAPE_OPS = (TransOp, ReshapeOp, JoinOp, SplitOp, HintOp)
