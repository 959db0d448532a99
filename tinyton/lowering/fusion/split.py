"""Split rows: a region whose few rows are long runs as a chain of kernels over (row, slice) programs.

One program per row cannot fill the GPU when there are few rows (16 rows of 262144 on 132 SMs), so each
row is cut into slices (`geometry._split_rows`) and reduced by one program per slice. The region's
reductions are grouped into walks by dependency level (`Scheduler.passes`); kernel i walks its slice once
and stores the partial results of walk i in scratch buffers of one value per (row, slice); every later
kernel first combines the partials of its row (sum, max, min; the online max+sum of softmax rescales each
slice's sum by exp(m_slice - max)); the last kernel writes the outputs. Every kernel reads its slice once,
so the first read comes from DRAM and the later ones mostly from L2: every other kernel walks the programs
in reverse, so it starts with the slices the previous kernel read last.
A reduction of integers combines exactly as it accumulates; float partials are f32, like the accumulators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Attribute, Operation, SSAValue

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.intmath import next_power_of_2
from tinyton.lowering.fusion.emitter import f32, identity
from tinyton.lowering.fusion.region import RegionEmitter, accumulator_element, reduction_kind
from tinyton.lowering.fusion.schedule import Online, Scheduler


@dataclass(frozen=True, eq=False)
class Scratch:
    """A buffer of partial results passed between the kernels of one split region (no program value):
    one element per (row, slice), row-major. Compared by identity: each is one buffer."""

    shape: tuple[int, ...]
    element: Attribute


def partials(passes: Sequence[tuple[list[tta.ReduceOp], list[Online]]]) -> list[tuple[Operation, str, Attribute]]:
    """The partial results of every walk, in scratch-buffer order: (reduction, what, element), `what`
    being the reduction kind, or "online max" / "online sum" for the two halves of an online pair."""
    out: list[tuple[Operation, str, Attribute]] = []
    for reds, pairs in passes:
        maxes = {p.rmax for p in pairs}
        out += [(r, reduction_kind(r), accumulator_element(element_type(r.input.type))) for r in reds if r not in maxes]
        for p in pairs:
            out += [(p.rmax, "online max", f32), (p.rsum, "online sum", f32)]
    return out


class SplitScheduler(Scheduler):
    """Emit kernel `stage` of a split region (`stages(...)` kernels in all) into `rg`'s kernel."""

    def __init__(self, rg: RegionEmitter, ops: Sequence[Operation], outputs: Sequence[tuple[SSAValue, SSAValue]],
                 scratch: Sequence[SSAValue], stage: int):
        super().__init__(rg, ops, outputs)
        self.scratch, self.stage = list(scratch), stage

    def run(self) -> None:
        rg, em, geom = self.rg, self.rg.em, self.rg.geom
        passes = self.passes()
        slot = {(op, what): i for i, (op, what, _) in enumerate(partials(passes))}
        base = em.mul_int(geom.split.index, geom.slice)
        for reds, pairs in passes[: self.stage]:
            self._combine(reds, pairs, slot)
        if self.stage == len(passes):
            self.write_outputs(geom.slice, base)
            return
        plain, online = self.accumulate(*passes[self.stage], geom.slice, base)
        for r, acc in plain:
            self._store(slot[r, reduction_kind(r)], em.reduce(reduction_kind(r), acc, geom.k.dim))
        for p, (m, s) in online:
            self._store(slot[p.rmax, "online max"], m)
            self._store(slot[p.rsum, "online sum"], s)

    # ---- scratch buffers ----------------------------------------------------------------------
    def _row_offset(self) -> SSAValue:
        return self.rg.em.mul_int(self.rg.geom.sources[0].index, self.rg.geom.split.extent)

    def _store(self, index: int, value: SSAValue) -> None:
        em = self.rg.em
        ptr = em.emit(tt.AddPtrOp(self.scratch[index], em.add(self._row_offset(), self.rg.geom.split.index)))
        em.emit(tt.StoreOp(ptr, value))

    def _load(self, index: int, kind: str) -> SSAValue:
        """The row's partials in scratch buffer `index` as one tile, lanes past the slices neutral."""
        em, n = self.rg.em, self.rg.geom.split.extent
        lanes = em.arange(next_power_of_2(n))
        ptr = em.emit(tt.AddPtrOp(self.scratch[index], self._row_offset()))
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(ptr, (next_power_of_2(n),)), lanes))
        if n == next_power_of_2(n):
            return em.emit(tt.LoadOp(ptrs))
        mask = em.cmp("lt", lanes, em.i32(n))
        element = element_type(self.scratch[index].type).pointee
        return em.select(mask, em.emit(tt.LoadOp(ptrs, mask)), em.const(identity(kind, element), element))

    def _combine(self, reds: list[tta.ReduceOp], pairs: list[Online], slot: dict) -> None:
        """The results of one earlier walk from its partials, for this program's row."""
        em, root = self.rg.em, self.rg.root
        maxes = {p.rmax for p in pairs}
        for r in reds:
            if r not in maxes:
                kind = reduction_kind(r)
                root.memo[r.result] = self.result(r, em.reduce(kind, self._load(slot[r, kind], kind), 0))
        for p in pairs:
            m = self._load(slot[p.rmax, "online max"], "max")
            s = self._load(slot[p.rsum, "online sum"], "sum")
            top = em.reduce("max", m, 0)
            neg_inf = em.const(float("-inf"), f32)
            safe = em.select(em.cmp("eq", top, neg_inf), em.const(0.0, f32), top)  # all -inf: every sum is 0
            scaled = em.binary(tt.MulOp, s, em.emit(tt.ExpOp(em.binary(tt.SubOp, m, em.to_shape(safe, shape_of(m.type))))))
            self.online_result(p, top, em.reduce("sum", scaled, 0))


def stages(scheduler: Scheduler) -> int:
    """Kernels of a split region: one per walk, then the one writing the outputs."""
    return len(scheduler.passes()) + 1
