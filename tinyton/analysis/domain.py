"""Can a set of tta ops run as ONE kernel, and how does each value map onto the kernel's index space?

Both the fusion planner (legality of a merge) and the codegen (index arithmetic) call `analyze`, so the
planner can never build a group the codegen cannot emit.

The kernel iterates over a *domain* D (a shape) with at most one reduced axis `red`. Every value held
in registers gets a *map*: for each of its dims, the D axis it runs along, or None for a size-1
(broadcast) dim. Maps are strictly increasing (no transposes in registers). Values defined outside
the group are read from memory through a `View` (tinyton/analysis/views.py: a strided window on an input
buffer): transposes, broadcasts, slices and reshapes of inputs cost nothing but index arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from math import prod

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.matmul_operands import check_matmul
from tinyton.analysis.not_fusable import NotFusable
from tinyton.analysis.views import VIEWS, View, check_strided, columns_window, view_after
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

Map = tuple[int | None, ...]

ELEMENTWISE = (tta.BinaryOp, tta.CmpOp, tta.UnaryOp, tta.WhereOp, tta.CastOp, tta.CheckIndexOp, tta.ConstantOp,
               tta.ArangeOp)
AXIS_OPS = (tta.ReduceOp, tta.ScanOp, tta.SortingOp)
"""Ops that walk one axis (reductions, scans whose every element depends on those before it, sorts whose every
element depends on the whole row): the domain's reduced axis, unless it has size 1 (`is_trivial`)."""
INDEX_LIMIT = 1 << 31
"""Kernels index with i32: every buffer and the domain must have fewer elements."""


@dataclass
class Domain:
    """The kernel's index space and how every value of the group sits in it."""

    shape: tuple[int, ...]
    red: int | None
    maps: dict[SSAValue, Map] = field(default_factory=dict)
    views: dict[SSAValue, View] = field(default_factory=dict)
    matmul: tta.MatmulOp | None = None
    k_maps: dict[SSAValue, Map] = field(default_factory=dict)
    """A matmul domain's K loops (tinyton/analysis/matmul_operands.py): per value read or computed there (and
    per row statistic), the product axis of each dim (`K_AXIS`: along K)."""
    placements: dict[Operation, tuple[int, ...] | None] = field(default_factory=dict)
    """Where the users of a register op's result place its dims (`_placement`)."""

    @property
    def kind(self) -> str:
        """The codegen strategy (and the default `kind` of a fusion region)."""
        if self.matmul is not None:
            return "matmul_epilogue"
        if self.red is None:
            return "elementwise"
        inner = prod(self.shape[self.red + 1 :])
        return "row_reduction" if inner == 1 else "reduction"

    def view(self, value: SSAValue) -> View:
        return self.views.get(value) or View.of(value)

    def align(self, shape: Sequence[int], like: Map) -> Map:
        """Map of an operand of `shape` broadcast (NumPy-style, trailing dims) against a result mapped `like`."""
        k = len(like) - len(shape)
        return tuple(None if d == 1 else like[j + k] for j, d in enumerate(shape))

    def free_map(self, shape: Sequence[int]) -> Map:
        """A value with no register producer sits right-aligned in the domain (NumPy broadcasting)."""
        n, k = len(self.shape), len(shape)
        out: list[int | None] = []
        for j, d in enumerate(shape):
            a = n - k + j
            if d == 1:
                out.append(None)
            elif a < 0 or self.shape[a] != d:
                raise NotFusable(f"shape {tuple(shape)} does not broadcast into the domain {self.shape}")
            else:
                out.append(a)
        return tuple(out)

    def map_of(self, value: SSAValue) -> Map:
        return self.maps[value] if value in self.maps else self.free_map(shape_of(value.type))

    def operand_map(self, op: Operation, index: int) -> Map:
        """How operand `index` of a register op is indexed (its map, or the alignment of its view)."""
        value = op.operands[index]
        if value in self.maps:
            return self.maps[value]
        if isinstance(op, (tta.ReduceOp, tta.ReshapeOp, tta.TransposeOp)):
            return self.map_of(value)
        if isinstance(op, tta.TakeOp) and index == 1:
            out = self.maps[op.result]
            axis = op.axis.value.data
            return tuple(None if d == 1 else out[axis + j] for j, d in enumerate(shape_of(value.type)))
        if isinstance(op, tta.PutOp):  # the value as the put's map; the index along its axis
            out = self.maps[op.result]
            return out if index == 1 else (out[op.index_axis],)
        return self.align(shape_of(value.type), self.maps[op.results[0]])

    def take_table_axes(self, op: tta.TakeOp) -> tuple[Map, int]:
        """(map of the table's non-gathered dims (None at the gathered axis), gathered axis)."""
        out, axis = self.maps[op.result], op.axis.value.data
        k = len(shape_of(op.indices.type))
        table = shape_of(op.table.type)
        m = tuple(None if j == axis or d == 1 else out[j if j < axis else j + k - 1] for j, d in enumerate(table))
        return m, axis


