"""Debugging ops of the `tt` dialect: `tt.assert` (`tl.device_assert`) and `tt.print` (`tl.device_print`).

Both have side effects, so no pass removes or reorders them across memory ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BoolAttr, StringAttr, i1
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryWriteEffect

from tinyton.dialects.tt_types import element_type, require


@irdl_op_definition
class AssertOp(IRDLOperation):
    """Stop the kernel with `message` if an element of `condition` is false (the simulator names it)."""

    name = "tt.assert"
    condition = operand_def()
    message = prop_def(StringAttr)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$condition `,` $message attr-dict `:` type($condition)"

    def __init__(self, condition: SSAValue | Operation, message: str):
        super().__init__(operands=[condition], properties={"message": StringAttr(message)})

    def verify_(self) -> None:
        require(element_type(self.condition.type) == i1, "assert takes an i1 condition")


@irdl_op_definition
class PrintOp(IRDLOperation):
    """Print `prefix` and every element of each value (with the program id and the element's index)."""

    name = "tt.print"
    prefix = prop_def(StringAttr)
    hex = prop_def(BoolAttr)
    values = var_operand_def()
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$prefix (`,` $values^ `:` type($values))? attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, prefix: str, values: Sequence[SSAValue | Operation], hex: bool = False):
        super().__init__(
            operands=[list(values)], properties={"prefix": StringAttr(prefix), "hex": BoolAttr.from_bool(hex)}
        )


DEBUG_OPS = (AssertOp, PrintOp)
