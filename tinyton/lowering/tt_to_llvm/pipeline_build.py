"""Building blocks of the pipeliner's rewrites (pipeline.py, warp_specialize.py): an op builder, the buffers of
a plan's loads, a slot counter and its mbarrier phase, dots left in flight, and loops rebuilt with more carried
values or without dead ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, UnitAttr, f32, i32
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.traits import Pure
from xdsl.transforms.dead_code_elimination import region_dce

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.float8_dot import promotion_steps
from tinyton.lowering.tt_to_llvm.pipeline_plan import Load, Plan


def constant(value: int) -> tt.ConstantOp:
    return tt.ConstantOp(IntegerAttr(value, 32), i32)


class Builder:
    """Appends ops before `anchor` (or at the end of a block)."""

    def __init__(self, block: Block, anchor: Operation | None):
        self.block, self.anchor = block, anchor

    def add(self, op: Operation) -> Operation:
        if self.anchor is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, self.anchor)
        return op

    def value(self, op: Operation) -> SSAValue:
        return self.add(op).results[0]


def first_reader(op: Operation) -> Operation | None:
    """The first op of `op`'s block that reads its result or holds an op that does; None when nothing reads it."""
    block = op.parent_block()
    assert block is not None
    users = [use.operation for use in op.results[0].uses]
    return next((o for o in block.ops if any(o.is_ancestor(u) for u in users)), None)


def sink(op: Operation, before: Operation) -> None:
    """Move `op` down its block to just before `before`."""
    block = op.parent_block()
    assert block is not None
    op.detach()
    block.insert_op_before(op, before)


def advance(b: Builder, slot: SSAValue, slots: int) -> SSAValue:
    """`(slot + 1) % slots`."""
    one, last = b.value(constant(1)), b.value(constant(slots - 1))
    at_end = b.value(tt.CmpOp("eq", slot, last))
    return b.value(tt.SelectOp(at_end, b.value(constant(0)), b.value(tt.AddOp(slot, one))))


def keep_in_flight(loop: scf.ForOp, dots: Sequence[tt.DotOp], groups: int) -> scf.ForOp:
    """Leave `dots` in flight: after each the body waits for the previous iteration's instance of it (all
    but the last `groups` commit groups done: one a dot, or a set of dots issued together), the code after
    the loop for all; gives the loop (rebuilt when a float8 dot promotes its partial: `_keep_partial_in_flight`)."""
    body = loop.body.block
    outer = loop.parent_block()
    assert outer is not None
    partials = [dot for dot in dots if promotion_steps(dot) is not None]
    for dot in dots:
        if dot in partials:
            continue
        dot.attributes[tt.ASYNC_DOT_ATTR] = UnitAttr()
        body.insert_op_after(wait := tt.DotWaitOp(dot.result, groups), dot)
        body.last_op.operands[dot.acc.index - 1] = wait.result
        result = loop.results[dot.acc.index - 1]
        after = tt.DotWaitOp(result, 0)
        result.replace_all_uses_with(after.result)
        after.operands[0] = result
        outer.insert_op_after(after, loop)
    return _keep_partial_in_flight(loop, partials, groups) if partials else loop


def _keep_partial_in_flight(loop: scf.ForOp, dots: Sequence[tt.DotOp], groups: int) -> scf.ForOp:
    """A float8 dot promoting its partial sums becomes a `tt.promoted_dot` whose last chain, still running, is
    carried to the next iteration, which waits for it at its top, issues its own first chain and adds it while
    that runs: the adds and the loop's own work (the slot's release, the next slot's wait) no longer keep the
    tensor cores idle, only the moment between one chain's end and the next one's issue. (Carried as a plain
    async dot's accumulator is, replaced each iteration, the running chain's registers were copied at the loop's
    back edge: ptxas then serialises every wgmma, C7514.) After the loop: the last chain's wait (`tt.dot_wait 0`
    right after the loop, where warp_specialize.py looks for the loop's last waits) and its add."""
    assert groups == 1 and len(dots) == 1, "a promoted dot in flight is its loop's only dot"
    (dot,) = dots
    body = loop.body.block
    before = Builder(loop.parent_block(), loop)
    acc = dot.acc
    assert isinstance(acc, BlockArgument)
    pending = body.insert_arg(acc.type, len(body.args))
    limit = dot.max_num_imprecise_acc
    assert limit is not None
    promoted = tt.PromotedDotOp(dot.a, dot.b, acc, pending, limit.value.data)
    body.insert_op_before(promoted, dot)
    dot.result.replace_all_uses_with(promoted.result)
    dot.detach()
    dot.erase()
    zero = before.value(tt.ConstantOp(FloatAttr(0.0, f32), acc.type))
    new_loop = carry(loop, [zero], [promoted.pending_out])
    outer = new_loop.parent_block()
    assert outer is not None
    wait = tt.DotWaitOp(new_loop.results[-1], 0)
    result = new_loop.results[acc.index - 1]
    total = tt.AddOp(result, wait.result)
    result.replace_all_uses_with(total.result)
    total.operands[0] = result
    outer.insert_ops_after([wait, total], new_loop)
    return new_loop


