"""Memory ops of the `tt` dialect: pointer arithmetic (`tt.addptr`) and the loads and stores through tiles of
pointers (`tt.load`, `tt.store`), with Triton's cache and eviction hints.

A lane whose mask is false reads nothing (`tt.load` gives `other` there) or writes nothing. A volatile load is
never removed, merged or hoisted (`LoadEffects`); the others are reads that CSE may merge.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import StringAttr, UnitAttr, i1, i32, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind, MemoryWriteEffect, Pure

from tinyton.dialects.tt_types import element_type, is_pointer, require, shape_of, tile_type, type_name


@irdl_op_definition
class AddPtrOp(IRDLOperation):
    """Offset pointers by element counts (not bytes): `ptr + offsets`."""

    name = "tt.addptr"
    T: ClassVar = VarConstraint("T", AnyAttr())
    ptr = operand_def(T)
    offset = operand_def()
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset)"

    def __init__(self, ptr: SSAValue | Operation, offset: SSAValue | Operation):
        super().__init__(operands=[ptr, offset], result_types=[SSAValue.get(ptr).type])

    def verify_(self) -> None:
        require(is_pointer(self.ptr.type), "addptr needs pointers as its first operand")
        require(element_type(self.offset.type) in (i32, i64), "addptr offsets must be i32 or i64")
        require(
            shape_of(self.ptr.type) == shape_of(self.offset.type),
            "addptr pointer and offset shapes must match (splat or broadcast first)",
        )


def _verify_mask(op: Operation, ptr: SSAValue, mask: SSAValue | None) -> None:
    if mask is not None:
        require(
            mask.type == tile_type(i1, shape_of(ptr.type)),
            lambda: f"mask must be {type_name(tile_type(i1, shape_of(ptr.type)))}, got {type_name(mask.type)}",
        )


class LoadEffects(MemoryEffect):
    """A load reads memory; a volatile one also counts as a write (as Triton's), so that no pass removes,
    merges or hoists it: a loop spinning on a volatile load must read memory on every iteration."""

    @classmethod
    def get_effects(cls, op: Operation) -> frozenset[EffectInstance]:
        kinds = (MemoryEffectKind.READ, MemoryEffectKind.WRITE) if op.properties.get("volatile") else (MemoryEffectKind.READ,)
        return frozenset(EffectInstance(kind) for kind in kinds)


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read a tile through a tile of pointers; lanes where `mask` is false read nothing and give `other`."""

    name = "tt.load"
    ptr = operand_def()
    mask = opt_operand_def()
    other = opt_operand_def()
    cache = opt_prop_def(StringAttr)
    """PTX cache operator (".ca", ".cg", ".cv"), from Triton's `cache_modifier`."""
    evict = opt_prop_def(StringAttr)
    """"evict_first" or "evict_last" (PTX L1 eviction priority), from Triton's `eviction_policy`."""
    volatile = opt_prop_def(UnitAttr)
    """Triton's `volatile=True`: `ld.volatile` on the GPU, never removed, merged or hoisted (LoadEffects)."""
    result = result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    traits = traits_def(LoadEffects())
    assembly_format = (
        "$ptr (`mask` $mask^)? (`other` $other^)? attr-dict `:` type($ptr) (`,` type($mask)^)? "
        "(`,` type($other)^)? `->` type($result)"
    )

    def __init__(
        self,
        ptr: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        other: SSAValue | Operation | None = None,
        volatile: bool = False,
        **hints: str,
    ):
        pt = SSAValue.get(ptr).type
        result = tile_type(element_type(pt).pointee, shape_of(pt)) if is_pointer(pt) else pt
        properties: dict[str, Attribute] = {k: StringAttr(v) for k, v in hints.items()}
        if volatile:
            properties["volatile"] = UnitAttr()
        super().__init__(
            operands=[ptr, [mask] if mask else [], [other] if other else []],
            result_types=[result],
            properties=properties,
        )

    def verify_(self) -> None:
        require(is_pointer(self.ptr.type), lambda: f"load needs pointers, got {type_name(self.ptr.type)}")
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        require(self.result.type == expected, lambda: f"load result must be {type_name(expected)}")
        _verify_mask(self, self.ptr, self.mask)
        if self.other is not None:
            require(self.other.type == expected, lambda: f"other must be {type_name(expected)}")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Write a tile through a tile of pointers; lanes where `mask` is false write nothing."""

    name = "tt.store"
    ptr = operand_def()
    value = operand_def()
    mask = opt_operand_def()
    cache = opt_prop_def(StringAttr)
    """PTX cache operator (".wb", ".cg", ".cs", ".wt"), from Triton's `cache_modifier`."""
    evict = opt_prop_def(StringAttr)
    """"evict_first" or "evict_last", from Triton's `eviction_policy`."""
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$ptr `,` $value (`mask` $mask^)? attr-dict `:` type($ptr) `,` type($value) (`,` type($mask)^)?"

    def __init__(
        self,
        ptr: SSAValue | Operation,
        value: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        **hints: str,
    ):
        super().__init__(
            operands=[ptr, value, [mask] if mask else []], properties={k: StringAttr(v) for k, v in hints.items()}
        )

    def verify_(self) -> None:
        require(is_pointer(self.ptr.type), lambda: f"store needs pointers, got {type_name(self.ptr.type)}")
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        require(
            self.value.type == expected,
            lambda: f"stored value must be {type_name(expected)}, got {type_name(self.value.type)}",
        )
        _verify_mask(self, self.ptr, self.mask)


MEMORY_OPS = (AddPtrOp, LoadOp, StoreOp)
