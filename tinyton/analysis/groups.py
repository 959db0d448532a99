"""`analyze` for groups that grow by merging: what the fusion planner asks once per merge it tries.

Analyzing every union from scratch costs the size of the union, so a planner growing one group op by op
spends time quadratic in program length. `GroupDomain.union(a, b)` instead keeps the larger side's
analysis and re-derives only what the merge can change, in program order: the smaller side's ops, the
larger side's ops reading them, and the ops downstream of those whose view or map actually changed. That is
exact whenever the union's domain has the larger side's shape (a map depends only on the domain and on the
operands' maps and views); a union whose domain differs is analyzed afresh. Either way the result is the
Domain that `analyze(union ops, union outputs)` gives (tests/test_fusion_scale.py checks it merge by merge).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.domain import (
    AXIS_OPS,
    INDEX_LIMIT,
    Domain,
    Map,
    NotFusable,
    analyze,
    candidate_domains,
    check_matmul,
    has_template,
    infer_map,
    is_trivial,
    register_shape,
)
from tinyton.analysis.views import check_strided, view_after
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

_GONE = object()


class _Overlay(MutableMapping):
    """A dict seen through pending changes (`_GONE` deletes): the union's maps and views before commit."""

    def __init__(self, base: dict):
        self.base: dict = base
        self.changes: dict = {}

    def __getitem__(self, key: Any) -> Any:
        value = self.changes[key] if key in self.changes else self.base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        if key in self.changes:
            return self.changes[key] is not _GONE
        return key in self.base

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - this is `get` itself

    def __setitem__(self, key: Any, value: Any) -> None:
        self.changes[key] = value

    def __delitem__(self, key: Any) -> None:
        self.changes[key] = _GONE

    def __iter__(self) -> Iterator:
        raise TypeError("an overlay is only looked up")

    def __len__(self) -> int:
        raise TypeError("an overlay is only looked up")

    def commit(self) -> dict:
        """Apply the changes to the base dict and return it."""
        for key, value in self.changes.items():
            if value is _GONE:
                self.base.pop(key, None)
            else:
                self.base[key] = value
        return self.base


@dataclass
class GroupDomain:
    """A fusable group, its Domain, and what `union` needs to derive the union's candidate domains."""

    ops: set[Operation]
    position: Mapping[Operation, int]
    """Program order of every op the planner sees (shared by all groups of one function)."""
    dom: Domain
    outputs: dict[SSAValue, None]
    """Results used outside the group (a dict as an insertion-ordered set)."""
    reductions: dict[tuple[tuple[int, ...], int], int] = field(default_factory=dict)
    """(input shape, axis) of the non-trivial reductions -> first position."""
    trivial: dict[tuple[int, ...], int] = field(default_factory=dict)
    """Input shapes of reductions over a size-1 axis (in registers) -> first position."""
    matmuls: list[tta.MatmulOp] = field(default_factory=list)
    n_reductions: int = 0
    puts: int = 0
    shapes: tuple[int, ...] | str = ()
    """Broadcast of the register results' shapes, or NumPy's message when they do not broadcast."""

    @staticmethod
    def of(ops: Sequence[Operation] | set[Operation], position: Mapping[Operation, int]) -> GroupDomain:
        """The analysis of `ops` (any order) from scratch; raises NotFusable."""
        ordered = sorted(ops, key=position.__getitem__)
        members = set(ordered)
        outputs = {r: None for op in ordered for r in op.results if any(u.operation not in members for u in r.uses)}
        group = GroupDomain(members, position, analyze(ordered, outputs), outputs)
        for op in ordered:
            if op.results[0] in group.dom.maps:
                group.add_register(op)
        return group

    def add_register(self, op: Operation) -> None:
        """Record what the candidate domains need of register op `op`."""
        if isinstance(op, AXIS_OPS):
            trivial = is_trivial(op)
            table: dict[Any, int] = self.trivial if trivial else self.reductions
            key = shape_of(op.input.type) if trivial else (shape_of(op.input.type), op.axis.value.data)
            table[key] = min(table.get(key, self.position[op]), self.position[op])
            self.n_reductions += not trivial
        elif isinstance(op, tta.MatmulOp):
            self.matmuls.append(op)
        self.puts += isinstance(op, tta.PutOp)
        self.shapes = _broadcast(self.shapes, register_shape(op))

    def summary(self) -> GroupDomain:
        """A copy of the candidate bookkeeping (sharing ops, dom and outputs)."""
        return GroupDomain(self.ops, self.position, self.dom, self.outputs, dict(self.reductions),
                           dict(self.trivial), list(self.matmuls), self.n_reductions, self.puts, self.shapes)

    def map_of(self, value: SSAValue) -> Map:
        return self.dom.map_of(value)

    @staticmethod
    def union(a: GroupDomain, b: GroupDomain) -> Union:
        """The analysis of `a ∪ b` (raises NotFusable); nothing changes until its `commit()`."""
        big, small = (a, b) if len(a.ops) >= len(b.ops) else (b, a)
        return Union(big, small)


