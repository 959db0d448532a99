"""`tinyton-fusion-to-kernels`: each `tta.fusion` region becomes one tt kernel (`KernelSpec` adds the
facts needed to launch it).

Takes: a module whose functions hold `tta.fusion` regions (the output of `tinyton-fuse`). Gives: that
module with one nested `builtin.module` per region, holding the region's tt kernel (`func.func` of tt ops).

Kernel parameters: one `!tt.ptr<T>` per region input, then one per region output (contiguous
buffers of the value's shape; rank-0 values are one-element buffers), then one per scratch buffer of a
split region (partial results passed between programs: the one kernel with grid barriers of `grid.py`, whose
last scratch buffer is the barrier's counter, or the kernels of `split.py`; a flash-decoding attention's
partials and the counters its programs count themselves in at, `attention_combine.py`). Shapes are compile-time
constants (a traced program is specialised on them), so the kernel takes no scalar parameters and
masks appear only where a block does not divide its extent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from math import prod
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i32,
    i64,
)
from xdsl.ir import OpResult, SSAValue
from xdsl.passes import ModulePass

from tinyton.analysis.attention import Attention, find_attention
from tinyton.analysis.attention_backward import AttentionBackward, backward_of
from tinyton.analysis.domain import Domain, analyze
from tinyton.analysis.pass_inputs import check_fused_program
from tinyton.dialects import tta
from tinyton.dialects.tt import PointerType, element_type, shape_of
from tinyton.dtypes import dtype_of
from tinyton.intmath import cdiv
from tinyton.lowering.fusion import cache_policy, grid
from tinyton.lowering.fusion.attention import emit_attention
from tinyton.lowering.fusion.attention_blocks import (
    NOMINAL_SM_COUNT,
    AttentionProblem,
    BlockChooser,
    Blocks,
    default_blocks,
    kv_split,
    packed_group_axes,
)
from tinyton.lowering.fusion.attention_backward import (
    BackwardBuffers,
    backward_blocks,
    emit_delta,
    emit_key_value_grads,
    emit_query_grads,
)
from tinyton.lowering.fusion.attention_combine import combine_in_last_chunk
from tinyton.lowering.fusion.emitter import Emitter, f32
from tinyton.lowering.fusion.geometry import Geometry, plan, plan_matmul
from tinyton.lowering.fusion.grid import GridScheduler, plan_grid
from tinyton.lowering.fusion.matmul_tiles import (
    MatmulProblem,
    TileChooser,
    default_tiles,
)
from tinyton.lowering.fusion.region import RegionEmitter
from tinyton.lowering.fusion.row_shapes import RowChooser, default_row_shape, row_problem
from tinyton.lowering.fusion.schedule import Scheduler
from tinyton.lowering.fusion.split import (
    Scratch,
    SplitScheduler,
    scratch_layout,
    stages,
)

DIVISIBILITY = 16
"""Buffers come from the allocator (cuMemAlloc / NumPy), so every pointer is 16-byte aligned."""


@dataclass(frozen=True)
class KernelParam:
    """Kernel argument `name` is region input (or output) number `index`."""

    role: Literal["input", "output", "scratch"]
    index: int
    name: str


@dataclass
class KernelSpec:
    """One launch of the array program: the tt kernel, its grid and how to bind its arguments."""

    name: str
    kind: str
    module: ModuleOp
    grid: tuple[int, int, int]
    num_warps: int
    params: list[KernelParam]
    fusion: tta.FusionOp
    tiles: dict[str, int] = field(default_factory=dict)
    alias: int | None = None
    """Set when output 0 is a contiguous reshape of input `alias`: the launch can be skipped by
    binding the output to the input's buffer (the kernel, a copy, stays valid either way)."""
    scratch: tuple[Scratch, ...] = ()
    """Buffers shared by the kernels of one split region, after the outputs in parameter order."""
    fallback: tuple[KernelSpec, ...] = ()
    """A kernel with a grid barrier (`grid.py`, launched cooperatively): the kernels launched instead when
    the GPU cannot hold all its programs at once."""

    @property
    def inputs(self) -> list[SSAValue]:
        """Program values read, in parameter order (the region's operands)."""
        return list(self.fusion.inputs)

    @property
    def outputs(self) -> list[SSAValue]:
        """Program values written, in parameter order (the region's results)."""
        return list(self.fusion.outputs)

    @property
    def bindings(self) -> list[SSAValue | Scratch]:
        """What each parameter points to, in order: region inputs, region outputs, scratch buffers."""
        return [*self.inputs, *self.outputs, *self.scratch]

    @property
    def fusions(self) -> list[tta.FusionOp]:
        """The regions the launch computes (several for a `launch_groups.KernelGroup`)."""
        return [self.fusion]

    @property
    def kernel(self) -> func.FuncOp:
        return next(op for op in self.module.ops if isinstance(op, func.FuncOp))


