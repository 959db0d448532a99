"""A model of a warp-specialised kernel's mbarrier protocol, run on its pipelined tt IR without a GPU.

The producer and consumer regions of `tt.warp_specialize` run as two coroutines over their scalar ops (loop
counters, slots, phases: tile ops are opaque), on a model of Hopper's mbarriers: a phase completes after its
count of arrivals, and `try_wait.parity P` passes once the phase of parity P has completed (the current phase
has the other parity). A TMA copy writes its slot at once, tagged with the producer's loop counters; a consumer's
read of the slot must find the tag of its own loop counters (the same iteration of the same tile), and a copy must
not overwrite a slot before the consumers released it. Both blocked with no progress is a deadlock (the GPU would
hang). What this does not check: the lowering to PTX (FileCheck and ptxas do), timing.

The consumers' ping-pong turns (`tt.warpgroup_turn`) are checked apart, on the sequence of turn steps the consumers
ran: each warpgroup plays its actions (the lowering's own, `warp_roles.turn_actions`) on a model of the named
barriers (`bar.sync` and `bar.arrive` count arrivals; the barrier completes at two warpgroups' worth, whoever
arrived), under every schedule in which one warpgroup runs ahead as far as it can, the schedules that break a
protocol whose barriers could be completed by one warpgroup twice.
"""

from __future__ import annotations

import operator
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, TensorType
from xdsl.ir import Operation, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.warp_roles import TURN_BARRIER, turn_actions

BINARY = {
    tt.AddOp: operator.add, tt.SubOp: operator.sub, tt.MulOp: operator.mul, tt.MaximumOp: max, tt.MinimumOp: min,
    tt.AndOp: operator.and_, tt.OrOp: operator.or_, tt.XorOp: operator.xor,
    tt.DivOp: lambda a, b: int(a / b) if b else -1, tt.RemOp: lambda a, b: a - int(a / b) * b if b else a,
    tt.FloorDivOp: lambda a, b: a // b if b else 0, tt.ModOp: lambda a, b: a % b if b else 0,
}
COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
           "ge": operator.ge}


class ProtocolError(AssertionError):
    """The protocol would hang the GPU or feed a dot the wrong tile."""


@dataclass
class Mbarrier:
    count: int
    completed: int = 0
    pending: int = 0

    def __post_init__(self) -> None:
        self.pending = self.count

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.completed += 1
            self.pending = self.count

    def passed(self, parity: int) -> bool:
        return self.completed % 2 != parity


@dataclass
class Run:
    """One program's run: the mbarriers, what each slot holds, and the reads checked."""

    program_id: int
    consumer_warps: int
    barriers: dict[tuple[SSAValue, int], Mbarrier] = field(default_factory=dict)
    slots: dict[tuple[SSAValue, int, int], tuple] = field(default_factory=dict)
    reading: dict[tuple[SSAValue, int], tuple] = field(default_factory=dict)
    tma_buffers: set[SSAValue] = field(default_factory=set)
    """The buffers TMA copies fill (the slots the protocol guards)."""
    released_by: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """Each buffer's `empty` mbarriers: those the producer waited on before copying into it."""
    reads: int = 0
    copies: int = 0
    turns: list[str] = field(default_factory=list)
    """The consumers' `tt.warpgroup_turn` steps, in the order they ran."""


def _value(env: dict[SSAValue, object], v: SSAValue, what: str) -> int:
    value = env.get(v)
    if value is None:
        raise ProtocolError(f"the protocol's {what} depends on a value the model does not compute ({v})")
    return int(value)


def _execute(ops: Iterable[Operation], env: dict[SSAValue, object], run: Run, counters: tuple[int, ...],
             waited: list[SSAValue] | None = None) -> Generator[None, None, list[object]]:
    """Run `ops` (a block's); yield while a wait cannot pass; give the operands of the block's yield. `waited`
    holds the role's last waited mbarriers (the producer's `empty` ones guard the buffers it then copies into)."""
    waited = [] if waited is None else waited
    for op in ops:
        if isinstance(op, scf.YieldOp):
            return [env.get(v) for v in op.operands]
        if isinstance(op, scf.ForOp):
            lb, ub, step = (_value(env, v, "loop bound") for v in (op.lb, op.ub, op.step))
            carried = [env.get(v) for v in op.iter_args]
            body = op.body.block
            for i in range(lb, ub, step):
                env[body.args[0]] = i
                env.update(zip(body.args[1:], carried))
                carried = yield from _execute(body.ops, env, run, (*counters, i), waited)
            env.update(zip(op.results, carried))
        elif isinstance(op, tt.ConstantOp) and not isinstance(op.result.type, TensorType):
            value = op.value
            env[op.result] = value.value.data if isinstance(value, IntegerAttr) else None
        elif isinstance(op, tt.ProgramIdOp):
            env[op.result] = run.program_id if op.axis.value.data == 0 else 0
        elif type(op) in BINARY and not isinstance(op.results[0].type, TensorType):
            a, b = (env.get(v) for v in op.operands)
            env[op.results[0]] = None if a is None or b is None else BINARY[type(op)](int(a), int(b))
        elif isinstance(op, tt.CmpOp) and not isinstance(op.result.type, TensorType):
            a, b = (env.get(v) for v in op.operands)
            env[op.result] = None if a is None or b is None else int(COMPARE[op.predicate.data](a, b))
        elif isinstance(op, tt.SelectOp) and not isinstance(op.result.type, TensorType):
            c, a, b = (env.get(v) for v in op.operands)
            env[op.result] = None if c is None else (a if c else b)
        elif isinstance(op, tt.BarrierWaitOp):
            barrier = run.barriers[op.barriers, _value(env, op.slot, "wait's slot")]
            parity = _value(env, op.phase, "wait's phase")
            while not barrier.passed(parity):
                yield
            waited[:] = [op.barriers]
        elif isinstance(op, tt.TmaCopyOp):
            slot = _value(env, op.slot, "copy's slot")
            if (op.buffer, slot) in run.reading:
                raise ProtocolError(f"the producer overwrites slot {slot} at {counters} before the consumers released it")
            run.slots[op.buffer, slot, op.part_index] = counters
            run.released_by[op.buffer] = waited[0] if waited else None
            run.copies += 1
        elif isinstance(op, tt.TmaArriveOp):
            if _value(env, op.valid, "arrival's condition"):
                run.barriers[op.barriers, _value(env, op.slot, "arrival's slot")].arrive()
        elif isinstance(op, tt.LocalLoadOp) and op.buffer in run.tma_buffers:  # not a cp.async copy's buffer
            slot = _value(env, op.slot, "read's slot")
            written = run.slots.get((op.buffer, slot, op.part_index))
            if written != counters:
                raise ProtocolError(f"the consumers' iteration {counters} reads slot {slot}, which holds {written}")
            run.reading[op.buffer, slot] = counters
            run.reads += 1
        elif isinstance(op, tt.WarpgroupTurnOp):
            run.turns.append(op.step.data)
        elif isinstance(op, tt.BarrierArriveOp):
            if _value(env, op.valid, "release's condition"):
                slot = _value(env, op.slot, "released slot")
                for buffer, held in list(run.reading):
                    if held == slot and run.released_by.get(buffer) is op.barriers:
                        del run.reading[buffer, held]
                for _ in range(run.consumer_warps):
                    run.barriers[op.barriers, slot].arrive()
    return []