def flip(b: Builder, phase: SSAValue, slot: SSAValue, slots: int) -> SSAValue:
    """The mbarrier phase of the next iteration's read slot: flipped when `slot` is the last one."""
    at_end = b.value(tt.CmpOp("eq", slot, b.value(constant(slots - 1))))
    return b.value(tt.SelectOp(at_end, b.value(tt.SubOp(b.value(constant(1)), phase)), phase))


def buffers(before: Builder, plan: Plan, slots: int) -> list[tuple[SSAValue, int]]:
    """Per load, its buffer of `slots` slots and its part of each slot: a buffer of its own, or one shared with
    the loads of its group (`plan.together`), one tile each side by side."""
    placed: dict[Load, tuple[SSAValue, int]] = {}
    for group in [*plan.together, *([ld] for ld in plan.loads)]:
        if group[0] in placed:
            continue
        tile = group[0].result.type
        buffer = before.value(tt.LocalAllocOp(slots, tt.shape_of(tile), tt.element_type(tile), len(group)))
        placed.update((ld, (buffer, part)) for part, ld in enumerate(group))
    return [placed[ld] for ld in plan.loads]


def drop_dead_carried(loop: scf.ForOp) -> scf.ForOp:
    """Remove iter_args whose result is unused and whose value only feeds its own update; gives the loop."""
    body = loop.body.block
    yield_op = body.last_op
    dead = []
    for i, (arg, res) in enumerate(zip(body.args[1:], loop.results)):
        if res.uses:
            continue
        users = _forward(arg, yield_op)
        if users is not None and all(u.index == i for u in users):
            dead.append(i)
    if not dead:
        return loop
    keep = [i for i in range(len(loop.iter_args)) if i not in dead]
    operands = list(yield_op.operands)
    yield_op.detach()
    body.add_op(scf.YieldOp(*(operands[i] for i in keep)))
    yield_op.erase()
    region_dce(loop.body)
    for i in reversed(dead):
        body.erase_arg(body.args[1 + i])
    return _rebuilt(loop, [loop.iter_args[i] for i in keep], keep)


def carry(loop: scf.ForOp, inits: Sequence[SSAValue], yields: Sequence[SSAValue]) -> scf.ForOp:
    """`loop` rebuilt with its body's last arguments (added by the caller) carried from `inits`, the body
    yielding `yields` for them; its old results are the new loop's first ones."""
    body = loop.body.block
    yield_op = body.last_op
    yield_op.detach()
    body.add_op(scf.YieldOp(*yield_op.operands, *yields))
    yield_op.erase()
    return _rebuilt(loop, [*loop.iter_args, *inits], range(len(loop.results)))


def _rebuilt(loop: scf.ForOp, inits: Sequence[SSAValue], kept: Sequence[int]) -> scf.ForOp:
    """A loop over `loop`'s body (its arguments and yield already matching `inits`) in `loop`'s place; the old
    results `kept` become its results, in order."""
    region = loop.detach_region(loop.body)
    new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, list(inits), region)
    new_loop.attributes.update(loop.attributes)
    block = loop.parent_block()
    assert block is not None
    block.insert_op_before(new_loop, loop)
    for i, new in zip(kept, new_loop.results):
        loop.results[i].replace_all_uses_with(new)
    loop.detach()
    loop.erase()
    return new_loop


@dataclass(frozen=True)
class _YieldUse:
    index: int


def _forward(value: SSAValue, yield_op: Operation) -> list[_YieldUse] | None:
    """The yield operands that `value` reaches through pure ops of the loop's body only (None: it reaches anything
    else, an op nested in a branch among them)."""
    out: list[_YieldUse] = []
    seen: set[Operation] = set()
    pending = [value]
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if user is yield_op:
                out.append(_YieldUse(use.index))
            elif user not in seen:
                if not user.has_trait(Pure) or user.regions or user.parent_block() is not yield_op.parent_block():
                    return None
                seen.add(user)
                pending += user.results
    return out
