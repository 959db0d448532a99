"""A matmul's left operand read per K tile: computed from arrays in memory (`(x * r * w).astype(bf16)`), with the
row statistics it needs (RMSNorm's `mean(x * x)`) from a loop over K of their own or from the products' loop.

A computed left operand (tinyton/analysis/matmul_operands.py) is evaluated per K tile from tiles of the arrays
it reads (`evaluate`), each loaded by `k_tiles` through its map in the K loop (`rg.dom.k_maps`); the loops load
them K steps ahead and carry them in registers (`tiles_at`: the pipeliner stages only loads feeding a dot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Operation, SSAValue

from tinyton.analysis.views import View
from tinyton.analysis.matmul_operands import K_AXIS, is_scalar_constant
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.emitter import Emitter, f32, identity
from tinyton.lowering.fusion.reduction_kinds import COMBINE, accumulator_element, reduction_kind
from tinyton.lowering.fusion.region import inside_bounds


RowStatistic = tuple[tta.ReduceOp, SSAValue, Sequence[Operation]]
"""A reduction along K of an elementwise chain (in program order) of an array in memory."""


def evaluate(rg, ops: Sequence[Operation], env: dict[SSAValue, SSAValue], leaf) -> None:
    """The elementwise `ops` (program order) on K tiles, into `env`: their operands are values of `env`,
    scalar constants, per-row values of the program scope, or arrays in memory (`leaf(value)` loads a tile)."""
    em = rg.em
    for op in ops:
        args = []
        for v in op.operands:
            if v in env:
                args.append(env[v])
            elif in_memory(rg, v):
                env[v] = leaf(v)
                args.append(env[v])
            elif is_scalar_constant(v):
                args.append(em.const(v.op.value.value.data, v.type))
            else:
                args.append(rg.root.get(v))
        # a reshape of size-1 dims changes no tile: the maps (`dom.k_maps`) placed its operands
        env[op.results[0]] = args[0] if isinstance(op, tta.ReshapeOp) else rg.elementwise(op, args)


def k_tiles(rg, k0: SSAValue, bounded: bool = False, bk: int | None = None,
            one_row: bool = False) -> tuple[SSAValue | None, Callable[[SSAValue], SSAValue]]:  # fmt: skip
    """The mask of the K chunk at `k0` (None: K divides, unless `bounded`: a chunk that may start past K) and a
    loader of the `[BM or 1, BK or 1]` tile of an array in memory read in the K loop (its map: `rg.dom.k_maps`;
    `bk`: a K step other than the product's; `one_row`: `[1, BK]` tiles of a product of one row, read at row 0)."""
    em, n, bk = rg.em, len(rg.dom.shape), bk or rg.geom.notes["BK"]
    m_src = rg.geom.source_of(n - 2)
    K = shape_of(rg.dom.matmul.lhs.type)[-1]
    kk = em.add(k0, em.arange(bk, 2, 1))
    k_mask = em.cmp("lt", kk, em.i32(K)) if K % bk or bounded else None

    def load(value: SSAValue) -> SSAValue:
        view = rg.dom.view(value)
        strides, k_stride = _operand_strides(view, rg.dom.k_maps[value])
        if one_row:  # the one row's offset along the row axes is 0
            strides = {a: st for a, st in strides.items() if a not in m_src.axes}
        rows = any(a in strides for a in m_src.axes)
        shape = (m_src.block if rows else 1, bk if k_stride else 1)
        key = ("k-loop rows", view.base, tuple(sorted(strides.items())), view.offset, shape)
        if rg.root.get(key) is None:  # loop invariant: the pointers of the rows
            with em.inside(rg.root.block):
                off = em.add(rg.offsets(strides, rg.root), em.i32(view.offset) if view.offset else None)
                ptrs = em.to_shape(rg.ptrs[view.base], shape)
                rg.root.memo[key] = ptrs if off is None else em.emit(tt.AddPtrOp(ptrs, em.to_shape(off, shape)))
        ptrs = rg.root.get(key)
        if k_stride:
            ptrs = em.emit(tt.AddPtrOp(ptrs, em.to_shape(em.mul_int(kk, k_stride), shape)))
        element = element_type(view.base.type)
        # a piece of a concatenation or padding reads only inside its bounds (fuzz seed 20261123 cases 1350, 1744
        # read memory before or after the piece's array)
        inside = inside_bounds(em, view, rg.dom.k_maps[value], lambda a: kk if a == K_AXIS else rg.offsets({a: 1}, rg.root))
        if inside is False:  # the tile reads nothing but the view's fill
            return em.const(view.fill or 0, element, shape)
        mask = em.and_(em.and_(m_src.mask if rows else None, k_mask if k_stride else None), inside)
        if mask is None:
            return em.emit(tt.LoadOp(ptrs))
        return masked_load(em, ptrs, em.to_shape(mask, shape), em.const(view.fill or 0, element, shape))

    return k_mask, load


def in_memory(rg, v: SSAValue) -> bool:
    """Whether an operand of a K-tile computation is an array read a tile at a time: neither a scalar constant
    nor a per-row value of the program scope."""
    return not is_scalar_constant(v) and rg.root.get(v) is None


def prologue_leaves(rg, ops: Sequence[Operation]) -> list[SSAValue]:
    """The arrays in memory that `evaluate` loads a K tile of for `ops` (in its order, once each)."""
    produced = {r for op in ops for r in op.results}
    return list(dict.fromkeys(v for op in ops for v in op.operands if v not in produced and in_memory(rg, v)))


def _operand_strides(view: View, m: tuple[int | None, ...]) -> tuple[dict[int, int], int]:
    """Per-domain-axis strides of an array read in a K loop through its map `m`, and its K stride (0: the
    array is constant along K)."""
    strides, k_stride = {}, 0
    for a, st in zip(m, view.strides):
        if a == K_AXIS:
            k_stride = st
        elif a is not None and st:
            strides[a] = st
    return strides, k_stride


def masked_identity(em: Emitter, red: tta.ReduceOp, value: SSAValue, mask: SSAValue | None) -> SSAValue:
    """`value` in the reduction's accumulator type, the lanes outside `mask` its identity."""
    kind, el = reduction_kind(red), acc_element(red)
    v = em.cast(value, el)
    return v if mask is None else em.select(mask, v, em.const(identity(kind, el), el))


def finish_row(rg, red: tta.ReduceOp, acc: SSAValue, K: int) -> SSAValue:
    """`[BM, BK]` partials -> the reduction's `[BM, 1]` tile (`[1, 1]` when it has no row axis: M is 1
    and the masked rows hold the identity)."""
    em, kind = rg.em, reduction_kind(red)
    row = em.reduce(kind, acc, 1)
    if isinstance(red, tta.ReduceMeanOp):
        row = em.binary(tt.MulOp, row, em.const(1.0 / K, f32))
    rows = rg.geom.source_of(len(rg.dom.shape) - 2).axes
    if not set(rows) & set(rg.dom.map_of(red.result)):
        row = em.reduce(kind, row, 0)
    return em.cast(row, element_type(red.result.type))


ROW_STATISTICS_STEP = 4096
"""The most K elements a step of a one-row product's statistics loop reads: a decode step's 2048- or 4096-wide
row in one step (at the product's 512, its RMSNorm waited on four dependent loads before the weights' first)."""
ROW_STATISTICS_LANES = 32
"""The most elements of a one-row statistics step each thread holds (a `[1, BK]` f32 tile, loaded one step ahead)."""
ROW_STATISTICS_AHEAD = 4
"""Most K steps a statistics loop over several rows loads ahead, its `[BM, BK]` tiles carried in registers: a decode
batch's RMSNorm over 16-row tiles of 128 is 16 steps for a 2048-wide row, each waiting on its own load when one
step ahead."""
ROW_STATISTICS_AHEAD_LANES = 64
"""Most elements a thread holds of the tiles a statistics loop over several rows loads ahead (16 x 128 f32 tiles: two
steps on 2 warps, four on 4; 64 x 128: one). ptxas -v (sm_90a) on a 48-row normed projection: four steps of 64 x 128
took the padded 64-row tile from 168 to 254 registers a thread."""


def emit_row_statistics(rg, stats: Sequence[RowStatistic]) -> None:
    """A loop over K before the products' computing `stats` (read by a left operand's prologue), into the
    program scope's memo; its tiles are loaded ahead (one K step for one row, ROW_STATISTICS_AHEAD for more)."""
    em, op = rg.em, rg.dom.matmul
    K, bk = shape_of(op.lhs.type)[-1], rg.geom.notes["BK"]
    m_src = rg.geom.source_of(len(rg.dom.shape) - 2)
    # one row (a batch-1 decode step), in a tile of 1 or of 16 rows: the row alone, in a few wide steps (16-row
    # tiles of the product's K step made the gate/up projection's RMSNorm 16 dependent loads before its weights')
    chains = [o for _, _, chain in stats for o in chain]
    one_row = m_src.extent == 1 and all(rg.root.get(v) is None for o in chains for v in o.operands)
    bm, threads = 1 if one_row else m_src.block, 32 * rg.geom.num_warps
    if one_row:
        bk = max(bk, min(next_power_of_2(K), ROW_STATISTICS_STEP, ROW_STATISTICS_LANES * threads))
    init = [em.const(identity(reduction_kind(red), acc_element(red)), acc_element(red), (bm, bk)) for red, _, _ in stats]
    leaves = list(dict.fromkeys([*(source for _, source, _ in stats), *prologue_leaves(rg, chains)]))

    per_step = bm * bk * len(leaves) // threads  # elements a thread holds of a step's tiles
    affordable = ROW_STATISTICS_AHEAD_LANES // max(1, per_step)
    depth = 1 if one_row else max(1, min(ROW_STATISTICS_AHEAD, cdiv(K, bk), affordable))

    def step_tiles(k0: SSAValue, bounded: bool) -> list[SSAValue]:
        return tiles_at(rg, leaves, k0, bounded, bk, one_row)

    def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        loaded, next_tiles = turn_ring(em, carried[len(stats) :], depth, bk, k0, step_tiles)
        k_mask, load = k_tiles(rg, k0, bk=bk, one_row=one_row)
        env: dict[SSAValue, SSAValue] = dict(zip(leaves, loaded))
        out = []
        for (red, _, chain), part in zip(stats, carried):
            evaluate(rg, chain, env, load)
            value = em.to_shape(env[red.input], (bm, bk))
            # rows past M hold the identity too (`finish_row` may sum rows)
            mask = em.and_(k_mask, None if one_row else m_src.mask)
            out.append(em.binary(COMBINE[reduction_kind(red)], part, masked_identity(em, red, value, mask)))
        return [*out, *next_tiles]

    tiles0 = first_steps(step_tiles, depth, lambda i: em.i32(i * bk), lambda i: (i + 1) * bk > K)
    results = em.for_loop(0, K, bk, [*init, *tiles0], body)
    for (red, _, _), acc in zip(stats, results):
        rg.root.memo[red.result] = finish_row(rg, red, acc, K)


def tiles_at(rg, leaves: Sequence[SSAValue], k0: SSAValue, bounded: bool = False, bk: int | None = None,
             one_row: bool = False) -> list[SSAValue]:  # fmt: skip
    """The K tiles at `k0` of the arrays `leaves` (`bounded`: masked where `k0` may be past K; `one_row`: as
    `k_tiles`); none, and no index arithmetic, for a plain left operand."""
    if not leaves:
        return []
    load = k_tiles(rg, k0, bounded, bk, one_row)[1]
    return [load(v) for v in leaves]


StepTiles = Callable[[SSAValue, bool], list[SSAValue]]
"""The tiles a loop loads for the K step at `k0` (`bounded`: masked where `k0` may be past K)."""


def first_steps(step_tiles: StepTiles, depth: int, start: Callable[[int], SSAValue],
                bounded: Callable[[int], bool]) -> list[SSAValue]:  # fmt: skip
    """The tiles of a loop's first `depth` K steps (step `i` at `start(i)`), loaded before it: the ring it carries."""
    return [t for i in range(depth) for t in step_tiles(start(i), bounded(i))]


def turn_ring(em: Emitter, ring: Sequence[SSAValue], depth: int, bk: int, k0: SSAValue,
              step_tiles: StepTiles) -> tuple[list[SSAValue], list[SSAValue]]:  # fmt: skip
    """The step at `k0`'s tiles (the ring's first `len(ring) // depth`), and the ring the next step gets: the later
    steps' tiles, then those of the step `depth` ahead (masked: it may be past K)."""
    per_step = len(ring) // depth
    ahead = step_tiles(em.add(k0, em.i32(depth * bk)), True)
    return list(ring[:per_step]), [*ring[per_step:], *ahead]


def masked_load(em: Emitter, ptrs: SSAValue, mask: SSAValue | None, zero: SSAValue) -> SSAValue:
    return em.emit(tt.LoadOp(ptrs, mask, zero if mask else None))


def acc_element(red: tta.ReduceOp):
    return accumulator_element(element_type(red.input.type))

