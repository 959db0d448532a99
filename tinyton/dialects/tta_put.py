"""`tta.put`: NumPy's assignment `x[key] = value` as a value, the array with some elements replaced.

Result element `j` is `value[i]` where `j` is the window position of `i` (per dim `start + i * step`; along
`axis`, when an index array is given, `index[i]`, negative indices counting from the end), and `dest[j]`
elsewhere. The tracer (tinyton/frontend/array_assign.py) makes the assigned array's Python object hold the
result, so later reads see the new value; an array program that assigns into one of its input arrays
updates that input in place (the function's trailing results, `tta.updates`).

Fusion keeps it a store: the put's kernel writes the values into its destination's buffer, which the put's
result shares (tinyton/rewrites/in_place.py makes every other reader of the destination run before it), so
updating one row of a large array costs one row, not a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I32,
    I64,
    DenseArrayBase,
    IntegerAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_types import element_type, require, shape_of
from tinyton.dialects.tta_index import Windowed
from tinyton.dialects.tta_shapes import dtype_name, verify_value

UPDATES = "tta.updates"
"""Attribute of a program's func: the input each trailing result is written back to (an assignment into an
input array), as an i64 array; those results are not returned to the caller."""


@irdl_op_definition
class PutOp(Windowed, IRDLOperation):
    """`dest[key] = value`: `dest` with the window `start + i * step` (and `index[i]` along `axis`) holding
    `value`, whose shape is the window's."""

    name = "tta.put"
    T: ClassVar = VarConstraint("T", base(TensorType))
    dest = operand_def(T)
    value = operand_def(TensorType)
    index = opt_operand_def(TensorType)
    start = prop_def(DenseArrayBase[I64])
    step = prop_def(DenseArrayBase[I64])
    axis = opt_prop_def(IntegerAttr[I32])
    result = result_def(T)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$dest `[` ($index^ `:` type($index))? `]` `=` $value `start` `=` $start `step` `=` $step"
        " (`axis` $axis^)? attr-dict `:` type($dest) `,` type($value)"
    )

    def __init__(self, dest: SSAValue, value: SSAValue, start: Sequence[int], step: Sequence[int],
                 index: SSAValue | None = None, axis: int | None = None):
        props = {
            "start": DenseArrayBase.from_list(i64, [int(s) for s in start]),
            "step": DenseArrayBase.from_list(i64, [int(s) for s in step]),
        }
        if axis is not None:
            props["axis"] = IntegerAttr(axis, i32)
        super().__init__(operands=[dest, value, [] if index is None else [index]], properties=props,
                         result_types=[SSAValue.get(dest).type])

    @property
    def index_axis(self) -> int | None:
        return None if self.axis is None else self.axis.value.data

    def verify_(self) -> None:
        verify_value("put destination", self.dest.type, moved=True)
        dest, value = shape_of(self.dest.type), shape_of(self.value.type)
        require(element_type(self.value.type) == element_type(self.dest.type),
                f"tta.put value must be {dtype_name(self.dest.type)} (insert tta.cast)")
        require(len(self.starts) == len(self.steps) == len(dest) == len(value),
                f"tta.put takes one start and step per dim of its rank-{len(dest)} destination and value")
        axis = self.index_axis
        require((axis is None) == (self.index is None), "tta.put takes an index array exactly when it has an axis")
        if self.index is not None:
            require(element_type(self.index.type) == i32 and len(shape_of(self.index.type)) == 1,
                    "tta.put indices are a 1-d int32 array")
            require(0 <= axis < len(dest) and value[axis] == shape_of(self.index.type)[0],
                    f"tta.put value dim {axis} must have one element per index")
        for d, (start, step, n, extent) in enumerate(zip(self.starts, self.steps, value, dest)):
            if d == axis or n == 0:
                continue
            last = start + (n - 1) * step
            require(0 <= start < extent and 0 <= last < extent,
                    f"tta.put window of dim {d} leaves the destination (start {start}, step {step}, {n} elements, "
                    f"extent {extent})")
