"""
Which layout each tile value gets, decided before any code is emitted.

Loads, reductions and dots fix layouts (*anchors*; a dot on tensor cores gives its result
the mma accumulator layout, which the epilogue then works in); elementwise ops, `expand_dims` and
`broadcast` inherit them from their operands. Tiles computed only from `arange`, `splat`
and constants are *free*: they cost a few integer ops in any layout, so the lowering
builds them on demand in whatever layout their consumer wants (what Triton achieves by
propagating layouts backwards), e.g. `arange(0, M)[:, None]` directly in the row layout of
a 2-D load, instead of converting through shared memory.

A load through free pointers is *flexible*: its default layout only holds until its first
user needs another one (an elementwise op taking a reduction result's or another load's
layout, a broadcast into a 2-D layout); then the load is pinned to that layout (seen
back through `expand_dims`/`broadcast`) and the assignment runs again, so the tile is
loaded where it is needed instead of converted through shared memory. A loop's carried tile
whose initial value is such a load (a tile loaded K steps ahead) is flexible too: the load
before the loop and the body's load of the next step's are pinned to the layout the body's
users want. A broadcast of a one-element tile (RMSNorm's row scale of a one-row product) is
free: every thread holds that element in any layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod

from xdsl.dialects import func, scf
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.axis_info import pointee_bytes
from tinyton.lowering.tt_to_llvm.layouts import Layout, blocked, scannable
from tinyton.lowering.tt_to_llvm.mma_layout import mma_tiling, uses_mma
from tinyton.lowering.tt_to_llvm.wgmma_layout import register_a_layout, uses_wgmma, wgmma_tiling

ELEMENTWISE = (
    tt.BinaryOp, tt.UnaryOp, tt.CmpOp, tt.SelectOp, tt.CastOp, tt.BitcastOp, tt.FmaOp, tt.HintOp, tt.AddPtrOp,
)
"""Ops computing each element from the same element of their operands, in any layout."""

SOURCES = (tt.ArangeOp, tt.SplatOp, tt.ConstantOp, tt.LocalLoadOp)
"""Ops whose result is free: a `tt.local_load` is read from its shared-memory slot in whatever layout the
consumer asks for (a tensor-core dot reads it with `ldmatrix` and never asks)."""
PASS_THROUGH = (*ELEMENTWISE, tt.ExpandDimsOp, tt.BroadcastOp, tt.TransOp)
"""Ops whose result is free (or flexible) when their tile operands are."""

_ROUNDS = 5
"""Re-analyses of a loop body (or of the kernel, for pinned loads) before settling: a tile carried `d` iterations
ahead (a GEMV's loads `num_stages - 1` K steps ahead) settles its `d` carried copies one round each."""


def is_tile(value: SSAValue) -> bool:
    return bool(tt.shape_of(value.type))


def _carried_as(user: Operation, index: int) -> SSAValue | None:
    """The body argument of an `scf.for` that operand `index` of `user` becomes: an initial value of the loop's,
    or a value its body yields; None for any other use."""
    if isinstance(user, scf.ForOp) and index >= 3:  # lower bound, upper bound, step, then the initial values
        return user.body.block.args[1 + index - 3]
    if isinstance(user, scf.YieldOp) and isinstance(loop := user.parent_op(), scf.ForOp):
        return loop.body.block.args[1 + index]
    return None


class LayoutAssignment:
    """`layout[v]` for every tile value `v`; `free` holds the rematerialisable ones (their
    `layout` is only the default used when no consumer asks for another)."""

    def __init__(self, kernel: func.FuncOp, num_warps: int, arch: str = ""):
        """`arch` (`sm_NN`) decides between wgmma's accumulator layout and mma.sync's."""
        self.num_warps = num_warps
        self.arch = arch
        self._pinned: dict[SSAValue, Layout] = {}
        for _ in range(_ROUNDS):
            self.layout: dict[SSAValue, Layout] = {}
            self.free: set[SSAValue] = set()
            self._flexible: dict[SSAValue, None] = {}  # in program order
            self._from_carried: set[SSAValue] = set()
            """Elementwise results computed from a flexible carried tile (`acc * alpha` of an accumulator)."""
            self._loads: list[SSAValue] = []
            self._visit_block(kernel.body.block)
            memo: dict[SSAValue, Layout | None] = {}
            for v in reversed(self._flexible):  # users first: no recursion along long elementwise chains
                memo[v] = self._wanted(v, memo)
            wanted = {v: w for v in self._loads if (w := memo[v]) is not None and w != self.layout[v]}
            if not wanted:
                break
            self._pinned |= wanted

    def default(self, value: SSAValue) -> Layout:
        """The blocked layout for `value`, vectorised for its element size when it is a pointer."""
        vec = 16 // pointee_bytes(value.type) if tt.is_pointer(value.type) else 4
        return blocked(tt.shape_of(value.type), self.num_warps, vec)

    def anchor(self, values: Iterable[SSAValue | None], fallback: SSAValue) -> Layout:
        """The layout of the first fixed tile among `values` of `fallback`'s shape, else of the first flexible
        one, preferring a tile that is neither carried by a loop nor broadcast (a GEMV's product of the weights'
        tile and the broadcast row, added to a carried accumulator, takes the weights' 16-byte loads' layout,
        not the broadcast's or the f32 accumulator's default; `acc * alpha + p @ v` of an attention's broadcast
        products takes the product's reduction's layout, not the accumulator's), else `fallback`'s default."""
        shape = tt.shape_of(fallback.type)
        tiles = [v for v in values if v is not None and tt.shape_of(v.type) == shape and v not in self.free]
        if not tiles:
            return self.default(fallback)

        def rank(v: SSAValue) -> tuple[bool, bool, bool, bool]:
            carried, broadcast = isinstance(v, BlockArgument), isinstance(v.owner, tt.BroadcastOp)
            return v in self._flexible, carried, broadcast, v in self._from_carried

        return self.layout[min(tiles, key=rank)]

    def _wanted(self, value: SSAValue, memo: dict[SSAValue, Layout | None]) -> Layout | None:
        """A layout, other than its own, that a user of the flexible `value` needs it in (`memo` holds the
        answer for the flexible values defined after it). A tile a loop carries (loaded one K step ahead) is
        wanted as the body's users of it want it, initial value and next iteration's alike; a wgmma dot's left
        operand in the layout of its register fragment (q of a warp-specialised attention, left in registers); a
        dot's start in its accumulator's layout (a row's broadcast loaded in the slice of it each thread holds)."""
        for use in value.uses:
            user = use.operation
            arg = _carried_as(user, use.index)
            if arg is not None:
                wanted = memo.get(arg) or self.layout.get(arg)
            elif len(user.results) != 1 or not is_tile(result := user.results[0]):
                continue
            else:
                deeper = memo[result] if result in self._flexible else None
                match user:
                    case tt.DotOp() if user.a is value and uses_wgmma(user, self.num_warps, self.arch):
                        wanted = register_a_layout(user, self.num_warps)  # loaded as wgmma reads it from registers
                    case tt.DotOp() if user.acc is value:  # a product's start (`-delta` of an attention backward)
                        wanted = self.layout[result]
                    case tt.ExpandDimsOp():
                        wanted = deeper.slice(user.axis.value.data) if deeper is not None else None
                    case tt.BroadcastOp():
                        wanted = (deeper or self.layout[result]).project(tt.shape_of(value.type))
                    case _ if isinstance(user, ELEMENTWISE):
                        wanted = deeper or self.layout[result]
                    case _:
                        wanted = None
            if wanted is not None and wanted != self.layout[value]:
                return wanted
        return None

    def _visit_block(self, block: Block) -> None:
        for op in block.ops:
            self._visit(op)

    def _visit(self, op: Operation) -> None:
        if isinstance(op, scf.ForOp):
            self._visit_for(op)
        elif isinstance(op, scf.IfOp):
            self._visit_if(op)
        elif isinstance(op, scf.WhileOp):
            self._visit_while(op)
        elif isinstance(op, tt.WarpSpecializeOp):
            for region in op.regions:
                self._visit_block(region.block)
        elif isinstance(op, (tt.SplitOp, tt.CombineReduceOp, tt.ScanOp, tt.InlineAsmOp, tt.PromotedDotOp)):
            self._assign_results(op)
        elif len(op.results) == 1 and is_tile(op.results[0]):
            self._assign(op, op.results[0])

    def _assign_results(self, op: Operation) -> None:
        """Ops with several results of one layout: the halves of a split, reductions, scans, inline asm, a promoted
        dot (its sum and its running chain)."""
        match op:
            case tt.SplitOp():
                whole = self.layout[op.input]
                layout = whole.without_pair_dim() if whole.has_pair_dim() else self.default(op.lhs)
            case tt.CombineReduceOp():
                layout = self.layout[op.inputs[0]].slice(op.axis.value.data)
            case tt.PromotedDotOp():
                layout = wgmma_tiling(op, self.num_warps).accumulator()
            case tt.InlineAsmOp():
                layout = self.anchor([v for v in op.args if is_tile(v)], op.outputs[0]) if is_tile(op.outputs[0]) else None
            case _:  # a scan: in its input's layout when the scan can walk it, else the default
                layout = self.layout.get(op.inputs[0]) or self.default(op.inputs[0])
                if not scannable(layout, op.axis.value.data):
                    layout = self.default(op.inputs[0])
        for result in op.results:
            if is_tile(result):
                self.layout[result] = layout

    def _assign(self, op: Operation, result: SSAValue) -> None:
        tiles = [v for v in op.operands if is_tile(v)]
        if isinstance(op, SOURCES) or isinstance(op, PASS_THROUGH) and all(v in self.free for v in tiles) or (
            isinstance(op, tt.BroadcastOp) and prod(tt.shape_of(op.input.type)) == 1  # every thread holds it
        ):
            self.free.add(result)
        elif isinstance(op, tt.LoadOp) and all(v in self.free for v in tiles) or (
            isinstance(op, PASS_THROUGH) and all(v in self.free or v in self._flexible for v in tiles)
        ):
            self._flexible[result] = None
        if isinstance(op, ELEMENTWISE) and any(
                v in self._from_carried or isinstance(v, BlockArgument) and v in self._flexible for v in tiles):
            self._from_carried.add(result)
        match op:
            case tt.ExpandDimsOp():
                layout = self.layout[op.input].expand(op.axis.value.data)
            case tt.BroadcastOp():
                shape = tt.shape_of(result.type)
                layout = (self.layout[op.input].broadcast_target(shape) or self._sibling(op, result)
                          or self.default(result))
            case tt.ReduceOp():
                layout = self.layout[op.input].slice(op.axis.value.data)
            case tt.DotOp() if uses_wgmma(op, self.num_warps, self.arch):
                layout = wgmma_tiling(op, self.num_warps).accumulator()
            case tt.DotOp() if uses_mma(op):
                layout = mma_tiling(op, self.num_warps).accumulator()
            case tt.TransOp():
                layout = self.layout[op.input].permute(op.order.get_values())
            case tt.ReshapeOp():
                layout = self.layout[op.input].reshape(tt.shape_of(result.type))
            case tt.JoinOp():
                layout = self.anchor([op.lhs, op.rhs], op.lhs).with_pair_dim()
            case tt.LoadOp():
                layout = self._pinned.get(result) or self.anchor(op.operands, op.ptr)
                if result in self._flexible:
                    self._loads.append(result)
            case _:
                layout = self.anchor(tiles, result)
        self.layout[result] = layout

    def _sibling(self, op: tt.BroadcastOp, result: SSAValue) -> Layout | None:
        """The layout of another operand of an elementwise user that broadcasting into reuses registers
        (`acc * alpha[:, None]`: alpha sliced from the scores' layout, acc in the second dot's, perhaps through a
        `tt.dot_wait` placed after the broadcast: tinyton/lowering/tt_to_llvm/dot_overlap.py)."""
        shape, source = tt.shape_of(result.type), self.layout[op.input]
        for use in result.uses:
            if not isinstance(use.operation, ELEMENTWISE):
                continue
            for v in use.operation.operands:
                layout = self.layout.get(v)
                if layout is None and isinstance(v.owner, tt.DotWaitOp):  # waited for after the broadcast
                    layout = self.layout.get(v.owner.acc)
                if (v is not result and v not in self.free and layout is not None and layout.shape == shape
                        and layout.project(tt.shape_of(op.input.type)) == source):
                    return layout
        return None

    def _visit_for(self, op: scf.ForOp) -> None:
        body = op.body.block
        carried = list(zip(op.iter_args, body.args[1:], op.results))
        for init, arg, _ in carried:
            if is_tile(init) and init in self.free:
                # Like a flexible load: the layout of what the body yields wins.
                self.layout[arg] = self.default(init)
                self._flexible[arg] = None
            elif is_tile(init):
                self.layout[arg] = self.layout[init]
                if init in self._flexible:  # a tile loaded ahead: loaded in the layout the body wants it in
                    self._flexible[arg] = None
        for _ in range(_ROUNDS):
            self._visit_block(body)
            changed = False
            for (init, arg, _), y in zip(carried, body.last_op.operands):
                if is_tile(init) and init in self.free and y not in self.free and self.layout[y] != self.layout[arg]:
                    self.layout[arg] = self.layout[y]
                    changed = True
            if not changed:
                break
        for _, arg, res in carried:
            if arg in self.layout:
                self.layout[res] = self.layout[arg]

    def _visit_while(self, op: scf.WhileOp) -> None:
        """Carried tiles keep the layout of their initial value (a free one gets its default layout);
        what the body yields is converted to it."""
        before, after = op.before_region.block, op.after_region.block
        for init, *values in zip(op.arguments, before.args, after.args, op.res):
            if is_tile(init):
                layout = self.default(init) if init in self.free else self.layout[init]
                self.layout.update((v, layout) for v in values)
        self._visit_block(before)
        self._visit_block(after)

    def _visit_if(self, op: scf.IfOp) -> None:
        regions = [r for r in (op.true_region, op.false_region) if r.blocks]
        for region in regions:
            self._visit_block(region.block)
        for i, res in enumerate(op.results):
            if is_tile(res):
                yields = [region.block.last_op.operands[i] for region in regions]
                self.layout[res] = self.anchor(yields, res)
