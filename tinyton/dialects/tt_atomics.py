"""Atomic read-modify-write ops of the `tt` dialect, the barrier of `tl.debug_barrier`, and the grid barrier.

`tt.atomic_rmw` applies `kind` (add, max, min, and, or, xor, xchg) to each active lane's element and gives
the element's old value; `tt.atomic_cas` stores `val` where the element equals `cmp` and gives the old value.
Both carry Triton's memory ordering (`sem`) and scope (`scope`), which the lowering writes into the PTX
`atom` instruction. A lane whose mask is false does nothing (its result is unspecified; the simulator gives
0). A scalar atomic runs once per program.

`tt.grid_barrier` waits until every program of a group (the programs of the launch sharing one counter) has
reached it (one kernel over split rows: partials, then their combination per row, `lowering/fusion/grid.py`);
only a launch whose programs are all resident at once may use it.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I32, Float16Type, IntegerAttr, StringAttr, i1, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from tinyton.dialects.tt_types import (
    element_type,
    is_float,
    is_int,
    is_pointer,
    require,
    shape_of,
    tile_type,
    type_name,
)

RMW_KINDS = ("add", "max", "min", "and", "or", "xor", "xchg")
SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")
BITWISE_KINDS = ("and", "or", "xor")


class _AtomicOp(IRDLOperation):
    sem = prop_def(StringAttr)
    scope = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    VALUES: ClassVar[tuple[str, ...]]
    """Names of the value operands, which have the pointee's type and the pointer's shape."""

    def _verify_common(self, ptr: SSAValue) -> Attribute:
        require(is_pointer(ptr.type), f"{self.name} needs pointers, got {type_name(ptr.type)}")
        require(self.sem.data in SEMANTICS, f"sem must be one of {', '.join(SEMANTICS)}, got {self.sem.data!r}")
        require(self.scope.data in SCOPES, f"scope must be one of {', '.join(SCOPES)}, got {self.scope.data!r}")
        expected = tile_type(element_type(ptr.type).pointee, shape_of(ptr.type))
        for name in self.VALUES:
            value = getattr(self, name)
            require(value.type == expected, f"{name} must be {type_name(expected)}, got {type_name(value.type)}")
        require(self.results[0].type == expected, f"{self.name} result must be {type_name(expected)}")
        elem = element_type(expected)
        require(elem != i1 and (is_int(elem) or is_float(elem)), f"{self.name} needs numbers, got {type_name(elem)}")
        return elem


@irdl_op_definition
class AtomicRMWOp(_AtomicOp):
    """`old = *ptr; *ptr = old <kind> val` per active lane, atomically; gives `old`."""

    name = "tt.atomic_rmw"
    T: ClassVar = VarConstraint("T", AnyAttr())
    kind = prop_def(StringAttr)
    ptr = operand_def()
    val = operand_def(T)
    mask = opt_operand_def()
    result = result_def(T)
    VALUES: ClassVar[tuple[str, ...]] = ("val",)
    assembly_format = (
        "$kind `,` $ptr `,` $val (`mask` $mask^)? attr-dict `:` type($ptr) `,` type($val) (`,` type($mask)^)?"
    )

    def __init__(
        self,
        kind: str,
        ptr: SSAValue | Operation,
        val: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        sem: str = "acq_rel",
        scope: str = "gpu",
    ):
        super().__init__(
            operands=[ptr, val, [mask] if mask else []],
            properties={"kind": StringAttr(kind), "sem": StringAttr(sem), "scope": StringAttr(scope)},
            result_types=[SSAValue.get(val).type],
        )

    def verify_(self) -> None:
        elem = self._verify_common(self.ptr)
        kind = self.kind.data
        require(kind in RMW_KINDS, f"kind must be one of {', '.join(RMW_KINDS)}, got {kind!r}")
        require(not (kind in BITWISE_KINDS and is_float(elem)), f"atomic {kind} needs integers, got {type_name(elem)}")
        require(
            not (isinstance(elem, Float16Type) and kind not in ("add", "xchg")),
            f"atomic {kind} on f16 is not supported (add and xchg are)",
        )
        if self.mask is not None:
            want = tile_type(i1, shape_of(self.ptr.type))
            require(self.mask.type == want, f"mask must be {type_name(want)}, got {type_name(self.mask.type)}")


@irdl_op_definition
class AtomicCASOp(_AtomicOp):
    """`old = *ptr; *ptr = old == cmp ? val : old` per lane, atomically; gives `old` (no mask, as Triton)."""

    name = "tt.atomic_cas"
    T: ClassVar = VarConstraint("T", AnyAttr())
    ptr = operand_def()
    cmp = operand_def(T)
    val = operand_def(T)
    result = result_def(T)
    VALUES: ClassVar[tuple[str, ...]] = ("cmp", "val")
    assembly_format = "$ptr `,` $cmp `,` $val attr-dict `:` type($ptr) `,` type($val)"

    def __init__(
        self,
        ptr: SSAValue | Operation,
        cmp: SSAValue | Operation,
        val: SSAValue | Operation,
        sem: str = "acq_rel",
        scope: str = "gpu",
    ):
        super().__init__(
            operands=[ptr, cmp, val],
            properties={"sem": StringAttr(sem), "scope": StringAttr(scope)},
            result_types=[SSAValue.get(val).type],
        )

    def verify_(self) -> None:
        self._verify_common(self.ptr)


@irdl_op_definition
class DebugBarrierOp(IRDLOperation):
    """All threads of the program wait here (`bar.sync`); `tl.debug_barrier()`."""

    name = "tt.debug_barrier"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "attr-dict"


@irdl_op_definition
class GridBarrierOp(IRDLOperation):
    """The `programs` programs of the launch that arrive with one `counter` wait here until all of them have
    arrived; the writes of each before it are visible to all after it. Exactly one of them is the `leader`.
    `counter` points to one i32 that is 0 before the first launch using it and has its low 31 bits back at 0
    after each barrier (the leader adds 2**31 - (programs - 1), the others 1, and each waits for bit 31 to
    flip), so consecutive launches reuse it without clearing it. All programs must be resident at once (a
    cooperative launch), or the kernel hangs."""

    name = "tt.grid_barrier"
    counter = operand_def()
    leader = operand_def(i1)
    programs = prop_def(IntegerAttr[I32])
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$counter `,` $leader `programs` $programs attr-dict `:` type($counter)"

    def __init__(self, counter: SSAValue | Operation, leader: SSAValue | Operation, programs: int):
        super().__init__(operands=[counter, leader], properties={"programs": IntegerAttr(programs, 32)})

    def verify_(self) -> None:
        t = self.counter.type
        ok = is_pointer(t) and not shape_of(t) and element_type(t).pointee == i32
        require(ok, f"tt.grid_barrier needs a scalar !tt.ptr<i32>, got {type_name(t)}")
        require(self.programs.value.data >= 1, "tt.grid_barrier needs programs >= 1")


ATOMIC_OPS = (AtomicRMWOp, AtomicCASOp, DebugBarrierOp, GridBarrierOp)