def is_trivial(op: Operation) -> bool:
    """A reduction or scan over a size-1 axis: the identity (in registers, like a reshape)."""
    return isinstance(op, AXIS_OPS) and shape_of(op.input.type)[op.axis.value.data] == 1


def _inside(value: SSAValue, members: set[Operation]) -> bool:
    return isinstance(value, OpResult) and value.op in members


def _check_map(m: Map, what: Operation) -> Map:
    axes = [a for a in m if a is not None]
    if any(b <= a for a, b in pairwise(axes)):
        raise NotFusable(f"{what.name} would reorder axes in registers (a transpose needs memory)")
    return m


def has_template(op: Operation) -> bool:
    return isinstance(op, (*ELEMENTWISE, *VIEWS, *AXIS_OPS, tta.MatmulOp, tta.TakeOp, tta.PutOp))


def register_shape(op: Operation) -> tuple[int, ...]:
    """The shape a register op computes over: its result's, or for a put the assigned window's."""
    return shape_of((op.value if isinstance(op, tta.PutOp) else op.results[0]).type)


def check_puts(ops: Sequence[Operation], external: Callable[[SSAValue], bool]) -> None:
    """A put's kernel stores its values into the destination's buffer: the destination is not computed or
    read by the kernel (the other readers run before it), and the put's result is read after it."""
    members = set(ops)
    for op in ops:
        if not isinstance(op, tta.PutOp):
            continue
        if not external(op.dest) or any(u.operation in members and u.operation is not op for u in op.dest.uses):
            raise NotFusable("a put's destination is neither computed nor read by the put's kernel")
        if any(u.operation in members for u in op.result.uses):
            raise NotFusable("a put's result is read from memory, after the put's kernel")


def candidate_domains(
    matmul: tta.MatmulOp | None,
    reductions: Iterable[tuple[tuple[int, ...], int]],
    shapes: Sequence[tuple[int, ...]],
    trivial: Iterable[tuple[int, ...]],
    written: Sequence[tuple[int, ...]] = (),
) -> list[Domain]:
    """The domains to try, in order: the matmul's output; else each reduction's (input shape, axis), the
    largest input first (given in that order); else the broadcast of `shapes` (register results and
    view outputs), or when they do not broadcast together, of the `written` output shapes; then the input of each
    reduction over a size-1 axis (it may realign dims)."""
    if matmul is not None:
        return [Domain(shape_of(matmul.result.type), None, matmul=matmul)]
    candidates = [Domain(shape, axis) for shape, axis in reductions]
    if candidates:
        return candidates
    try:
        candidates = [Domain(tta.broadcast_shapes(*shapes), None)]
    except tta.ShapeError as e:
        try:  # values reshaped onto other axes (`arange(T)[:, None]`): the outputs' shape is the domain
            candidates = [Domain(tta.broadcast_shapes(*written), None)]
        except tta.ShapeError:
            raise NotFusable(str(e)) from None
    return candidates + [Domain(shape, None) for shape in trivial]