def put_destinations(fusion: tta.FusionOp) -> list[tuple[SSAValue, SSAValue]]:
    """(region result, program value) for each result of `fusion` that a put computes: the result shares the
    buffer of the put's destination (tinyton/rewrites/in_place.py makes that safe)."""
    found = []
    for out, value in zip(fusion.outputs, fusion.yield_op.values):
        if isinstance(value, OpResult) and isinstance(value.op, tta.PutOp):
            dest = value.op.dest
            found.append((out, fusion.inputs[dest.index] if dest in fusion.block.args else dest))
    return found


def writes_of(spec: KernelSpec) -> set[SSAValue]:
    """The program values a kernel writes: its results and the destinations its puts write into."""
    return {*spec.outputs, *(dest for _, dest in put_destinations(spec.fusion))}


def _hint(value: SSAValue, fallback: str) -> str:
    hint = value.name_hint or fallback
    return re.sub(r"\W", "_", hint)


def _kernel(fusion: tta.FusionOp, name: str, scratch: tuple[Scratch, ...] = ()) -> tuple[func.FuncOp, list[KernelParam]]:
    """An empty kernel taking the region's inputs, outputs and `scratch` buffers as pointers."""
    results = list(fusion.yield_op.values)
    params = [KernelParam("input", i, _hint(a, f"in{i}")) for i, a in enumerate(fusion.block.args)]
    params += [KernelParam("output", i, f"out{i}") for i in range(len(results))]
    params += [KernelParam("scratch", i, "counter" if s.counter else f"partial{i}") for i, s in enumerate(scratch)]
    types = [PointerType(element_type(v.type)) for v in (*fusion.block.args, *results)]
    types += [PointerType(s.element) for s in scratch]
    attrs = ArrayAttr([DictionaryAttr({"tt.divisibility": IntegerAttr(DIVISIBILITY, 32)}) for _ in types])
    kernel = func.FuncOp(name, (types, []), arg_attrs=attrs)
    for arg, p in zip(kernel.body.block.args, params):
        arg.name_hint = p.name
    return kernel, params


def _module(kernel: func.FuncOp, num_warps: int) -> ModuleOp:
    kernel.body.block.add_op(func.ReturnOp())
    module = ModuleOp([kernel])
    module.attributes["tt.num_warps"] = IntegerAttr(num_warps, i32)
    # Not verified here: verifying costs as much as generating it. The tests verify every kernel they build.
    return module


def build_kernels(fusion: tta.FusionOp, name: str, choose_tiles: TileChooser = default_tiles,
                  choose_blocks: BlockChooser = default_blocks, sm_count: int = NOMINAL_SM_COUNT,
                  choose_rows: RowChooser = default_row_shape) -> list[KernelSpec]:
    """Generate the tt kernel of one fusion region (a matmul region with the tiles `choose_tiles` picks,
    an attention region with the blocks `choose_blocks` picks, a row region of one program per row or
    rows with the shape `choose_rows` picks; a split region gives several, launched in order)."""
    ops = [op for op in fusion.block.ops if not isinstance(op, tta.YieldOp)]
    results = list(fusion.yield_op.values)
    n_in = len(fusion.block.args)
    attention = find_attention(ops, results) if fusion.kind.data == "attention" else None
    if attention is not None:
        return attention_kernels(fusion, attention, name, choose_blocks(attention_problem(attention)), sm_count)
    backward = backward_of(ops, results) if fusion.kind.data == "attention_backward" else None
    if backward is not None:
        return attention_backward_kernels(fusion, backward, name, choose_blocks)
    dom = analyze(ops, results)
    if dom.matmul is not None:
        problem = MatmulProblem.of(dom, fusion)
        geom = plan_matmul(dom, choose_tiles(problem).fit(problem))
    else:
        geom = plan(dom, lambda rows, length: choose_rows(row_problem(fusion, rows, length)))
    products = sum(isinstance(op, tta.MatmulOp) for op in ops)
    scratch = _split_k_scratch(geom, products) if geom.split_k is not None else ()
    kernel, params = _kernel(fusion, name, scratch)
    args = kernel.body.block.args
    em = Emitter(kernel.body.block)
    policy = cache_policy.ROW_LOADS if dom.matmul is None else None
    rg = RegionEmitter(dom, geom, em, dict(zip(fusion.block.args, args)), policy)
    outputs = list(zip(results, args[n_in : n_in + len(results)]))
    if scratch:
        rg.split_buffers = (args[-2], args[-1])
    if geom.split is not None:
        chain = _split_kernels(fusion, name, ops, Scheduler(rg, ops, outputs))
        one = plan_grid(geom, sm_count)
        return chain if one is None else [_grid_kernel(fusion, name, ops, dom, one, chain)]
    rg.setup_programs()
    Scheduler(rg, ops, outputs).run()
    em.close_branches()
    alias = None
    if len(ops) == 1 and isinstance(ops[0], tta.ReshapeOp) and results[0] in dom.views:
        alias = 0 if dom.views[results[0]].is_contiguous and dom.views[results[0]].is_plain else None
    module = _module(kernel, geom.num_warps)
    if geom.per_sm:
        module.attributes["tt.min_programs_per_sm"] = IntegerAttr(geom.per_sm, i32)
    return [KernelSpec(name, fusion.kind.data, module, (geom.programs, 1, 1), geom.num_warps, params, fusion,
                       dict(geom.notes), alias, scratch=scratch)]


