"""The main loop of a matmul kernel: `[BM, BK] x [BK, BN]` tiles accumulated with `tt.dot` over K.

Operands are read through their views, so `x @ w.T` or a broadcast batch costs no copy. float32 operands
multiply as `TINYTON_FP32_MATMUL` says (`tf32x3` by default: float32 accuracy on tensor cores). The f32
accumulator (f64 for f64 operands) then feeds the region's elementwise epilogue (bias, activation, residual) in registers.
Row reductions of the left operand (RMSNorm's `mean(x * x)`, tinyton/rewrites/row_scale.py) accumulate
in the same loop from the `[BM, BK]` tiles the dot reads, so the norm costs no extra pass over `x`; a
computed left operand is evaluated per K tile (matmul_left.py). A one-row tile is the GEMV form
(`emit_matmuls`); RoPE's rotated halves come from the product's own tile (rotations.py); a split K loop ends
in its tile's last program (split_k.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Operation, SSAValue

from tinyton.analysis.views import View
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.emitter import Emitter, f32, identity
from tinyton.lowering.fusion.matmul_descriptors import descriptor, descriptor_load
from tinyton.lowering.fusion.reduction_kinds import COMBINE, accumulator_element, reduction_kind
from tinyton.lowering.fusion.matmul_left import (
    RowStatistic,
    acc_element,
    evaluate,
    finish_row,
    first_steps,
    k_tiles,
    masked_identity,
    masked_load,
    prologue_leaves,
    tiles_at,
    turn_ring,
)
from tinyton.lowering.fusion.rotations import rotated_windows, swapped_halves
from tinyton.lowering.fusion.split_k import range_bounds, sum_ranges
from tinyton.lowering.matmul_precision import fp32_matmul_precision

FLOAT8_IMPRECISE_ACC = 128
"""`max_num_imprecise_acc` of an array program's float8 dot: at most 128 products (four k32 wgmmas) summed in
Hopper's ~13-bit float8 accumulator before the partial is added in f32 (NumPy's f32 accumulation, as cuBLAS's
`torch._scaled_mm` without `use_fast_accum`), DeepSeek-V3's interval, not Triton's kernel default of the whole K.
In a pipelined K loop each iteration's dot is two chains of at most 128 products, the second left running into
the next iteration (`tt.promoted_dot`, `float8_dot.chain_in_flight`). Attention's float8 dots, one block deep
(K = D for the scores, the key block for `p @ v`), take the same interval: promoting every k32 wgmma instead had
doubled their partial accumulators and f32 additions (sm_90a, D = 128: 255 registers and 592 FADDs a thread for
128 x 64 blocks against 199 and 272; 128 x 128 blocks spilled and serialised their wgmmas, C7512), and the
probabilities' own rounding to e4m3 (2^-4) dwarfs what 128 products in the float8 accumulator lose (~2^-13)."""


def imprecise_acc(element, k: int) -> int | None:
    """The `max_num_imprecise_acc` of an array program's dot of `element` operands over K steps of `k`: a float8
    dot promotes every `FLOAT8_IMPRECISE_ACC` products."""
    return min(FLOAT8_IMPRECISE_ACC, k) if isinstance(element, tt.FLOAT8_TYPES) else None


def _strides(view: View, batch: int, row_axis: int, row_dim: int) -> tuple[dict[int, int], int]:
    """Per-domain-axis strides of a matmul operand (batch dims right-aligned) and its K stride."""
    strides = {}
    rank = len(view.shape)
    for j in range(rank - 2):
        if view.shape[j] != 1 and view.strides[j]:
            strides[batch - (rank - 2) + j] = view.strides[j]
    if view.shape[row_dim] != 1:
        strides[row_axis] = view.strides[row_dim]
    k_dim = rank - 1 if row_dim == rank - 2 else rank - 2
    return strides, view.strides[k_dim]


def _columns_inside(em: Emitter, view: View, n_src) -> SSAValue | None:
    """The `[1, BN]` lanes of a right operand's column window that lie inside its bounds (None: all)."""
    if view.bounds is None:
        return None
    (lo, hi), n = view.bounds[-1], view.shape[-1]
    inside = em.cmp("ge", n_src.index, em.i32(lo)) if lo > 0 else None
    return em.and_(inside, em.cmp("lt", n_src.index, em.i32(hi)) if hi < n else None)


