"""Reductions and scans with a combine region: `tt.reduce` and `tt.scan` (Triton's `tl.reduce` and
`tl.associative_scan`).

Both take one or more tiles of one shape and a region whose block has two scalar arguments per input
(the left operands, then the right ones) and ends in `tt.combine_yield` with one scalar per input. The
combine must be associative; reductions may combine in any order (the GPU's tree), scans keep the left
operand earlier along the axis (later with `reverse`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I32, BoolAttr, IntegerAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import (
    HasParent,
    IsTerminator,
    Pure,
    RecursivelySpeculatable,
    RecursiveMemoryEffect,
)

from tinyton.dialects.tt_types import (
    element_type,
    require,
    shape_of,
    tile_type,
    type_name,
)


class _CombineOp(IRDLOperation):
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    combine = region_def("single_block")
    outputs = var_result_def()
    traits = traits_def(Pure(), RecursiveMemoryEffect(), RecursivelySpeculatable())

    def result_shape(self) -> list[int]:
        raise NotImplementedError

    def _verify_combine(self) -> None:
        elems = [element_type(v.type) for v in self.inputs]
        args = [a.type for a in self.combine.block.args]
        require(
            args == elems + elems,
            f"{self.name} combine takes two scalars per input: {[type_name(e) for e in elems] * 2}",
        )
        last = self.combine.block.last_op
        require(isinstance(last, CombineYieldOp), f"{self.name} combine must end in tt.combine_yield")
        require([v.type for v in last.operands] == elems, f"{self.name} combine must yield one scalar per input")

    def verify_(self) -> None:
        require(len(self.inputs) >= 1, f"{self.name} needs inputs")
        shape = shape_of(self.inputs[0].type)
        require(all(shape_of(v.type) == shape for v in self.inputs), f"{self.name} inputs must have one shape")
        require(0 <= self.axis.value.data < len(shape), f"axis {self.axis.value.data} out of range")
        for v, r in zip(self.inputs, self.outputs, strict=True):
            expected = tile_type(element_type(v.type), self.result_shape())
            require(r.type == expected, f"{self.name} result must be {type_name(expected)}")
        self._verify_combine()


def _combine_block(elements: Sequence[Attribute]) -> Block:
    return Block(arg_types=[*elements, *elements])


@irdl_op_definition
class ReduceOp(_CombineOp):
    """Reduce tiles along `axis` with the combine region; rank-1 inputs reduce to scalars."""

    name = "tt.reduce"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, combine: Block):
        shape = [d for i, d in enumerate(shape_of(inputs[0].type)) if i != axis]
        super().__init__(
            operands=[list(inputs)],
            properties={"axis": IntegerAttr(axis, 32)},
            regions=[Region(combine)],
            result_types=[[tile_type(element_type(v.type), shape) for v in inputs]],
        )

    def result_shape(self) -> list[int]:
        return [d for i, d in enumerate(shape_of(self.inputs[0].type)) if i != self.axis.value.data]

    @staticmethod
    def block_for(inputs: Sequence[SSAValue]) -> Block:
        """An empty combine block for `inputs` (two scalar arguments per input)."""
        return _combine_block([element_type(v.type) for v in inputs])


@irdl_op_definition
class ScanOp(_CombineOp):
    """Inclusive prefix combination along `axis`; `reverse` scans from the end."""

    name = "tt.scan"
    reverse = prop_def(BoolAttr)

    def __init__(self, inputs: Sequence[SSAValue], axis: int, combine: Block, reverse: bool = False):
        super().__init__(
            operands=[list(inputs)],
            properties={"axis": IntegerAttr(axis, 32), "reverse": BoolAttr.from_bool(reverse)},
            regions=[Region(combine)],
            result_types=[[v.type for v in inputs]],
        )

    def result_shape(self) -> list[int]:
        return list(shape_of(self.inputs[0].type))

    block_for = ReduceOp.block_for


@irdl_op_definition
class CombineYieldOp(IRDLOperation):
    """The combined scalars of a `tt.reduce` / `tt.scan` combine region."""

    name = "tt.combine_yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(ReduceOp, ScanOp), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


COMBINE_OPS = (ReduceOp, ScanOp, CombineYieldOp)
