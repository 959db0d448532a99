"""Ops of the `tt` dialect that move or count elements by value: `tt.gather`, `tt.histogram`, and
`tt.inline_asm` (Triton's `tl.gather`, `tl.histogram`, `tl.inline_asm_elementwise`).

`tt.gather %src[%index] axis = a` reads, for every position of `%index`, the element of `%src` at the same
position with coordinate `a` replaced by the index there (`numpy.take_along_axis`); the index tile has the
source's rank and its sizes except along `a`. `tt.histogram` counts, per bin `i` of its i32 result, the
elements equal to `i` (under the optional mask); other values count nowhere. `tt.inline_asm` runs PTX on
every element of its operands (broadcast to one shape), `pack` elements per instance of the asm.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I32,
    BoolAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    i1,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_types import (
    element_type,
    is_int,
    require,
    shape_of,
    tile_type,
    type_name,
)


@irdl_op_definition
class GatherOp(IRDLOperation):
    """`result[p] = src[p with p[axis] = index[p]]` for every position `p` of `index`."""

    name = "tt.gather"
    src = operand_def(TensorType)
    index = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$src `[` $index `]` `axis` `=` $axis attr-dict `:` type($src) `,` type($index) `->` type($result)"
    )

    def __init__(self, src: SSAValue | Operation, index: SSAValue | Operation, axis: int):
        src_type, index_type = SSAValue.get(src).type, SSAValue.get(index).type
        super().__init__(
            operands=[src, index],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[tile_type(element_type(src_type), shape_of(index_type))],
        )

    def verify_(self) -> None:
        src, index, axis = shape_of(self.src.type), shape_of(self.index.type), self.axis.value.data
        require(is_int(element_type(self.index.type)), "tt.gather indices must be integers")
        require(len(src) == len(index), f"tt.gather index rank {len(index)} must equal the source rank {len(src)}")
        require(0 <= axis < len(src), f"tt.gather axis {axis} out of range")
        require(
            all(s == i for d, (s, i) in enumerate(zip(src, index)) if d != axis),
            f"tt.gather index shape {index} must equal the source shape {src} except along axis {axis}",
        )
        expected = tile_type(element_type(self.src.type), index)
        require(self.result.type == expected, f"tt.gather result must be {type_name(expected)}")


@irdl_op_definition
class HistogramOp(IRDLOperation):
    """Per bin `i` of the 1-D i32 result, how many elements (with a true mask) equal `i`."""

    name = "tt.histogram"
    src = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = "$src (`mask` $mask^ `:` type($mask))? attr-dict `:` type($src) `->` type($result)"

    def __init__(self, src: SSAValue | Operation, num_bins: int, mask: SSAValue | Operation | None = None):
        super().__init__(operands=[src, mask], result_types=[tile_type(i32, [num_bins])])

    def verify_(self) -> None:
        require(is_int(element_type(self.src.type)), "tt.histogram counts integers")
        require(len(shape_of(self.result.type)) == 1 and element_type(self.result.type) == i32,
                "tt.histogram gives a 1-D i32 tile")
        if self.mask is not None:
            require(self.mask.type == tile_type(i1, shape_of(self.src.type)), "tt.histogram mask must be i1 like src")


def _bits(elem: Attribute) -> int:
    return getattr(elem, "bitwidth", 64)  # pointers: 64-bit registers


@irdl_op_definition
class InlineAsmOp(IRDLOperation):
    """`asm` (PTX, `$0...` the results then the operands, as LLVM's inline asm) on every element of the
    operands, `pack` consecutive elements of a thread per instance; `pure` asm may be removed or merged."""

    name = "tt.inline_asm"
    args = var_operand_def()
    asm = prop_def(StringAttr)
    constraints = prop_def(StringAttr)
    pure = prop_def(BoolAttr)
    pack = prop_def(IntegerAttr[I32])
    source = opt_prop_def(StringAttr)
    """The user's `file:line`, for the simulator's refusal."""
    outputs = var_result_def()
    assembly_format = "$asm `,` $constraints `(` $args `)` attr-dict `:` functional-type($args, $outputs)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        asm: str,
        constraints: str,
        args: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        pure: bool,
        pack: int,
        source: str | None = None,
    ):
        super().__init__(
            operands=[list(args)],
            properties={
                "asm": StringAttr(asm),
                "constraints": StringAttr(constraints),
                "pure": BoolAttr.from_bool(pure),
                "pack": IntegerAttr(pack, 32),
                "source": StringAttr(source) if source else None,
            },
            result_types=[list(result_types)],
        )

    def verify_(self) -> None:
        shapes = {tuple(shape_of(v.type)) for v in (*self.args, *self.outputs)}
        require(len(shapes) == 1, f"tt.inline_asm operands and results must have one shape, got {sorted(shapes)}")
        pack = self.pack.value.data
        require(pack >= 1, "tt.inline_asm pack must be at least 1")

        def registers(values: Sequence[SSAValue]) -> int:
            return sum(packed_words(_bits(element_type(v.type)), pack)[1] for v in values)

        want = (registers(self.outputs), registers(self.args))
        got = asm_operand_count(self.constraints.data)
        require(
            got == want,
            f"tt.inline_asm constraints {self.constraints.data!r} name {got[0]} outputs and {got[1]} inputs; with "
            f"pack={pack} the asm takes {want[0]} output and {want[1]} input registers (elements narrower than "
            "32 bits share one)",
        )


def packed_words(bitwidth: int, pack: int) -> tuple[int, int]:
    """(elements per register, registers) of one operand or result of a `tt.inline_asm` instance, as
    Triton packs them: elements narrower than 32 bits share 32-bit registers, up to `pack` of them."""
    per_word = min(max(32 // bitwidth, 1), pack)
    return per_word, -(-pack // per_word)


def asm_operand_count(constraints: str) -> tuple[int, int]:
    """(outputs, inputs) named by an LLVM constraint string (clobbers `~{...}` left out)."""
    items = [c.strip() for c in constraints.split(",") if c.strip() and not c.strip().startswith("~")]
    outputs = sum(c.startswith("=") for c in items)
    return outputs, len(items) - outputs


INDEXING_OPS = (GatherOp, HistogramOp, InlineAsmOp)