def _broadcast(shapes: tuple[int, ...] | str, shape: tuple[int, ...]) -> tuple[int, ...] | str:
    if isinstance(shapes, str):
        return shapes
    try:
        return tta.broadcast_shapes(shapes, shape)
    except tta.ShapeError as e:
        return str(e)


class _Fresh(Exception):
    """The union must be analyzed from scratch."""


class _Outputs:
    """big.outputs less `removed`, plus `added`, without copying big's."""

    def __init__(self, base: Mapping[SSAValue, None], removed: set[SSAValue], added: list[SSAValue]):
        self.base, self.removed, self.added = base, removed, added

    def __contains__(self, v: SSAValue) -> bool:
        return (v in self.base and v not in self.removed) or v in self.added

    def __iter__(self) -> Iterator[SSAValue]:
        yield from (v for v in self.base if v not in self.removed)
        yield from self.added


def _entry(op: Operation, pos: Mapping[Operation, int]) -> tuple[int, int, Operation]:
    return pos[op], id(op), op


class Union:
    """A tentative merge: `big` keeps its analysis, patched by what `small` changes."""

    def __init__(self, big: GroupDomain, small: GroupDomain):
        self.big, self.small = big, small
        self.fresh: GroupDomain | None = None
        try:
            self.dom, self.changed = self._incremental()
        except _Fresh:
            self.fresh = GroupDomain.of([*big.ops, *small.ops], big.position)
            self.dom, self.changed = self.fresh.dom, list(self.fresh.outputs)

    @property
    def outputs_to_check(self) -> list[SSAValue]:
        """Outputs of the union whose map is new or changed (all of them after a fresh analysis)."""
        return self.changed

    def map_of(self, value: SSAValue) -> Map:
        return self.dom.map_of(value)

    def commit(self) -> GroupDomain:
        """Make the union the bigger side's analysis (the smaller side's becomes stale)."""
        if self.fresh is not None:
            return self.fresh
        big, summary = self.big, self.summary
        big.ops |= self.small.ops
        big.dom = Domain(self.dom.shape, self.dom.red, self.dom.maps.commit(), self.views.commit(), self.dom.matmul,
                         self.dom.k_maps)
        for v in self.removed:
            big.outputs.pop(v, None)
        big.outputs.update(dict.fromkeys(self.added))
        big.reductions, big.trivial, big.matmuls = summary.reductions, summary.trivial, summary.matmuls
        big.n_reductions, big.puts, big.shapes = summary.n_reductions, summary.puts, summary.shapes
        return big

    # ---- the incremental analysis -------------------------------------------------------------------
    def _inside(self, v: SSAValue) -> bool:
        return isinstance(v, OpResult) and (v.op in self.big.ops or v.op in self.small.ops)

    def _incremental(self) -> tuple[Domain, list[SSAValue]]:
        big, small = self.big, self.small
        for op in small.ops:
            if not has_template(op):
                raise NotFusable(f"{op.name} has no kernel template")
            if any(prod(shape_of(v.type)) >= INDEX_LIMIT for v in (*op.operands, *op.results)):
                raise NotFusable("arrays of 2**31 elements or more need 64-bit indexing")
        registers, new_register = self._views()

        def external(v: SSAValue) -> bool:
            return v in self.views or not self._inside(v)

        for op in registers:
            if isinstance(op, tta.TakeOp) and not external(op.table):
                raise NotFusable("take reads its table from memory; a computed table needs its own kernel")

        # The union's candidate domains, from both sides' summaries.
        summary = self.summary = big.summary()
        for op in new_register:
            summary.add_register(op)
        outputs = self._outputs()
        if summary.puts:
            raise _Fresh  # `analyze` checks what a put's kernel reads
        if summary.matmuls and (summary.reductions or not all(external(m.lhs) for m in summary.matmuls)):
            raise _Fresh  # row reductions or a prologue in a matmul's K loop: `analyze` finds their ops
        k_maps = check_matmul(summary.matmuls, [], external, self.views).maps if summary.matmuls else {}
        check_strided(k_maps, self.views, "a matmul's K loop")
        if not summary.reductions and not summary.matmuls and isinstance(summary.shapes, str):
            raise _Fresh  # shapes that do not broadcast together: `analyze` tries the outputs' shape
        order = sorted(summary.reductions.items(), key=lambda kv: (-len(kv[0][0]), -prod(kv[0][0]), kv[1]))
        shapes = [] if isinstance(summary.shapes, str) else [summary.shapes]
        candidates = candidate_domains(
            summary.matmuls[0] if summary.matmuls else None,
            [key for key, _ in order],
            shapes + [shape_of(v.type) for v in outputs if v in self.views] if not order else [],
            [shape for shape, _ in sorted(summary.trivial.items(), key=lambda kv: kv[1])],
        )
        errors = []
        for dom in candidates:
            if dom.shape != big.dom.shape:
                raise _Fresh
            dom.k_maps = k_maps
            try:
                return self._maps(dom, registers, external, outputs)
            except NotFusable as e:
                errors.append(e)
        raise errors[0]

    def _views(self) -> tuple[list[Operation], list[Operation]]:
        """Which values are views now: every op of `small`, and the ops of `big` downstream of a change.
        Returns the register ops to derive maps for, and those that are new registers of the union."""
        big, small, pos = self.big, self.small, self.big.position
        self.views = views = _Overlay(big.dom.views)
        heap = [_entry(op, pos) for op in small.ops]
        heap += [_entry(u.operation, pos) for op in small.ops for r in op.results for u in r.uses
                 if u.operation in big.ops]
        heapq.heapify(heap)
        seen: set[Operation] = set()
        registers: list[Operation] = []
        new_register: list[Operation] = []
        while heap:
            op = heapq.heappop(heap)[2]
            if op in seen:
                continue
            seen.add(op)
            result = op.results[0]
            view = view_after(op, views, self._inside)
            if op in small.ops:
                if view is not None:
                    views[result] = view
                else:
                    registers.append(op)
                    new_register.append(op)
                continue
            old = big.dom.views.get(result)
            if old is None and view is not None:  # a register op of big becomes a view: rare, start afresh
                raise _Fresh
            if view is None:
                registers.append(op)
            if old == view:
                continue
            if view is None:
                del views[result]
                new_register.append(op)
            else:
                views[result] = view
            for u in result.uses:
                if u.operation in big.ops:
                    heapq.heappush(heap, _entry(u.operation, pos))
        return registers, new_register

    def _outputs(self) -> _Outputs:
        """The union's outputs: big's and small's, less the values only the other side reads."""
        big, small = self.big, self.small
        inside: Callable[[Any], bool] = lambda u: u.operation in big.ops or u.operation in small.ops
        removed = {v for op in small.ops for v in op.operands if v in big.outputs and all(map(inside, v.uses))}
        self.removed, self.added = removed, [v for v in small.outputs if not all(map(inside, v.uses))]
        return _Outputs(big.outputs, removed, self.added)

    def _maps(self, dom: Domain, registers: list[Operation], external, outputs: _Outputs) -> tuple[Domain, list]:
        """Maps in `dom` (big's shape): re-derive `registers` and, in program order, whatever reads a map
        that changed; big's other maps stand."""
        big, pos = self.big, self.big.position
        dom.maps = maps = _Overlay(big.dom.maps)  # type: ignore[assignment]
        dom.views = self.views  # type: ignore[assignment]
        heap = [_entry(op, pos) for op in registers]
        heapq.heapify(heap)
        done: set[Operation] = set()
        changed: list[SSAValue] = []
        rederived = 0  # big's reductions derived again (the others keep big's reduced axis)
        while heap:
            op = heapq.heappop(heap)[2]
            result = op.results[0]
            if op in done or result in self.views:
                continue
            done.add(op)
            m = infer_map(dom, op, external)
            mine = op in big.ops
            rederived += mine and isinstance(op, AXIS_OPS) and not is_trivial(op)
            if mine and m == big.dom.maps.get(result):
                continue
            maps[result] = m
            changed.append(result)
            for u in result.uses:
                if u.operation in big.ops and u.operation not in done:
                    heapq.heappush(heap, _entry(u.operation, pos))
        if dom.red != big.dom.red and rederived < big.n_reductions:
            raise NotFusable("reductions in one kernel must reduce the same axis of the same domain")
        for v in outputs.added:
            if v in self.views:
                dom.free_map(shape_of(v.type))
        return dom, list(dict.fromkeys([*(v for v in changed if v in outputs), *outputs.added]))
