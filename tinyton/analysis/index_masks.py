"""Index masks: boolean arrays computed from `tt.arange` alone (causal, banded, a decode step's
`arange(T) <= pos`), which the attention kernels compute from a block's indices instead of reading.

A mask is a `Compare` of an affine function of the query and key indices (and of one-element integer
inputs) with 0, or a `Logic` of masks, in one normal form per set of kept indices (`compare`), so every
spelling of a mask (`i >= j`, `j <= i`, `~(i < j)`, `tt.tril`, `tt.tril(ones) == 1`, `where(m, 0, -inf) == 0`)
is one mask and one kernel.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

from xdsl.dialects.builtin import IntegerType, i1
from xdsl.ir import Attribute, Operation, OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of


def is_constant(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, tta.ConstantOp)


def is_minus_inf(value: SSAValue) -> bool:
    """A constant -inf: masked scores that add nothing to the softmax."""
    return is_constant(value) and constant_value(value) == float("-inf")


@dataclass(frozen=True)
class Affine:
    """`sum(coef[p] * index along position p) + sum(k * s for s, k in scalars) + const`; positions count
    from the right (-1: keys, -2: queries); `scalars` are one-element integer arrays read at run time (a
    decode step's position), so `arange(T) <= pos` is an index mask too."""

    coef: tuple[tuple[int, int], ...]
    const: int
    scalars: tuple[tuple[SSAValue, int], ...] = ()

    def scaled(self, k: int) -> Affine:
        return Affine(tuple((p, c * k) for p, c in self.coef), self.const * k, tuple((v, c * k) for v, c in self.scalars))

    def plus(self, other: Affine) -> Affine:
        coef = dict(self.coef)
        for p, c in other.coef:
            coef[p] = coef.get(p, 0) + c
        scalars = dict(self.scalars)
        for v, c in other.scalars:
            scalars[v] = scalars.get(v, 0) + c
        return Affine(tuple(sorted((p, c) for p, c in coef.items() if c)), self.const + other.const,
                      tuple((v, c) for v, c in scalars.items() if c))  # fmt: skip


@dataclass(frozen=True)
class Compare:
    """`lhs <predicate> 0` for an affine index expression."""

    predicate: str
    lhs: Affine


@dataclass(frozen=True)
class Logic:
    """`and` / `or` of masks."""

    kind: str
    parts: tuple[Mask, ...]


Mask = Compare | Logic


def _moved_positions(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> dict[int, int] | None:
    """How the right-aligned positions of a reshape that only adds or drops size-1 dims move."""
    kept_in = [i - len(in_shape) for i, d in enumerate(in_shape) if d != 1]
    kept_out = [i - len(out_shape) for i, d in enumerate(out_shape) if d != 1]
    if [in_shape[p] for p in kept_in] != [out_shape[p] for p in kept_out]:
        return None
    return dict(zip(kept_in, kept_out))


def is_scalar_leaf(value: SSAValue) -> bool:
    """A one-element integer array not computed from aranges and constants (an input such as a position):
    an index mask reads it at run time instead of cloning what computes it."""
    if element_type(value.type) == i1 or not isinstance(element_type(value.type), IntegerType):
        return False
    if prod(shape_of(value.type)) != 1:
        return False
    return not (isinstance(value, OpResult) and isinstance(value.op, _AFFINE_OPS))


def affine_index(value: SSAValue) -> Affine | None:
    """`value` as an affine function of the query and key indices and of scalar leaves, if it is computed
    from aranges, constants and scalar leaves only."""
    if is_scalar_leaf(value):
        return Affine((), 0, ((value, 1),))
    if not isinstance(value, OpResult):
        return None
    op = value.op
    if isinstance(op, tta.ArangeOp):  # a length-1 arange is the constant `start`
        return Affine(((-1, 1),) if shape_of(op.result.type)[0] > 1 else (), op.start.value.data)
    if isinstance(op, tta.ConstantOp):
        data = op.value.value.data
        return Affine((), data) if isinstance(data, int) and element_type(op.result.type) != i1 else None
    if isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp)):
        inner = affine_index(op.input)
        moves = _moved_positions(shape_of(op.input.type), shape_of(op.result.type))
        if inner is None or moves is None or any(p not in moves for p, _ in inner.coef):
            return None  # (a coefficient sits on a dim of extent > 1, which every reshape here keeps)
        return Affine(tuple(sorted((moves[p], c) for p, c in inner.coef)), inner.const)
    if isinstance(op, tta.CastOp) and _widens_int(op):  # an int32 arange as int64 (torch's indices)
        return affine_index(op.input)
    if isinstance(op, (tta.AddOp, tta.SubOp)):
        a, b = affine_index(op.lhs), affine_index(op.rhs)
        if a is None or b is None:
            return None
        return a.plus(b if isinstance(op, tta.AddOp) else b.scaled(-1))
    if isinstance(op, tta.MulOp):
        a, b = affine_index(op.lhs), affine_index(op.rhs)
        if a is not None and b is not None and not b.coef and not b.scalars:
            return a.scaled(b.const)
        if a is not None and b is not None and not a.coef and not a.scalars:
            return b.scaled(a.const)
    return None


