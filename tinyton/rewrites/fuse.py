"""`tinyton-fuse`: PDL patterns first, then greedy producer→consumer fusion over the op graph.

Takes: a module of `func.func`s of tta ops (a traced array program). Gives: the same functions with every
compute op inside a `tta.fusion` region, each region one kernel, in topological order.

Rules (XLA-style, the legality of each merge decided by the codegen's own domain analysis, so every
group is one kernel the codegen can emit):
- elementwise into elementwise; elementwise producers into a reduction (prologue);
- per-row consumers of a reduction, broadcast back over the same rows (epilogue), and several
  reductions over the same rows; siblings over one domain that only share an input, too;
- a matmul with elementwise epilogues (bias, activation, residual, a put); sibling matmuls (one output
  shape, an operand in common: q/k/v projections) share one kernel, one K loop each; a computed left operand
  is evaluated in the K loop, with the row statistics it reads (RMSNorm, tinyton/analysis/matmul_operands.py;
  norm cones are proposed as groups with their matmuls, and copied for projections of another width);
- layout ops (transpose, reshape, broadcast_to) of values read from memory are views: absorbed by
  every consumer (each gets its own copy of the op, matmuls reading one as their left operand one per
  output shape; the copies in one kernel are one again), never materialised for them;
- a put (`x[key] = v`) stores into its destination's buffer: the destination's other readers come first
  (ordering edges of the group graph, tinyton/rewrites/in_place.py);
- an index array reshaped onto another axis (`(arange(T) == pos)[:, None]`) joins its consumer: when the
  group's shapes do not broadcast together, the domain is its outputs' shape (tinyton/analysis/domain.py).
A merge is refused when it would make the group graph cyclic (a path leaves one group and re-enters
the other through a third): checked on the condensed group graph (tinyton/rewrites/group_graph.py). Nothing is duplicated but
views, scalar constants, index arithmetic (ints and bools computed from constants and aranges only) and norms
before projections of different widths. Groups are emitted in topological order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import cse

from tinyton.analysis.domain import NotFusable
from tinyton.analysis.groups import GroupDomain, Union
from tinyton.analysis.pass_inputs import check_array_program
from tinyton.analysis.views import VIEWS
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.profiling import stage
from tinyton.rewrites.group_graph import GroupGraph, Reachability
from tinyton.rewrites.outline import (
    Group,
    default_kind,
    duplicate_free_ops,
    erase_dead_ops,
    functions,
    inline_fusions,
    merge_view_copies,
    rebuild,
)
from tinyton.rewrites.attention_canonical import canonicalize_attention
from tinyton.rewrites.heads import SplitHeadsPass
from tinyton.rewrites.in_place import ordering_edges, prepare_puts
from tinyton.rewrites.patterns import FusePatternsPass
from tinyton.rewrites.prologues import duplicate_shared_prologues, prologue_groups
from tinyton.rewrites.gathers import PushGathersPass
from tinyton.rewrites.index_checks import check_indices
from tinyton.rewrites.layouts import PushLayoutsPass
from tinyton.rewrites.long_sorts import SplitLongSortsPass
from tinyton.rewrites.remap import PushSlicesPass
from tinyton.rewrites.row_scale import RowScalePass
from tinyton.rewrites.row_stats import operand_sum_groups, row_stat_groups


ROW_PATTERNS = frozenset({"rmsnorm", "softmax"})
"""Pattern kinds of row kernels (tinyton/rewrites/*.pdl.mlir)."""


class Planner:
    """Groups of one function's ops: `group` maps each op to its group, `groups` is the condensed group
    graph, `analysis` each group's domain (None for a group that is not one kernel on its own)."""

    def __init__(self, ops: Sequence[Operation], seeds: Sequence[Group] = ()):
        self.ops = list(ops)
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.edges = [(v.op, op) for op in self.ops for v in op.operands if isinstance(v, OpResult) and v.op in self.index]
        self.edges.sort(key=lambda e: (self.index[e[1]], self.index[e[0]]))
        self.group: dict[Operation, int] = {op: i for i, op in enumerate(self.ops)}
        self.members: dict[int, list[Operation]] = {i: [op] for i, op in enumerate(self.ops)}
        self.kinds: dict[int, set[str]] = {i: set() for i in self.members}
        self.empty: dict[int, set[bool]] = {
            i: {0 in shape_of(r.type) for r in op.results} for i, op in enumerate(self.ops)
        }
        """Per group: whether its results are empty arrays (True), real ones (False), or both."""
        ordering = ordering_edges(self.ops)  # readers of a put's destination run before the put
        self.groups = GroupGraph(list(self.members),
                                 ((self.group[u], self.group[v]) for u, v in [*self.edges, *ordering]))
        for ops_, kind in seeds:
            kept = [self.group[op] for op in sorted((op for op in ops_ if op in self.index), key=self.index.__getitem__)]
            g = kept[0] if kept else None
            for other in kept[1:]:
                g = self._merge(g, other)
            if g is not None and kind:
                self.kinds[g].add(kind)
        self.analysis: dict[int, GroupDomain | None] = {g: self._analyze(g) for g in self.members}
        proposals = [row_stat_groups, prologue_groups, operand_sum_groups]
        for proposed in [group for propose in proposals for group in propose(self.ops, self.index)]:
            self._propose(proposed)

    # ---- legality ---------------------------------------------------------------------------
    def _analyze(self, g: int) -> GroupDomain | None:
        try:
            return GroupDomain.of(self.members[g], self.index)
        except NotFusable:
            return None

    def union(self, a: int, b: int) -> Union | GroupDomain | None:
        """The analysis of groups a and b merged, if that is one kernel writing each output once."""
        if len(self.empty[a] | self.empty[b]) > 1:
            return None  # empty arrays get no kernel (fusion_to_kernels): keep them apart from real work
        x, y = self.analysis[a], self.analysis[b]
        try:
            if x is None or y is None:
                merged: Union | GroupDomain = GroupDomain.of([*self.members[a], *self.members[b]], self.index)
                outputs = list(merged.outputs)
            else:
                merged = GroupDomain.union(x, y)
                outputs = merged.outputs_to_check
        except NotFusable:
            return None
        return merged if _writes_once(merged, outputs) else None

    def _propose(self, ops: Sequence[Operation]) -> None:
        """Make `ops` (in program order, no cycle through them; groups of a pattern only when wholly inside)
        one group if that is one kernel writing each output once."""
        groups = list(dict.fromkeys(self.group[op] for op in ops))
        members = set(ops)
        if any(not members.issuperset(self.members[g]) for g in groups):
            return  # claimed by a pattern
        try:
            analysis = GroupDomain.of(ops, self.index)
        except NotFusable:
            return
        if not _writes_once(analysis, analysis.outputs):
            return
        for g in groups:
            del self.analysis[g]
        g = groups[0]
        for other in groups[1:]:
            g = self._merge(g, other)
        self.analysis[g] = analysis

    def creates_cycle(self, a: int, b: int, reach: Reachability | None = None) -> bool:
        """Would merging a and b close a cycle, i.e. is there a path a → c → ... → b (or b → a)?"""
        return (reach or self.groups).creates_cycle(a, b)

    def _merge(self, a: int, b: int) -> int:
        """Merge groups a and b; the larger one's id survives (members move small to large)."""
        if len(self.members[a]) < len(self.members[b]):
            a, b = b, a
        for op in self.members[b]:
            self.group[op] = a
        self.members[a] += self.members.pop(b)
        self.kinds[a] |= self.kinds.pop(b)
        self.empty[a] |= self.empty.pop(b)
        self.groups.merge(a, b)
        return a

    def try_merge(self, a: int, b: int, reach: Reachability | None = None) -> bool:
        if a == b or self.creates_cycle(a, b, reach):
            return False
        merged = self.union(a, b)
        if merged is None:
            return False
        analysis = merged.commit() if isinstance(merged, Union) else merged
        del self.analysis[a], self.analysis[b]
        keep = self._merge(a, b)
        self.analysis[keep] = analysis
        if reach is not None:
            reach.merged(keep, b if keep == a else a)
        return True

    # ---- the greedy loop ----------------------------------------------------------------------
    def run(self) -> list[Group]:
        changed = True
        while changed:
            changed = False
            for u, v in self.edges:
                changed |= self.try_merge(self.group[u], self.group[v])
            changed |= self._siblings()
        first = {g: min(self.index[op] for op in ops) for g, ops in self.members.items()}
        return [self._finish(g) for g in self.groups.sorted(first.__getitem__)]

    def _siblings(self) -> bool:
        """Groups over the same domain that only share an input (several reductions of the same rows,
        or a reduction and an elementwise map of one array): one kernel reads the input once."""
        readers: dict[object, list[int]] = {}
        for g, ops in self.members.items():
            for op in ops:
                for v in op.operands:
                    owner = v.op if isinstance(v, OpResult) else None
                    if (owner is not None and self.group.get(owner) == g) or isinstance(owner, tta.ConstantOp):
                        continue
                    groups = readers.setdefault(v, [])
                    if g not in groups[-1:]:  # a group's ops are visited together
                        groups.append(g)
        pairs = []
        for groups in readers.values():
            by_domain: dict[object, list[int]] = {}
            for g in groups:
                if self._domain(g) is not None:
                    by_domain.setdefault(self._domain(g), []).append(g)
            pairs += [pair for same in by_domain.values() for pair in combinations(same, 2)]
        if not pairs:
            return False
        reach = Reachability(self.groups, (g for pair in pairs for g in pair))
        changed = False
        for a, b in pairs:
            if a in self.members and b in self.members and self._domain(a) == self._domain(b):
                changed |= self.try_merge(a, b, reach)
        return changed

    def _domain(self, g: int) -> tuple[int, ...] | None:
        analysis = self.analysis[g]
        return analysis.dom.shape if analysis is not None else None

    def _finish(self, g: int) -> Group:
        ops = sorted(self.members[g], key=self.index.__getitem__)
        analysis = self.analysis[g]
        kinds = self.kinds[g]
        if analysis is not None and analysis.dom.matmul is not None:
            kinds = kinds - ROW_PATTERNS  # a norm in a projection's K loop: the region is the matmul's
        kind = "+".join(sorted(kinds)) or default_kind(ops, analysis.dom if analysis else None)
        return ops, kind


def _writes_once(merged: Union | GroupDomain, outputs) -> bool:
    """Each output varies along every domain axis but the reduced one (a per-column array computed in a
    per-element kernel would be stored once per row), or is a statistic of a matmul's K loop, which varies
    along every axis but the columns (`dy.sum(0)` beside `dy.T @ x`: the programs of the first column tile
    store it, `first_tiles`)."""
    dom = merged.dom
    wide = {i for i, d in enumerate(dom.shape) if d > 1 and i != dom.red}
    columns = {len(dom.shape) - 1}
    return all(wide - (columns if v in dom.k_maps else set()) <= set(dom.map_of(v)) for v in outputs)


def fuse_function(fn: func.FuncOp) -> list[tta.FusionOp]:
    """Plan and outline one function (existing regions are dissolved and kept as seeds)."""
    seeds = inline_fusions(fn)
    erase_dead_ops(fn)
    prepare_puts(fn)
    duplicate_shared_prologues(fn)
    duplicate_free_ops(fn, seeds)
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp) and _is_node(op)]
    return rebuild(fn, [(merge_view_copies(group), kind) for group, kind in Planner(ops, seeds).run()])


def _is_node(op: Operation) -> bool:
    """Scalar constants are cloned into the regions reading them, unless returned themselves."""
    return not isinstance(op, tta.ConstantOp) or any(isinstance(u.operation, func.ReturnOp) for u in op.result.uses)


def merge_equal_ops(module: ModuleOp) -> None:
    """xDSL's `cse` for computed values; views keep the readers they were spelled with, but for left matmul
    operands (sibling projections share one). A view is free, and which readers share one decides what the
    patterns see: a `k.T` per attention (two attentions of one k), one `q` for an attention's forward and
    its dk (a training step)."""
    spelled = {(use.operation, use.index): view for view in module.walk() if isinstance(view, VIEWS)
               for use in view.results[0].uses}
    cse(module)
    for view in [op for op in module.walk() if isinstance(op, VIEWS)]:
        readers: dict[Operation, list] = {}
        for use in view.results[0].uses:
            lhs = isinstance(use.operation, tta.MatmulOp) and use.index == 0
            readers.setdefault(view if lhs else spelled.get((use.operation, use.index), view), []).append(use)
        for uses in list(readers.values())[1:]:
            clone = view.clone()
            Rewriter.insert_op(clone, InsertPoint.after(view))
            for use in uses:
                use.operation.operands[use.index] = clone.results[0]


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Sorts of rows longer than one program holds split into chunk sorts and merges (`tinyton-split-long-sorts`),
    common subexpressions merged (xDSL's `cse`: a value spelled twice is one value), projections split into
    heads (`tinyton-split-heads`), attention in one form (`tinyton-canonicalize-attention`), gathers of aranges as
    index checks (`tinyton-check-indices`), slices of computed
    values onto the arrays read (`tinyton-push-slices`, concatenations first, but for those of attention gradients,
    which the backward's kernels store in place: any left after the patterns are pushed then), gathers of them onto their
    operands (`tinyton-push-gathers`), row scales behind matmuls
    (`tinyton-row-scale`), pattern
    fusion (`tinyton-fuse-patterns`), then the
    general rules above."""

    name = "tinyton-fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        with stage("long sorts split into chunks"):
            SplitLongSortsPass().apply(ctx, op)
        with stage("common subexpressions"):  # `x.astype(bf16)` per projection: one cast, so siblings share it
            merge_equal_ops(op)
        with stage("projections split into heads"):
            SplitHeadsPass().apply(ctx, op)
            merge_equal_ops(op)
        with stage("attention spellings"):  # before row scales: `e * (1 / sum)` is a softmax, not a row scale;
            canonicalize_attention(op)  # before slices are pushed: `np.repeat` of k and v is still one
        with stage("gathers of aranges as index checks"):  # before slices are pushed: through the checks too
            check_indices(op)
        with stage("slices pushed to the arrays read"):
            PushSlicesPass(keep_gradients=True).apply(ctx, op)
        with stage("gathers pushed to the arrays read"):
            PushGathersPass().apply(ctx, op)
        with stage("row scales behind matmuls"):
            RowScalePass().apply(ctx, op)
        with stage("fusion patterns (PDL)"):
            FusePatternsPass().apply(ctx, op)
        with stage("slices pushed to the arrays read"):  # the concatenations no attention backward stored
            PushSlicesPass().apply(ctx, op)
        with stage("transposes and reshapes pushed to the arrays read"):  # after the patterns (q, k and v's)
            PushLayoutsPass().apply(ctx, op)
        with stage("fusion planner"):
            for fn in functions(op):
                fuse_function(fn)