def reduction_order(op: tta.ReduceOp | tta.ScanOp | tta.SortingOp) -> tuple[int, int]:
    """Sort key of reduction candidates: higher rank, then more elements, first."""
    shape = shape_of(op.input.type)
    return -len(shape), -prod(shape)


def analyze(ops: Sequence[Operation], outputs: Iterable[SSAValue]) -> Domain:
    """The domain of `ops` (in program order) writing `outputs`; raises NotFusable if not one kernel."""
    members = set(ops)
    outputs = list(outputs)
    views: dict[SSAValue, View] = {}
    register: list[Operation] = []
    inside = lambda v: _inside(v, members)
    for op in ops:
        if not has_template(op):
            raise NotFusable(f"{op.name} has no kernel template")
        view = view_after(op, views, inside)
        if view is not None:
            views[op.result] = view
        else:
            register.append(op)

    def external(v: SSAValue) -> bool:
        return v in views or not _inside(v, members)

    for v in [*(v for op in ops for v in op.operands), *outputs]:
        if prod(shape_of(v.type)) >= INDEX_LIMIT:
            raise NotFusable("arrays of 2**31 elements or more need 64-bit indexing")

    check_puts(ops, external)
    matmuls = [op for op in register if isinstance(op, tta.MatmulOp)]
    reductions = [op for op in register if isinstance(op, AXIS_OPS) and not is_trivial(op)]
    for op in register:
        if isinstance(op, tta.TakeOp) and not external(op.table):
            raise NotFusable("take reads its table from memory; a computed table needs its own kernel")
    k_loop = None
    if matmuls:
        k_loop = check_matmul(matmuls, reductions, external, views)
        check_strided(k_loop.maps, views, "a matmul's K loop")
        register = [op for op in register if op not in k_loop.ops]
        reductions = []
    by_size = sorted(reductions, key=reduction_order)
    candidates = candidate_domains(
        matmuls[0] if matmuls else None,
        [(shape_of(r.input.type), r.axis.value.data) for r in by_size],
        [register_shape(op) for op in register] + [shape_of(v.type) for v in outputs if v in views],
        [shape_of(op.input.type) for op in register if is_trivial(op)],
        [register_shape(v.op) if isinstance(v.op, tta.PutOp) else shape_of(v.type) for v in outputs],
    )
    errors = []
    for dom in candidates:
        if k_loop is not None:
            dom.k_maps = k_loop.maps
        try:
            return _infer_all(dom, register, views, outputs, external)
        except NotFusable as e:
            errors.append(e)
    raise errors[0]


def _infer_all(dom: Domain, register: list[Operation], views: dict[SSAValue, View], outputs, external) -> Domain:
    """Maps of every register value in domain `dom` (NotFusable if one does not fit)."""
    if prod(dom.shape) >= INDEX_LIMIT:
        raise NotFusable("domains of 2**31 elements or more need 64-bit indexing")
    dom.views = views
    for op in register:
        dom.maps[op.results[0]] = infer_map(dom, op, external)
    for v in outputs:
        if v in views:
            dom.free_map(shape_of(v.type))
    return dom


def infer_map(dom: Domain, op: Operation, external: Callable[[SSAValue], bool]) -> Map:
    """Map of the result of register op `op` in `dom` (NotFusable if it does not fit)."""
    return _check_map(_infer(dom, op, external), op)


