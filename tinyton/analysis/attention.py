"""Is this tta dataflow scaled-dot-product attention, and what are its parts?

    s0 = q @ kᵀ                       (kᵀ: `tta.transpose` of k's last two axes, or an input already K×S;
                                       q: an array, or a view of one by reshapes then transposes)
    s  = f(s0, bias, mask, constants)  a chain of elementwise ops, one use each (scale, bias, mask)
    p  = softmax(s, axis=-1)           max, sub, exp, sum, div
    o  = p @ v

Index masks are computed in the kernel from the block's indices and one-element integer inputs (a decode
step's `arange(T) <= pos`); k and v may each be `where(index mask, a, b)` of two views (the new row written
into the KV cache), read as two loads and a select (`Select`).

The flash-attention rewrite (tinyton/rewrites/attention.py) asks `score_chain` whether the scores feeding
a softmax come from `q @ kᵀ` this way, and the kernel generator (tinyton/lowering/fusion/attention.py)
reads the same structure back from the outlined region with `find_attention`, so the rewrite never outlines
a region the generator cannot emit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from xdsl.dialects.builtin import IntegerType, i1
from xdsl.ir import Attribute, Operation, OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of

SCORE_OPS = (tta.AddOp, tta.SubOp, tta.MulOp, tta.DivOp, tta.WhereOp, tta.MaximumOp, tta.MinimumOp, tta.NegOp)
"""Elementwise ops allowed between `q @ kᵀ` and the softmax: scale, bias, masks."""


@dataclass(frozen=True)
class ScoreStep:
    """One elementwise op applied to the scores; `operand` is the position of the scores among its operands."""

    op: Operation
    operand: int

    @property
    def others(self) -> list[SSAValue]:
        """The step's other operands: constants, bias or mask arrays, index masks."""
        return [v for i, v in enumerate(self.op.operands) if i != self.operand]