_AFFINE_OPS = (tta.ArangeOp, tta.ConstantOp, tta.ReshapeOp, tta.BroadcastToOp, tta.AddOp, tta.SubOp, tta.MulOp)


def _widens_int(op: tta.CastOp) -> bool:
    """A cast between signed ints that keeps every value (its result as wide or wider)."""
    src, dst = element_type(op.input.type), element_type(op.result.type)
    return (isinstance(src, IntegerType) and isinstance(dst, IntegerType) and src != i1
            and dst.width.data >= src.width.data)  # fmt: skip


def index_mask(value: SSAValue) -> Mask | None:
    """A boolean array computed from aranges only, over the last two axes (queries, keys)."""
    if not isinstance(value, OpResult):
        return None
    op = value.op
    if isinstance(op, tta.CmpOp):
        a, b = affine_index(op.lhs), affine_index(op.rhs)
        if a is None or b is None:
            return _compared_choice(op)
        lhs = a.plus(b.scaled(-1))
        return compare(op.predicate.data, lhs) if all(p in (-1, -2) for p, _ in lhs.coef) else None
    if element_type(value.type) != i1:
        return None
    if isinstance(op, (tta.WhereOp, tta.CastOp)):  # `where(mask, True, False)` (`tt.tril` of bool ones), casts
        choice = index_choice(value)
        return _choosing(choice, bool(choice.true), bool(choice.false)) if choice is not None else None
    if isinstance(op, tta.XorOp) and constant_value(op.rhs) is True:  # `~mask`, `np.logical_not(mask)`
        inner = index_mask(op.lhs)
        return negated(inner) if inner is not None else None
    if isinstance(op, (tta.AndOp, tta.OrOp)):
        a, b = index_mask(op.lhs), index_mask(op.rhs)
        return Logic("and" if isinstance(op, tta.AndOp) else "or", (a, b)) if a and b else None
    if isinstance(op, (tta.ReshapeOp, tta.BroadcastToOp)):  # size-1 dims added or dropped: positions move
        inner = index_mask(op.input)
        return index_mask_moved(op, inner) if inner is not None else None
    return None


def compare(predicate: str, lhs: Affine) -> Compare:
    """`lhs <predicate> 0` in the normal form of the indices it keeps, so that every spelling of a mask
    (`i >= j`, `j <= i`, `~(i < j)`, `tt.tril`) is one `Compare` and one kernel: `>=` for orderings
    (integers: `x > 0` is `x - 1 >= 0`, `x <= 0` is `-x >= 0`), `==` and `!=` with a positive first
    coefficient."""
    if predicate in ("lt", "le"):
        predicate, lhs = {"lt": "gt", "le": "ge"}[predicate], lhs.scaled(-1)
    if predicate == "gt":
        predicate, lhs = "ge", lhs.plus(Affine((), -1))
    if predicate in ("eq", "ne") and (lhs.coef or lhs.scalars) and (lhs.coef or lhs.scalars)[0][1] < 0:
        lhs = lhs.scaled(-1)
    return Compare(predicate, lhs)


def negated(mask: Mask) -> Mask:
    """The indices `mask` drops (De Morgan's laws over `Logic`)."""
    if isinstance(mask, Logic):
        return Logic("or" if mask.kind == "and" else "and", tuple(negated(part) for part in mask.parts))
    if mask.predicate == "ge":
        return compare("lt", mask.lhs)
    return compare("ne" if mask.predicate == "eq" else "eq", mask.lhs)


@dataclass(frozen=True)
class IndexChoice:
    """`where(mask, true, false)` of an index mask and two constants (through casts and broadcasts): a
    two-valued array computed from the indices, such as the additive mask `where(keep, 0, -inf)`, the
    float `tt.tril(tt.ones((n, n)))` or a bool mask itself (True, False)."""

    mask: Mask
    true: bool | int | float
    false: bool | int | float


