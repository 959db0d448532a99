"""
Emitting LLVM ops: the insertion point, a prologue for values computed once per kernel
(constants, thread coordinates), integer arithmetic folded at compile time, blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.dtypes import constant_key

GLOBAL_PTR = llvm.LLVMPointerType(IntAttr(1))
SHARED_PTR = llvm.LLVMPointerType(IntAttr(3))

T = TypeVar("T")


def _wrap(value: int, width: int) -> int:
    """`value` as a `width`-bit two's complement integer."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


INT_OPS: dict[str, tuple[type[Operation], Callable[[int, int], int] | None]] = {
    "add": (llvm.AddOp, lambda a, b: a + b),
    "sub": (llvm.SubOp, lambda a, b: a - b),
    "mul": (llvm.MulOp, lambda a, b: a * b),
    "and": (llvm.AndOp, lambda a, b: a & b),
    "or": (llvm.OrOp, lambda a, b: a | b),
    "xor": (llvm.XOrOp, lambda a, b: a ^ b),
    "shl": (llvm.ShlOp, lambda a, b: a << b),
    "ashr": (llvm.AShrOp, lambda a, b: a >> b),
    "lshr": (llvm.LShrOp, None),
}
"""Integer ops by name, with how to fold them on Python ints (wrapped to the type after)."""
_RIGHT_IDENTITY = {"add": 0, "sub": 0, "mul": 1, "or": 0, "xor": 0, "shl": 0, "ashr": 0, "lshr": 0}
_LEFT_IDENTITY = {"add": 0, "mul": 1, "or": 0, "xor": 0}


class Emitter:
    """Builds the body of `func`, starting in its entry block."""

    def __init__(self, func: llvm.FuncOp):
        self.func = func
        self.ip = InsertPoint.at_end(func.body.block)
        self._markers: list[Operation] = []
        self._known: dict[SSAValue, int] = {}
        self._consts: dict[tuple[object, Attribute], SSAValue] = {}
        self._hoisted: dict[object, object] = {}
        self._prologue_end = self.marker()

    def insert(self, op: Operation) -> Operation:
        Rewriter.insert_op(op, self.ip)
        return op

    def value(self, op: Operation) -> SSAValue:
        return self.insert(op).results[0]

    def hoisted(self, build: Callable[[], T]) -> T:
        """Run `build` with its ops going to the entry block's prologue (so they may only
        use prologue values), where they dominate everything."""
        saved, self.ip = self.ip, InsertPoint.before(self._prologue_end)
        try:
            return build()
        finally:
            self.ip = saved

    def cached(self, key: object, build: Callable[[], T]) -> T:
        """`build()` once per key, in the prologue (thread coordinates, predicates, ...)."""
        if key not in self._hoisted:
            self._hoisted[key] = self.hoisted(build)
        return self._hoisted[key]  # type: ignore[return-value]

    def marker(self) -> Operation:
        """A placeholder at the insertion point, to insert before later; erased by `finish`."""
        marker = self.insert(llvm.UndefOp(i32))
        self._markers.append(marker)
        return marker

    def finish(self) -> None:
        for marker in self._markers:
            marker.detach()
            marker.erase()

    # --- constants and arithmetic -----------------------------------------------------------

    def const(self, value: float, t: Attribute = i32) -> SSAValue:
        """A constant, created once in the prologue."""
        key = constant_key(value, t)
        if key not in self._consts:
            if isinstance(t, AnyFloat):
                attr: Attribute = FloatAttr(float(value), t)
            else:
                value = _wrap(int(value), t.bitwidth) if t.bitwidth > 1 else int(value) & 1
                attr = IntegerAttr(value, t)
            result = self.hoisted(lambda: self.value(llvm.ConstantOp(attr, t)))
            self._consts[key] = result
            if isinstance(t, IntegerType):
                self._known[result] = int(value)
        return self._consts[key]

    def known(self, v: SSAValue) -> int | None:
        """The compile-time value of an integer, if it is a constant."""
        return self._known.get(v)

    def int_op(self, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """Integer `a <kind> b` (an `INT_OPS` name), folded when possible."""
        op_type, fold = INT_OPS[kind]
        ka, kb = self.known(a), self.known(b)
        if fold is not None and ka is not None and kb is not None and a.type.bitwidth > 1:
            return self.const(fold(ka, kb), a.type)
        if kb is not None and _RIGHT_IDENTITY.get(kind) == kb:
            return a
        if ka is not None and _LEFT_IDENTITY.get(kind) == ka:
            return b
        return self.value(op_type(a, b))

    def icmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        flag = llvm.ICmpPredicateFlag(predicate)
        return self.value(llvm.ICmpOp(a, b, IntegerAttr(flag.to_int(), 64)))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return a if a is b else self.value(llvm.SelectOp(cond, a, b))

    def all_of(self, conds: Sequence[SSAValue | None]) -> SSAValue | None:
        """The conjunction of the given i1 values (None: no condition)."""
        present = [c for c in conds if c is not None]
        if not present:
            return None
        out = present[0]
        for c in present[1:]:
            out = self.value(llvm.AndOp(out, c))
        return out

    def gep(self, ptr: SSAValue, index: SSAValue | int, elem: Attribute) -> SSAValue:
        """`ptr + index` elements of type `elem` (the index is sign-extended)."""
        if (index if isinstance(index, int) else self.known(index)) == 0:
            return ptr
        return self.value(llvm.GEPOp.from_mixed_indices(ptr, [index], elem, result_type=ptr.type))

    # --- blocks -------------------------------------------------------------------------------

    def new_block(self, arg_types: Sequence[Attribute] = ()) -> Block:
        block = Block(arg_types=arg_types)
        self.func.body.add_block(block)
        return block

    def move_to(self, block: Block) -> None:
        self.ip = InsertPoint.at_end(block)

    def only_where(self, condition: SSAValue | None, body: Callable[[], object]) -> None:
        """Emit `body` to run in the threads where the i1 `condition` holds (in every thread where it is None),
        for effects one thread of a replicated value must have alone (a print, a store of a replica's bytes)."""
        if condition is None:
            body()
            return
        then, done = self.new_block(), self.new_block()
        self.insert(llvm.CondBrOp(condition, then, [], done, []))
        self.move_to(then)
        body()
        self.insert(llvm.BrOp(done))
        self.move_to(done)
