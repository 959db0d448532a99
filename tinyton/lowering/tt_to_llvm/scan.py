"""
`tt.scan`: an inclusive scan along one axis, in the layout the tile already has (Triton's scan lowering).

By increasing position along the axis, the elements lie in a run of each thread's registers, then lanes,
then warps, then repeated register chunks (`layouts.scannable`; the layout assignment gives any other
input the default blocked layout). Four stages, each linear in the elements a thread holds, so a long
axis makes a kernel as long as its loads, not a quadratic one:

1. each thread scans each of its runs sequentially; the run's last value is its total;
2. across lanes, one butterfly step per lane bit along the axis (`shfl.sync.bfly` of the block totals):
   each thread keeps the combination of the blocks before its own (an exclusive prefix, absent in the
   first lane) and the total of the block it now belongs to;
3. across warps, one shared-memory round: every warp writes its totals, every thread combines those of
   the warps before its own;
4. the prefix is combined into every register of the run, then the chunks are carried in order: each
   combines the total of all chunks before it.

`reverse` scans from the end: the same stages with the order of positions reversed. The earlier operand
is always the left one of the combine region, so non-commutative combines scan correctly.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from math import prod

from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.combine import combine
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers
from tinyton.lowering.tt_to_llvm.layouts import Basis, Layout
from tinyton.lowering.tt_to_llvm.reductions import shuffle
from tinyton.lowering.tt_to_llvm.shared import byte_size, load_tile, store_tile

Values = list[SSAValue]


@dataclass(frozen=True)
class Prefix:
    """The combination of the elements before a block (`values`), and whether there are any: `valid` is
    a runtime i1; `values` None means known to be none."""

    values: Values | None = None
    valid: SSAValue | None = None


def _select(ctx: KernelContext, cond: SSAValue, a: Values, b: Values) -> Values:
    return [ctx.select(cond, x, y) for x, y in zip(a, b)]


def _prepend(ctx: KernelContext, op: tt.ScanOp, earlier: Prefix, later: Prefix) -> Prefix:
    """`earlier` followed by `later`, either possibly empty."""
    if earlier.values is None:
        return later
    if later.values is None:
        return earlier
    assert earlier.valid is not None and later.valid is not None
    both = combine(ctx, op, earlier.values, later.values)
    values = _select(ctx, later.valid, _select(ctx, earlier.valid, both, later.values), earlier.values)
    return Prefix(values, ctx.int_op("or", earlier.valid, later.valid))


@dataclass
class ScanPlan:
    """Which register, lane and warp bits of `layout` move along `axis`, by increasing position."""

    layout: Layout
    axis: int

    def __post_init__(self) -> None:
        axis, layout = self.axis, self.layout
        self.lanes = sorted((i for i, b in enumerate(layout.lane) if b[axis]), key=lambda i: layout.lane[i][axis])
        self.warps = sorted((i for i, b in enumerate(layout.warp) if b[axis]), key=lambda i: layout.warp[i][axis])
        first_thread = min([layout.lane[i][axis] for i in self.lanes] + [layout.warp[i][axis] for i in self.warps],
                           default=1 << 62)
        along = [i for i, b in enumerate(layout.reg) if b[axis]]
        self.run_bits = [i for i in along if layout.reg[i][axis] < first_thread]
        self.chunk_bits = sorted((i for i in along if i not in self.run_bits), key=lambda i: layout.reg[i][axis])
        self.run_mask = sum(1 << i for i in self.run_bits)
        self.chunk_mask = sum(1 << i for i in self.chunk_bits)

    def position(self, r: int) -> int:
        return self.layout.reg_coord(r)[self.axis]

    def groups(self, reverse: bool) -> dict[int, list[int]]:
        """Per block (a register index without its run bits): its run's registers in scan order."""
        out: dict[int, list[int]] = {}
        for r in range(self.layout.num_regs):
            out.setdefault(r & ~self.run_mask, []).append(r)
        return {g: sorted(rs, key=self.position, reverse=reverse) for g, rs in out.items()}

    def totals_layouts(self) -> tuple[Layout, Layout]:
        """The layouts of the warps' block totals in shared memory: written (the axis holds warp
        positions, then chunks) and read (every thread holds all warps' totals of its blocks, the warp
        positions in the highest register bits)."""
        axis, layout = self.axis, self.layout
        num_warps = 1 << len(self.warps)

        def along(value: int, b: Basis) -> Basis:
            return b[:axis] + (value,) + b[axis + 1 :]

        reg = tuple(
            along(num_warps << self.chunk_bits.index(i), b) if i in self.chunk_bits else b
            for i, b in enumerate(layout.reg)
            if i not in self.run_bits
        )
        lane = tuple(along(0, b) for b in layout.lane)
        warp = tuple(along(1 << self.warps.index(i), b) if i in self.warps else b for i, b in enumerate(layout.warp))
        shape = along(num_warps << len(self.chunk_bits), layout.shape)
        written = Layout(shape, reg, lane, warp)
        read = Layout(
            shape,
            reg + tuple(along(1 << k, (0,) * layout.rank) for k in range(len(self.warps))),
            lane,
            tuple(along(0, b) for b in warp),
        )
        return written, read