def index_choice(value: SSAValue) -> IndexChoice | None:
    """`value` as an `IndexChoice`, or None."""
    if not isinstance(value, OpResult):
        return None
    op = value.op
    if isinstance(op, (tta.BroadcastToOp, tta.ReshapeOp)):  # a constant choice broadcast stays one
        inner = index_choice(op.input)
        moved = index_mask_moved(op, inner.mask) if inner is not None else None
        return IndexChoice(moved, inner.true, inner.false) if moved is not None else None
    if isinstance(op, tta.CastOp):
        inner = index_choice(op.input)
        convert = _converter(element_type(op.result.type))
        return IndexChoice(inner.mask, convert(inner.true), convert(inner.false)) if inner is not None else None
    if isinstance(op, tta.WhereOp):
        mask, true, false = index_mask(op.condition), constant_value(op.true_value), constant_value(op.false_value)
        return IndexChoice(mask, true, false) if mask is not None and None not in (true, false) else None
    if element_type(value.type) == i1 and not isinstance(op, tta.ConstantOp):
        mask = index_mask(value)
        return IndexChoice(mask, True, False) if mask is not None else None
    return None


def index_mask_moved(op: tta.ReshapeOp | tta.BroadcastToOp, mask: Mask) -> Mask | None:
    """`mask` seen through a reshape or broadcast that only adds or drops size-1 dims (None otherwise)."""
    moves = _moved_positions(shape_of(op.input.type), shape_of(op.result.type))
    return _moved_mask(mask, moves) if moves is not None else None


def _converter(element: Attribute) -> Callable[[bool | int | float], bool | int | float]:
    if element == i1:
        return bool
    return int if isinstance(element, IntegerType) else float


def _choosing(choice: IndexChoice, true: bool, false: bool) -> Mask | None:
    """The mask of a two-valued array that is `true` where `choice.mask` holds and `false` elsewhere."""
    if true == false:
        return None  # the same everywhere: no index mask
    return choice.mask if true else negated(choice.mask)


_PREDICATES: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}


def _compared_choice(op: tta.CmpOp) -> Mask | None:
    """A two-valued index array compared with a constant (`tt.tril(tt.ones((n, n))) == 0`)."""
    for choice_value, constant, flipped in ((op.lhs, op.rhs, False), (op.rhs, op.lhs, True)):
        choice, c = index_choice(choice_value), constant_value(constant)
        if choice is not None and c is not None:
            test = _PREDICATES[op.predicate.data]
            true, false = (test(c, x) if flipped else test(x, c) for x in (choice.true, choice.false))
            return _choosing(choice, true, false)
    return None


def _moved_mask(mask: Mask, moves: dict[int, int]) -> Mask | None:
    """`mask` with its index positions moved by a reshape (None if one leaves the last two axes)."""
    if isinstance(mask, Logic):
        parts = [_moved_mask(part, moves) for part in mask.parts]
        return Logic(mask.kind, tuple(parts)) if all(parts) else None
    coef = tuple(sorted((moves.get(p, p), c) for p, c in mask.lhs.coef))
    if any(p not in (-1, -2) for p, _ in coef):
        return None
    return compare(mask.predicate, Affine(coef, mask.lhs.const, mask.lhs.scalars))


def constant_value(value: SSAValue) -> bool | int | float | None:
    """The value of a scalar constant, or of a constant broadcast to an array; None otherwise."""
    while isinstance(value, OpResult) and isinstance(value.op, (tta.BroadcastToOp, tta.ReshapeOp)):
        value = value.op.input
    if not is_constant(value):
        return None
    data = value.op.value.value.data
    return bool(data) if element_type(value.type) == i1 else data


def mask_ops(value: SSAValue) -> list[Operation]:
    """The ops computing an index mask, in program order (to clone into the attention region)."""
    seen: list[Operation] = []

    def visit(v: SSAValue) -> None:
        if isinstance(v, OpResult) and v.op not in seen and not is_scalar_leaf(v):
            for operand in v.op.operands:
                visit(operand)
            seen.append(v.op)

    visit(value)
    return seen


def key_limit(mask: Mask) -> Affine | None:
    """The last key kept, an affine expression of one-element inputs, when the mask keeps exactly the keys
    `j <= limit` whatever the query (a decode step's `arange(S) <= pos`); None otherwise."""
    if not isinstance(mask, Compare) or mask.predicate != "ge" or dict(mask.lhs.coef) != {-1: -1}:
        return None
    return Affine((), mask.lhs.const, mask.lhs.scalars)  # in normal form: limit - j >= 0


def causal_offset(mask: Mask) -> int | None:
    """`c` when the mask keeps exactly the keys `j <= i + c` of query `i` (a causal mask, shifted)."""
    if not isinstance(mask, Compare) or mask.lhs.scalars:
        return None
    # in normal form (`compare`): i - j + const >= 0  <=>  j <= i + const
    return mask.lhs.const if mask.predicate == "ge" and dict(mask.lhs.coef) == {-2: 1, -1: -1} else None