@dataclass(frozen=True)
class QView:
    """How the kernel reads q: `base` (as stored, contiguous) through `ops` (reshapes, then transposes;
    each used once), which make q `shape` with element `strides` over `base`. No ops: q itself."""

    base: SSAValue
    ops: tuple[Operation, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def _contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(prod(shape[i + 1 :]) for i in range(len(shape)))


def reshaped_strides(shape: Sequence[int], strides: Sequence[int], out: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of a reshape to `out` of the strided view (`shape`, `strides`), or None when it needs a
    copy (NumPy's rule: each run of dims that merges or splits must be contiguous within itself)."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [i for i, n in enumerate(out) if n != 1]
    if 0 in shape or prod(shape) != prod(out):
        return None
    result = [0] * len(out)
    i = j = 0
    while i < len(old) and j < len(new):
        i_end, j_end, a, b = i + 1, j + 1, old[i][0], out[new[j]]
        while a != b:
            if a < b:
                a, i_end = a * old[i_end][0], i_end + 1
            else:
                b, j_end = b * out[new[j_end]], j_end + 1
        if any(old[t][1] != old[t + 1][0] * old[t + 1][1] for t in range(i, i_end - 1)):
            return None
        stride = old[i_end - 1][1]
        for t in reversed(range(j, j_end)):
            result[new[t]] = stride
            stride *= out[new[t]]
        i, j = i_end, j_end
    return tuple(result)


def q_view(q: SSAValue) -> QView:
    """The longest chain of single-use reshapes and transposes ending at `q` that is a strided view of
    the array it starts from (a reshape of a transposed view only where NumPy's would be a view: the heads
    of `x.transpose(0, 2, 1, 3)` split into groups)."""
    chain: list[Operation] = []
    value = q
    while isinstance(value, OpResult) and isinstance(value.op, (tta.ReshapeOp, tta.TransposeOp)) and value.has_one_use():
        chain.insert(0, value.op)
        value = value.op.input
    for first in range(len(chain) + 1):  # drop leading ops until the rest is a view
        base = chain[first].input if first < len(chain) else q
        shape, strides = shape_of(base.type), _contiguous(shape_of(base.type))
        for op in chain[first:]:
            out = shape_of(op.result.type)
            if isinstance(op, tta.TransposeOp):
                strides = tuple(strides[p] for p in op.perm)
            elif (strides := reshaped_strides(shape, strides, out)) is None:
                break
            shape = out
        else:
            return QView(base, tuple(chain[first:]), tuple(shape), strides)
    raise AssertionError("unreachable: q itself is a view")


@dataclass(frozen=True)
class Select:
    """k or v given as `where(mask, a, b)`: an index mask over its last two axes choosing between two
    strided views (a decode step's new row and its cache), read by the kernel as two loads and a select
    instead of a kernel of its own that writes the updated cache."""

    where: tta.WhereOp
    mask: Mask
    true: QView
    false: QView

    @property
    def ops(self) -> list[Operation]:
        return [*mask_ops(self.where.condition), *self.true.ops, *self.false.ops, self.where]


def select_of(value: SSAValue) -> Select | None:
    """`value` as a `Select`, or None (not a `where` used once, a condition that is no index mask)."""
    if not (isinstance(value, OpResult) and isinstance(value.op, tta.WhereOp) and value.has_one_use()):
        return None
    op = value.op
    mask = index_mask(op.condition)
    if mask is None or is_constant(op.true_value) or is_constant(op.false_value):
        return None
    return Select(op, mask, q_view(op.true_value), q_view(op.false_value))


@dataclass(frozen=True)
class Attention:
    q: QView
    k: SSAValue
    """Keys as stored: `(..., S_kv, D)` when `k_transposed`, else `(..., D, S_kv)` (already kᵀ)."""
    k_transposed: bool
    v: SSAValue
    qk: tta.MatmulOp
    transpose: tta.TransposeOp | None
    steps: tuple[ScoreStep, ...]
    softmax: tuple[Operation, ...]
    """reduce_max, sub, exp, reduce_sum, div."""
    pv: tta.MatmulOp | None
    """`p @ v`; None only in a backward that is given the logsumexp (analysis/attention_backward.py)."""
    k_select: Select | None = None
    v_select: Select | None = None

    @property
    def ops(self) -> list[Operation]:
        """Every op of the attention (index masks and selected k/v included)."""
        selects = [op for sel in (self.k_select, self.v_select) if sel is not None for op in sel.ops]
        first = [*selects, *self.q.ops, *([self.transpose] if self.transpose is not None else [])]
        masks = [op for step in self.steps for v in step.others for op in mask_ops(v) if index_mask(v)]
        return [*first, *masks, self.qk, *(s.op for s in self.steps), *self.softmax, *([self.pv] if self.pv else [])]

    @property
    def causal_step(self) -> ScoreStep | None:
        """The step `where(keep, s, -inf)` whose index mask keeps exactly the keys `j <= i + c`."""
        for step in self.steps:
            if isinstance(step.op, tta.WhereOp) and step.operand == 1 and is_minus_inf(step.op.false_value):
                mask = index_mask(step.op.condition)
                if mask is not None and causal_offset(mask) is not None:
                    return step
        return None

    @property
    def causal_offset(self) -> int | None:
        """`c` when a step masks the scores to the keys `j <= i + c` (the KV loop then stops there)."""
        step = self.causal_step
        if step is None:
            return None
        mask = index_mask(step.op.condition)
        assert mask is not None
        return causal_offset(mask)


def is_minus_inf(value: SSAValue) -> bool:
    """A constant -inf: masked scores that add nothing to the softmax."""
    return is_constant(value) and constant_value(value) == float("-inf")


def is_constant(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, tta.ConstantOp)


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _swaps_last_two(op: tta.TransposeOp) -> bool:
    perm = op.perm
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def score_chain(s: SSAValue) -> tuple[tta.MatmulOp, tta.TransposeOp | None, tuple[ScoreStep, ...]] | None:
    """The `q @ kᵀ` matmul the scores `s` come from, the transpose of k (if any) and the steps between;
    None when `s` is not computed that way (another op, a step used twice, a mask that reads the scores)."""
    steps: list[ScoreStep] = []
    value = s
    while not (isinstance(value, OpResult) and isinstance(value.op, tta.MatmulOp)):
        if not isinstance(value, OpResult) or not isinstance(value.op, SCORE_OPS):
            return None
        op = value.op
        positions = [i for i, v in enumerate(op.operands) if shape_of(v.type) == shape_of(value.type)
                     and not is_constant(v) and _depends_on_matmul(v)]
        if len(positions) != 1 or (steps and not _single_use(value)):
            return None
        if isinstance(op, tta.WhereOp) and positions[0] == 0:
            return None  # the scores chose the mask: not a masking of the scores
        steps.append(ScoreStep(op, positions[0]))
        value = op.operands[positions[0]]
    qk = value.op
    if steps and not _single_use(value):
        return None
    if len(shape_of(qk.lhs.type)) < 2 or len(shape_of(qk.rhs.type)) < 2:
        return None
    kt = qk.rhs
    transpose = kt.op if isinstance(kt, OpResult) and isinstance(kt.op, tta.TransposeOp) else None
    if transpose is not None and not (_swaps_last_two(transpose) and _single_use(kt)):
        transpose = None  # some other permutation: read the permuted array as an input
    return qk, transpose, tuple(reversed(steps))


def _depends_on_matmul(value: SSAValue, budget: int = 64) -> bool:
    """Whether `value` is computed from a tta.matmul through elementwise score ops (a short walk)."""
    pending = [value]
    while pending and budget:
        budget -= 1
        v = pending.pop()
        if not isinstance(v, OpResult):
            continue
        if isinstance(v.op, tta.MatmulOp):
            return True
        if isinstance(v.op, SCORE_OPS):
            pending.extend(v.op.operands)
    return False


def last_axis_max(op: Operation) -> bool:
    """A `reduce_max` over the last axis that keeps it: the first op of a softmax."""
    return isinstance(op, tta.ReduceMaxOp) and op.keeps_dims and op.axis.value.data == len(shape_of(op.input.type)) - 1


def feeds_softmax(value: SSAValue, budget: int = 16) -> bool:
    """Whether `value` reaches the input of a softmax (a last-axis `reduce_max` of it) through score steps
    (scale, bias, masks), each the only user of the value before it: scores, whose rewrites (the attention
    canonicalization) leave the rounding of every other program NumPy's."""
    while budget:
        budget -= 1
        users = [u.operation for u in value.uses]
        if any(last_axis_max(user) for user in users):
            return True
        if len(users) != 1 or not isinstance(users[0], SCORE_OPS) or shape_of(users[0].results[0].type) != shape_of(value.type):
            return False
        value = users[0].results[0]
    return False


def find_attention(ops: Sequence[Operation], results: Sequence[SSAValue]) -> Attention | None:
    """The attention computed by exactly these ops (an outlined region), or None."""
    if len(results) != 1:
        return None
    pv = results[0].op if isinstance(results[0], OpResult) else None
    if not isinstance(pv, tta.MatmulOp):
        return None
    div = pv.lhs.op if isinstance(pv.lhs, OpResult) else None
    if not isinstance(div, tta.DivOp):
        return None
    e, total = div.lhs, div.rhs
    exp, rsum = e.op if isinstance(e, OpResult) else None, total.op if isinstance(total, OpResult) else None
    if not isinstance(exp, tta.ExpOp) or not isinstance(rsum, tta.ReduceSumOp) or rsum.input != e:
        return None
    sub = exp.input.op if isinstance(exp.input, OpResult) else None
    if not isinstance(sub, tta.SubOp):
        return None
    s, m = sub.lhs, sub.rhs
    rmax = m.op if isinstance(m, OpResult) else None
    if not isinstance(rmax, tta.ReduceMaxOp) or rmax.input != s:
        return None
    if not (_last_axis(rmax, s) and _last_axis(rsum, e)):
        return None
    chain = score_chain(s)
    if chain is None:
        return None
    qk, transpose, steps = chain
    k = transpose.input if transpose is not None else qk.rhs
    found = Attention(q_view(qk.lhs), k, transpose is not None, pv.rhs, qk, transpose, steps,
                      (rmax, sub, exp, rsum, div), pv, select_of(k), select_of(pv.rhs))  # fmt: skip
    computed = lambda group: {op for op in group if not isinstance(op, tta.ConstantOp)}
    return found if computed(found.ops) == computed(ops) else None


def _last_axis(reduction: tta.ReduceOp, value: SSAValue) -> bool:
    """A reduction over the last axis that keeps it (so the result broadcasts back over the row)."""
    return reduction.axis.value.data == len(shape_of(value.type)) - 1 and reduction.keeps_dims


# ---------------------------------------------------------------------------------------------
# Index masks: conditions computed from `tt.arange` alone (causal and banded masks)
# ---------------------------------------------------------------------------------------------


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
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _compared_choice(op: tta.CmpOp) -> Mask | None:
    """A two-valued index array compared with a constant (`tt.tril(tt.ones((n, n))) == 0`)."""
    for choice_value, constant, flipped in ((op.lhs, op.rhs, False), (op.rhs, op.lhs, True)):
        choice, c = index_choice(choice_value), constant_value(constant)
        if choice is not None and c is not None:
            test = _PREDICATES[op.predicate.data]
            decide = (lambda x: test(c, x)) if flipped else (lambda x: test(x, c))
            return _choosing(choice, decide(choice.true), decide(choice.false))
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


def causal_offset(mask: Mask) -> int | None:
    """`c` when the mask keeps exactly the keys `j <= i + c` of query `i` (a causal mask, shifted)."""
    if not isinstance(mask, Compare) or mask.lhs.scalars:
        return None
    # in normal form (`compare`): i - j + const >= 0  <=>  j <= i + const
    return mask.lhs.const if mask.predicate == "ge" and dict(mask.lhs.coef) == {-2: 1, -1: -1} else None
