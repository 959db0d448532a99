"""
Contiguity, divisibility and constancy of integer and pointer tiles, as in Triton's AxisInfo.

The memory lowering uses them to pick the width of vector accesses: a thread may load
`v` elements at once when the addresses are consecutive (contiguity), the first one is
aligned to `v` elements (divisibility) and the mask is the same for all of them (constancy).

Per dimension `d` of a value (scalars count as shape `(1,)`):
- contiguity `c`: along `d`, aligned groups of `c` elements (indices `[k*c, (k+1)*c)`) hold
  consecutive values (pointers: consecutive elements);
- constancy `k`: aligned groups of `k` elements hold one value;
- divisibility `D`: the first element of every contiguity group is a multiple of `D`
  (pointers: in bytes). All three are powers of two.
Plus `nonnegative`: every element is >= 0 (index arithmetic without overflow, as Triton assumes), which
lets a kernel's truncating `//` and `%` (`tt.div`, `tt.rem`) keep the rules of floor division.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from math import gcd

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from tinyton.dialects import tt

MAX_DIVISIBILITY = 1 << 30
"""Divisibility of 0 (and the cap for products)."""

POINTER_ALIGNMENT_ATTR = "tt.divisibility"
_LOOP_ROUNDS = 8
"""Passes over a loop body before loop-carried values are given up on."""


def _pow2_divisor(value: int) -> int:
    return MAX_DIVISIBILITY if value == 0 else min(value & -value, MAX_DIVISIBILITY)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tt.shape_of(value.type) or (1,)


def pointee_bytes(ptr_type: Attribute) -> int:
    """Bytes of the element a pointer (tile) points to; booleans take a byte."""
    return max(1, tt.element_type(ptr_type).pointee.bitwidth // 8)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    value: int | None = None
    """The value of every element, when known at compile time."""
    nonnegative: bool = False

    @staticmethod
    def unknown(shape: Sequence[int]) -> AxisInfo:
        return AxisInfo((1,) * len(shape), (1,) * len(shape), (1,) * len(shape))

    @staticmethod
    def constant(shape: Sequence[int], value: int | None, divisibility: int) -> AxisInfo:
        return AxisInfo((1,) * len(shape), (divisibility,) * len(shape), tuple(shape), value)

    def divisibility_at(self, d: int, group: int, unit: int = 1) -> int:
        """Divisibility of the first element of aligned groups of `group` elements along `d`
        (`unit`: bytes per step, for pointers)."""
        if group >= self.contiguity[d]:
            return self.divisibility[d]
        return min(self.divisibility[d], group * unit)

    def element_divisibility(self) -> int:
        """A power of two dividing every element."""
        return max([1] + [D for c, D in zip(self.contiguity, self.divisibility) if c == 1])


def _add(a: AxisInfo, b: AxisInfo, unit: int = 1, sub: bool = False) -> AxisInfo:
    """`a + b*unit` (pointer + offsets when unit is the element size), or `a - b`."""
    rank = len(a.contiguity)
    contiguity = tuple(
        max(gcd(a.contiguity[d], b.constancy[d]), 1 if sub else gcd(a.constancy[d], b.contiguity[d]))
        for d in range(rank)
    )
    divisibility = tuple(
        gcd(a.divisibility_at(d, contiguity[d], unit), b.divisibility_at(d, contiguity[d]) * unit)
        for d in range(rank)
    )
    value = None
    if a.value is not None and b.value is not None:
        value = a.value - b.value if sub else a.value + b.value * unit
    return AxisInfo(contiguity, divisibility, tuple(map(gcd, a.constancy, b.constancy)), value)


def _mul(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    rank = len(a.contiguity)
    if b.value == 1 or a.value == 1:
        return a if b.value == 1 else b
    divisibility = tuple(
        min(a.divisibility_at(d, 1) * b.divisibility_at(d, 1), MAX_DIVISIBILITY) for d in range(rank)
    )
    value = a.value * b.value if a.value is not None and b.value is not None else None
    return AxisInfo((1,) * rank, divisibility, tuple(map(gcd, a.constancy, b.constancy)), value)


def _floordiv(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """`a // 2**k` keeps runs of equal quotients; other divisors lose everything."""
    rank = len(a.contiguity)
    v = b.value
    if v is None or v <= 0 or v & (v - 1):
        return AxisInfo((1,) * rank, (1,) * rank, tuple(map(gcd, a.constancy, b.constancy)))
    constancy = tuple(
        max(a.constancy[d], min(a.contiguity[d], v, a.divisibility[d])) for d in range(rank)
    )
    divisibility = tuple(max(1, a.divisibility_at(d, 1) // v) for d in range(rank))
    value = a.value // v if a.value is not None else None
    return AxisInfo((1,) * rank, divisibility, constancy, value)


def _mod(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """`a % 2**k` keeps contiguous runs that do not wrap."""
    rank = len(a.contiguity)
    v = b.value
    if v is None or v <= 0 or v & (v - 1):
        return AxisInfo((1,) * rank, (1,) * rank, tuple(map(gcd, a.constancy, b.constancy)))
    contiguity = tuple(min(a.contiguity[d], v, a.divisibility[d]) for d in range(rank))
    divisibility = tuple(min(a.divisibility_at(d, contiguity[d]), v) for d in range(rank))
    value = a.value % v if a.value is not None else None
    return AxisInfo(contiguity, divisibility, a.constancy, value)


def _shift(a: AxisInfo, b: AxisInfo, left: bool) -> AxisInfo:
    if b.value is None or not 0 <= b.value < 31:
        return AxisInfo.unknown(a.contiguity)
    factor = AxisInfo.constant(a.contiguity, 1 << b.value, 1 << b.value)
    return _mul(a, factor) if left else _floordiv(a, factor)


def _compare(op: tt.CmpOp, a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """Constant wherever both sides are. Also (Triton's rule) `x < n` and `x >= n`, with `x`
    consecutive and `n` constant: they flip only at `x = n`, so they are constant over
    aligned groups whose size divides `n` and the first `x` of each group."""
    rank = len(a.contiguity)
    constancy = list(map(gcd, a.constancy, b.constancy))
    pred = op.predicate.data
    for x, n, flips_at_n in ((a, b, pred in ("lt", "ge")), (b, a, pred in ("gt", "le"))):
        for d in range(rank):
            if flips_at_n and x.contiguity[d] > 1:
                group = min(x.contiguity[d], x.divisibility[d], n.divisibility[d], n.constancy[d])
                constancy[d] = max(constancy[d], group)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(constancy))


def _select(c: AxisInfo, a: AxisInfo, b: AxisInfo) -> AxisInfo:
    rank = len(a.contiguity)
    contiguity = tuple(min(c.constancy[d], a.contiguity[d], b.contiguity[d]) for d in range(rank))
    divisibility = tuple(
        gcd(a.divisibility_at(d, contiguity[d]), b.divisibility_at(d, contiguity[d])) for d in range(rank)
    )
    constancy = tuple(gcd(gcd(c.constancy[d], a.constancy[d]), b.constancy[d]) for d in range(rank))
    return AxisInfo(contiguity, divisibility, constancy)


def _constancy_only(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """`and`/`or`/`xor` (combined masks), a division of possibly negative values: only constancy survives."""
    rank = len(a.contiguity)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(map(gcd, a.constancy, b.constancy)))


def _join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds for a value that is either `a` or `b`."""
    contiguity = tuple(map(min, a.contiguity, b.contiguity))
    divisibility = tuple(
        min(a.divisibility_at(d, c), b.divisibility_at(d, c)) for d, c in enumerate(contiguity)
    )
    return AxisInfo(
        contiguity,
        divisibility,
        tuple(map(min, a.constancy, b.constancy)),
        a.value if a.value == b.value else None,
        a.nonnegative and b.nonnegative,
    )


def _truncating(floor_rule: Callable[[AxisInfo, AxisInfo], AxisInfo]) -> Callable[[AxisInfo, AxisInfo], AxisInfo]:
    """`tt.div`/`tt.rem` round toward zero: like floor division on a non-negative dividend only."""
    return lambda a, b: floor_rule(a, b) if a.nonnegative else _constancy_only(a, b)


_BINARY: dict[type[Operation], Callable[[AxisInfo, AxisInfo], AxisInfo]] = {
    tt.AddOp: _add,
    tt.SubOp: lambda a, b: _add(a, b, sub=True),
    tt.MulOp: _mul,
    tt.FloorDivOp: _floordiv,
    tt.ModOp: _mod,
    tt.DivOp: _truncating(_floordiv),
    tt.RemOp: _truncating(_mod),
    tt.ShlOp: lambda a, b: _shift(a, b, left=True),
    tt.ShrOp: lambda a, b: _shift(a, b, left=False),
    tt.AndOp: _constancy_only,
    tt.OrOp: _constancy_only,
    tt.XorOp: _constancy_only,
}


def _nonnegative(op: Operation, operands: Sequence[AxisInfo], result: AxisInfo) -> bool:
    """Whether every element of `op`'s result is >= 0, from its operands' facts."""
    if result.value is not None:
        return result.value >= 0
    match op:
        case tt.ArangeOp():
            return op.start.value.data >= 0
        case tt.ProgramIdOp() | tt.NumProgramsOp():
            return True
        case tt.CastOp():
            return operands[0].nonnegative or tt.element_type(op.input.type).bitwidth == 1
        case tt.ModOp():
            return operands[1].nonnegative
        case tt.RemOp():
            return operands[0].nonnegative
        case tt.SelectOp():
            return operands[1].nonnegative and operands[2].nonnegative
        case tt.DivOp():  # x / 0 is -1
            return operands[0].nonnegative and (operands[1].value or 0) > 0
        case tt.SplatOp() | tt.ExpandDimsOp() | tt.BroadcastOp() | tt.TransOp() | tt.AddOp() | tt.MulOp() | tt.FloorDivOp() | tt.ShrOp():
            return all(x.nonnegative for x in operands)
        case tt.HintOp():
            return operands[0].nonnegative
    return False
def _hinted(src: AxisInfo, op: tt.HintOp) -> AxisInfo:
    """`src` with the user's promises (`tl.multiple_of` and friends) for the last dimension."""

    def last(values: tuple[int, ...], attr: IntegerAttr | None) -> tuple[int, ...]:
        return values if attr is None else (*values[:-1], max(values[-1], attr.value.data))

    return AxisInfo(
        last(src.contiguity, op.contiguity),
        last(src.divisibility, op.divisibility),
        last(src.constancy, op.constancy),
        src.value,
        src.nonnegative,
    )


class AxisAnalysis:
    """Forward analysis over a kernel; `info[value]` for every integer or pointer value."""

    def __init__(self, kernel: func.FuncOp):
        self.info: dict[SSAValue, AxisInfo] = {}
        attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
        for i, arg in enumerate(kernel.args):
            hint = attrs[i].data.get(POINTER_ALIGNMENT_ATTR) if i < len(attrs) else None
            div = hint.value.data if isinstance(hint, IntegerAttr) else 1
            if tt.is_pointer(arg.type):
                div = max(div, pointee_bytes(arg.type))
            self.info[arg] = AxisInfo.constant((1,), None, div) if div > 1 else AxisInfo.unknown((1,))
        self._visit_block(kernel.body.block)

    def __getitem__(self, value: SSAValue) -> AxisInfo:
        return self.info.get(value) or AxisInfo.unknown(_shape(value))

    def _visit_block(self, block: Block) -> None:
        for op in block.ops:
            self._visit(op)

    def _visit(self, op: Operation) -> None:
        if isinstance(op, scf.ForOp):
            self._visit_for(op)
            return
        if isinstance(op, scf.WhileOp):  # carried values: nothing known; the regions' own values are
            for region in (op.before_region, op.after_region):
                self._visit_block(region.block)
            return
        if isinstance(op, tt.WarpSpecializeOp):
            for region in op.regions:
                self._visit_block(region.block)
            return
        if isinstance(op, scf.IfOp):
            for region in (op.true_region, op.false_region):
                if region.blocks:
                    self._visit_block(region.block)
            if op.false_region.blocks:
                then_y, else_y = (r.block.last_op for r in (op.true_region, op.false_region))
                for res, a, b in zip(op.results, then_y.operands, else_y.operands):
                    self.info[res] = _join(self[a], self[b])
            return
        if len(op.results) == 1:
            info = self._rule(op)
            if info is not None:
                facts = [self[v] for v in op.operands]
                self.info[op.results[0]] = replace(info, nonnegative=_nonnegative(op, facts, info))

    def _visit_for(self, op: scf.ForOp) -> None:
        """Loop-carried values (pointers bumped each iteration, say) hold what holds for the
        initial value and for every yielded one: iterate the join to a fixpoint."""
        body = op.body.block
        lb, step = self[op.lb], self[op.step]
        div = gcd(lb.element_divisibility(), step.element_divisibility())
        self.info[body.args[0]] = replace(AxisInfo.constant((1,), None, div), nonnegative=lb.nonnegative)
        carried = body.args[1:]
        for arg, init in zip(carried, op.iter_args):
            self.info[arg] = self[init]
        for _ in range(_LOOP_ROUNDS):
            self._visit_block(body)
            joined = [_join(self[arg], self[y]) for arg, y in zip(carried, body.last_op.operands)]
            if joined == [self[arg] for arg in carried]:
                break
            self.info.update(zip(carried, joined))
        else:
            self.info.update((arg, AxisInfo.unknown(_shape(arg))) for arg in carried)
            self._visit_block(body)
        self.info.update(zip(op.results, (self[arg] for arg in carried)))

    def _rule(self, op: Operation) -> AxisInfo | None:
        shape = _shape(op.results[0])
        match op:
            case tt.ConstantOp(value=IntegerAttr() as v):
                return AxisInfo.constant(shape, v.value.data, _pow2_divisor(v.value.data))
            case tt.ArangeOp():
                n = op.end.value.data - op.start.value.data
                return AxisInfo((n,), (_pow2_divisor(op.start.value.data),), (1,))
            case tt.SplatOp():
                src = self[op.input]
                return AxisInfo.constant(shape, src.value, src.element_divisibility())
            case tt.ExpandDimsOp():
                src, axis = self[op.input], op.axis.value.data
                ins = lambda t, x: t[:axis] + (x,) + t[axis:]
                return AxisInfo(
                    ins(src.contiguity, 1),
                    ins(src.divisibility, src.element_divisibility()),
                    ins(src.constancy, 1),
                    src.value,
                )
            case tt.BroadcastOp():
                src = self[op.input]
                old = _shape(op.input)
                constancy = tuple(n if o == 1 else k for o, n, k in zip(old, shape, src.constancy))
                return AxisInfo(src.contiguity, src.divisibility, constancy, src.value)
            case tt.TransOp():  # each dimension keeps its facts (a column-major tile loaded as its transpose)
                src, order = self[op.input], op.order.get_values()
                return AxisInfo(*(tuple(t[d] for d in order) for t in (src.contiguity, src.divisibility, src.constancy)),
                                src.value)  # fmt: skip
            case tt.AddPtrOp():
                return _add(self[op.ptr], self[op.offset], unit=pointee_bytes(op.ptr.type))
            case tt.CmpOp():
                return _compare(op, self[op.lhs], self[op.rhs])
            case tt.SelectOp():
                return _select(self[op.condition], self[op.true_value], self[op.false_value])
            case tt.HintOp():
                return _hinted(self[op.input], op)
            case tt.CastOp() if tt.is_int(op.input.type) and tt.is_int(op.result.type):
                return self[op.input]
            case tt.ProgramIdOp() | tt.NumProgramsOp():
                return AxisInfo.unknown(shape)
            case _ if type(op) in _BINARY and tt.is_int(op.results[0].type):
                return _BINARY[type(op)](self[op.operands[0]], self[op.operands[1]])
        return None


def vector_width(
    ptr: AxisInfo, mask: AxisInfo | None, per_thread: int, elem_bytes: int
) -> int:
    """Elements one access may move along the last dimension: at most 128 bits, the
    thread's contiguous registers, the contiguous and aligned addresses, one mask value."""
    last = len(ptr.contiguity) - 1
    v = min(per_thread, 16 // elem_bytes, ptr.contiguity[last], max(1, ptr.divisibility[last] // elem_bytes))
    if mask is not None:
        v = min(v, mask.constancy[last])
    return 1 << (max(v, 1).bit_length() - 1)

