"""Index-remapping ops of the `tta` dialect: strided windows (slices, flips, pads) and concatenation.

`tta.slice` is the one op behind basic slicing, `np.flip` and `np.pad`: result element `i` (per dim) is
input element `start + i * step`, and where that index leaves the input the result reads `fill` (a
constant; without one those elements are unspecified, for a consumer that never reads them:
`tta.concatenate`'s parts after `tinyton-concatenate-to-slices`). Fusion treats it as index arithmetic
(tinyton/rewrites/remap.py pushes it up through elementwise producers to the arrays read from memory,
where it is a `View` with an offset and bounds, tinyton/analysis/domain.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I32,
    I64,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_types import element_type, require, shape_of
from tinyton.dialects.tta_shapes import (
    ShapeError,
    array_type,
    checked,
    dtype_name,
    expect_result,
    normalize_axis,
    verify_axis,
    verify_value,
)


def inside_range(start: int, step: int, count: int, extent: int) -> tuple[int, int]:
    """The result indices `[lo, hi)` of a window (`start + i * step`, `0 <= i < count`) that fall inside
    `[0, extent)`; `lo == hi` when none does."""
    if step == 0:
        return (0, count) if 0 <= start < extent and count else (0, 0)
    if step > 0:
        lo, hi = -(start // step), -((start - extent) // step)  # ceil(-start / step), ceil((extent - start) / step)
    else:
        s = -step
        lo, hi = (start - extent) // s + 1, start // s + 1
    lo, hi = max(lo, 0), min(hi, count)
    return (lo, hi) if lo < hi else (0, 0)


def concatenate_shape(shapes: Sequence[Sequence[int]], axis: int) -> tuple[int, ...]:
    """`np.concatenate` of arrays of `shapes` along `axis` (NumPy's messages)."""
    if not shapes:
        raise ShapeError("need at least one array to concatenate")
    first = shapes[0]
    if not first:
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, len(first))
    for i, s in enumerate(shapes[1:], 1):
        if len(s) != len(first):
            raise ShapeError(
                "all the input array dimensions except for the concatenation axis must match exactly, but "
                f"the array at index 0 has {len(first)} dimension(s) and the array at index {i} has {len(s)} "
                "dimension(s)"
            )
        for d, (a, b) in enumerate(zip(first, s)):
            if d != axis and a != b:
                raise ShapeError(
                    "all the input array dimensions except for the concatenation axis must match exactly, but "
                    f"along dimension {d}, the array at index 0 has size {a} and the array at index {i} has size {b}"
                )
    return tuple(sum(s[axis] for s in shapes) if d == axis else n for d, n in enumerate(first))


class Windowed:
    """An op with a window per dim in its `start` and `step` properties (`tta.slice`, `tta.put`), read as tuples."""

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(self.start.get_values())

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(self.step.get_values())


@irdl_op_definition
class SliceOp(Windowed, IRDLOperation):
    """A strided window: result[i] = input[start + i * step] per dim (steps may be negative, or 0: one
    element repeated); indices
    outside the input read `fill` (`np.pad`), or are unspecified without one (`tta.concatenate`'s parts)."""

    name = "tta.slice"
    input = operand_def(TensorType)
    start = prop_def(DenseArrayBase[I64])
    step = prop_def(DenseArrayBase[I64])
    fill = opt_prop_def(IntegerAttr | FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `start` `=` $start `step` `=` $step (`fill` $fill^)? attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, start: Sequence[int], step: Sequence[int],
                 shape: Sequence[int], fill: IntegerAttr | FloatAttr | None = None):
        t = SSAValue.get(input).type
        props: dict[str, Attribute] = {
            "start": DenseArrayBase.from_list(i64, [int(s) for s in start]),
            "step": DenseArrayBase.from_list(i64, [int(s) for s in step]),
        }
        if fill is not None:
            props["fill"] = fill
        super().__init__(operands=[input], properties=props, result_types=[array_type(element_type(t), shape)])

    @property
    def fill_value(self) -> bool | int | float | None:
        return None if self.fill is None else self.fill.value.data

    def inside(self) -> tuple[tuple[int, int], ...]:
        """Per dim, the result indices `[lo, hi)` that read the input."""
        out, src = shape_of(self.result.type), shape_of(self.input.type)
        return tuple(inside_range(s, t, n, m) for s, t, n, m in zip(self.starts, self.steps, out, src))

    @property
    def pads(self) -> bool:
        """Whether some result element lies outside the input."""
        return any((lo, hi) != (0, n) for (lo, hi), n in zip(self.inside(), shape_of(self.result.type)) if n)

    def verify_(self) -> None:
        verify_value("slice input", self.input.type, moved=True)
        src, out = shape_of(self.input.type), shape_of(self.result.type)
        require(len(self.starts) == len(self.steps) == len(src) == len(out),
                f"tta.slice takes one start and step per dim of its rank-{len(src)} input and result")
        require(element_type(self.input.type) == element_type(self.result.type), "tta.slice keeps the element type")
        if self.fill is not None:
            require(self.fill.type == element_type(self.input.type),
                    f"tta.slice fill must be a {dtype_name(self.input.type)} constant")


@irdl_op_definition
class ConcatenateOp(IRDLOperation):
    """`np.concatenate(inputs, axis)` (`axis` non-negative); inputs share the element type."""

    name = "tta.concatenate"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue | Operation], axis: int):
        values = [SSAValue.get(v) for v in inputs]
        shape = concatenate_shape([shape_of(v.type) for v in values], axis)
        super().__init__(
            operands=[values],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[array_type(element_type(values[0].type), shape)],
        )

    def verify_(self) -> None:
        require(len(self.inputs) > 0, "need at least one array to concatenate")
        for i, v in enumerate(self.inputs):
            verify_value(f"input {i}", v.type, moved=True)
        first = element_type(self.inputs[0].type)
        require(all(element_type(v.type) == first for v in self.inputs),
                "tta.concatenate inputs must share one element type (insert tta.cast)")
        shapes = [shape_of(v.type) for v in self.inputs]
        verify_axis(self.axis.value.data, len(shapes[0]))
        expect_result(self, array_type(first, checked(concatenate_shape, shapes, self.axis.value.data)))