def _split_k_scratch(geom: Geometry, dots: int) -> tuple[Scratch, Scratch]:
    """A split K loop's f32 partial products (a tile per product, range and output tile: `split_k.py`) and its
    tiles' counters."""
    tiles = geom.programs // geom.split_k.extent
    tile = geom.notes["BM"] * geom.notes["BN"]
    return Scratch((geom.programs * dots * tile,), f32), Scratch((tiles,), i32, counter=True)


def _split_kernels(fusion: tta.FusionOp, name: str, ops: list, planner: Scheduler) -> list[KernelSpec]:
    """The kernels of a split region: one per walk over the slices, then the one writing the outputs."""
    geom, dom = planner.rg.geom, planner.rg.dom
    rows = geom.sources[0].extent * geom.split.extent
    elements, counts, _ = scratch_layout(planner.passes())
    scratch = tuple(Scratch((n * rows,), element) for element, n in zip(elements, counts))
    results, n_in = list(fusion.yield_op.values), len(fusion.block.args)
    specs = []
    for stage in range(stages(planner)):
        kernel, params = _kernel(fusion, f"{name}_{stage}", scratch)
        args = kernel.body.block.args
        geom = plan(dom)  # fresh sources: they hold the SSA indices of this kernel
        evict = cache_policy.SPLIT_LOADS if stage < stages(planner) - 1 else None
        rg = RegionEmitter(dom, geom, Emitter(kernel.body.block), dict(zip(fusion.block.args, args)), evict)
        rg.setup_programs(reverse=stage % 2 == 1)
        outputs = list(zip(results, args[n_in : n_in + len(results)]))
        SplitScheduler(rg, ops, outputs, args[n_in + len(results) :], stage).run()
        specs.append(KernelSpec(f"{name}_{stage}", fusion.kind.data, _module(kernel, geom.num_warps),
                                (geom.programs, 1, 1), geom.num_warps, params, fusion, dict(geom.notes),
                                scratch=scratch))
    return specs


