"""
The state of one kernel's lowering: what each tt value became, and the helpers every op's
lowering shares (thread coordinates, shared memory, loops).

A tile value becomes a `Tile`: a layout plus one LLVM SSA value per register of the
calling thread, in the layout's register order. A scalar is a `Tile` without layout (one
register, the same in every thread). A *free* tile (see `assign`) becomes a `Lazy`,
emitted at its definition point the first time a consumer asks for it in some layout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E5M2Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import DiagnosticException

from tinyton.dialects import nvvm, tt
from tinyton.lowering.tt_to_llvm.assign import LayoutAssignment
from tinyton.lowering.tt_to_llvm.axis_info import AxisAnalysis
from tinyton.lowering.tt_to_llvm.emitter import GLOBAL_PTR, SHARED_PTR, Emitter, T
from tinyton.lowering.tt_to_llvm.layouts import (
    LANES,
    Layout,
    register_map,
    replica_mask,
)

SMEM_LIMIT = 48 * 1024
"""Static shared memory a kernel may use without opting in at launch (the default limit)."""
SMEM_ANYWHERE = (0, 1 << 30)
"""`smem_pending` when any byte may still be read."""


NAMED_BARRIER = 1
"""The hardware barrier a warp-specialised kernel's consumers synchronise on (0 is every thread's)."""


class LoweringError(DiagnosticException):
    """The kernel cannot be lowered (unsupported op, too much shared memory, ...)."""


NUM_WARPS_ATTR = "tt.num_warps"
MIN_PROGRAMS_ATTR = "tt.min_programs_per_sm"


def programs_per_sm(module: Operation) -> int:
    """The programs the module's kernel asks to fit on an SM at once (`tt.min_programs_per_sm`, else 1)."""
    attr = module.attributes.get(MIN_PROGRAMS_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 1
"""Module attribute: programs each SM must hold at once (a grid-barrier kernel's); ptxas caps the registers
for it (`.minnctapersm`)."""
DEFAULT_NUM_WARPS = 4


def kernel_num_warps(module: ModuleOp, requested: int | None) -> int:
    attr = module.attributes.get(NUM_WARPS_ATTR)
    if requested is not None:
        n = requested
    else:
        n = attr.value.data if isinstance(attr, IntegerAttr) else DEFAULT_NUM_WARPS
    if n not in (1, 2, 4, 8, 16):
        raise LoweringError(f"num_warps must be 1, 2, 4, 8 or 16, got {n}")
    return n


def llvm_type(t: Attribute) -> Attribute:
    """The LLVM type of one element of a tt type: ints signless (unsigned ones pick unsigned instructions
    from their tt type), float8 as the i8 of its bits."""
    elem = tt.element_type(t)
    if isinstance(elem, tt.PointerType):
        return GLOBAL_PTR
    if isinstance(elem, IntegerType):
        return IntegerType(elem.bitwidth)
    if isinstance(elem, Float8E4M3FNType | Float8E5M2Type):
        return IntegerType(8)
    return elem


@dataclass
class Tile:
    layout: Layout | None
    regs: list[SSAValue]


@dataclass
class Lazy:
    op: Operation
    anchor: Operation
    """A placeholder op at the definition point: materialisations go right before it."""
    cache: dict[Layout, list[SSAValue]] = field(default_factory=dict)


TileLowering = Callable[["KernelContext", Operation, "Layout | None"], list[SSAValue]]
OpLowering = Callable[["KernelContext", Operation], None]
TILE_LOWERINGS: dict[type[Operation], TileLowering] = {}
"""Ops with one result: give its registers in the requested layout (None for a scalar)."""
OP_LOWERINGS: dict[type[Operation], OpLowering] = {}
"""Other ops (stores, control flow): lowered once, in place."""


def lowers_tile(*op_types: type[Operation]) -> Callable[[T], T]:
    def register(fn: T) -> T:
        for t in op_types:
            TILE_LOWERINGS[t] = fn  # type: ignore[assignment]
        return fn

    return register


def lowers(*op_types: type[Operation]) -> Callable[[T], T]:
    def register(fn: T) -> T:
        for t in op_types:
            OP_LOWERINGS[t] = fn  # type: ignore[assignment]
        return fn

    return register


LayoutConversion = Callable[["KernelContext", Sequence[SSAValue], Layout, Attribute, Layout], list[SSAValue]]
"""Moves a tile's registers between two layouts that share no registers: `(ctx, regs, src, elem, dst)`."""


class KernelContext(Emitter):
    def __init__(
        self,
        func: llvm.FuncOp,
        num_warps: int,
        assign: LayoutAssignment,
        axis: AxisAnalysis,
        smem_symbol: str,
        convert_layout: LayoutConversion,
        smem_limit: int = SMEM_LIMIT,
        wgmma: bool = False,
    ):
        """`convert_layout` is the shared-memory conversion (tinyton/lowering/tt_to_llvm/shared.py); the
        pass passes it in because shared-memory staging is built on this context's helpers."""
        super().__init__(func)
        self.convert_layout = convert_layout
        self.num_warps = num_warps
        self.assign = assign
        self.axis = axis
        self.smem_symbol = smem_symbol
        self.smem_limit = smem_limit
        self.wgmma = wgmma
        """Whether the kernel's dots use wgmma (whose shared-memory reads need `fence.proxy.async`)."""
        self.smem_floor = 0
        """Bytes at the bottom of shared memory reserved for the whole kernel (`reserve_smem`)."""
        self.local_buffers: dict[SSAValue, int] = {}
        """Byte offset of each `tt.local_alloc` buffer (and `tt.barrier_alloc` mbarriers)."""
        self.tensor_maps: dict[Operation, SSAValue] = {}
        """The parameter holding the TMA map each `tt.tma_copy` reads (tinyton/lowering/tt_to_llvm/tma.py)."""
        self.barrier_threads: int | None = None
        """Threads of the named barrier `barrier()` stands for (a warp-specialised kernel's consumers: its producer
        warps take no part); None: every thread of the program."""
        self.in_turn = False
        """Between a consumer warpgroup's `take` and `pass` of its turn (warpgroup_turns.py), where a barrier of
        all consumers would deadlock."""
        self.leader_warp = 0
        """The warp whose lane 0 issues the program's TMA copies and mbarrier arrivals (the producer's first)."""
        self.spare_warps = False
        """Whether warps past the program's `num_warps` run the code being lowered: a warp-specialised kernel's
        producer warps, before the split (warp_roles.py). Their warp index wraps onto the program's layouts, so
        `replica_predicate` counts them as replicas."""
        self.store_tile: int | None = None
        """Byte offset of the shared-memory tile TMA stores stage their blocks in (tma.reserve_store_tile)."""
        self.last_barrier: Operation | None = None
        """The latest barrier of the block being lowered since its last TMA store (a kernel with a store tile, the
        stores' leader among its threads): the next store's leader waits for the previous store's reads of the tile
        right before it, instead of waiting and synchronising again (tma.py); the dk/dv kernel's step reuses the
        barrier that publishes ds for its product with k."""
        self.programs_per_sm = 1
        """Programs that share an SM (`tt.min_programs_per_sm`): a warp-specialised program's share of its registers."""
        self.smem_bytes = 0
        self.smem_pending: tuple[int, int] | None = None
        """Bytes of shared memory that threads may read until the next barrier."""
        self.smem_pins: dict[SSAValue, int] = {}
        """Dots in flight whose operands were staged in shared memory (`pin_smem`), each with the floor before it."""
        self.dots_outlive_waits = False
        """Whether a dot of the loop being lowered may run past the wait its staged operands are unpinned at, or
        into the next iteration, where `smem_pins` does not show it (control_flow.py): then no barrier is taken to
        order every earlier read of shared memory (`barrier`)."""
        self.values: dict[SSAValue, Tile | Lazy] = {}
        self.module_ops: dict[str, Operation] = {}
        """Symbols the kernel needs beside it in the module (`vprintf`, format strings), by name."""
        tid = self.hoisted(lambda: self.value(nvvm.read_special_register("tid.x")))
        self.lane = self.hoisted(lambda: self.int_op("and", tid, self.const(LANES - 1)))
        self.warp = self.hoisted(lambda: self.int_op("lshr", tid, self.const(5)))

    # --- threads ------------------------------------------------------------------------------

    def _bits_value(self, tid_part: SSAValue, bases: Sequence[int]) -> SSAValue:
        """Sum over set bits `i` of `tid_part` of `bases[i]` (distinct powers of two or 0),
        with one and+shift per run of bits that map to consecutive powers."""
        out = self.const(0)
        i = 0
        while i < len(bases):
            if not bases[i]:
                i += 1
                continue
            n = 1
            while i + n < len(bases) and bases[i + n] == bases[i] << n:
                n += 1
            part = self.int_op("and", tid_part, self.const(((1 << n) - 1) << i))
            shift = bases[i].bit_length() - 1 - i
            part = self.int_op("shl", part, self.const(shift)) if shift >= 0 else self.int_op(
                "lshr", part, self.const(-shift)
            )
            out = self.int_op("or", out, part)
            i += n
        return out

    def thread_coords(self, layout: Layout) -> list[SSAValue]:
        """Per dimension, the coordinate of this thread's register 0 (computed once)."""

        def build() -> list[SSAValue]:
            return [
                self.int_op(
                    "or",
                    self._bits_value(self.lane, [b[d] for b in layout.lane]),
                    self._bits_value(self.warp, [b[d] for b in layout.warp]),
                )
                for d in range(layout.rank)
            ]

        return self.cached(("coords", layout.lane, layout.warp), build)

    def pinned_coords(self, layout: Layout) -> list[SSAValue]:
        """`thread_coords` through a copy LLVM cannot move (a volatile `mov`), here: what is computed from it stays
        where it is used. A tile's register addresses derived from the kernel-wide coordinates are loop-invariant, and
        LLVM hoists them out of the loop, each then held in a register for the whole loop (the attention backward's
        dk/dv kernel staged two tiles a step, 31 registers: it spilled)."""
        return [self.value(llvm.InlineAsmOp("mov.b32 $0, $1;", "=r,r", [t], [i32], has_side_effects=True))
                for t in self.thread_coords(layout)]

    def coords(self, layout: Layout, r: int, base: Sequence[SSAValue] | None = None) -> list[SSAValue]:
        """Coordinates of register `r` of this thread (from `base`, the thread's coordinates, if given)."""
        base = base if base is not None else self.thread_coords(layout)
        return [self.int_op("add", t, self.const(c)) for t, c in zip(base, layout.reg_coord(r))]

    def replica_predicate(self, layout: Layout | None) -> SSAValue | None:
        """True in exactly one of the threads holding the same elements (None: no replicas)."""

        def build() -> SSAValue | None:
            conds = []
            for part, bits in (
                (self.lane, replica_mask(layout.lane) if layout else LANES - 1),
                (self.warp, replica_mask(layout.warp) if layout else self.num_warps - 1),
            ):
                if bits:
                    conds.append(self.icmp("eq", self.int_op("and", part, self.const(bits)), self.const(0)))
            if self.spare_warps:
                conds.append(self.icmp("ult", self.warp, self.const(self.num_warps)))
            return self.all_of(conds)

        key = ("replica", self.spare_warps, *((layout.lane, layout.warp) if layout else ()))
        return self.cached(key, build)

    # --- shared memory ------------------------------------------------------------------------

    def smem_buffer(self, nbytes: int, what: str, align: int = 16) -> int:
        """
        Byte offset of a shared-memory buffer for one write, barrier, read round.

        Rounds alternate between the bottom of the round area (above the pipelining buffers, which
        live for the whole kernel) and right above the previous round's buffer, so that a round never
        overwrites what other threads may still be reading from the previous one (its barrier ordered
        everything older); only when neither fits is a barrier needed first.
        """
        floor = -(-self.smem_floor // align) * align
        if floor + nbytes > self.smem_limit:
            beside = f" beside {floor} bytes of pipelining buffers (fewer num_stages)" if floor else ""
            raise LoweringError(
                f"{what} needs {nbytes} bytes of shared memory, more than the {self.smem_limit} bytes a "
                f"kernel may use{beside}; use smaller tiles"
            )
        start = floor
        if self.smem_pending is not None:
            low, high = self.smem_pending
            above = max(floor, -(-high // align) * align)
            if floor + nbytes > low:
                if above + nbytes <= self.smem_limit:
                    start = above
                else:
                    self.barrier()
        self.smem_bytes = max(self.smem_bytes, start + nbytes)
        return start

    def reserve_smem(self, nbytes: int, align: int) -> int:
        """Byte offset of shared memory owned for the whole kernel (below every round's buffer);
        call before lowering any op."""
        start = -(-self.smem_floor // align) * align
        self.smem_floor = start + nbytes
        if self.smem_floor > self.smem_limit:
            raise LoweringError(
                f"the pipelining buffers need {self.smem_floor} bytes of shared memory, more than the "
                f"{self.smem_limit} bytes a kernel may use"
            )
        self.smem_bytes = max(self.smem_bytes, self.smem_floor)
        return start

    def pin_smem(self, dot: SSAValue, end: int) -> None:
        """Keep the rounds lowered after this point above `end` until `dot` (a wgmma left in flight: it reads its
        staged operands until its `tt.dot_wait`, which no barrier orders) is waited for (`unpin_smem`)."""
        self.smem_pins[dot] = self.smem_floor
        self.smem_floor = max(self.smem_floor, end)

    def unpin_smem(self, dot: SSAValue) -> None:
        """`dot` is waited for: once no pinned dot runs, rounds may use the staged operands' bytes again."""
        floor = self.smem_pins.pop(dot, None)
        if floor is not None and not self.smem_pins:
            self.smem_floor = min(floor, self.smem_floor)

    def smem_read(self, start: int, nbytes: int) -> None:
        """Record that threads read `[start, start + nbytes)` since the last barrier."""
        self.smem_pending = (start, start + nbytes)

    def smem_ptr(self, elem: Attribute, index: SSAValue | int, byte_offset: int = 0) -> SSAValue:
        """Address of element `index` of an `elem` array at `byte_offset` in shared memory."""
        base = self.cached(
            ("smem", byte_offset),
            lambda: self.gep(
                self.value(llvm.AddressOfOp(self.smem_symbol, SHARED_PTR)), byte_offset, IntegerType(8)
            ),
        )
        return self.gep(base, index, elem)

    @property
    def sm(self) -> int:
        """The target's compute capability as one number (sm_90a: 90, sm_120: 120)."""
        found = re.match(r"sm_(\d+)", self.assign.arch)
        return int(found[1]) if found else 90

    def leader(self) -> SSAValue:
        """True in lane 0 of the leader warp only (thread 0, or the producer's first thread): the thread that issues
        the program's TMA copies and stores and mbarrier arrivals."""
        warp = self.leader_warp

        def build() -> SSAValue:
            other = self.int_op("xor", self.warp, self.const(warp)) if warp else self.warp
            return self.icmp("eq", self.int_op("or", self.lane, other), self.const(0))

        return self.cached(("tma-leader", warp), build)

    def barrier(self) -> None:
        """A barrier of the program's threads (a warp-specialised kernel's consumers: a named one). Every read of
        shared memory before it is done once it is passed, but a staged operand's read by a dot still in flight:
        with none (no pin, none outliving its wait), the next round may write anywhere (`smem_pending`). The attention
        dk/dv step stages ds after the barrier at its top, with no barrier of its own."""
        if self.in_turn:
            raise LoweringError(
                "a barrier of all consumer warps between a warpgroup's `take` and `pass` (tt.warpgroup_turn) would"
                " wait for warpgroups waiting for this one's turn: keep only the step's dots between them")
        if self.barrier_threads is None:
            op: Operation = self.insert(nvvm.Barrier0Op())
        else:
            operands = [self.const(NAMED_BARRIER), self.const(self.barrier_threads)]
            op = self.insert(llvm.CallIntrinsicOp("llvm.nvvm.barrier.cta.sync.aligned.count", operands, []))
        if self.store_tile is not None and self.leader_warp == 0:
            self.last_barrier = op
        if not self.smem_pins and not self.dots_outlive_waits:
            self.smem_pending = None

    # --- values -------------------------------------------------------------------------------

    def set(self, value: SSAValue, layout: Layout | None, regs: Sequence[SSAValue]) -> None:
        self.values[value] = Tile(layout, list(regs))

    def scalar(self, value: SSAValue) -> SSAValue:
        tile = self.values[value]
        assert isinstance(tile, Tile) and tile.layout is None
        return tile.regs[0]

    def layout_of(self, value: SSAValue) -> Layout:
        """The layout a tile has, or is built in when its consumer does not choose one."""
        return self.assign.layout[value]

    def get(self, value: SSAValue, layout: Layout | None) -> list[SSAValue]:
        """The registers of `value` in `layout`; `layout` may broadcast size-1 dimensions."""
        if layout is None:
            return [self.scalar(value)]
        entry = self.values[value]
        if isinstance(entry, Lazy):
            shape = tt.shape_of(value.type)
            if shape == layout.shape:
                return self._materialize(entry, layout)
            src = layout.project(shape)
            regs = self._materialize(entry, src)
            return [regs[i] for i in register_map(src, layout)]  # type: ignore[union-attr]
        assert entry.layout is not None
        if entry.layout == layout:
            return entry.regs
        mapping = register_map(entry.layout, layout)
        if mapping is not None:
            return [entry.regs[i] for i in mapping]
        return self.convert_layout(self, entry.regs, entry.layout, llvm_type(value.type), layout)

    def _materialize(self, lazy: Lazy, layout: Layout) -> list[SSAValue]:
        if layout not in lazy.cache:
            saved, self.ip = self.ip, InsertPoint.before(lazy.anchor)
            try:
                lazy.cache[layout] = TILE_LOWERINGS[type(lazy.op)](self, lazy.op, layout)
            finally:
                self.ip = saved
        return lazy.cache[layout]

    # --- loops and ops -----------------------------------------------------------------------

    def loop(
        self,
        lb: SSAValue,
        ub: SSAValue,
        step: SSAValue,
        inits: Sequence[SSAValue],
        body: Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]],
    ) -> list[SSAValue]:
        """`for (iv = lb; iv < ub; iv += step)` carrying `inits` through block arguments;
        `body(iv, carried)` emits one iteration and returns the next carried values. `iv` has `lb`'s type
        (i32, or i64 where the bounds need it)."""
        header = self.new_block([lb.type, *(v.type for v in inits)])
        self.insert(llvm.BrOp(header, lb, *inits))
        self.move_to(header)
        iv, *carried = header.args
        first = self.new_block()
        exit_block = Block()
        self.insert(llvm.CondBrOp(self.icmp("slt", iv, ub), first, [], exit_block, []))
        self.move_to(first)
        # An iteration may read shared memory that the next one overwrites.
        self.smem_pending = SMEM_ANYWHERE
        next_values = body(iv, list(carried))
        self.insert(llvm.BrOp(header, self.int_op("add", iv, step), *next_values))
        self.func.body.add_block(exit_block)
        self.move_to(exit_block)
        self.smem_pending = SMEM_ANYWHERE
        return list(carried)

    def lower_block(self, block: Block) -> None:
        """Lower the ops of a tt block, up to (not including) its terminator. `last_barrier` is the block's own:
        a nested block may run again (a loop's) or not at all (a branch)."""
        self.last_barrier = None
        for op in block.ops:
            if not op.has_trait(IsTerminator):
                self.lower_op(op)
        self.last_barrier = None

    def lower_op(self, op: Operation) -> None:
        if type(op) in OP_LOWERINGS:
            OP_LOWERINGS[type(op)](self, op)
            return
        if type(op) not in TILE_LOWERINGS:
            raise LoweringError(f"tinyton-to-llvm cannot lower {op.name}")
        result = op.results[0]
        if result in self.assign.free:
            self.values[result] = Lazy(op, self.marker())
        else:
            layout = self.assign.layout.get(result)
            assert layout is None or layout.shape == tt.shape_of(result.type), f"bad layout for {op.name}"
            self.set(result, layout, TILE_LOWERINGS[type(op)](self, op, layout))