def check(module, program_id: int = 0, arguments: dict[int, int] | None = None,
          max_steps: int = 1_000_000) -> tuple[int, int]:
    """Run the protocol of the module's warp-specialised kernel for one program (its scalar parameters by
    position in `arguments`); gives (tiles copied, tiles read)."""
    split = next(op for op in module.walk() if isinstance(op, tt.WarpSpecializeOp))
    kernel = split.parent_block()
    inits = [op for op in kernel.ops if isinstance(op, tt.BarrierInitOp)]
    run = Run(program_id, max(op.arrival_count for op in inits))
    run.tma_buffers = {op.buffer for op in module.walk() if isinstance(op, tt.TmaCopyOp)}
    for init in inits:
        for s in range(init.barriers.type.get_shape()[0]):
            run.barriers[init.barriers, s] = Mbarrier(init.arrival_count)
    env: dict[SSAValue, object] = {kernel.args[i]: value for i, value in (arguments or {}).items()}
    for _ in _execute([op for op in kernel.ops if op.is_before_in_block(split)], env, run, ()):
        raise ProtocolError("a wait before the split")
    roles: dict[str, Iterator[None]] = {
        "producer": _execute(split.producer.block.ops, dict(env), run, ()),
        "consumers": _execute(split.consumer.block.ops, dict(env), run, ()),
    }
    for _ in range(max_steps):
        if not roles:
            break
        progress = False
        for name in list(roles):
            before = (run.copies, run.reads, sum(b.completed for b in run.barriers.values()))
            try:
                next(roles[name])
            except StopIteration:
                del roles[name]
                progress = True
                continue
            progress |= before != (run.copies, run.reads, sum(b.completed for b in run.barriers.values()))
        if not progress and roles:
            raise ProtocolError(f"deadlock: the {' and the '.join(roles)} wait forever "
                                f"({run.copies} tiles copied, {run.reads} read)")
    else:
        raise ProtocolError("the protocol did not end")
    if run.copies != run.reads:
        raise ProtocolError(f"{run.copies} tiles copied, {run.reads} read")
    check_turns(run.turns, run.consumer_warps // tt.PRODUCER_WARPS)
    return run.copies, run.reads


def check_turns(steps: list[str], groups: int) -> None:
    """Play the consumers' turn steps on named barriers of two warpgroups' arrivals, each warpgroup in turn running
    ahead of the others as far as it can; raise where they all block, or where a barrier is left part-way."""
    if groups < 2 or not steps:
        return
    plans: list[list[tuple[str, int]]] = [[] for _ in range(groups)]  # each warpgroup's actions, in order
    for step in steps:
        for group, verb, barrier in turn_actions(step, groups):
            plans[group].append((verb, barrier))
    for ahead in range(groups):
        arrived = dict.fromkeys(range(TURN_BARRIER, TURN_BARRIER + groups), 0)  # per barrier: this generation's
        generation = dict(arrived)  # per barrier: its generations completed
        position, waiting = [0] * groups, [None] * groups  # per warpgroup: next action, (barrier, generation) it awaits
        order = [ahead, *(g for g in range(groups) if g != ahead)]
        while any(position[g] < len(plans[g]) or waiting[g] for g in range(groups)):
            for g in order:  # the first warpgroup that can move does
                if waiting[g] is not None:
                    barrier, joined = waiting[g]
                    if generation[barrier] == joined:
                        continue
                    waiting[g] = None
                    break
                if position[g] < len(plans[g]):
                    verb, barrier = plans[g][position[g]]
                    position[g] += 1
                    joined = generation[barrier]
                    arrived[barrier] += 1
                    if arrived[barrier] == 2:
                        arrived[barrier], generation[barrier] = 0, joined + 1
                    elif verb == "sync":
                        waiting[g] = (barrier, joined)
                    break
            else:
                raise ProtocolError(f"deadlock in the warpgroups' turns (warpgroup {ahead} ahead): "
                                    f"warpgroups at steps {position} of {[len(p) for p in plans]}")
        if any(arrived.values()):
            raise ProtocolError(f"the warpgroups' turns leave named barriers part-way: {arrived} arrivals")