def _bit_set(ctx: KernelContext, part: SSAValue, bit: int, reverse: bool) -> SSAValue:
    """Whether bit `bit` of the lane or warp id puts the thread in the later half (the earlier one when
    `reverse`)."""
    masked = ctx.int_op("and", part, ctx.const(1 << bit))
    return ctx.icmp("eq" if reverse else "ne", masked, ctx.const(0))


def _across_lanes(
    ctx: KernelContext, op: tt.ScanOp, plan: ScanPlan, totals: dict[int, Values], reverse: bool
) -> dict[int, Prefix]:
    """Butterfly steps over the lane bits along the axis; `totals` become the warp's block totals."""
    prefixes = {g: Prefix() for g in totals}
    for bit in plan.lanes:
        later = _bit_set(ctx, ctx.lane, bit, reverse)
        for g, total in totals.items():
            partner = [shuffle(ctx, v, 1 << bit) for v in total]
            prefixes[g] = _prepend(ctx, op, Prefix(partner, later), prefixes[g])
            totals[g] = combine(ctx, op, _select(ctx, later, partner, total), _select(ctx, later, total, partner))
    return prefixes


def _warp_position(ctx: KernelContext, plan: ScanPlan, reverse: bool) -> SSAValue:
    """This warp's position along the axis among the warps of its block, in scan order."""
    position = ctx.const(0)
    for k, bit in enumerate(plan.warps):
        b = ctx.int_op("lshr", ctx.int_op("and", ctx.warp, ctx.const(1 << bit)), ctx.const(bit))
        position = ctx.int_op("or", position, ctx.int_op("shl", b, ctx.const(k)))
    if reverse:
        position = ctx.int_op("sub", ctx.const((1 << len(plan.warps)) - 1), position)
    return position


def _across_warps(
    ctx: KernelContext,
    op: tt.ScanOp,
    plan: ScanPlan,
    totals: dict[int, Values],
    prefixes: dict[int, Prefix],
    reverse: bool,
) -> None:
    """One shared-memory round: each thread prepends the totals of the warps before its own; `totals`
    become the totals over all warps."""
    written, read = plan.totals_layouts()
    blocks = sorted(totals)  # register order of `written`
    elems = [v.type for v in totals[blocks[0]]]
    sizes = [-(-prod(written.shape) * byte_size(e) // 16) * 16 for e in elems]
    start = ctx.smem_buffer(sum(sizes), "a scan across warps")
    offsets = [start + sum(sizes[:k]) for k in range(len(elems))]
    for k, (elem, offset) in enumerate(zip(elems, offsets)):
        store_tile(ctx, [totals[g][k] for g in blocks], written, elem, offset)
    ctx.barrier()
    loaded = [load_tile(ctx, read, written.shape, e, o) for e, o in zip(elems, offsets)]
    ctx.smem_read(start, sum(sizes))
    num_warps, n = 1 << len(plan.warps), len(blocks)
    position = _warp_position(ctx, plan, reverse)
    for s, g in enumerate(blocks):
        ordered = [[values[s + n * w] for values in loaded] for w in range(num_warps)]
        if reverse:
            ordered.reverse()
        inclusive = [ordered[0]]
        for t in ordered[1:]:
            inclusive.append(combine(ctx, op, inclusive[-1], t))
        before = inclusive[0]
        for w in range(1, num_warps - 1):
            before = _select(ctx, ctx.icmp("eq", position, ctx.const(w + 1)), inclusive[w], before)
        has_before = ctx.icmp("ne", position, ctx.const(0))
        prefixes[g] = _prepend(ctx, op, Prefix(before, has_before), prefixes[g])
        totals[g] = inclusive[-1]


@lowers(tt.ScanOp)
def lower_scan(ctx: KernelContext, op: tt.ScanOp) -> None:
    layout = ctx.layout_of(op.outputs[0])
    reverse = bool(op.reverse.value.data)
    plan = ScanPlan(layout, op.axis.value.data)
    regs = [list(v) for v in zip(*(ctx.get(x, layout) for x in op.inputs))]
    groups = plan.groups(reverse)
    totals: dict[int, Values] = {}
    for g, run in groups.items():
        for prev, r in pairwise(run):
            regs[r] = combine(ctx, op, regs[prev], regs[r])
        totals[g] = regs[run[-1]]
    prefixes = _across_lanes(ctx, op, plan, totals, reverse)
    if plan.warps:
        _across_warps(ctx, op, plan, totals, prefixes, reverse)
    for g, run in groups.items():
        prefix = prefixes[g]
        if prefix.values is not None and prefix.valid is not None:
            for r in run:
                regs[r] = _select(ctx, prefix.valid, combine(ctx, op, prefix.values, regs[r]), regs[r])
    chunks: dict[int, list[int]] = {}
    for g in groups:
        chunks.setdefault(g & ~plan.chunk_mask, []).append(g)
    for blocks in chunks.values():
        ordered = sorted(blocks, key=plan.position, reverse=reverse)
        carry = totals[ordered[0]]
        for i, g in enumerate(ordered[1:], 2):
            for r in groups[g]:
                regs[r] = combine(ctx, op, carry, regs[r])
            if i < len(ordered):
                carry = combine(ctx, op, carry, totals[g])
    for k, result in enumerate(op.outputs):
        ctx.set(result, layout, [v[k] for v in regs])
