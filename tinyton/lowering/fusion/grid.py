"""Split rows in one kernel: each program holds its slice in registers across grid-wide barriers.

The two-kernel form (`split.py`) reads every slice twice: once for the partial results, once more for the
outputs. When the whole region fits in the registers of the programs the GPU holds at once, one kernel does
it all: each program loads its slice once (a tile of the whole slice, no loop), computes the partial results
of the first walk, stores them in the scratch buffers (the same layout as `split.py`), waits at a
`tt.grid_barrier` for the other programs of its row, combines the partials of its row, and goes on to the next walk or
writes its outputs from the registers. A program may own the same slice of several rows (`GRID_ROWS`): it
issues the loads of all of them first, then takes them in turn (partials, barrier, outputs), so that the
barrier and combine of one row overlap the loads of the next and its writes the next row's wait. It is only correct when every program is resident at once: the plan
sizes the grid for `GRID_PROGRAMS_PER_SM` programs per SM, and the runtime launches it cooperatively after
checking the occupancy, else it launches the two-kernel form (`KernelSpec.fallback`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type
from tinyton.intmath import cdiv
from tinyton.lowering.fusion.geometry import Geometry, Source
from tinyton.lowering.fusion.pairs import Pair
from tinyton.lowering.fusion.reduction_kinds import accumulator_element, reduction_kind
from tinyton.lowering.fusion.program_indices import Scope
from tinyton.lowering.fusion.region import RegionEmitter
from tinyton.lowering.fusion.split import SplitScheduler, scratch_layout

GRID_WARPS = 8
GRID_PROGRAMS_PER_SM = 4
"""Programs of 8 warps an SM must hold at once (1024 threads: up to 64 registers each)."""
GRID_TILE = 8192
"""Elements a program holds (all its rows' slices): 32 per thread of 8 warps."""
GRID_SLICES = (2048, 4096, 8192)
"""Slice lengths tried, shortest first (more programs, fewer elements per thread)."""
GRID_ROWS = 2
"""Most rows one program takes in turn (a divisor of the rows: every program has as many). On an H100 at
16x262144 two rows were level with one or up to 5 % ahead, except fp16 rmsnorm (-4 %); four no better
(docs/benchmarks-history.md, branch `split3`)."""
BARRIER_PER_ROW = True
"""The programs of a row wait for each other only (a counter per row, 128 bytes apart), not for the grid."""
COUNTER_STRIDE = 32
"""i32 elements between two rows' counters: one 128-byte line each."""


def counters(rows: int) -> int:
    """Elements of the counter buffer of a grid kernel over `rows` split rows."""
    return rows * COUNTER_STRIDE if BARRIER_PER_ROW else 1


def plan_grid(split: Geometry, sm_count: int) -> Geometry | None:
    """The one-kernel geometry of split rows (`split`, from `geometry.plan`): the shortest slice, then the
    most rows per program, whose programs fit `GRID_PROGRAMS_PER_SM` per SM, each slice one tile; None when
    none fits."""
    rows, k = split.sources[0], split.k
    assert k is not None
    for length in GRID_SLICES:
        slices = cdiv(k.extent, length)
        for per in range(min(GRID_ROWS, GRID_TILE // length), 0, -1):
            if rows.extent % per or rows.extent // per * slices > GRID_PROGRAMS_PER_SM * sm_count:
                continue
            sp = Source((), slices)
            kk = Source(k.axes, k.extent, length, 0)
            notes = {"SPLIT": slices, "SLICE": length, "BLOCK": length, "ROWS": per, "GRID_BARRIER": 1}
            return Geometry(split.domain, 1, [Source(rows.axes, rows.extent, per), sp, kk], GRID_WARPS, kk, False,
                            notes, sp, length)
    return None


class GridScheduler(SplitScheduler):
    """Emit the one kernel of a grid-planned split region into `rg`'s kernel; `counter` is the barrier's."""

    def __init__(self, rg: RegionEmitter, ops: Sequence[Operation], outputs: Sequence[tuple[SSAValue, SSAValue]],
                 scratch: Sequence[SSAValue], counter: SSAValue):
        super().__init__(rg, ops, outputs, scratch, 0)
        self.counter = counter

    def run(self) -> None:
        rg, em, geom = self.rg, self.rg.em, self.rg.geom
        passes = self.passes()
        slot = scratch_layout(passes)[2]
        rg.set_k(em.mul_int(geom.split.index, geom.slice))
        rows, shared = geom.sources[0], rg.root
        first = rows.index
        waves = []
        for w in range(rows.block):  # one scope per row: the slice is loaded once, kept to the end
            root = Scope(shared.block, shared)
            waves.append((first if w == 0 else em.add(first, em.i32(w)), root, Scope(root.block, root)))
        for index, root, scope in waves:
            rows.index, rg.root = index, root
            self._prefetch(scope)
        for index, root, scope in waves:
            rows.index, rg.root = index, root
            for reds, pairs in passes:
                self._partials(reds, pairs, slot, scope)
                self._barrier()
                self._combine(reds, pairs, slot)
            for value, ptr in self.outputs:
                self.ensure(value, scope)
                rg.store(value, ptr, scope)
        rows.index, rg.root = first, shared

    def _prefetch(self, scope: Scope) -> None:
        """Load the row's slice of every input varying along the rows now, so that the loads of all the
        program's rows are in flight before the first row's reductions wait for them (loads are not moved
        across the barriers)."""
        rg, dom = self.rg, self.rg.dom
        rows = set(rg.geom.sources[0].axes)
        for op, i in self.loaded_operands():
            if isinstance(op, tta.TakeOp):
                continue
            if rows.intersection(rg.load_strides(dom.view(op.operands[i]), dom.operand_map(op, i))):
                rg.operand(op, i, scope)

    def _partials(self, reds: list[tta.ReduceOp], pairs: list[Pair], slot: dict, scope: Scope) -> None:
        """Store this program's partial results of one walk over its slice of the row."""
        em = self.rg.em
        firsts = {p.first for p in pairs}
        for r in reds:
            if r not in firsts:
                kind = reduction_kind(r)
                el = accumulator_element(element_type(r.input.type))
                value = self._masked(self._operand(r, scope), kind, self._acc_shape(r), el)
                self._store(slot[r, kind], em.reduce(kind, value, self.rg.geom.k.dim))
        for p in pairs:
            a = em.cast(em.to_shape(self._operand(p.first, scope), self._acc_shape(p.first)), p.element)
            run = p.step(em, p.init(em, self._row_shape(p.first)), a, self.rg.geom.k.mask, self.rg.geom.k.dim)
            for (name, _), value in zip(p.parts, run):
                self._store(slot[p.first, f"pair {name}"], value)

    def _barrier(self) -> None:
        """Wait for the programs of this row (or of the grid)."""
        em, geom = self.rg.em, self.rg.geom
        if BARRIER_PER_ROW:
            counter = em.emit(tt.AddPtrOp(self.counter, em.mul_int(geom.sources[0].index, COUNTER_STRIDE)))
            leader = em.cmp("eq", geom.split.index, em.i32(0))
            programs = geom.split.extent
        else:
            counter, programs = self.counter, geom.programs
            leader = em.cmp("eq", em.emit(tt.ProgramIdOp(0)), em.i32(0))
        em.emit(tt.GridBarrierOp(counter, leader, programs))
