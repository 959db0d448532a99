"""`tinyton-fusion-to-kernels`: each `tta.fusion` region becomes one tt kernel (`KernelSpec` adds the
facts needed to launch it).

Takes: a module whose functions hold `tta.fusion` regions (the output of `tinyton-fuse`). Gives: that
module with one nested `builtin.module` per region, holding the region's tt kernel (`func.func` of tt ops).

A region is a matmul (its tiles chosen by a `TileChooser`, `split_k.py` for a split K loop), rows or elementwise
work (`geometry.plan`; split rows as a chain of kernels, `split.py`, or one with grid barriers, `grid.py`), or an
attention (`attention_kernels.py`). The kernels' parameters and what launching them takes: `kernel_spec.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i32, i64
from xdsl.passes import ModulePass

from tinyton.analysis.attention import find_attention
from tinyton.analysis.attention_backward import backward_of
from tinyton.analysis.domain import Domain, analyze
from tinyton.analysis.pass_inputs import check_fused_program
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion import cache_policy, grid
from tinyton.lowering.fusion.attention_blocks import NOMINAL_SM_COUNT, BlockChooser, default_blocks
from tinyton.lowering.fusion.attention_kernels import attention_backward_kernels, attention_kernels, attention_problem
from tinyton.lowering.fusion.emitter import Emitter, f32
from tinyton.lowering.fusion.geometry import Geometry, plan, plan_matmul
from tinyton.lowering.fusion.grid import GridScheduler, plan_grid
from tinyton.lowering.fusion.kernel_spec import KernelSpec, finish_module, new_kernel
from tinyton.lowering.fusion.matmul_tiles import (
    MatmulProblem,
    TileChooser,
    default_tiles,
    stage_bytes,
)
from tinyton.lowering.fusion.persistent import persist, programs_sharing_an_sm
from tinyton.lowering.fusion.region import RegionEmitter
from tinyton.lowering.fusion.row_shapes import RowChooser, default_row_shape, row_problem
from tinyton.lowering.fusion.schedule import Scheduler
from tinyton.lowering.fusion.split import (
    Scratch,
    SplitScheduler,
    scratch_layout,
    stages,
)


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
        tiles = choose_tiles(problem).fit(problem)
        geom = plan_matmul(dom, tiles)
    else:
        geom = plan(dom, lambda rows, length: choose_rows(row_problem(fusion, rows, length)))
    products = sum(isinstance(op, tta.MatmulOp) for op in ops)
    scratch = _split_k_scratch(geom, products) if geom.split_k is not None else ()
    kernel, params = new_kernel(fusion, name, scratch)
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
    programs, per_sm = geom.programs, geom.per_sm
    if geom.notes.get("WARP_SPECIALIZE"):  # a matmul region's warp-specialised tile: persistent programs
        staged = tiles.block_m * tiles.block_n * max(element_type(v.type).bitwidth // 8 for v in results)
        per_sm = programs_sharing_an_sm(stage_bytes(problem, tiles) + staged, tiles.num_warps)  # ring, TMA store's tile
        programs = persist(kernel.body.block, geom.programs, sm_count, per_sm)
    module = finish_module(kernel, geom.num_warps)
    if per_sm:
        module.attributes["tt.min_programs_per_sm"] = IntegerAttr(per_sm, i32)
    return [KernelSpec(name, fusion.kind.data, module, (programs, 1, 1), geom.num_warps, params, fusion,
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
        kernel, params = new_kernel(fusion, f"{name}_{stage}", scratch)
        args = kernel.body.block.args
        geom = plan(dom)  # fresh sources: they hold the SSA indices of this kernel
        evict = cache_policy.SPLIT_LOADS if stage < stages(planner) - 1 else None
        rg = RegionEmitter(dom, geom, Emitter(kernel.body.block), dict(zip(fusion.block.args, args)), evict)
        rg.setup_programs(reverse=stage % 2 == 1)
        outputs = list(zip(results, args[n_in : n_in + len(results)]))
        SplitScheduler(rg, ops, outputs, args[n_in + len(results) :], stage).run()
        specs.append(KernelSpec(f"{name}_{stage}", fusion.kind.data, finish_module(kernel, geom.num_warps),
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
    kernel, params = new_kernel(fusion, name, scratch)
    args = kernel.body.block.args
    n_in, n_out = len(fusion.block.args), len(fusion.yield_op.values)
    rg = RegionEmitter(dom, geom, Emitter(kernel.body.block), dict(zip(fusion.block.args, args)),
                       cache_policy.GRID_LOADS)
    rg.setup_programs()
    outputs = list(zip(fusion.yield_op.values, args[n_in : n_in + n_out]))
    GridScheduler(rg, ops, outputs, args[n_in + n_out : -1], args[-1]).run()
    module = finish_module(kernel, geom.num_warps)
    module.attributes["tt.min_programs_per_sm"] = IntegerAttr(grid.GRID_PROGRAMS_PER_SM, i32)
    return KernelSpec(name, fusion.kind.data, module, (geom.programs, 1, 1), geom.num_warps, params, fusion,
                      dict(geom.notes), scratch=scratch, fallback=tuple(chain))


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
