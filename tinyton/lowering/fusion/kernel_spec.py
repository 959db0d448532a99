"""What launching a region's kernel takes: its parameters (`KernelParam`), its tt module, grid and bindings
(`KernelSpec`), and the empty kernel function a generator fills (`new_kernel`, then `finish_module`).

Kernel parameters: one `!tt.ptr<T>` per region input, then one per region output (contiguous buffers of the
value's shape; rank-0 values are one-element buffers), then one per scratch buffer (partial results passed
between programs, counters; `split.py`, `grid.py`, `split_k.py`, `attention_combine.py`). Shapes are
compile-time constants (a traced program is specialised on them), so the kernel takes no scalar parameters and
masks appear only where a block does not divide its extent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, i32
from xdsl.ir import OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import PointerType, element_type
from tinyton.lowering.fusion.split import Scratch

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


def new_kernel(fusion: tta.FusionOp, name: str, scratch: tuple[Scratch, ...] = ()) -> tuple[func.FuncOp, list[KernelParam]]:
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


def finish_module(kernel: func.FuncOp, num_warps: int) -> ModuleOp:
    """The kernel, ended, in its module with its warps."""
    kernel.body.block.add_op(func.ReturnOp())
    module = ModuleOp([kernel])
    module.attributes["tt.num_warps"] = IntegerAttr(num_warps, i32)
    # Not verified here: verifying costs as much as generating it. The tests verify every kernel they build.
    return module
