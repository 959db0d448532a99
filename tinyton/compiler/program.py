"""Array programs: a traced tta module -> fuse -> one tt kernel per `tta.fusion` -> launch them in order.

`build_program(graph, ...)` builds an `ArrayProgram` from the module the frontend traced (the frontend
caches it per input shapes, dtypes, baked-in scalars and `fuse`); calling it allocates the intermediates and outputs, launches each kernel in program
order and returns NumPy arrays for NumPy inputs, or arrays of the caller's device type (torch tensors,
`DeviceArray`s) for device inputs. Without a GPU the kernels run in the NumPy simulator.

Fusion stages used: `tinyton.rewrites.pipeline.fuse_module(module, fuse)` puts every compute op in a
`tta.fusion` region (one per op when `fuse` is False), and `tinyton.lowering.fusion.fusion_to_kernels`
gives one `KernelSpec` per region in program order: kernel parameters are pointers to the region's
inputs, then to its outputs. A kernel with a grid barrier (split rows in one kernel) is launched
cooperatively when the GPU holds its whole grid at once (occupancy x SMs, asked once per kernel), else its
two-kernel fallback is; its barrier counters are allocated zeroed once per call path and stream
(`launch_plan.py`), never per call.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import OpResult, SSAValue

from tinyton.compiler.attention_tuning import attention_blocks
from tinyton.compiler.kernel import CompiledKernel, compile_module, kernel_function, normalize_grid
from tinyton.compiler.launch_plan import Launches, Runner, overlap_enabled, runner, trigger_enabled
from tinyton.compiler.matmul_tuning import matmul_tiles
from tinyton.compiler.row_tuning import row_shape
from tinyton.dialects import tt, tta
from tinyton.dialects.tt_grid import mark_read_only
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tta import program_function, returns_tuple
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.lazy import lazy_module
from tinyton.lowering.fusion.attention_blocks import NOMINAL_SM_COUNT
from tinyton.profiling import stage
from tinyton.runtime import driver
from tinyton.runtime.devices import device_of_call, running_on
from tinyton.runtime.memory import HostMemory, memory_for, memory_key, memory_on_inputs_device

rewrites_pipeline = lazy_module("tinyton.rewrites.pipeline")  # on first use: the PDL parser and matcher load slowly


def fusion_enabled(fuse: bool | None = None) -> bool:
    """`fuse`, or the TINYTON_FUSION environment variable (default on; 0/false/off/no disable it)."""
    if fuse is not None:
        return fuse
    value = os.environ.get("TINYTON_FUSION")
    return value is None or value.strip().lower() not in ("0", "false", "off", "no")


def fused_module(graph: ModuleOp, fuse: bool | None = None) -> ModuleOp:
    """A copy of the traced module with every compute op in a `tta.fusion` (one per op unfused)."""
    module = rewrites_pipeline.fuse_module(graph.clone(), fusion_enabled(fuse))
    module.verify()
    for op in program_function(module).body.block.ops:
        if not isinstance(op, (tta.FusionOp, tta.ConstantOp, func.ReturnOp)):
            raise RuntimeError(f"internal error: {op.name} was left outside any tta.fusion, so no kernel computes it")
    return module


class _LazyAsm(Mapping[str, str]):
    """`program.asm`: IR texts by stage, each rendered on first access (PTX needs the toolchain)."""

    def __init__(self, makers: dict[str, Callable[[], str]]):
        self._makers, self._texts = makers, {}

    def __getitem__(self, key: str) -> str:
        if key not in self._texts:
            self._texts[key] = self._makers[key]()
        return self._texts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


@dataclass
class _Step:
    """One kernel launch: its KernelSpec, grid, and parameter slots (indices into the call's buffers)."""

    launch: Any
    grid: tuple[int, ...]
    slots: tuple[int, ...]
    compiled: Any = None
    fallback: list[_Step] = field(default_factory=list)
    """The launches replacing this one where the GPU cannot hold its grid at once (a grid barrier inside)."""


@dataclass
class ArrayProgram:
    """A compiled array program for one signature; call it with arrays like the Python function."""

    name: str
    graph: ModuleOp
    fused: ModuleOp
    num_launches: int
    input_positions: tuple[int, ...]
    buffer_specs: list[tuple[tuple[int, ...], np.dtype]]
    steps: list[_Step]
    outputs: tuple[int, ...]
    returns_tuple: bool
    updates: tuple[int, ...] = ()
    """The inputs (buffer slots) the program assigns into: updated in place, written back to the caller's
    array where the call made a copy of it (a strided or misaligned input, a host array staged on the GPU)."""
    counters: tuple[tuple[int, ...], ...] = ()
    """Shapes of the grid barriers' i32 counter buffers, the last buffer slots: zero before their first
    launch, kept from call to call."""
    asm: Mapping[str, str] = field(default_factory=dict)
    _runners: dict[tuple[Any, ...], Runner] = field(default_factory=dict, repr=False)

    def _kernel(self, step: _Step) -> CompiledKernel:
        """The step's CompiledKernel (lowered to PTX only when first launched on the GPU)."""
        if step.compiled is None:
            with stage("prepare kernel (print its tt text)"):
                step.compiled = compile_module(step.launch.module, num_warps=step.launch.num_warps)
        return step.compiled

    def __call__(self, *args: Any) -> Any:
        return self.runner(args)(args)

    def runner(self, args: Sequence[Any]) -> Runner:
        """The call path for arguments like `args` (cached per input types and devices): `runner(args)`
        gives the program's result."""
        inputs = [args[i] for i in self.input_positions]
        gpu = driver.backend() == "cuda"
        ordinal = device_of_call(inputs, f"array program {self.name}") if gpu else None
        key = (memory_key(inputs), ordinal)
        run = self._runners.get(key)
        if run is None:
            memory = memory_for(inputs, gpu)
            on_gpu = not (isinstance(memory, HostMemory) and memory.address is None)
            with running_on(ordinal or 0):  # the kernels' launches bind to the call's device
                kernels = [(self._kernel(s), s.grid, s.slots) for step in self.steps
                           for s in self._launched(step, on_gpu)]  # fmt: skip
                plan = Launches(self.input_positions, self.buffer_specs, kernels, self.outputs, self.returns_tuple,
                                self.counters, self.updates)
                run = runner(plan, memory)
            if on_gpu and not memory_on_inputs_device(memory):
                run = on_device(run, ordinal or 0)
            self._runners[key] = run
        return run

    def _launched(self, step: _Step, on_gpu: bool) -> list[_Step]:
        """The step, or its fallback on a GPU that cannot hold its grid at once (a grid barrier inside)."""
        if on_gpu and step.fallback and self._kernel(step).resident_programs() < math.prod(step.grid):
            return step.fallback
        return [step]

    def kernels(self) -> list[CompiledKernel]:
        """The compiled kernels (CompiledKernel objects), compiling them for the GPU if needed."""
        return [self._kernel(step) for step in self.steps]


def program_updates(fn: func.FuncOp) -> list[int]:
    """The inputs a traced program assigns into, one per trailing result (`tta.updates`)."""
    updates = fn.attributes.get(tta.UPDATES)
    return [] if updates is None else list(updates.get_values())


def sm_count() -> int:
    """The GPU's multiprocessors, the target fact that decides flash-decoding splits (a nominal H100's
    without a GPU, so the simulator runs the kernels an H100 would)."""
    return driver.device().sm_count if driver.is_available() else NOMINAL_SM_COUNT


def _reshaped_in_place(launches: Sequence[Any], results: set[SSAValue], destinations: set[SSAValue]) -> list[Any]:
    """The contiguous reshapes (`alias` kernels) whose output is a result and whose input an intermediate that no
    other result reshapes and no put writes into (`destinations`), written by a kernel that runs (not itself a
    reshape sharing its input's buffer): `(o5d).reshape(B, H, S, D)` after grouped-query attention, a
    projection's activation that the next product reads and the program returns `[B, T, N]`. No copy is
    launched: the producer writes the result, whose bytes are the same, and the intermediate's other readers
    read it there."""
    reshaped = Counter(k.inputs[k.alias] for k in launches if k.alias is not None and k.outputs[0] in results)
    shared = {k.outputs[0] for k in launches if k.alias is not None}
    return [k for k in launches if k.alias is not None and k.outputs[0] in results and isinstance(k.inputs[k.alias], OpResult)
            and k.inputs[k.alias] not in results | shared | destinations and reshaped[k.inputs[k.alias]] == 1]


def mark_overlap(launches: Sequence[Any], slot: Mapping[Any, int], n_inputs: int) -> None:
    """Ask each launch's kernel to overlap the launch before it (`tt.overlap_prior_grid`), and mark its
    parameters that point to an input no launch writes `tt.read_only`: loaded before its wait
    (tinyton/lowering/tt_to_llvm/grid_dependency.py). A put's result shares its destination's buffer slot, so the
    slots of every launch's outputs are the buffers written."""
    kernels = [spec for k in launches for spec in (k, *k.fallback)]
    written = {slot[v] for spec in kernels for v in spec.outputs}
    for spec in kernels:
        kernel = kernel_function(spec.module)
        read_only = [i for i, v in enumerate(spec.bindings)
                     if v in slot and slot[v] < n_inputs and slot[v] not in written]  # fmt: skip
        mark_read_only(kernel, read_only)
        spec.module.attributes[tt.OVERLAP_ATTR] = UnitAttr()
        if trigger_enabled():
            spec.module.attributes[tt.TRIGGER_ATTR] = UnitAttr()


def build_program(
    graph: ModuleOp, name: str, input_positions: Sequence[int], fuse: bool | None = None
) -> ArrayProgram:
    """Fuse, generate the kernels and plan the buffers of a traced program.

    `input_positions` are the indices of the Python arguments that are arrays (the program's inputs, in
    the order of the traced function's arguments); the others were baked into the trace."""
    driver.start_initialising()  # the kernels' generation asks for the SM count: cuInit meanwhile
    from tinyton.lowering.fusion import (  # on first use, as the fusion passes
        Scratch,
        fusion_to_kernels,
        group_launches,
        put_destinations,
    )

    with stage("fuse"):
        fused = fused_module(graph, fuse)
    with stage("generate kernels (tta.fusion -> tt)"):
        launches = group_launches(fusion_to_kernels(fused, matmul_tiles, attention_blocks, sm_count(), row_shape))
    body = program_function(fused).body.block

    slot: dict[SSAValue | Scratch, int] = {}
    specs: list[tuple[tuple[int, ...], np.dtype]] = []

    def buffer(value: SSAValue | Scratch) -> int:
        if value not in slot:
            slot[value] = len(specs)
            if isinstance(value, Scratch):
                specs.append((value.shape, ELEMENT_TO_NUMPY[value.element]))
            else:
                specs.append((shape_of(value.type), ELEMENT_TO_NUMPY[element_type(value.type)]))
        return slot[value]

    for arg in body.args:
        buffer(arg)
    returned = list(body.last_op.operands)
    updates = program_updates(program_function(fused))
    results = set(returned)
    puts = [[pair for fusion in k.fusions for pair in put_destinations(fusion)] for k in launches]
    in_place = _reshaped_in_place(launches, results, {dest for pairs in puts for _, dest in pairs})
    for k in in_place:  # a result that reshapes an intermediate: its producer writes the result's buffer
        slot[k.inputs[k.alias]] = buffer(k.outputs[0])
    kept: list[Any] = []
    for k, pairs in zip(launches, puts):
        if k in in_place:
            continue
        for out, dest in pairs:  # a put writes into its destination's buffer
            slot[out] = buffer(dest)
        if k.alias is not None and k.outputs[0] not in results:  # a contiguous reshape: share the buffer
            slot[k.outputs[0]] = buffer(k.inputs[k.alias])
            continue
        grid = normalize_grid(k.grid)
        if 0 not in grid:
            kept.append((k, grid))
            for v in (*k.bindings, *(v for f in k.fallback for v in f.bindings)):
                if not (isinstance(v, Scratch) and v.counter):
                    buffer(v)
    user = returned[: len(returned) - len(updates)]
    outputs = tuple(buffer(v) for v in user)
    for arg, final in zip(updates, returned[len(user) :]):
        if buffer(final) != arg:
            raise RuntimeError(f"internal error: the update of input {arg} is not in its buffer")
    if overlap_enabled():
        mark_overlap([k for k, _ in kept], slot, len(body.args))
    counters = [v for k, _ in kept for v in k.scratch if v.counter]
    for i, v in enumerate(counters):  # after every buffer allocated per call
        slot[v] = len(specs) + i

    def slots(k: Any) -> tuple[int, ...]:
        return tuple(slot[v] for v in k.bindings)

    steps = [_Step(k, grid, slots(k), fallback=[_Step(f, normalize_grid(f.grid), slots(f)) for f in k.fallback])
             for k, grid in kept]

    program = ArrayProgram(
        name=name,
        graph=graph,
        fused=fused,
        num_launches=len(steps),
        input_positions=tuple(input_positions),
        buffer_specs=specs,
        steps=steps,
        outputs=outputs,
        returns_tuple=returns_tuple(graph),
        updates=tuple(updates),
        counters=tuple(v.shape for v in counters),
    )
    makers: dict[str, Callable[[], str]] = {"graph": lambda: str(graph), "fused": lambda: str(fused)}
    for i, step in enumerate(steps):
        makers[f"kernel{i}:tt"] = lambda launch=step.launch: str(launch.module)
    makers["ptx"] = lambda: "\n".join(k.asm["ptx"] for k in program.kernels())
    program.asm = _LazyAsm(makers)
    return program


def on_device(run: Runner, ordinal: int) -> Runner:
    """`run` with device `ordinal` current, where its buffers are allocated on the current device."""

    def run_there(args: Sequence[Any]) -> Any:
        with running_on(ordinal):
            return run(args)

    return run_there
