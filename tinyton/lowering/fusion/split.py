"""Split rows: a region whose few rows are long runs as a chain of kernels over (row, slice) programs.

The form taken where the region does not fit in the registers of the programs the GPU holds at once, else
the fallback of the one kernel with grid barriers (`grid.py`), which shares the scratch layout below.

One program per row cannot fill the GPU when there are few rows (16 rows of 262144 on 132 SMs), so each
row is cut into slices (`geometry._split_rows`) and reduced by one program per slice. The region's
reductions are grouped into walks by dependency level (`Scheduler.passes`); kernel i walks its slice once
and stores the partial results of walk i in scratch buffers of one value per (row, slice); every later
kernel first combines the partials of its row (sum, max, min, and the pairs of `pairs.py`: softmax's max+sum,
a mean+variance); the last kernel writes the outputs. Every kernel reads its slice once,
so the first read comes from DRAM and the later ones mostly from L2: every other kernel walks the programs
in reverse, so it starts with the slices the previous kernel read last.
A reduction of integers combines exactly as it accumulates; float partials are
f32 (f64 for f64), like the accumulators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Attribute, Operation, SSAValue

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type
from tinyton.intmath import next_power_of_2
from tinyton.lowering.fusion.emitter import identity
from tinyton.lowering.fusion.pairs import Pair
from tinyton.lowering.fusion.reduction_kinds import accumulator_element, reduction_kind
from tinyton.lowering.fusion.region import RegionEmitter
from tinyton.lowering.fusion.schedule import Scheduler


@dataclass(frozen=True, eq=False)
class Scratch:
    """A buffer of partial results passed between the kernels of one split region (no program value):
    one block of one element per (row, slice), row-major, per partial result of its element type (one
    buffer per type, so a call allocates one or two). Compared by identity: each is one buffer."""

    shape: tuple[int, ...]
    element: Attribute
    counter: bool = False
    """Grid barriers' counters (`grid.py`): zero before their first launch, kept from call to call (each
    barrier leaves its counter a multiple of 2**31), never cleared."""


def partials(passes: Sequence[tuple[list[tta.ReduceOp], list[Pair]]]) -> list[tuple[Operation, str, Attribute]]:
    """The partial results of every walk, in scratch-buffer order: (reduction, what, element), `what`
    being the reduction kind, or "pair <part>" for the running values of a pair (`pairs.py`), keyed by
    its first reduction."""
    out: list[tuple[Operation, str, Attribute]] = []
    for reds, pairs in passes:
        firsts = {p.first for p in pairs}
        out += [(r, reduction_kind(r), accumulator_element(element_type(r.input.type))) for r in reds if r not in firsts]
        for p in pairs:
            out += [(p.first, f"pair {name}", p.element) for name, _ in p.parts]
    return out


def scratch_layout(passes: Sequence[tuple[list[tta.ReduceOp], list[Pair]]]) -> tuple[list[Attribute], list[int], dict]:
    """Scratch buffers by element type: their elements, how many partials each holds, and where each
    partial lives: (reduction, what) -> (buffer, block)."""
    elements: list[Attribute] = []
    counts: list[int] = []
    where = {}
    for op, what, element in partials(passes):
        if element not in elements:
            elements.append(element)
            counts.append(0)
        buffer = elements.index(element)
        where[op, what] = (buffer, counts[buffer])
        counts[buffer] += 1
    return elements, counts, where


class SplitScheduler(Scheduler):
    """Emit kernel `stage` of a split region (`stages(...)` kernels in all) into `rg`'s kernel."""

    def __init__(self, rg: RegionEmitter, ops: Sequence[Operation], outputs: Sequence[tuple[SSAValue, SSAValue]],
                 scratch: Sequence[SSAValue], stage: int):
        super().__init__(rg, ops, outputs)
        self.scratch, self.stage = list(scratch), stage

    def run(self) -> None:
        em, geom = self.rg.em, self.rg.geom
        passes = self.passes()
        slot = scratch_layout(passes)[2]
        base = em.mul_int(geom.split.index, geom.slice)
        for reds, pairs in passes[: self.stage]:
            self._combine(reds, pairs, slot)
        if self.stage == len(passes):
            self.write_outputs(geom.slice, base)
            return
        plain, paired = self.accumulate(*passes[self.stage], geom.slice, base)
        for r, acc in plain:
            self._store(slot[r, reduction_kind(r)], em.reduce(reduction_kind(r), acc, geom.k.dim))
        for p, run in paired:
            for (name, _), value in zip(p.parts, run):
                self._store(slot[p.first, f"pair {name}"], value)

    # ---- scratch buffers ----------------------------------------------------------------------
    def _row_start(self, at: tuple[int, int]) -> SSAValue:
        """Pointer to this program's row of partials in block `at` = (buffer, block)."""
        em, geom = self.rg.em, self.rg.geom
        buffer, block = at
        row = em.mul_int(geom.sources[0].index, geom.split.extent)
        offset = em.add(em.i32(block * geom.sources[0].extent * geom.split.extent) if block else None, row)
        return em.emit(tt.AddPtrOp(self.scratch[buffer], offset))

    def _store(self, at: tuple[int, int], value: SSAValue) -> None:
        em = self.rg.em
        em.emit(tt.StoreOp(em.emit(tt.AddPtrOp(self._row_start(at), self.rg.geom.split.index)), value))

    def _load(self, at: tuple[int, int], neutral: float) -> SSAValue:
        """The row's partials in block `at` as one tile, lanes past the slices `neutral`."""
        em, n = self.rg.em, self.rg.geom.split.extent
        lanes = em.arange(next_power_of_2(n))
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(self._row_start(at), (next_power_of_2(n),)), lanes))
        if n == next_power_of_2(n):
            return em.emit(tt.LoadOp(ptrs))
        mask = em.cmp("lt", lanes, em.i32(n))
        element = element_type(self.scratch[at[0]].type).pointee
        return em.select(mask, em.emit(tt.LoadOp(ptrs, mask)), em.const(neutral, element))

    def _combine(self, reds: list[tta.ReduceOp], pairs: list[Pair], slot: dict) -> None:
        """The results of one earlier walk from its partials, for this program's row."""
        em, root = self.rg.em, self.rg.root
        firsts = {p.first for p in pairs}
        for r in reds:
            if r not in firsts:
                kind = reduction_kind(r)
                element = element_type(self.scratch[slot[r, kind][0]].type).pointee
                tile = self._load(slot[r, kind], identity(kind, element))
                root.memo[r.result] = self.result(r, em.reduce(kind, tile, 0))
        for p in pairs:
            tiles = [self._load(slot[p.first, f"pair {name}"], neutral) for name, neutral in p.parts]
            self.pair_result(p, p.combine(em, tiles))


def stages(scheduler: Scheduler) -> int:
    """Kernels of a split region: one per walk, then the one writing the outputs."""
    return len(scheduler.passes()) + 1