def _free_axis(dom: Domain, aligned: int, extent: int) -> int:
    """The axis of a result dim that no register operand fixes (none has a non-1 dim there): right-aligned
    (NumPy), or where that does not fit, as for a value computed from nothing in registers (an `arange`, a
    compare of one with an input, a select on a size-1 mask), the only domain axis of its extent (the
    reshape that follows puts it there)."""
    if 0 <= aligned < len(dom.shape) and dom.shape[aligned] == extent:
        return aligned
    fits = [a for a, d in enumerate(dom.shape) if d == extent]
    return fits[0] if len(fits) == 1 else aligned


def _placement(dom: Domain, op: Operation, external: Callable[[SSAValue], bool]) -> tuple[int, ...] | None:
    """Where the dims of register op `op`'s result sit, as offsets from the domain's last axis, when its users in
    the kernel agree on it (`_placed_by`); None where they do not or say nothing (NumPy's right alignment then).
    An index computed along axis 0 is `arange(n).reshape(n, 1)`, and casts and arithmetic before that reshape (T5's
    relative positions, ALiBi's distances) or a take's indices after it follow it. Users outside the kernel (a
    yield, another group's ops) read the result from memory, stored through the map chosen here, so they do not
    constrain it (seed 53 case 1415: a yield beside in-kernel reshapes). Each op's users are placed first, on a
    stack (a kernel's chain of ops may be longer than Python's recursion), once (`dom.placements`)."""
    stack = [op]
    while stack:
        top = stack[-1]
        if top in dom.placements:
            stack.pop()
            continue
        users = _users_inside(top, external)
        pending = [user for user in users if user not in dom.placements]
        if pending:
            stack += pending
            continue
        stack.pop()
        found = {_placed_by(dom, user, top, external) for user in users}
        dom.placements[top] = found.pop() if len(found) == 1 else None
    return dom.placements[op]


def _users_inside(op: Operation, external: Callable[[SSAValue], bool]) -> set[Operation]:
    """The ops of the kernel that read `op`'s result and compute in registers."""
    return {u.operation for u in op.results[0].uses if u.operation.results and not external(u.operation.results[0])}


def _placed_by(dom: Domain, user: Operation, op: Operation,
               external: Callable[[SSAValue], bool]) -> tuple[int, ...] | None:
    """Where `user` puts the dims of `op`'s result: a reshape that adds or removes size-1 dims, or an elementwise op
    (NumPy's broadcasting), where it places its own dims (right-aligned in the domain where its users say nothing);
    a take, its indices' dims at its axis. None: elsewhere, or a reshape only stored, whose map follows its input
    (a reduction's rows reshaped for the kernel's result: seed 20261203 case 4936)."""
    shape, out = shape_of(op.results[0].type), shape_of(user.results[0].type)
    placed = dom.placements.get(user)
    if placed is None:
        if isinstance(user, tta.ReshapeOp) and not _users_inside(user, external):
            return None
        placed = tuple(j - len(out) for j in range(len(out)))
    if isinstance(user, tta.TakeOp):
        if user.indices is not op.results[0] or user.table is op.results[0]:
            return None
        return placed[user.axis.value.data :][: len(shape)]
    if isinstance(user, tta.ReshapeOp):
        if [d for d in shape if d != 1] != [d for d in out if d != 1]:
            return None
        at = iter(p for p, d in zip(placed, out) if d != 1)
        return tuple(next(at) if d != 1 else j - len(shape) for j, d in enumerate(shape))
    if isinstance(user, ELEMENTWISE) and len(out) >= len(shape):
        return placed[len(out) - len(shape) :]
    return None