def _grid_kernel(fusion: tta.FusionOp, name: str, ops: list, dom: Domain, geom: Geometry,
                 chain: list[KernelSpec]) -> KernelSpec:
    """The one kernel of a split region (`grid.py`): scratch buffers of partials (the chain's when they are
    large enough: one of the two runs, so they share them), then the barriers' counters."""
    rows = geom.sources[0].extent * geom.split.extent
    partials = chain[0].scratch
    if rows > chain[0].grid[0]:
        partials = tuple(Scratch((p.shape[0] // chain[0].grid[0] * rows,), p.element) for p in partials)
    scratch = (*partials, Scratch((grid.counters(geom.sources[0].extent),), i32, counter=True))
    kernel, params = _kernel(fusion, name, scratch)
    args = kernel.body.block.args
    n_in, n_out = len(fusion.block.args), len(fusion.yield_op.values)
    rg = RegionEmitter(dom, geom, Emitter(kernel.body.block), dict(zip(fusion.block.args, args)),
                       cache_policy.GRID_LOADS)
    rg.setup_programs()
    outputs = list(zip(fusion.yield_op.values, args[n_in : n_in + n_out]))
    GridScheduler(rg, ops, outputs, args[n_in + n_out : -1], args[-1]).run()
    module = _module(kernel, geom.num_warps)
    module.attributes["tt.min_programs_per_sm"] = IntegerAttr(grid.GRID_PROGRAMS_PER_SM, i32)
    return KernelSpec(name, fusion.kind.data, module, (geom.programs, 1, 1), geom.num_warps, params, fusion,
                      dict(geom.notes), scratch=scratch, fallback=tuple(chain))


def attention_problem(att: Attention) -> AttentionProblem:
    """The sizes that choose an attention region's tiling."""
    out = shape_of(att.pv.result.type)
    group = prod(out[a] for a in packed_group_axes(att))  # decoding packs a group's query heads as rows
    return AttentionProblem(prod(out[:-2]) // group, out[-2] * group, shape_of(att.v.type)[-2], att.q.shape[-1],
                            out[-1], dtype_of(element_type(att.q.base.type)).name, att.causal_offset is not None)


def attention_kernels(fusion: tta.FusionOp, att: Attention, name: str, blocks: Blocks,
                      sm_count: int) -> list[KernelSpec]:
    """One flash-attention kernel; when `kv_split` splits the KV loop for a GPU of `sm_count` SMs, its programs
    store partials (f32 scratch buffers m, l and acc) and the last of each row block's combines them
    (`attention_combine.py`)."""
    problem = attention_problem(att)
    split = kv_split(problem, blocks, sm_count)
    notes = {"block_m": blocks.bm, "block_n": blocks.bn}
    if split is None:
        kernel, params = _kernel(fusion, name)
        args = kernel.body.block.args
        grid = emit_attention(Emitter(kernel.body.block), att, dict(zip([*fusion.block.args, att.pv.result], args)),
                              blocks)
        return [KernelSpec(name, fusion.kind.data, _module(kernel, blocks.num_warps), grid, blocks.num_warps, params,
                           fusion, notes)]
    rows = (split.count, problem.batch, problem.s_q)
    counters = Scratch((cdiv(problem.s_q, blocks.bm) * problem.batch,), i32, counter=True)
    scratch = (Scratch(rows, f32), Scratch(rows, f32), Scratch((*rows, problem.d_v), f32), counters)
    notes["kv_splits"] = split.count
    n_in = len(fusion.block.args)
    kernel, params = _kernel(fusion, name, scratch)
    args = kernel.body.block.args
    out, m, l_sum, acc, counter = args[n_in:]
    em = Emitter(kernel.body.block)
    grid = emit_attention(em, att, dict(zip(fusion.block.args, args)), blocks, split, (m, l_sum, acc))
    combine_in_last_chunk(em, (m, l_sum, acc), counter, out, element_type(att.pv.result.type),
                          (split.count, problem.batch, problem.s_q, problem.d_v), blocks.bm)
    return [KernelSpec(name, fusion.kind.data, _module(kernel, blocks.num_warps), grid, blocks.num_warps, params,
                       fusion, notes, scratch=scratch)]


def attention_backward_kernels(fusion: tta.FusionOp, bwd: AttentionBackward, name: str,
                               choose_blocks: BlockChooser) -> list[KernelSpec]:
    """FlashAttention-2's backward (attention_backward.py): the forward kernel storing the rows' logsumexp
    (only without a given `lse`), then the delta, dk/dv and dq kernels; f32 scratch for lse, delta and (when
    the program does not return it) the forward output."""
    att = bwd.scores
    rows = (prod(att.q.shape[:-2]) * att.q.shape[-2],)
    results = list(fusion.yield_op.values)
    o_scratch = bwd.lse is None and att.pv is not None and att.pv.result not in results
    if bwd.lse is None and bwd.o is None and att.pv is None:
        raise AssertionError("backward_of gives a forward output or a logsumexp")
    scratch = [Scratch(rows, f32)]  # delta
    if bwd.lse is None:
        scratch.append(Scratch(rows, f32))  # lse, from the forward kernel
    if o_scratch:
        scratch.append(Scratch((*att.q.shape[:-2], att.q.shape[-2], shape_of(att.v.type)[-1]), element_type(att.v.type)))
    scratch_t = tuple(scratch)
    blocks = backward_blocks(bwd)
    specs: list[KernelSpec] = []

    def kernel(stage: str, kind: str, warps: int, emit) -> None:
        kernel, params = _kernel(fusion, f"{name}_{stage}", scratch_t)
        args = list(kernel.body.block.args)
        n = len(fusion.block.args) + len(results)
        pointers = dict(zip([*fusion.block.args, *results], args))
        extra = dict(zip(scratch_t, args[n:]))
        lse = pointers[bwd.lse] if bwd.lse is not None else extra[scratch_t[1]]
        o_value = att.pv.result if bwd.lse is None else bwd.o
        o = extra[scratch_t[-1]] if o_scratch else pointers[o_value] if o_value is not None else None
        if o_scratch:
            pointers[att.pv.result] = o
        buffers = BackwardBuffers(lse, bwd.lse is not None, extra[scratch_t[0]], o)
        grid = emit(Emitter(kernel.body.block), pointers, buffers)
        specs.append(KernelSpec(f"{name}_{stage}", kind, _module(kernel, warps), grid, warps, params, fusion,
                                {}, scratch=scratch_t))

    if bwd.lse is None:
        forward = choose_blocks(attention_problem(att))
        kernel("forward", "attention", forward.num_warps,
               lambda em, ptrs, buf: emit_attention(em, att, ptrs, forward, lse=buf.lse, lse_guarded=bwd.guarded))
    kernel("delta", "attention_delta", 4, lambda em, ptrs, buf: emit_delta(em, bwd, ptrs, buf, blocks))
    kernel("dkdv", "attention_dkdv", blocks.dkdv.num_warps,
           lambda em, ptrs, buf: emit_key_value_grads(em, bwd, ptrs, buf, blocks))
    kernel("dq", "attention_dq", blocks.dq.num_warps, lambda em, ptrs, buf: emit_query_grads(em, bwd, ptrs, buf, blocks))
    return specs


def writes_nothing(fusion: tta.FusionOp) -> bool:
    """Every result is zero-size (NumPy's empty arrays): the region needs no kernel."""
    return all(0 in shape_of(v.type) for v in fusion.outputs)


def fusion_to_kernels(module: ModuleOp, choose_tiles: TileChooser = default_tiles,
                      choose_blocks: BlockChooser = default_blocks,
                      sm_count: int = NOMINAL_SM_COUNT,
                      choose_rows: RowChooser = default_row_shape) -> list[KernelSpec]:
    """Kernels of every `tta.fusion` in `module` that writes something, in program order (the launch
    order); a region whose results are all empty has no kernel, its buffers are just allocated. Matmul
    regions take the tiles `choose_tiles` picks, attention regions the blocks `choose_blocks` picks, and
    split their KV loop for a GPU of `sm_count` SMs when that would leave it idle; row regions take the
    shape `choose_rows` picks."""
    specs: list[KernelSpec] = []
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp):
            continue
        for op in fn.body.block.ops:
            if isinstance(op, tta.FusionOp) and not writes_nothing(op):
                name = re.sub(r"\W", "_", f"{fn.sym_name.data}_{len(specs)}_{op.kind.data}")
                specs += build_kernels(op, name, choose_tiles, choose_blocks, sm_count, choose_rows)
    return specs


@dataclass(frozen=True)
class FusionToKernelsPass(ModulePass):
    """Append each fusion's kernel as a nested module (`tinyton.grid`, `tt.num_warps` attributes) and
    tag the fusion with its kernel's name: the IR view of `fusion_to_kernels`, for inspection; `sm_count`
    stands for the GPU's SMs (flash-decoding splits), `split_k` > 1 cuts the K loop of every matmul region's
    default tiles in that many ranges (the split-K form a tuner may pick, `split_k.py`)."""

    name = "tinyton-fusion-to-kernels"
    sm_count: int = NOMINAL_SM_COUNT
    split_k: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_fused_program(op, self.name)
        tiles = lambda p: replace(default_tiles(p), split_k=self.split_k)  # noqa: E731
        for spec in fusion_to_kernels(op, tiles, sm_count=self.sm_count):
            named = spec.fusion.attributes.get("kernel")  # a split region's kernels: "name_0 name_1"
            names = f"{named.data} {spec.name}" if isinstance(named, StringAttr) and spec.scratch else spec.name
            spec.fusion.attributes["kernel"] = StringAttr(names)
            kernel_module = spec.module
            kernel_module.properties["sym_name"] = StringAttr(spec.name)
            kernel_module.attributes["tinyton.grid"] = DenseArrayBase.from_list(i64, list(spec.grid))
            op.body.block.add_op(kernel_module)