class _Right:
    """One product's right operand B: how its `[BK, BN]` tiles are read (descriptor blocks, or masked loads of
    `[BN, BK]` tiles transposed when its K is contiguous) and its accumulator's element and precision."""

    def __init__(self, rg, op: tta.MatmulOp, bk: int, gemv: bool):
        em, dom = rg.em, rg.dom
        n = len(dom.shape)
        self.em, self.op = em, op
        view = dom.view(op.rhs)
        strides, self.k_stride = _strides(view, n - 2, n - 1, len(view.shape) - 1)
        n_src = rg.geom.source_of(n - 1)
        self.n_src, bn = n_src, n_src.block
        self.element = element_type(op.rhs.type)  # float8 operands may mix e4m3 and e5m2
        # a B whose K is contiguous that no descriptor reads (`w` of `x @ w.T` through a window: RoPE's halves) is
        # loaded as `[BN, BK]` tiles and transposed, so a thread's K run is one vector copy, not 2-byte loads
        self.desc = descriptor(rg, view, right=True) if view.is_plain and n_src.contiguous and not gemv else None
        self.k_major = self.desc is None and self.k_stride == 1
        self.shape = (bn, bk) if self.k_major else (bk, bn)
        off = em.add(rg.offsets(strides, rg.root), em.i32(view.offset) if view.offset else None)
        self.offsets = em.to_shape(self.oriented(off) if off is not None else em.i32(0), self.shape)
        self.base = em.to_shape(rg.ptrs[view.base], self.shape)
        # the columns in bounds, and inside a window of them (those outside read 0)
        self.lanes = self.oriented(em.and_(n_src.mask, _columns_inside(em, view, n_src)))
        self.k_lanes = em.arange(bk, 2, 1 if self.k_major else 0)
        self.zero = em.const(0.0, self.element, self.shape)

    def oriented(self, value: SSAValue | None) -> SSAValue | None:
        """A `[BK, BN]`-oriented index or mask in the orientation B's tiles are loaded in."""
        return _transposed(self.em, value) if self.k_major else value

    def stored(self, k0: SSAValue, k_mask: Callable[[SSAValue], SSAValue | None]) -> SSAValue:
        """B's tile at `k0` as stored (`[BN, BK]` when K-major); `k_mask(kk)` masks K indices past K (or None)."""
        em = self.em
        kk = em.add(k0, self.k_lanes)
        mask = em.and_(k_mask(kk), self.lanes)
        ptrs = em.emit(tt.AddPtrOp(self.base, em.binary(tt.AddOp, self.offsets, em.mul_int(kk, self.k_stride))))
        return masked_load(em, ptrs, em.to_shape(mask, self.shape) if mask is not None else None, self.zero)

    def tile(self, k0: SSAValue, k_mask: Callable[[SSAValue], SSAValue | None]) -> SSAValue:
        """B's `[BK, BN]` tile at `k0`, as the dot reads it."""
        if self.desc is not None:
            return descriptor_load(self.em, self.desc, (k0, _start(self.em, self.n_src)), self.shape)
        b = self.stored(k0, k_mask)
        return self.em.emit(tt.TransOp(b, (1, 0))) if self.k_major else b


