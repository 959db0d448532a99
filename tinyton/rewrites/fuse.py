"""`tinyton-fuse`: PDL patterns first, then greedy producer→consumer fusion over the op graph.

Takes: a module of `func.func`s of tta ops (a traced array program). Gives: the same functions with every
compute op inside a `tta.fusion` region, each region one kernel, in topological order.

Rules (XLA-style, the legality of each merge decided by the codegen's own domain analysis, so every
group is one kernel the codegen can emit):
- elementwise into elementwise; elementwise producers into a reduction (prologue);
- per-row consumers of a reduction, broadcast back over the same rows (epilogue), and several
  reductions over the same rows; siblings over one domain that only share an input, too;
- a matmul with elementwise epilogues (bias, activation, residual);
- layout ops (transpose, reshape, broadcast_to) of values read from memory are views: absorbed by
  every consumer (each gets its own copy of the op), never materialised for them.
A merge is refused when it would make the group graph cyclic (a path leaves one group and re-enters
the other through a third): checked on the condensed graph with networkx. Nothing is duplicated but
views and scalar constants; reductions never are. Groups are emitted in topological order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import networkx as nx
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult
from xdsl.passes import ModulePass

from tinyton.analysis.domain import NotFusable, analyze
from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.rewrites.outline import (
    Group,
    default_kind,
    duplicate_free_ops,
    erase_dead_ops,
    functions,
    inline_fusions,
    rebuild,
)
from tinyton.rewrites.patterns import FusePatternsPass


class Planner:
    """Groups of one function's ops; `graph` holds ops, `groups` the condensed group graph."""

    def __init__(self, ops: Sequence[Operation], seeds: Sequence[Group] = ()):
        self.ops = list(ops)
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(self.ops)
        for op in self.ops:
            for v in op.operands:
                if isinstance(v, OpResult) and v.op in self.index:
                    self.graph.add_edge(v.op, op)
        self.group: dict[Operation, int] = {op: i for i, op in enumerate(self.ops)}
        self.members: dict[int, list[Operation]] = {i: [op] for i, op in enumerate(self.ops)}
        self.kinds: dict[int, set[str]] = {i: set() for i in self.members}
        self.groups = nx.DiGraph()
        self.groups.add_nodes_from(self.members)
        self.groups.add_edges_from((self.group[u], self.group[v]) for u, v in self.graph.edges)
        for ops_, kind in seeds:
            kept = [op for op in ops_ if op in self.index]
            for op in kept[1:]:
                self._merge(self.group[kept[0]], self.group[op])
            if kept and kind:
                self.kinds[self.group[kept[0]]].add(kind)

    # ---- legality ---------------------------------------------------------------------------
    def outputs(self, ops: set[Operation]) -> list:
        return [r for op in ops for r in op.results if any(u.operation not in ops for u in r.uses)]

    def legal(self, ops: set[Operation]) -> bool:
        """One kernel (the codegen's analysis), and no output written redundantly by many programs: each
        output must vary along every domain axis but the reduced one (a per-column array computed in
        a per-element kernel would be stored once per row)."""
        ordered = sorted(ops, key=self.index.__getitem__)
        outputs = self.outputs(ops)
        if len({0 in shape_of(r.type) for op in ops for r in op.results}) > 1:
            return False  # empty arrays get no kernel (fusion_to_kernels): keep them apart from real work
        try:
            dom = analyze(ordered, outputs)
        except NotFusable:
            return False
        wide = {a for a, d in enumerate(dom.shape) if d > 1 and a != dom.red}
        return all(wide <= set(dom.map_of(v)) for v in outputs)

    def creates_cycle(self, a: int, b: int) -> bool:
        """Would merging a and b close a cycle, i.e. is there a path a → c → ... → b (or b → a)?"""
        for x, y in ((a, b), (b, a)):
            for c in self.groups.successors(x):
                if c != y and nx.has_path(self.groups, c, y):
                    return True
        return False

    def _merge(self, a: int, b: int) -> int:
        for op in self.members[b]:
            self.group[op] = a
        self.members[a] += self.members.pop(b)
        self.kinds[a] |= self.kinds.pop(b)
        nx.contracted_nodes(self.groups, a, b, self_loops=False, copy=False)
        return a

    def try_merge(self, a: int, b: int) -> bool:
        if a == b or self.creates_cycle(a, b) or not self.legal(set(self.members[a]) | set(self.members[b])):
            return False
        self._merge(a, b)
        return True

    # ---- the greedy loop ----------------------------------------------------------------------
    def run(self) -> list[Group]:
        changed = True
        while changed:
            changed = False
            for u, v in sorted(self.graph.edges, key=lambda e: (self.index[e[1]], self.index[e[0]])):
                changed |= self.try_merge(self.group[u], self.group[v])
            changed |= self._siblings()
        first = {g: min(self.index[op] for op in ops) for g, ops in self.members.items()}
        order = nx.lexicographical_topological_sort(self.groups, key=first.__getitem__)
        return [self._finish(g) for g in order]

    def _siblings(self) -> bool:
        """Groups over the same domain that only share an input (several reductions of the same rows,
        or a reduction and an elementwise map of one array): one kernel reads the input once."""
        readers: dict[object, list[int]] = {}
        for g, ops in self.members.items():
            for op in ops:
                for v in op.operands:
                    owner = v.op if isinstance(v, OpResult) else None
                    if owner in ops or isinstance(owner, tta.ConstantOp):
                        continue
                    if g not in readers.setdefault(v, []):
                        readers[v].append(g)
        changed = False
        for groups in readers.values():
            for a, b in combinations(groups, 2):
                if a in self.members and b in self.members and self._domain(a) == self._domain(b):
                    changed |= self.try_merge(a, b)
        return changed

    def _domain(self, g: int) -> tuple[int, ...] | None:
        ops = set(self.members[g])
        try:
            return analyze(sorted(ops, key=self.index.__getitem__), self.outputs(ops)).shape
        except NotFusable:
            return None

    def _finish(self, g: int) -> Group:
        ops = sorted(self.members[g], key=self.index.__getitem__)
        kind = "+".join(sorted(self.kinds[g])) or default_kind(ops)
        return ops, kind


def fuse_function(fn: func.FuncOp) -> list[tta.FusionOp]:
    """Plan and outline one function (existing regions are dissolved and kept as seeds)."""
    seeds = inline_fusions(fn)
    erase_dead_ops(fn)
    duplicate_free_ops(fn)
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp) and _is_node(op)]
    return rebuild(fn, Planner(ops, seeds).run())


def _is_node(op: Operation) -> bool:
    """Scalar constants are cloned into the regions reading them, unless returned themselves."""
    return not isinstance(op, tta.ConstantOp) or any(isinstance(u.operation, func.ReturnOp) for u in op.result.uses)


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Pattern fusion (`tinyton-fuse-patterns`), then the general rules above."""

    name = "tinyton-fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        FusePatternsPass().apply(ctx, op)
        for fn in functions(op):
            fuse_function(fn)
