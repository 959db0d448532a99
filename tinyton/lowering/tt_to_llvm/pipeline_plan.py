"""Which loops `tinyton-pipeline` (pipeline.py) rewrites, and how: the loads feeding tensor-core dots, the pure
ops computing their addresses (cloned to run iterations ahead), the dots that may stay in flight across iterations
(and those of one left operand that one wgmma issues), and the depth whose buffers fit the shared memory left."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.dialects import scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.traits import Pure

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.float8_dot import chain_in_flight, promotion_steps
from tinyton.lowering.tt_to_llvm.mma_layout import k_major_b, m_major_a, uses_mma
from tinyton.lowering.tt_to_llvm.pipeline_tma import Load, uses_tma
from tinyton.lowering.tt_to_llvm.swizzle import LINE_BYTES
from tinyton.lowering.tt_to_llvm.wgmma_layout import MAX_N, WgmmaTiling, uses_wgmma

STAGES_ATTR = tt.NUM_STAGES_ATTR
DEFAULT_STAGES = 3


def is_zero(value: SSAValue | None) -> bool:
    """Whether a load's `other` is absent or 0.0 (`cp.async` zero-fills masked-off lanes)."""
    if value is None:
        return True
    op = value.owner
    return isinstance(op, tt.ConstantOp) and isinstance(op.value, FloatAttr) and op.value.value.data == 0.0


def feeds_mma_only(load: Load, num_warps: int | None = None, arch: str = "") -> bool:
    """Whether every user of the load is a tensor-core dot taking it as an operand, or a transpose taking it as
    the K-major B operand of such dots (kᵀ of a key block loaded as stored) or, given the launch's `num_warps`
    and `arch`, as the M-major A of wgmma dots (`a.T @ b`: `mma_layout.m_major_a`)."""
    users = [use.operation for use in load.result.uses]
    return bool(users) and all(_dot_operand(u, load.result, num_warps, arch) for u in users)


def _dot_operand(user: Operation, value: SSAValue, num_warps: int | None, arch: str) -> bool:
    if isinstance(user, tt.TransOp):
        users = [use.operation for use in user.result.uses]
        return tuple(user.order.get_values()) == (1, 0) and bool(users) and all(
            isinstance(u, tt.DotOp) and uses_mma(u) and (u.b is user.result) != (u.a is user.result)
            and (u.b is user.result or num_warps is not None and uses_wgmma(u, num_warps, arch))
            for u in users
        )
    return isinstance(user, tt.DotOp) and uses_mma(user) and value in (user.a, user.b) and value is not user.acc


def _defined_in(value: SSAValue, block: Block) -> bool:
    owner = value.owner
    return owner is block if isinstance(value, BlockArgument) else owner.parent_block() is block