def emit_matmuls(rg, ops: Sequence[tta.MatmulOp], stats: Sequence[RowStatistic] = (),
                 prologue: Sequence[Operation] = ()) -> list[SSAValue]:
    """Emit one K loop at program scope for products of one left operand (SwiGLU's `x @ w1.T` and `x @ w3.T`:
    `x`'s tile is read once a K step, both dots stay in flight); returns their result tiles `[BM, BN]` in
    their result types. The reductions `stats` of the left operand (each of an array holding its elements, in
    any order: `permuted_map`) are computed in the same loop from its tiles, into the program scope's memo. A
    computed left operand is evaluated per K tile by its `prologue` ops (program order), whose per-row operands
    are already in the program scope.

    A one-row tile (BM = 1: a decode step's `x @ w.T`, picked by the tuner) is the GEMV form: the products
    of the `[1, BK]` row and the `[BN, BK]` (or `[BK, BN]`) tile of B are summed in f32 lanes on CUDA cores (one
    FMA each), reduced over K once after the loop, and both tiles are loaded `num_stages - 1` K steps ahead: no
    tensor-core tile of 16 rows, so BN may be 4 and a 512-wide key projection still has a program for every SM."""
    em, dom = rg.em, rg.dom
    lhs = ops[0].lhs
    assert all(op.lhs is lhs for op in ops), "the products of one K loop share their left operand"
    n = len(dom.shape)
    K = shape_of(lhs.type)[-1]
    bk = rg.geom.notes["BK"]
    m_src = rg.geom.source_of(n - 2)
    bm = m_src.block
    gemv = bm == 1
    el = element_type(lhs.type)
    rotated = rotated_windows(dom, ops) if rg.geom.source_of(n - 1).pair else {}
    rights = [_Right(rg, op, bk, gemv) for op in ops if op not in rotated]
    imprecise = imprecise_acc(el, bk)
    computed = bool(prologue)
    if not computed:
        a_view = dom.view(lhs)
        a_strides, a_k = _strides(a_view, n - 2, n - 2, len(a_view.shape) - 2)
        a_off = rg.offsets(a_strides, rg.root)
        a_off = em.to_shape(a_off if a_off is not None else em.i32(0), (bm, bk))
        a_base = em.to_shape(rg.ptrs[a_view.base], (bm, bk))
    ka = em.arange(bk, 2, 1)
    zero_a = em.const(0.0, el, (bm, bk))
    acc_el = accumulator_element(el)  # f32, or f64 for f64 operands
    acc0 = [em.const(0.0, acc_el, r.shape if gemv else (bm, r.n_src.block)) for r in rights]
    precisions = [fp32_matmul_precision() if el == f32 and r.element == f32 else "ieee" for r in rights]
    row0 = [em.const(identity(reduction_kind(red), acc_element(red)), acc_element(red), (bm, bk))
            for red, _, _ in stats]
    # a tile the stats read stays in registers; a computed one never was in memory
    a_desc = None if stats or computed or gemv else descriptor(rg, a_view, right=False)

    def k_mask(bounded: bool) -> Callable[[SSAValue], SSAValue | None]:
        """The mask of K indices past K, made only where a tile needs it (`bounded`: its step may start past K)."""
        return lambda kk: em.cmp("lt", kk, em.i32(K)) if K % bk or bounded else None

    def a_mask(k0: SSAValue, bounded: bool) -> SSAValue | None:
        mask = em.and_(k_mask(bounded)(em.add(k0, ka)), m_src.mask)
        return em.to_shape(mask, (bm, bk)) if mask is not None else None

    def plain_a(k0: SSAValue, mask: SSAValue | None) -> SSAValue:
        ptrs = em.emit(tt.AddPtrOp(a_base, em.binary(tt.AddOp, a_off, em.mul_int(em.add(k0, ka), a_k))))
        return masked_load(em, ptrs, mask, zero_a)

    def ahead(k0: SSAValue, bounded: bool) -> list[SSAValue]:
        """The GEMV form's tiles of A (plain) and of each B of the K step at `k0`, loaded before the step."""
        a = [] if computed else [plain_a(k0, a_mask(k0, bounded))]
        return [*a, *(r.stored(k0, k_mask(bounded)) for r in rights)]

    # a computed left operand's K tiles (and the GEMV form's A and B tiles) are loaded `depth` K steps ahead,
    # carried in registers: their latency overlaps K steps instead of stalling each one (the pipeliner stages
    # only loads that feed a dot); the GEMV form keeps `num_stages - 1` steps in flight
    leaves = prologue_leaves(rg, prologue) if computed else []
    depth = max(1, rg.geom.notes["STAGES"] - 1) if gemv else 1

    def step_tiles(k0: SSAValue, bounded: bool) -> list[SSAValue]:
        return tiles_at(rg, leaves, k0, bounded) + (ahead(k0, bounded) if gemv else [])

    # a step is masked unless it lies inside K whole (not the first one of an empty K either); a split loop
    # runs this program's range of K (its steps inside K but for the last range's)
    split = rg.geom.split_k is not None
    assert not (split and stats), "a split K loop's row statistics come from a loop of their own"
    lb, ub = range_bounds(rg, K, bk) if split else (0, K)
    step_at = (lambda i: em.add(lb, em.i32(i * bk))) if split else (lambda i: em.i32(i * bk))
    tiles0 = first_steps(step_tiles, depth, step_at, lambda i: split or (i + 1) * bk > K)
    accs = len(rights)

    def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        loaded, next_tiles = turn_ring(em, carried[accs + len(stats) :], depth, bk, k0, step_tiles)
        if gemv:
            loaded, b_tiles = loaded[: len(loaded) - accs], loaded[len(loaded) - accs :]
            loaded, a_now = (loaded, []) if computed else (loaded[:-1], loaded[-1:])
        # A's rows and K lanes in bounds, made once for its plain load and the row statistics that read it
        plain = not (computed or gemv or a_desc is not None)
        mask = a_mask(k0, bounded=False) if stats or plain else None
        if computed:
            tile_mask, load = k_tiles(rg, k0)
            env: dict[SSAValue, SSAValue] = dict(zip(leaves, loaded))
            evaluate(rg, prologue, env, load)
            a = em.to_shape(env[lhs], (bm, bk))
            if tile_mask is not None:  # lanes past K are 0 (B's are, but 0 * inf or NaN is not 0)
                a = em.select(em.to_shape(tile_mask, (bm, bk)), a, zero_a)
        elif gemv:
            a = a_now[0]
        elif plain:
            a = plain_a(k0, mask)
        else:
            a = descriptor_load(em, a_desc, (_start(em, m_src), k0), (bm, bk))
        out = []
        for i, (r, acc) in enumerate(zip(rights, carried)):
            if gemv:  # one fused multiply-add a lane, as a dot on FMAs does (a `mul.rn` and an `add.rn` each)
                row = em.cast(a, acc_el) if r.k_major else _transposed(em, em.cast(a, acc_el))
                shape = shape_of(acc.type)
                b = em.cast(b_tiles[i], acc_el)
                out.append(em.emit(tt.FmaOp(em.to_shape(row, shape), em.to_shape(b, shape), acc)))
            else:
                b = r.tile(k0, k_mask(False))
                out.append(em.emit(tt.DotOp(a, b, acc, precisions[i], max_num_imprecise_acc=imprecise)))
        for (red, source, chain), part in zip(stats, carried[accs:]):
            env = {source: a}
            evaluate(rg, chain, env, lambda v: a)
            v = masked_identity(em, red, env[red.input], mask)
            out.append(em.binary(COMBINE[reduction_kind(red)], part, v))
        return [*out, *next_tiles]

    stages = None if gemv else rg.geom.notes["STAGES"]  # the GEMV form loads ahead itself: no dot to pipeline
    warp_specialize = bool(rg.geom.notes.get("WARP_SPECIALIZE")) and not gemv
    results = em.for_loop(lb, ub, bk, [*acc0, *row0, *tiles0], body, stages, warp_specialize)
    for (red, _, _), part in zip(stats, results[accs : accs + len(stats)]):
        rg.root.memo[red.result] = finish_row(rg, red, part, K)
    # the GEMV form's lanes summed over K, as the `[1, BN]` row; a split K: the ranges' sums, in the last program
    sums = [em.expand(em.emit(tt.ReduceSumOp(acc, 1 if r.k_major else 0)), 0) if gemv else acc
            for r, acc in zip(rights, results[:accs])]
    sums = sum_ranges(rg, sums) if split else sums
    out = {r.op: em.cast(acc, element_type(r.op.result.type)) for r, acc in zip(rights, sums)}
    swapped = {whole: swapped_halves(em, out[whole]) for whole in set(rotated.values())}
    for window, whole in rotated.items():  # RoPE's halves: the product's own tile, its halves swapped
        inside = _columns_inside(em, dom.view(window.rhs), rg.geom.source_of(n - 1))
        out[window] = swapped[whole] if inside is None else em.select(inside, swapped[whole], em.const(
            0.0, element_type(window.result.type)))
    return [out[op] for op in ops]


def _transposed(em: Emitter, value: SSAValue | None) -> SSAValue | None:
    """A `[r, c]` tile as `[c, r]` (a scalar as it is)."""
    if value is None or not shape_of(value.type):
        return value
    return em.emit(tt.TransOp(value, (1, 0)))


def _start(em: Emitter, source) -> SSAValue:
    return source.start if source.start is not None else em.i32(0)


