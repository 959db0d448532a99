"""Order a region's computation into passes over the reduced axis, and emit them.

Whole rows in registers: one straight-line pass, every value computed once. Rows longer than the
register budget: reductions are grouped into passes by dependency level; each pass walks the row in
chunks, recomputing the chunk-varying values it needs from the inputs and accumulating elementwise
(Triton's `acc += x; ...; tl.sum(acc)`); a final pass writes the chunk-varying outputs. Pairs of
reductions share a pass (`pairs.py`): softmax's `sum(exp(a - max(a)))` with its max (online rescaling),
a variance `sum((a - mean(a))**2)` with its mean (Chan's merge), so a long-row softmax or layer norm reads
its input twice, not three times.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects.builtin import i32
from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.domain import is_trivial
from tinyton.analysis.matmul_operands import lhs_prologue, permuted_map, row_prologue
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.emitter import identity
from tinyton.lowering.fusion.matmul import emit_matmuls
from tinyton.lowering.fusion.matmul_left import emit_row_statistics
from tinyton.lowering.fusion.pairs import Pair, find_pair
from tinyton.lowering.fusion.reduction_kinds import ARG_KINDS, COMBINE, accumulator_element, reduction_kind, scan_kind
from tinyton.lowering.fusion.program_indices import Scope
from tinyton.lowering.fusion.region import RegionEmitter

PRELOAD_ELEMENTS = 32
"""Most elements per thread that a whole-row kernel loads before computing (all inputs together, 32 f32
registers); beyond that, inputs are loaded where first used, to keep registers for long rows."""


class Scheduler:
    def __init__(self, rg: RegionEmitter, ops: Sequence[Operation], outputs: Sequence[tuple[SSAValue, SSAValue]]):
        self.rg, self.ops, self.outputs = rg, list(ops), list(outputs)
        self.reductions = dict.fromkeys(op for op in self.ops if isinstance(op, tta.ReduceOp) and not is_trivial(op))
        """In program order; a dict, so that `op in self.reductions` costs O(1) in long regions."""
        self._needs: dict[Operation, frozenset[Operation]] = {}
        self._args = {op for op in self.reductions if reduction_kind(op) in ARG_KINDS}
        """The argmax/argmin reductions: a looped walk carries their best value and index per row."""

    # ---- dependencies ------------------------------------------------------------------------
    def _owner(self, v: SSAValue) -> Operation | None:
        return v.op if isinstance(v, OpResult) and v in self.rg.dom.maps else None

    def ensure(self, value: SSAValue, scope: Scope) -> None:
        """Emit `value` and what it needs (reductions must already be done)."""
        stack = [value]
        while stack:
            v = stack[-1]
            op = self._owner(v)
            if op is None or scope.get(v) is not None:
                stack.pop()
                continue
            assert op not in self.reductions, "reduction needed before its pass"
            todo = [u for u in op.operands if self._owner(u) is not None and scope.get(u) is None]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            self.rg.compute(op, scope)

    def needs(self, value: SSAValue) -> frozenset[Operation]:
        """Reductions `value` depends on (stopping at them), memoised per op: every pass asks again."""
        stack = [value]
        while stack:
            op = self._owner(stack[-1])
            if op is None or op in self._needs:
                stack.pop()
                continue
            if op in self.reductions:
                self._needs[op] = frozenset((op,))
                continue
            todo = [v for v in op.operands if (o := self._owner(v)) is not None and o not in self._needs]
            if todo:
                stack += todo
                continue
            self._needs[op] = frozenset().union(*(self._needs[o] for v in op.operands if (o := self._owner(v))))
        op = self._owner(value)
        return self._needs[op] if op is not None else frozenset()

    # ---- reductions ---------------------------------------------------------------------------
    def _acc_shape(self, op: tta.ReduceOp) -> tuple[int, ...]:
        axes = {a for a in self.rg.dom.map_of(op.input) if a is not None} | {self.rg.dom.red}
        return self.rg.geom.tile_shape(axes)

    def _masked(self, value: SSAValue, kind: str, shape: tuple[int, ...], element) -> SSAValue:
        """`value` (broadcast to `shape`, cast to the accumulator type) with out-of-row lanes neutral."""
        em, k = self.rg.em, self.rg.geom.k
        v = em.cast(em.to_shape(value, shape), element)
        return v if k.mask is None else em.select(k.mask, v, em.const(identity(kind, element), element))

    def _finish(self, op: tta.ReduceOp, acc: SSAValue) -> SSAValue:
        """Cross-lane reduction of the accumulator, then the result (`result`); an argmax's is the index."""
        em, kind, dim = self.rg.em, reduction_kind(op), self.rg.geom.k.dim
        if kind in ARG_KINDS:
            return self.result(op, em.arg_reduce(kind, acc, self._k_index(acc), dim)[1])
        return self.result(op, em.reduce(kind, acc, dim))

    def _k_index(self, like: SSAValue) -> SSAValue:
        """The index along the reduced axis of each lane of tile `like`."""
        return self.rg.em.to_shape(self.rg.geom.k.index, shape_of(like.type))

    def result(self, op: tta.ReduceOp, r: SSAValue) -> SSAValue:
        """The reduction's value from its reduced accumulator: mean scaling, cast to the result type."""
        em = self.rg.em
        if isinstance(op, tta.ReduceMeanOp):
            n = self.rg.dom.shape[self.rg.dom.red]
            scale = em.const(1.0 / n if n else float("nan"), element_type(r.type))
            r = em.binary(tt.MulOp, r, scale)  # mean = sum * (1/n), in the accumulator's type
        return em.cast(r, element_type(op.result.type))

    def pair_result(self, p: Pair, run: list[SSAValue]) -> None:
        """Record both reductions of a pair from its final running values."""
        em = self.rg.em
        first, second = p.finish(em, run)
        self.rg.root.memo[p.first.result] = em.cast(first, element_type(p.first.result.type))
        self.rg.root.memo[p.second.result] = self.result(p.second, second)

    def _operand(self, op: Operation, scope: Scope) -> SSAValue:
        if op.operands[0] in self.rg.dom.maps:
            self.ensure(op.operands[0], scope)
        return self.rg.operand(op, 0, scope)

    # ---- the two strategies -------------------------------------------------------------------
    def run(self) -> None:
        rg = self.rg
        if rg.geom.k is not None and not rg.geom.looped:
            rg.set_k(None)
        if rg.geom.k is None or not rg.geom.looped:
            self._straight()
        else:
            self._looped()

    def _straight(self) -> None:
        rg = self.rg
        for op in self.ops:
            if isinstance(op, tta.MatmulOp) and op.result not in rg.root.memo:
                self._matmuls(op)
        scope = Scope(rg.root.block, rg.root)  # after the products: a split K loop continues in a branch
        if rg.dom.matmul is None:
            self._load_inputs_first(scope)
            for op in self.reductions:
                el = accumulator_element(element_type(op.input.type))
                value = self._masked(self._operand(op, scope), reduction_kind(op), self._acc_shape(op), el)
                rg.root.memo[op.result] = self._finish(op, value)
        for value, ptr in self.outputs:
            self.ensure(value, scope)
            rg.store(value, ptr, scope)

    def loaded_operands(self) -> list[tuple[Operation, int]]:
        """(op, operand index) of every input a register op reads through a load: ops folded into views
        are not emitted (their users load the view), a gather's table is read by index, not loaded, and a
        put's destination is only written."""
        maps = self.rg.dom.maps
        return [(op, i) for op in self.ops if any(r in maps for r in op.results)
                for i, v in enumerate(op.operands)
                if v not in maps and not (isinstance(op, (tta.TakeOp, tta.PutOp)) and i == 0)]

    def _load_inputs_first(self, scope: Scope) -> None:
        """Issue every input load before any computation when they fit `PRELOAD_ELEMENTS` per thread: all
        of them are then in flight at once, one memory latency in place of one per input (a SiLU gate's
        second operand was loaded after the first one's divisions, a layer norm's weights after both
        reductions and their barriers; Triton's kernels load first)."""
        rg = self.rg
        loads: dict[tuple, tuple[Operation, int, int]] = {}
        for op, i in self.loaded_operands():
            key, shape = rg.load_tile(op.operands[i], rg.dom.operand_map(op, i))
            loads.setdefault(key, (op, i, prod(shape)))
        threads = 32 * rg.geom.num_warps
        if sum(max(1, n // threads) for _, _, n in loads.values()) <= PRELOAD_ELEMENTS:
            for op, i, _ in loads.values():
                rg.operand(op, i, scope)

    def _matmuls(self, op: tta.MatmulOp) -> None:
        """The tiles of the product and of the region's other products of its left operand, from one K loop
        (into the program scope's memo). A computed left operand's prologue reads per-row values: they and the
        row statistics they need are computed first (one loop over K), the other statistics of the left
        operand in the products' loop."""
        rg = self.rg
        members = set(self.ops)
        external = lambda v: v in rg.dom.views or not (isinstance(v, OpResult) and v.op in members)  # noqa: E731
        pending = [(red, source, chain) for red, source, chain in self._row_prologues(external)
                   if red.result not in rg.root.memo]
        lhs_view, lhs_map = rg.dom.view(op.lhs), rg.dom.k_maps[op.lhs]
        mine = [stat for stat in pending if permuted_map(rg.dom.view(stat[1]), lhs_view, lhs_map) is not None]
        prologue: list[Operation] = []
        if not external(op.lhs):
            matmuls = {m for m in self.ops if isinstance(m, tta.MatmulOp)}
            ops, maps = lhs_prologue(op.lhs, external, matmuls, len(rg.dom.shape))
            prologue = [o for o in self.ops if o in ops]
            before = [stat for stat in pending if stat not in mine]
            if before:
                emit_row_statistics(rg, before)
            for v in maps:
                if not external(v) and not (isinstance(v, OpResult) and v.op in ops):
                    self.ensure(v, rg.root)  # a per-row value the prologue reads
        if mine and rg.geom.split_k is not None:  # each program's K loop sees its range only
            emit_row_statistics(rg, mine)
            mine = []
        products = [m for m in self.ops if isinstance(m, tta.MatmulOp) and m.lhs is op.lhs]
        for product, tile in zip(products, emit_matmuls(rg, products, mine, prologue)):
            rg.root.memo[product.result] = tile

    def _row_prologues(self, external) -> list[tuple[tta.ReduceOp, SSAValue, list[Operation]]]:
        """The reductions of a matmul region: row statistics of an array in memory, each with its source and
        elementwise chain (computed in a K loop)."""
        return [(red, *row_prologue(red, lambda v: not external(v))) for red in self.reductions]

    def passes(self) -> list[tuple[list[tta.ReduceOp], list[Pair]]]:
        """The reductions grouped into walks over the row by dependency level; the second reduction of a
        pair (`pairs.py`: softmax's sum, a variance) joins its first one's walk."""
        pending, done, out = list(self.reductions), set(), []
        while pending:
            ready = [r for r in pending if self.needs(r.input) <= done]
            pairs = [p for r in pending if r not in ready and (p := find_pair(self._owner, r)) and p.first in ready
                     and self.needs(r.input) <= done | {p.first}]
            if not ready:
                raise AssertionError("reductions form a cycle")
            out.append((ready, pairs))
            done |= set(ready) | {p.second for p in pairs}
            pending = [r for r in pending if r not in done]
        return out

    def _looped(self) -> None:
        for reds, pairs in self.passes():
            plain, paired = self.accumulate(reds, pairs, self.rg.geom.k.extent)
            for r, acc in plain:  # an argmax's walk gives its index
                self.rg.root.memo[r.result] = self.result(r, acc) if r in self._args else self._finish(r, acc)
            for p, run in paired:
                self.pair_result(p, run)
        self.write_outputs(self.rg.geom.k.extent)

    def write_outputs(self, length: int, base: SSAValue | None = None) -> None:
        """Store the outputs: per-row ones once, chunk-varying ones in a walk over `length` elements of
        the row from `base`."""
        rg, em = self.rg, self.rg.em
        row = [(v, p) for v, p in self.outputs if not rg.kvar(rg.dom.map_of(v))]
        for value, ptr in row:
            self.ensure(value, rg.root)
            rg.store(value, ptr, rg.root)
        chunked = [(v, p) for v, p in self.outputs if (v, p) not in row]
        if chunked:
            scans = self._scans([v for v, _ in chunked])

            def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
                scope = Scope(em.block, rg.root)
                rg.set_k(em.add(base, k0))
                rg.scan_carry, rg.scan_next = dict(zip(scans, carried)), {}
                for value, ptr in chunked:
                    self.ensure(value, scope)
                    rg.store(value, ptr, scope)
                return self._next_scans(scans)

            em.for_loop(0, length, rg.geom.k.block, self._scan_init(scans), body)

    # ---- scans of looped rows: each walk carries their running totals from chunk to chunk ------------
    def _scans(self, values: list[SSAValue]) -> list[tta.ScanOp]:
        """The scans a walk computing `values` evaluates (reductions are done before it)."""
        stack, seen, out = list(values), set(), []
        while stack:
            op = self._owner(stack.pop())
            if op is None or op in seen or op in self.reductions:
                continue
            seen.add(op)
            if isinstance(op, tta.ScanOp) and not is_trivial(op):
                out.append(op)
            stack += op.operands
        return out

    def _scan_init(self, scans: list[tta.ScanOp]) -> list[SSAValue]:
        em, dom, init = self.rg.em, self.rg.dom, []
        for s in scans:
            el = accumulator_element(element_type(s.result.type))
            rows = {a for a in dom.map_of(s.result) if a is not None and a != dom.red}
            init.append(em.const(identity(scan_kind(s), el), el, self.rg.geom.tile_shape(rows)))
        return init

    def _next_scans(self, scans: list[tta.ScanOp]) -> list[SSAValue]:
        rg = self.rg
        out = [rg.scan_next[s] for s in scans]
        rg.scan_carry, rg.scan_next = {}, {}
        return out

    def accumulate(
        self, reds: list[tta.ReduceOp], pairs: list[Pair], length: int, base: SSAValue | None = None
    ) -> tuple[list[tuple[tta.ReduceOp, SSAValue]], list[tuple[Pair, list[SSAValue]]]]:
        """One walk over `length` elements of the row from `base` computing `reds` (and the second
        reductions of `pairs`): elementwise accumulators of the plain reductions, the running values of
        each pair."""
        rg, em = self.rg, self.rg.em
        firsts = {p.first for p in pairs}
        args = [r for r in reds if r in self._args]
        plain = [r for r in reds if r not in firsts and r not in args]
        init: list[SSAValue] = []
        for r in plain:
            el = accumulator_element(element_type(r.input.type))
            init.append(em.const(identity(reduction_kind(r), el), el, self._acc_shape(r)))
        for r in args:  # the best value and its (i32) index so far; `result` casts it to the op's index type
            el = accumulator_element(element_type(r.input.type))
            init += [em.const(identity(reduction_kind(r), el), el, self._row_shape(r)),
                     em.const(0, i32, self._row_shape(r))]
        for p in pairs:
            init += p.init(em, self._row_shape(p.first))
        scans = self._scans([r.input for r in reds])
        init += self._scan_init(scans)

        def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            scope = Scope(em.block, rg.root)
            rg.set_k(em.add(base, k0))
            rg.scan_carry, rg.scan_next = dict(zip(scans, carried[len(carried) - len(scans) :])), {}
            out = []
            for r, acc in zip(plain, carried):
                el = element_type(acc.type)
                v = self._masked(self._operand(r, scope), reduction_kind(r), shape_of(acc.type), el)
                out.append(em.binary(COMBINE[reduction_kind(r)], acc, v))
            at = len(plain)
            for r in args:  # a later chunk wins only when strictly better: ties keep the first index
                best, index = carried[at : at + 2]
                kind = reduction_kind(r)
                v = self._masked(self._operand(r, scope), kind, self._acc_shape(r), element_type(best.type))
                value, where = em.arg_reduce(kind, v, self._k_index(v), rg.geom.k.dim)
                take = em.better(kind, value, best)
                out += [em.select(take, value, best), em.select(take, where, index)]
                at += 2
            for p in pairs:
                a = em.cast(em.to_shape(self._operand(p.first, scope), self._acc_shape(p.first)), p.element)
                out += p.step(em, carried[at : at + len(p.parts)], a, rg.geom.k.mask, rg.geom.k.dim)
                at += len(p.parts)
            return out + self._next_scans(scans)

        results = em.for_loop(0, length, rg.geom.k.block, init, body)
        paired, at = [], len(plain) + 2 * len(args)
        for p in pairs:
            paired.append((p, results[at : at + len(p.parts)]))
            at += len(p.parts)
        indices = results[len(plain) + 1 : len(plain) + 2 * len(args) : 2]
        return list(zip(plain, results)) + list(zip(args, indices)), paired

    def _row_shape(self, r: tta.ReduceOp) -> tuple[int, ...]:
        shape = list(self._acc_shape(r))
        if len(shape) == 1 or not shape:
            return ()
        shape[self.rg.geom.k.dim] = 1
        return tuple(shape)
