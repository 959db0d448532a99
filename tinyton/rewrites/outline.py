"""Rebuild a traced function as a sequence of `tta.fusion` regions, one per planned group.

Shared by the pattern pass, the general fusion pass and the unfused baseline: a plan is a list of
groups in topological order; `rebuild` emits one region per group (operands = values from outside,
results = values used outside or returned) and leaves groups with kind None as plain ops. Scalar
`tta.constant`s are never inputs: each region clones the constants it reads (a region is isolated
from above), so constants are not part of any group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue, Use
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.analysis.domain import ELEMENTWISE, Domain, NotFusable, analyze
from tinyton.analysis.views import VIEWS
from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type, is_float, shape_of
from tinyton.rewrites.group_graph import lexicographic_order

Group = tuple[list[Operation], str | None]


def functions(module: ModuleOp) -> Iterator[func.FuncOp]:
    yield from (op for op in module.ops if isinstance(op, func.FuncOp))


def inline_fusions(fn: func.FuncOp) -> list[Group]:
    """Dissolve existing regions back into plain ops; returns them as seed groups with their kinds."""
    seeds: list[Group] = []
    for fusion in [op for op in fn.body.block.ops if isinstance(op, tta.FusionOp)]:
        mapping: dict[SSAValue, SSAValue] = dict(zip(fusion.block.args, fusion.inputs))
        members = []
        for op in fusion.block.ops:
            if isinstance(op, tta.YieldOp):
                for old, new in zip(fusion.outputs, op.values):
                    old.replace_all_uses_with(mapping[new])
                continue
            clone = op.clone(mapping)
            Rewriter.insert_op(clone, InsertPoint.before(fusion))
            if not isinstance(clone, tta.ConstantOp):
                members.append(clone)
        Rewriter.erase_op(fusion)
        seeds.append((members, fusion.kind.data))
    return seeds


def erase_dead_ops(fn: func.FuncOp) -> None:
    """Drop ops whose results nobody reads (a kernel with no outputs would be launched for nothing)."""
    for op in reversed(list(fn.body.block.ops)):
        if isinstance(op, func.ReturnOp) or op.regions:
            continue
        if op.results and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)


def duplicate_free_ops(fn: func.FuncOp, seeds: Sequence[Group] = ()) -> None:
    """Give every user of a layout op (transpose/reshape/broadcast_to), an `arange` or index arithmetic computed
    from them (`_computes_indices`) its own copy, the users in one seed group one copy between them (an attention
    backward reads q in its forward and in dk: one array).

    Views and index ranges cost nothing but index arithmetic, so each consumer kernel can absorb one instead of
    forcing it to be materialised for the others (an `arange` shared by two `take_along_axis` was yielded by
    the first one's region, whose domain it did not fit: fuzz seed 20261203 case 4936). Matmuls reading a view
    as their left operand share one copy per output shape: sibling projections share an operand
    (tinyton/analysis/matmul_operands.py)."""
    seed_of = {op: i for i, (ops, _) in enumerate(seeds) for op in ops}
    index_arithmetic: set[Operation] = set()
    for op in fn.body.block.ops:  # program order: an op's operands are classified before it
        if _computes_indices(op, index_arithmetic):
            index_arithmetic.add(op)
    for op in reversed(list(fn.body.block.ops)):  # readers first: a whole computation copied per reader
        if op in index_arithmetic and op not in seed_of:
            first = next((u for u in op.results[0].uses if not isinstance(u.operation, func.ReturnOp)), None)

            def reader(use: Use, first: Use | None = first) -> object:
                """The function's return shares the first reader's copy (a kernel computing it stores it too)."""
                use = first if first is not None and isinstance(use.operation, func.ReturnOp) else use
                return seed_of.get(use.operation, (use.operation, use.index))

            _one_copy_per_group(op, reader)
    for op in list(fn.body.block.ops):
        if not isinstance(op, (*VIEWS, tta.ArangeOp)) or _stored_by_its_seed(op, seed_of):
            continue
        uses = list(op.result.uses)
        siblings = bool(uses) and all(isinstance(u.operation, tta.MatmulOp) and u.index == 0 for u in uses)
        _one_copy_per_group(op, lambda u, siblings=siblings: seed_of[u.operation] if u.operation in seed_of else
                            shape_of(u.operation.results[0].type) if siblings else (u.operation, u.index))  # fmt: skip


def merge_view_copies(ops: Sequence[Operation]) -> list[Operation]:
    """`ops` (a group, in program order) with its copies of one view of memory made one again (`duplicate_free_ops`
    gave each reader its own): a kernel that stores a view for readers in other kernels, which cannot read it in
    place (a window that two projections of different widths read as their left operand), stores it once, not once
    per reader. A view has no layout of its own in the kernel, so the group's analysis stands."""
    members, views = set(ops), set()
    first: dict[tuple, Operation] = {}
    kept: list[Operation] = []
    for op in ops:
        source = op.operands[0] if isinstance(op, VIEWS) else None
        computed = isinstance(source, OpResult) and source.op in members and source.op not in views
        if source is None or computed:
            kept.append(op)
            continue
        key = (op.name, source, tuple(sorted(op.properties.items())), op.results[0].type)
        same = first.setdefault(key, op)
        if same is not op:
            op.results[0].replace_all_uses_with(same.results[0])
            Rewriter.erase_op(op)
            continue
        views.add(op)
        kept.append(op)
    return kept


def _computes_indices(op: Operation, found: set[Operation]) -> bool:
    """An elementwise op or a view of int or bool values computed from constants and aranges only (`found`: the ops
    already known to): index arithmetic and masks (`(i - start) // step`, `i < n`), which a reader recomputes for
    nothing rather than read a kernel's result (RoPE's backward made two kernels of them, each read twice)."""
    if not isinstance(op, (*ELEMENTWISE, *VIEWS)) or isinstance(op, (tta.ConstantOp, tta.ArangeOp)) or not op.results:
        return False
    if any(is_float(element_type(r.type)) for r in op.results):
        return False
    return all(isinstance(v, OpResult) and (isinstance(v.op, (tta.ConstantOp, tta.ArangeOp)) or v.op in found)
               for v in op.operands)


def _one_copy_per_group(op: Operation, group_of: Callable[[Use], object]) -> None:
    """Give each group of `op`'s readers (by `group_of` of each use) its own copy of it, the first group `op`."""
    readers: dict[object, list[Use]] = {}
    for use in list(op.results[0].uses):
        readers.setdefault(group_of(use), []).append(use)
    for group in list(readers.values())[1:]:
        clone = _clone_after(op)
        for use in group:
            use.operation.operands[use.index] = clone


def _stored_by_its_seed(op: Operation, seed_of: dict[Operation, int]) -> bool:
    """A view in a seed group of a value computed in the same group: the layout the group's kernel stores its
    result in (attention's `output_views`), which every reader then reads as stored, not a view of its own
    (a copy would make the value before it a second result)."""
    producer = op.operands[0].owner if op.operands else None
    return op in seed_of and isinstance(producer, Operation) and seed_of.get(producer) == seed_of[op]


def _clone_after(op: Operation) -> SSAValue:
    clone = op.clone()
    Rewriter.insert_op(clone, InsertPoint.after(op))
    return clone.results[0]


def convex(members: set[Operation], index: Mapping[Operation, int]) -> bool:
    """No path leaves the group and comes back (it would need a kernel before and after itself); `index`:
    the ops' program order."""
    last = max(index[op] for op in members)
    seen: set[Operation] = set()
    stack = [u.operation for op in members for r in op.results for u in r.uses if u.operation not in members]
    while stack:
        op = stack.pop()
        if op in seen or op not in index or index[op] > last:
            continue
        seen.add(op)
        for r in op.results:
            for u in r.uses:
                if u.operation in members:
                    return False
                stack.append(u.operation)
    return True


def outputs_of(ops: Sequence[Operation]) -> list[SSAValue]:
    """Results of `ops` used by anything outside them (other ops or the function's return)."""
    members = set(ops)
    return [r for op in ops for r in op.results if any(u.operation not in members for u in r.uses)]


def default_kind(ops: Sequence[Operation], dom: Domain | None = None) -> str:
    """Name of the codegen strategy of a group (used when no pattern named it); `dom`, the group's domain
    when the caller has it."""
    if all(isinstance(op, (*VIEWS, tta.TakeOp)) for op in ops):
        return ops[-1].name.removeprefix("tta.")
    if dom is not None:
        return dom.kind
    try:
        return analyze(ops, outputs_of(ops)).kind
    except NotFusable:
        return "unfusable"


def order_groups(groups: Sequence[Group]) -> list[Group]:
    """Groups in a topological order of their dependencies, ties broken by program order."""
    owner = {op: i for i, (ops, _) in enumerate(groups) for op in ops}
    succ: dict[int, set[int]] = {i: set() for i in range(len(groups))}
    for i, (ops, _) in enumerate(groups):
        for op in ops:
            for v in op.operands:
                j = owner.get(v.op) if isinstance(v, OpResult) else None
                if j is not None and j != i:
                    succ[j].add(i)
    position = _positions(groups)
    first = {i: min(position[op] for op in ops) for i, (ops, _) in enumerate(groups)}
    return [groups[i] for i in lexicographic_order(succ, first.__getitem__)]


def rebuild(fn: func.FuncOp, groups: Sequence[Group]) -> list[tta.FusionOp]:
    """Re-emit the function body as `groups` (topological order); returns the new regions."""
    block = fn.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    position = {op: i for i, op in enumerate(block.ops)}
    new: dict[SSAValue, SSAValue] = {}
    fusions: list[tta.FusionOp] = []
    old: list[Operation] = []
    for ops, kind in groups:
        if kind is not None:  # constants are cloned into the regions reading them, unless the program returns them
            ops = [op for op in ops if not isinstance(op, tta.ConstantOp) or _returned(op)] or list(ops)
        if kind is None:
            for op in ops:
                op.detach()
                op.operands = [new.get(v, v) for v in op.operands]
                Rewriter.insert_op(op, InsertPoint.before(ret))
            continue
        fusion = _outline(ops, kind, new)
        Rewriter.insert_op(fusion, InsertPoint.before(ret))
        fusions.append(fusion)
        old.extend(ops)
    ret.operands = [new.get(v, v) for v in ret.operands]
    for op in sorted(old, key=lambda o: -position[o]):  # users before producers
        Rewriter.erase_op(op, safe_erase=False)
    for op in list(block.ops):  # constants now cloned into every region that reads them
        if isinstance(op, tta.ConstantOp) and not op.result.uses:
            Rewriter.erase_op(op)
    return fusions


def _positions(groups: Sequence[Group]) -> dict[Operation, int]:
    """Program order of the ops of `groups` (they all live in one block)."""
    block = next(op for ops, _ in groups for op in ops).parent_block()
    return {op: i for i, op in enumerate(block.ops)} if block else {}


def _outline(ops: Sequence[Operation], kind: str, new: dict[SSAValue, SSAValue]) -> tta.FusionOp:
    members = set(ops)
    inputs: list[SSAValue] = []
    constants: list[tta.ConstantOp] = []
    for op in ops:
        for v in op.operands:
            owner = v.op if isinstance(v, OpResult) else None
            if owner in members or v in inputs or owner in constants:
                continue
            if isinstance(owner, tta.ConstantOp):
                constants.append(owner)
            else:
                inputs.append(v)
    outputs = outputs_of(ops)
    fusion = tta.FusionOp(kind, [new.get(v, v) for v in inputs], [r.type for r in outputs])
    mapping: dict[SSAValue, SSAValue] = {}
    for v, arg in zip(inputs, fusion.block.args):
        mapping[v] = arg
        arg.name_hint = v.name_hint
    for op in [*constants, *ops]:
        fusion.block.add_op(op.clone(mapping))
    fusion.block.add_op(tta.YieldOp(*(mapping[r] for r in outputs)))
    for r, res in zip(outputs, fusion.results):
        res.name_hint = r.name_hint
        new[r] = res
    return fusion


def outline_each_op(module: ModuleOp) -> ModuleOp:
    """Fusion off: every op (but scalar constants) becomes a region of its own, in place."""
    for fn in functions(module):
        inline_fusions(fn)
        erase_dead_ops(fn)
        ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
        groups: list[Group] = []
        for op in ops:
            if isinstance(op, tta.ConstantOp) and not _returned(op):
                groups.append(([op], None))
            else:
                groups.append(([op], default_kind([op])))
        rebuild(fn, groups)
    return module


def _returned(op: Operation) -> bool:
    return any(isinstance(u.operation, func.ReturnOp) for r in op.results for u in r.uses)
