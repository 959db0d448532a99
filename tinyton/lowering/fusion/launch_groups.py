"""Independent one-row products launched together: a decode step's q and k/v projections as one kernel.

Two consecutive kernels of a program, neither reading what the other writes, become one launch (a horizontal
fusion): its programs `0 .. n-1` run one kernel's body and `n ..` the other's, behind a branch on the
program id that every thread of a program takes alike, each body's `tt.program_id` counted from its own
first program. The kernel whose programs each stream the most weight bytes takes the first program ids: the
GPU places programs in id order, so its long programs start first instead of running alone at the end
(a Llama layer's key/value programs read two dots' columns, twice a query program's bytes). A decode step then pays one launch gap less per layer, and the second projection's weights
stream while the first's last programs still run (grouped-query attention's q and k/v have different widths,
so they are two regions: `docs/fusion.md`).

Only kernels of one-row products in the GEMV form (`block_m` 1: a few microseconds each, of which the gap is
a large share) are grouped, with the same warps, nothing aliased and no scratch buffers: kernels with
tensor-core dots keep their own launch (their shared-memory rings would add up in one kernel), and a long
kernel gains nothing from sharing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from math import prod

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Region, SSAValue

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.lowering.fusion.kernel_spec import KernelSpec, writes_of
from tinyton.lowering.fusion.split import Scratch


@dataclass
class KernelGroup:
    """One launch running the kernels `parts` side by side (each over its own range of program ids); it reads
    and writes what they do, in their parameter order."""

    name: str
    module: ModuleOp
    grid: tuple[int, int, int]
    num_warps: int
    parts: tuple[KernelSpec, ...]
    alias: None = None
    scratch: tuple[Scratch, ...] = ()
    fallback: tuple[KernelSpec, ...] = ()

    @property
    def kind(self) -> str:
        return "+".join(p.kind for p in self.parts)

    @property
    def fusions(self) -> list[tta.FusionOp]:
        return [p.fusion for p in self.parts]

    @property
    def inputs(self) -> list[SSAValue]:
        return [v for p in self.parts for v in p.inputs]

    @property
    def outputs(self) -> list[SSAValue]:
        return [v for p in self.parts for v in p.outputs]

    @property
    def bindings(self) -> list[SSAValue | Scratch]:
        return [v for p in self.parts for v in p.bindings]


def groupable(spec: KernelSpec) -> bool:
    """A one-row product's GEMV kernel on a one-dimensional grid, with nothing aliased, scratch or fallback."""
    return (spec.tiles.get("BM") == 1 and spec.alias is None and not spec.scratch and not spec.fallback
            and spec.grid[1:] == (1, 1) and "tt.min_programs_per_sm" not in spec.module.attributes)


def independent(first: KernelSpec, second: KernelSpec) -> bool:
    """Whether neither kernel reads or writes what the other writes (a put's destination counts as written)."""
    written = [writes_of(first), writes_of(second)]
    touched = [set(first.inputs) | written[0], set(second.inputs) | written[1]]
    return not (written[0] & touched[1] or written[1] & touched[0])


def group_launches(launches: Sequence[KernelSpec]) -> list[KernelSpec | KernelGroup]:
    """`launches` with each run of consecutive, independent, groupable kernels of the same warps as one
    `KernelGroup`."""
    out: list[KernelSpec | KernelGroup] = []
    run: list[KernelSpec] = []

    def flush() -> None:
        out.append(run[0] if len(run) == 1 else merge(run))
        run.clear()

    for spec in launches:
        if not groupable(spec):
            if run:
                flush()
            out.append(spec)
            continue
        if run and (spec.num_warps != run[0].num_warps or not all(independent(e, spec) for e in run)):
            flush()
        run.append(spec)
    if run:
        flush()
    return out


def weight_bytes_per_program(spec: KernelSpec) -> float:
    """The bytes of the right operands of `spec`'s products that each of its programs streams."""
    products = [op for op in spec.fusion.block.walk() if isinstance(op, tta.MatmulOp)]
    total = sum(prod(shape_of(op.rhs.type)) * element_type(op.rhs.type).bitwidth // 8 for op in products)
    return total / prod(spec.grid)


def merge(parts: Sequence[KernelSpec]) -> KernelGroup:
    """One kernel taking every part's parameters in order, the parts with the longest programs first
    (`weight_bytes_per_program`; ties keep program order); program `p` runs the part whose range holds it:
    `if p < end0 { part 0 } else { if p < end1 { part 1 } else { ... } }`."""
    parts = sorted(parts, key=weight_bytes_per_program, reverse=True)
    kernels = [p.kernel for p in parts]
    name = "__".join(k.sym_name.data for k in kernels)
    params = [a for k in kernels for a in k.body.block.args]
    attrs = [attr for k in kernels for attr in k.arg_attrs.data] if all(k.arg_attrs for k in kernels) else None
    merged = func.FuncOp(name, ([a.type for a in params], []), arg_attrs=ArrayAttr(attrs) if attrs else None)
    block = merged.body.block
    mapping = dict(zip(params, block.args))
    for old, new in mapping.items():
        new.name_hint = old.name_hint
    block.add_op(pid := tt.ProgramIdOp(0))
    sizes = [prod(p.grid) for p in parts]
    ends = list(accumulate(sizes))
    bodies = [_body(kernel, mapping, pid.result, end - size, size) for kernel, end, size in zip(kernels, ends, sizes)]
    chain = bodies[-1]
    for body, end in zip(reversed(bodies[:-1]), reversed(ends[:-1])):
        branch = Block()
        limit = tt.ConstantOp(IntegerAttr(end, 32), i32)
        inside = tt.CmpOp("lt", pid.result, limit.result)
        branch.add_ops([limit, inside, scf.IfOp(inside.result, [], Region(body), Region(chain)), scf.YieldOp()])
        chain = branch
    for op in list(chain.ops)[:-1]:  # the outermost branch, without its yield
        op.detach()
        block.add_op(op)
    block.add_op(func.ReturnOp())
    module = ModuleOp([merged])
    module.attributes["tt.num_warps"] = IntegerAttr(parts[0].num_warps, i32)
    return KernelGroup(name, module, (ends[-1], 1, 1), parts[0].num_warps, tuple(parts))


def _body(kernel: func.FuncOp, mapping: dict[SSAValue, SSAValue], pid: SSAValue, start: int, programs: int) -> Block:
    """A part's body as the block of a branch: its `tt.program_id 0` counted from `start`, its
    `tt.num_programs 0` its own count of programs."""
    body = Block()
    first = tt.ConstantOp(IntegerAttr(start, 32), i32)
    local = tt.SubOp(pid, first.result)
    count = tt.ConstantOp(IntegerAttr(programs, 32), i32)
    body.add_ops([first, local, count])
    for op in kernel.body.block.ops:
        if not isinstance(op, func.ReturnOp):
            body.add_op(op.clone(value_mapper=mapping))
    for op in list(body.walk()):
        if isinstance(op, (tt.ProgramIdOp, tt.NumProgramsOp)) and op.axis.value.data == 0:
            op.result.replace_all_uses_with(local.result if isinstance(op, tt.ProgramIdOp) else count.result)
            op.detach()
            op.erase()
    body.add_op(scf.YieldOp())
    return body
