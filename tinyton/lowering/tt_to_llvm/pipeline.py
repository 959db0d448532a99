"""
`tinyton-pipeline`: software pipelining of the loops that load the operands of a tensor-core `tt.dot`.

Takes: a tt kernel module. Gives: the same module where each such `scf.for` keeps `S` (`num_stages`) tiles
of every operand in flight, as Triton's pipeliner does. Each load `tt.load(ptrs, mask, other=0)` whose
only users are tensor-core dots becomes a `tt.local_alloc` buffer of `S` slots, filled by `tt.async_copy`
(`cp.async`, masked-off lanes zero-filled):

    prologue:  copy iterations 0 .. S-2 into slots 0 .. S-2, one commit group each
    loop i:    tt.async_wait S-2      (iteration i's group has landed; one barrier for all threads)
               copy iteration i+S-1 into the slot iteration i-1 read; commit
               tt.local_load slot i % S -> the dot reads it straight from shared memory
    after:     tt.async_wait 0

The addresses of iteration `i+S-1` come from cloning the body's pure ops that compute the loads'
operands, and the updates of the loop-carried values they use (the pointer increments), into the
prologue and the body, run `S-1` iterations ahead on extra loop-carried values; a copy of an
iteration past the loop's end is masked off entirely. The loop's own copies of those values are
dropped when nothing else uses them.

On sm_90a the wgmma dots of a body, when each accumulates into a carried value and reads only pipelined
slots (B perhaps through the `tt.trans` of a slot: `w` of `x @ w.T`, read K-major), stay in flight for one
more iteration (Triton's `warp_group_dot_wait {pendings = D}`): each is marked `tt.async_dot` and followed by
`tt.dot_wait D`, D the number of commit groups (the groups complete in order, so the previous iteration's
instance of that dot is done) and, after the loop, by `tt.dot_wait 0`. Dots of one left operand that one wgmma
can issue (`issued_together`: SwiGLU's gate and up) get one buffer whose slots hold their B tiles side by side,
each copy and read naming its part, and count as one group. The buffers then get one extra slot (`S + 1`), so
the copy of iteration `i+S-1` overwrites the slot iteration `i-2` read, whose dots every warp finished before
the barrier of `tt.async_wait`; the slot of iteration `i-1`, perhaps still read by its dots, is left alone.
A float8 dot that promotes its partial sums (`max_num_imprecise_acc`), the loop's only dot, stays in flight as a
`tt.promoted_dot` whose last chain of wgmmas is carried to the next iteration (`pipeline_build.keep_in_flight`,
`float8_dot.chain_in_flight`); one that cannot (several wgmma blocks a warpgroup, a single K step) waits for its
wgmmas itself, and a body holding one keeps all its dots synchronous.

On sm_90, when every such load is a `tt.descriptor_load` that TMA can read, the copies are TMA copies
completing on one mbarrier per slot instead (tinyton/lowering/tt_to_llvm/pipeline_tma.py).

The depth is the loop's `tt.num_stages` attribute (`tt.range(..., num_stages=)`), else the module's
(the launch option), else Triton's default of 3, reduced until the buffers fit `shared_limit`; 1 or 0
leaves the loop as it is. Which loops qualify, their address slices, in-flight dots and depth are decided
in pipeline_plan.py; this module rewrites them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import DiagnosticException

from tinyton.analysis.pass_inputs import check_kernel_module
from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.lowering.tt_to_llvm.context import kernel_num_warps, programs_per_sm
from tinyton.lowering.tt_to_llvm.dot_overlap import overlap_dots
from tinyton.lowering.tt_to_llvm.pipeline_plan import (
    Plan,
    feeds_mma_only,
    is_zero,
    plan_loop,
    stage_count,
    tile_elements,
)
from tinyton.lowering.tt_to_llvm.pipeline_build import (
    Builder,
    advance,
    buffers,
    carry,
    constant,
    drop_dead_carried,
    first_reader,
    flip,
    keep_in_flight,
    sink,
)
from tinyton.lowering.tt_to_llvm.pipeline_tma import issue_tma
from tinyton.lowering.tt_to_llvm.tma import staged_store_bytes
from tinyton.lowering.tt_to_llvm.warp_specialize import specialize_loop, wants_warp_specialization, writes_memory
from tinyton.lowering.tt_to_llvm.warpgroup_turns import take_turns

DEFAULT_SHARED_LIMIT = 48 * 1024


def _issue(
    b: Builder, plan: Plan, buffers: Sequence[tuple[SSAValue, int]], iv: SSAValue, state: Sequence[SSAValue],
    slot: SSAValue, ub: SSAValue,
) -> list[SSAValue]:
    """Copy the tiles of the iteration at `iv` (whose carried values are `state`) into `slot`, commit,
    and give the carried values of the next iteration."""
    body = plan.loop.body.block
    mapping: dict[SSAValue, SSAValue] = {body.args[0]: iv}
    mapping.update((body.args[1 + i], s) for i, s in zip(plan.carried, state))
    for op in plan.ops:
        b.add(op.clone(value_mapper=mapping))
    valid = b.value(tt.CmpOp("lt", iv, ub))
    yields = body.last_op.operands
    if plan.tma:
        assert plan.barriers is not None
        issue_tma(b.add, plan.loads, mapping, buffers, plan.barriers, slot, valid)
        return [mapping.get(yields[i], yields[i]) for i in plan.carried]
    for load, (buffer, part) in zip(plan.loads, buffers):
        assert part == 0, "only TMA copies fill slots of several tiles"
        shape = tt.shape_of(load.ptr.type)
        mask = b.value(tt.SplatOp(valid, shape))
        if load.mask is not None:
            mask = b.value(tt.AndOp(mapping.get(load.mask, load.mask), mask))
        b.add(tt.AsyncCopyOp(mapping.get(load.ptr, load.ptr), buffer, slot, mask))
    b.add(tt.AsyncCommitOp())
    return [mapping.get(yields[i], yields[i]) for i in plan.carried]


def pipeline_loop(plan: Plan, stages: int) -> scf.ForOp:
    loop = plan.loop
    if plan.async_dots:
        loop = plan.loop = keep_in_flight(loop, plan.async_dots, plan.dot_groups)
    outer = loop.parent_block()
    assert outer is not None
    before = Builder(outer, loop)
    ahead = stages - 1
    slots = stages + plan.extra_slots
    slot_buffers = buffers(before, plan, slots)
    if plan.tma:
        plan.barriers = before.value(tt.BarrierAllocOp(slots))
        before.add(tt.BarrierInitOp(plan.barriers))
    # Prologue: iterations 0 .. S-2.
    state = [loop.iter_args[i] for i in plan.carried]
    iv = loop.lb
    for s in range(ahead):
        if s:
            iv = before.value(tt.AddOp(iv, loop.step))
        state = _issue(before, plan, slot_buffers, iv, state, before.value(constant(s)), loop.ub)
    lookahead = before.value(tt.MulOp(before.value(constant(ahead)), loop.step))

    # The new loop carries the original values, the state S-1 iterations ahead and the two slots.
    body = loop.body.block
    yield_op = body.last_op
    ahead_args = [body.insert_arg(body.args[1 + i].type, len(body.args)) for i in plan.carried]
    read_slot = body.insert_arg(i32, len(body.args))
    write_slot = body.insert_arg(i32, len(body.args))
    phase = body.insert_arg(i32, len(body.args)) if plan.tma else None
    first = body.first_op
    b = Builder(body, first)
    if plan.barriers is not None and phase is not None:
        b.add(tt.TmaWaitOp(plan.barriers, read_slot, phase))
    else:
        b.add(tt.AsyncWaitOp(stages - 2))
    for load, (buffer, part) in zip(plan.loads, slot_buffers):
        load.result.replace_all_uses_with(b.value(tt.LocalLoadOp(buffer, read_slot, part)))
    iv_ahead = b.value(tt.AddOp(body.args[0], lookahead))
    next_state = _issue(b, plan, slot_buffers, iv_ahead, ahead_args, write_slot, loop.ub)
    b = Builder(body, yield_op)
    next_read, next_write = advance(b, read_slot, slots), advance(b, write_slot, slots)
    phases = [] if phase is None else [flip(b, phase, read_slot, slots)]
    for load in plan.loads:
        load.detach()
        load.erase()

    inits = [*state, before.value(constant(0)), before.value(constant(ahead))]
    inits += [before.value(constant(0))] if plan.tma else []
    new_loop = carry(loop, inits, [*next_state, next_read, next_write, *phases])
    if not plan.tma:
        outer.insert_op_after(tt.AsyncWaitOp(0), new_loop)
    region_dce(new_loop.body)
    return drop_dead_carried(new_loop)


SHARED_A_MIN_N = 128
"""Least N of a warp-specialised loop's wgmma dots for which an invariant A is read from shared memory: a wgmma of
N = 64 reading both operands there (2 KiB each for 32 cycles of tensor-core work a warpgroup) takes about the
shared-memory bandwidth of an SM, one of N = 128 three quarters of it; below, A stays in registers."""

REGISTER_A_MAX_K = 128
"""Widest invariant A (its K) a warp-specialised loop keeps in registers whatever N (`_shared_a`)."""


def _invariant_operands(module: ModuleOp) -> list[tt.LoadOp]:
    """Loads outside any loop whose only users are tensor-core dots inside loops (q of attention): read
    from shared memory by every iteration, they are copied there once instead of stored each time. In a loop
    asking for warp specialisation (every warp copies, before the split), only an A of dots that read it there
    (`_shared_a`): the others read it from registers (wgmma's register A, which the layout assignment loads it
    in), as FlashAttention-3 keeps q in shared memory for its 128-key blocks."""
    found = []
    for op in module.walk():
        if not (isinstance(op, tt.LoadOp) and len(tt.shape_of(op.result.type)) == 2 and is_zero(op.other)):
            continue
        users = [u.operation for u in op.result.uses]
        loops = [_enclosing_loop(user, op.parent_block()) for user in users]
        if not feeds_mma_only(op) or any(loop is None for loop in loops):
            continue
        if any(tt.WARP_SPECIALIZE_ATTR in loop.attributes for loop in loops if loop is not None) and not all(
            isinstance(user, tt.DotOp) and user.a is op.result and _shared_a(user) for user in users
        ):
            continue
        found.append(op)
    return found


def _shared_a(dot: tt.DotOp) -> bool:
    """Whether a warp-specialised loop's wgmma dot reads its invariant A from shared memory rather than registers:
    N at least `SHARED_A_MIN_N`, or a K over `REGISTER_A_MAX_K` (q of head dim 256 would take 64 registers a
    thread)."""
    k, n = tt.shape_of(dot.a.type)[1], tt.shape_of(dot.b.type)[1]
    return n >= SHARED_A_MIN_N or k > REGISTER_A_MAX_K


def _enclosing_loop(op: Operation, outer: Block | None) -> scf.ForOp | None:
    """The outermost `scf.for` nested in `outer` that holds `op`, if any."""
    found, parent = None, op.parent_op()
    while parent is not None and outer is not None and outer.is_ancestor(parent):
        if isinstance(parent, scf.ForOp):
            found = parent
        parent = parent.parent_op()
    return found


def _hoist(load: tt.LoadOp) -> tt.LocalLoadOp:
    """Replace the load with a one-slot buffer filled by `cp.async` (one commit group) and read back. Inside a
    loop (a persistent kernel's tiles) the threads first wait for each other: the copy must not overwrite the
    last iteration's tile while another warp's dots still read it."""
    b = Builder(load.parent_block(), load)
    buffer = b.value(tt.LocalAllocOp(1, tt.shape_of(load.result.type), tt.element_type(load.result.type)))
    slot = b.value(constant(0))
    if isinstance(load.parent_op(), scf.ForOp):
        b.add(tt.DebugBarrierOp())
    b.add(tt.AsyncCopyOp(load.ptr, buffer, slot, load.mask))
    b.add(tt.AsyncCommitOp())
    read = b.add(tt.LocalLoadOp(buffer, slot))
    load.result.replace_all_uses_with(read.results[0])
    load.detach()
    load.erase()
    return read


def _wait_before_first_use(read: tt.LocalLoadOp, pipelined: set[scf.ForOp]) -> None:
    """Before the first op using the hoisted tile, wait for its copy, unless that op is a pipelined loop
    using it directly: that loop's first `tt.async_wait` covers the older copy."""
    block, first = read.parent_block(), first_reader(read)
    if block is None or first is None:
        return
    users = [use.operation for use in read.results[0].uses]
    if first in pipelined and all(u.parent_op() is first for u in users if first.is_ancestor(u)):
        return
    block.insert_op_before(tt.AsyncWaitOp(0), first)


def pipeline_module(
    module: ModuleOp, shared_limit: int = DEFAULT_SHARED_LIMIT, num_warps: int | None = None, arch: str = "",
    tma: bool = True,
) -> None:
    """Copy loop-invariant dot operands to shared memory once, then pipeline every eligible loop of the
    module's kernels (innermost first); `num_warps` (default: the module's) and `arch` tell whether a dot
    runs on wgmma and may stay in flight, and whether descriptor loads may use TMA (unless `tma` is off)."""
    warps = kernel_num_warps(module, num_warps)
    budget = shared_limit - staged_store_bytes(module)
    hoisted = []
    for load in _invariant_operands(module):
        nbytes = tt.element_type(load.result.type).bitwidth // 8 * tile_elements(load.result)
        if 2 * nbytes <= budget:  # keep room for the loops' buffers
            budget -= nbytes
            hoisted.append(_hoist(load))
    loops = [op for op in module.walk() if isinstance(op, scf.ForOp)]
    pipelined: set[scf.ForOp] = set()
    for loop in reversed(loops):
        if loop.parent is None:  # rebuilt: a tile loop around a warp-specialised one
            continue
        plan = _plan(loop, module, warps, arch, tma, budget)
        if plan is None:
            continue
        pingpong = plan.warp_specialized and tt.PINGPONG_ATTR in loop.attributes
        stages = stage_count(loop, module, plan, budget)
        if stages < 2:
            continue
        budget -= (stages + plan.extra_slots) * plan.stage_bytes
        if plan.warp_specialized:
            specialize_loop(plan, stages, warps, programs_per_sm(module), arch, budget)
            new_loop = plan.loop  # the consumers' loop
        else:
            new_loop = pipeline_loop(plan, stages)
        if not plan.async_dots:  # a step's slots are released (or overwritten) once its dots are waited for
            overlap_dots(new_loop.body.block, warps, arch)
        if pingpong:
            take_turns(new_loop, warps // tt.PRODUCER_WARPS)
        if not plan.tma:  # only a cp.async loop's first wait covers the hoisted copies
            pipelined.add(new_loop)
    for read in hoisted:
        _wait_before_first_use(read, pipelined)
    _sink_past_loops(module)


def _sink_past_loops(module: ModuleOp) -> None:
    """A descriptor load no producer took whose readers all come after a loop that follows it (and writes no memory)
    moves past the loop: held in registers across it, its block would cost the loop's registers (the overlapped
    attention's last value block where no producer copies it)."""
    for load in [op for op in module.walk() if isinstance(op, tt.DescriptorLoadOp)]:
        block, first = load.parent_block(), first_reader(load)
        if block is None or first is None:
            continue
        loops = [op for op in block.ops if isinstance(op, scf.ForOp) and load.is_before_in_block(op)
                 and op.is_before_in_block(first)]
        if loops and not any(writes_memory(op) for loop in loops for op in loop.body.walk()):
            sink(load, first)


def _plan(loop: scf.ForOp, module: ModuleOp, warps: int, arch: str, tma: bool, budget: int) -> Plan | None:
    """How to pipeline `loop` (`plan_loop`), the blocks no dot reads left to plain loads where their slots would
    make the ring shallower than it is without them."""
    def planned(side: bool) -> Plan | None:
        plan = plan_loop(loop, warps, arch, tma, side)
        if plan is not None:
            plan.warp_specialized = wants_warp_specialization(plan, warps, arch)
        return plan

    plan = planned(side=True)
    if plan is None or not plan.side:
        return plan
    bare = planned(side=False)
    if bare is not None and stage_count(loop, module, plan, budget) < stage_count(loop, module, bare, budget):
        return bare
    return plan


@dataclass(frozen=True)
class PipelinePass(ModulePass):
    """Software-pipeline the loops feeding tensor-core dots (`shared_limit`: bytes the buffers may take;
    `arch`: the target, sm_90a keeps wgmma dots in flight and sm_90* copies descriptor blocks with TMA
    unless `tma` is false)."""

    name = "tinyton-pipeline"

    shared_limit: int = DEFAULT_SHARED_LIMIT
    arch: str = ""
    tma: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            check_kernel_module(op, self.name)
        except CompilationError as e:
            raise DiagnosticException(str(e)) from None
        pipeline_module(op, self.shared_limit, arch=self.arch, tma=self.tma)