def _infer(dom: Domain, op: Operation, external) -> Map:
    """Map of the result of register op `op` from its operands' maps (NumPy alignment)."""
    out_shape = shape_of(op.results[0].type)
    if isinstance(op, tta.SliceOp):
        raise NotFusable("a slice of a value computed in registers needs memory (tinyton-push-slices moves "
                         "slices of elementwise values to their inputs)")
    if isinstance(op, tta.MatmulOp):
        if (op.lhs in dom.views and not dom.view(op.lhs).is_plain) or not columns_window(dom.view(op.rhs)):
            raise NotFusable("a matmul reads its operands whole, or a window of its right operand's columns (another "
                             "slice or pad of an operand needs its own kernel)")
        return tuple(None if d == 1 else a for a, d in enumerate(out_shape))
    if isinstance(op, tta.ReduceOp) and dom.matmul is not None and not is_trivial(op):
        return dom.k_maps[op.result]  # a row statistic, computed in a K loop
    if isinstance(op, tta.PutOp):  # stored where the window says: laid out as the value
        m = dom.map_of(op.value)
        if op.index is not None and not external(op.index) and dom.maps[op.index] != (m[op.index_axis],):
            raise NotFusable("a put's indices are computed along another axis than its values")
        return m
    if isinstance(op, AXIS_OPS):
        m, axis = dom.map_of(op.input), op.axis.value.data
        if not is_trivial(op) and m[axis] != dom.red:
            raise NotFusable("reductions in one kernel must reduce the same axis of the same domain")
        if isinstance(op, tta.SortingOp) and not is_trivial(op) and prod(dom.shape[dom.red + 1 :]) != 1:
            raise NotFusable(f"{op.name} sorts whole rows: its axis is the kernel's last")
        if isinstance(op, (tta.ScanOp, tta.SortingOp)):
            return m
        return tuple(None if j == axis else a for j, a in enumerate(m) if j != axis or op.keeps_dims)
    if isinstance(op, (tta.ReshapeOp, tta.TransposeOp)):  # in registers: only size-1 dims may move
        m, in_shape = dom.map_of(op.input), shape_of(op.input.type)
        moved = isinstance(op, tta.TransposeOp) and sorted(p := [i for i in op.perm if in_shape[i] != 1]) != p
        if moved or [d for d in in_shape if d != 1] != [d for d in out_shape if d != 1]:
            raise NotFusable(f"{op.name} of a computed value changes the layout (needs memory)")
        it = iter(a for a in m if a is not None)
        return tuple(None if d == 1 else next(it) for d in out_shape)
    constraints: list[tuple[int, Map, tuple[int, ...]]] = []  # (offset into out dims, map, shape)
    if isinstance(op, tta.TakeOp):
        if dom.view(op.table).bounds is not None:
            raise NotFusable("take reads an unpadded table (a padded one needs its own kernel)")
        check_strided([op.table], dom.views, "a gather")
        if not external(op.indices):
            constraints.append((op.axis.value.data, dom.maps[op.indices], shape_of(op.indices.type)))
    else:
        for v in op.operands:
            if not external(v):
                s = shape_of(v.type)
                constraints.append((len(out_shape) - len(s), dom.maps[v], s))
    n, k = len(dom.shape), len(out_shape)
    by_reshape = _placement(dom, op, external)
    if by_reshape is None or min(by_reshape, default=0) < -n:  # a reshape to more dims than the domain has
        by_reshape = [j - k for j in range(k)]  # (seed 58 case 2675: (2, 32, 2, 1) in a (2, 32, 2) kernel)
    aligned = [n + o for o in by_reshape]
    out: list[int | None] = []
    for j, d in enumerate(out_shape):
        if d == 1:
            out.append(None)
            continue
        axes = {m[j - off] for off, m, s in constraints if 0 <= j - off < len(s) and s[j - off] != 1}
        if len(axes) > 1:
            raise NotFusable(f"{op.name} combines values laid out along different axes")
        a = axes.pop() if axes else _free_axis(dom, aligned[j], d)
        if a is None or a < 0 or dom.shape[a] != d:
            raise NotFusable(f"{op.name} result {out_shape} does not fit the domain {dom.shape}")
        out.append(a)
    if len(placed := [a for a in out if a is not None]) != len(set(placed)):
        raise NotFusable(f"{op.name} result {out_shape} puts two dims on one axis of the domain {dom.shape}")
    return tuple(out)