@dataclass
class Plan:
    """What pipelining one loop needs: the loads, the carried values their addresses follow, and
    the body's ops computing those addresses and updates (in body order)."""

    loop: scf.ForOp
    loads: list[Load]
    carried: list[int]
    """Indices of the iter_args that the loads' addresses depend on."""
    ops: list[Operation]
    async_dots: list[tt.DotOp] = field(default_factory=list)
    """The loop's wgmma dots when they may stay in flight across iterations (all of the body's or none)."""
    tma: bool = False
    """Whether the tiles arrive by TMA (tinyton/lowering/tt_to_llvm/pipeline_tma.py) rather than cp.async."""
    barriers: SSAValue | None = None
    """With TMA: the slots' mbarriers (made by `pipeline_loop`)."""
    together: list[list[Load]] = field(default_factory=list)
    """Groups of right-operand loads whose in-flight dots one wgmma issues (`issued_together`): each group's tiles
    share one buffer, side by side in each slot, in the order of their dots."""
    warp_specialized: bool = False
    """Whether a producer warpgroup fills the slots (warp_specialize.py): consumers release each slot themselves."""
    side: int = 0
    """How many of the loads no dot reads (`tma_block`s beside the dots' operands: an attention's bias, read back
    from its slot)."""

    @property
    def dot_groups(self) -> int:
        """wgmma commit groups of an iteration: one per in-flight dot, those issued together counting once."""
        return len(self.async_dots) - sum(len(g) - 1 for g in self.together)

    @property
    def extra_slots(self) -> int:
        """Slots per buffer beyond the stages: one when dots stay in flight (unless warp-specialised)."""
        return int(bool(self.async_dots) and not self.warp_specialized)

    @property
    def stage_bytes(self) -> int:
        """Shared memory of one slot of every buffer (and of its mbarrier with TMA)."""
        tiles = sum(tt.element_type(ld.result.type).bitwidth // 8 * tile_elements(ld.result) for ld in self.loads)
        return tiles + 8 * self.tma * (1 + self.warp_specialized)


def tma_block(op: Operation, arch: str) -> bool:
    """Whether `op` is a 2-D descriptor load TMA can copy on `arch`."""
    return isinstance(op, tt.DescriptorLoadOp) and len(tt.shape_of(op.result.type)) == 2 and uses_tma([op], arch)


def pure_slice(values: Iterable[SSAValue], block: Block) -> tuple[set[Operation], set[int]] | None:
    """The ops of `block` that `values` depend on and the iter_args (indices) they reach; None when one
    of those ops is not pure or has regions."""
    ops: set[Operation] = set()
    carried: set[int] = set()
    pending = list(values)
    while pending:
        value = pending.pop()
        if not _defined_in(value, block):
            continue
        if isinstance(value, BlockArgument):
            if value.index > 0:
                carried.add(value.index - 1)
            continue
        op = value.owner
        if op in ops:
            continue
        if not op.has_trait(Pure) or op.regions:
            return None
        ops.add(op)
        pending += op.operands
    return ops, carried


def plan_loop(loop: scf.ForOp, num_warps: int, arch: str, tma: bool, side: bool = True) -> Plan | None:
    """How to pipeline `loop`: its loads that feed only tensor-core dots (all by TMA when they can be, with the
    loop's other 2-D descriptor loads TMA can copy unless not `side`; else those with a zero `other` by cp.async),
    the carried values and pure ops their addresses need; None when there are none or an address needs an impure
    op."""
    block = loop.body.block
    candidates = [
        op for op in block.ops
        if isinstance(op, (tt.LoadOp, tt.DescriptorLoadOp)) and tt.shape_of(op.result.type)
        and feeds_mma_only(op, num_warps, arch)
    ]
    tma = tma and uses_tma(candidates, arch)
    # blocks other ops read (an attention's bias) ride in the same ring, read back from their slot
    side_loads = [op for op in block.ops if op not in candidates and tma_block(op, arch)] if tma and side else []
    if side_loads:
        candidates = [op for op in block.ops if op in candidates or op in side_loads]
    loads = candidates if tma else [op for op in candidates if is_zero(op.other)]
    if not loads:
        return None
    if tma:
        roots = [v for load in loads for v in (*load.offsets, *load.shape, *load.strides)]
    else:
        roots = [v for load in loads for v in (load.ptr, load.mask) if v is not None]
    ops: set[Operation] = set()
    carried: set[int] = set()
    while True:
        found = pure_slice(roots, block)
        if found is None:
            return None
        ops, reached = found
        if reached <= carried:
            break
        carried |= reached
        roots += [block.last_op.operands[i] for i in carried]
    ordered = [op for op in block.ops if op in ops]
    dots = _async_dots(block, loads, num_warps, arch)
    together = issued_together(dots, loads, num_warps) if tma else []
    return Plan(loop, loads, sorted(carried), ordered, dots, tma, together=together, side=len(side_loads))


def issued_together(dots: list[tt.DotOp], loads: list[Load], num_warps: int) -> list[list[Load]]:
    """The right operands of in-flight wgmma dots of one left operand (SwiGLU's gate and up, Llama's key and
    value), grouped up to MAX_N columns: their B tiles side by side in a slot are one wider B, so that one
    m64n256 wgmma does the work of two m64n128 (A read once from shared memory, as a 128 x 256 tile's, which the
    H200 ran ~25 % faster than a 128 x 128 tile's two dots). A group takes dots in program order whose tile
    each warpgroup issues whole (one instruction wide) and whose B tiles, put one after the other, are laid out
    as one: N x K tiles of one 128-byte panel, or K x N tiles of whole panels."""
    by_result = {ld.result: ld for ld in loads}
    candidates: dict[tuple[SSAValue, object, bool, object], list[Load]] = {}
    for dot in dots:
        b = k_major_b(dot) or dot.b
        load = by_result.get(b)
        if load is None or not _own_tile(b, dot) or not _joinable(dot, b is not dot.b, num_warps):
            continue
        candidates.setdefault((dot.a, dot.b.type, b is not dot.b, dot.acc.type), []).append(load)
    groups = []
    for (_, b_type, _, _), members in candidates.items():
        per = MAX_N // tt.shape_of(b_type)[1]
        groups += [members[i : i + per] for i in range(0, len(members), per) if len(members[i : i + per]) > 1]
    return groups


def _own_tile(b: SSAValue, dot: tt.DotOp) -> bool:
    """Whether `dot` is the only reader of the loaded tile `b` (directly, or through its one transpose)."""
    users = [use.operation for use in b.uses]
    if users == [dot]:
        return True
    return len(users) == 1 and isinstance(users[0], tt.TransOp) and [u.operation for u in users[0].result.uses] == [dot]


def _joinable(dot: tt.DotOp, k_major: bool, num_warps: int) -> bool:
    (m, k), (_, n) = tt.shape_of(dot.a.type), tt.shape_of(dot.b.type)
    tiling = WgmmaTiling.of(m, n, num_warps)
    size = tt.element_type(dot.b.type).bitwidth // 8
    if size != 2:  # 16-bit operands (a float8 dot in flight is its loop's only dot: `_may_stay_in_flight`)
        return False
    row_bytes = (k if k_major else n) * size
    whole = row_bytes <= LINE_BYTES if k_major else row_bytes % LINE_BYTES == 0
    return tiling.groups_n == 1 and tiling.reps_n == 1 and whole


def _async_dots(block: Block, loads: list[Load], num_warps: int, arch: str) -> list[tt.DotOp]:
    """The body's dots when every one may stay in flight (`_may_stay_in_flight`); none otherwise."""
    dots = [op for op in block.walk() if isinstance(op, tt.DotOp)]
    loaded = {ld.result for ld in loads}
    return dots if all(_may_stay_in_flight(d, block, loaded, num_warps, arch) for d in dots) else []


def _may_stay_in_flight(dot: tt.DotOp, block: Block, loaded: set[SSAValue], num_warps: int, arch: str) -> bool:
    """Whether `dot` may stay in flight: on wgmma, not promoting float8 partial sums or able to promote them in
    flight (`float8_dot.chain_in_flight`: the loop's only dot), A and B pipelined loads (B perhaps read K-major
    through its transpose), its accumulator a carried value used by nothing else and its result only yielded in
    that value's place."""
    if not uses_wgmma(dot, num_warps, arch):
        return False
    if promotion_steps(dot) is not None:
        alone = sum(isinstance(op, tt.DotOp) for op in block.walk()) == 1
        if not alone or chain_in_flight(dot, num_warps) is None:
            return False
    a, b = m_major_a(dot) or dot.a, k_major_b(dot) or dot.b
    if not {a, b} <= loaded or a is b:
        return False
    acc, yield_op = dot.acc, block.last_op
    if not isinstance(acc, BlockArgument) or acc.owner is not block or acc.index == 0 or acc.uses.get_length() != 1:
        return False
    uses = list(dot.result.uses)
    return len(uses) == 1 and uses[0].operation is yield_op and uses[0].index == acc.index - 1


def stage_count(loop: scf.ForOp, module: ModuleOp, plan: Plan, shared_limit: int) -> int:
    attr = loop.attributes.get(STAGES_ATTR) or module.attributes.get(STAGES_ATTR)
    stages = attr.value.data if isinstance(attr, IntegerAttr) else DEFAULT_STAGES
    while stages > 1 and (stages + plan.extra_slots) * plan.stage_bytes > shared_limit:
        stages -= 1
    return stages


def tile_elements(value: SSAValue) -> int:
    n = 1
    for d in tt.shape_of(value.type):
        n *= d
    return n
