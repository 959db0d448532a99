"""Array programs: a traced tta module -> fuse -> one tt kernel per `tta.fusion` -> launch them in order.

`build_program(graph, ...)` builds an `ArrayProgram` from the module the frontend traced (the frontend
caches it per input shapes, dtypes, baked-in scalars and `fuse`); calling it allocates the intermediates and outputs, launches each kernel in program
order and returns NumPy arrays for NumPy inputs, or arrays of the caller's device type (torch tensors,
`DeviceArray`s) for device inputs. Without a GPU the kernels run in the NumPy simulator.

Fusion stages used: `tinyton.rewrites.pipeline.fuse_module(module, fuse)` puts every compute op in a
`tta.fusion` region (one per op when `fuse` is False), and `tinyton.lowering.fusion.fusion_to_kernels`
gives one `KernelSpec` per region in program order: kernel parameters are pointers to the region's
inputs, then to its outputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from tinyton.compiler.attention_tuning import attention_blocks
from tinyton.compiler.kernel import CompiledKernel, compile_module, normalize_grid
from tinyton.compiler.matmul_tuning import matmul_tiles
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tta import program_function, returns_tuple
from tinyton.dtypes import ELEMENT_TO_NUMPY
from tinyton.lowering.fusion.attention_blocks import NOMINAL_SM_COUNT
from tinyton.profiling import stage
from tinyton.runtime import arrays, driver
from tinyton.runtime.streams import current_stream
from tinyton.runtime.torch_interop import from_host, host_view, is_torch, torch_dtype


def fusion_enabled(fuse: bool | None = None) -> bool:
    """`fuse`, or the TINYTON_FUSION environment variable (default on; 0/false/off/no disable it)."""
    if fuse is not None:
        return fuse
    value = os.environ.get("TINYTON_FUSION")
    return value is None or value.strip().lower() not in ("0", "false", "off", "no")


def fused_module(graph: ModuleOp, fuse: bool | None = None) -> ModuleOp:
    """A copy of the traced module with every compute op in a `tta.fusion` (one per op unfused)."""
    from tinyton.rewrites.pipeline import (
        fuse_module,  # on first use: the PDL parser and matcher are slow to import
    )

    module = fuse_module(graph.clone(), fusion_enabled(fuse))
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
    asm: Mapping[str, str] = field(default_factory=dict)
    _runners: dict[tuple[Any, ...], Callable[[list[Any]], tuple[Any, ...]]] = field(default_factory=dict, repr=False)

    def _kernel(self, step: _Step) -> CompiledKernel:
        """The step's CompiledKernel (lowered to PTX only when first launched on the GPU)."""
        if step.compiled is None:
            with stage("prepare kernel (print its tt text)"):
                step.compiled = compile_module(step.launch.module, num_warps=step.launch.num_warps)
        return step.compiled

    def __call__(self, *args: Any) -> Any:
        inputs = [args[i] for i in self.input_positions]
        sample = inputs[0] if inputs else None
        # is_cuda tells torch's CPU and GPU tensors apart without building a torch.device per call.
        kind = (type(sample), getattr(sample, "is_cuda", None))
        runner = self._runners.get(kind)
        if runner is None:
            runner = self._runners[kind] = self._runner(sample)
        results = runner(inputs)
        return results if self.returns_tuple else results[0]

    def _runner(self, sample: Any) -> Callable[[list[Any]], tuple[Any, ...]]:
        """The call path for inputs like `sample`, with everything that does not change per call bound."""
        memory = _Memory.for_inputs(sample, driver.backend() == "cuda")
        prepare, allocate, finish, address = memory.prepare, memory.allocate, memory.finish, memory.address
        temporaries = self.buffer_specs[len(self.input_positions) :]
        outputs = self.outputs

        if address is None:

            def simulate(inputs: list[Any]) -> tuple[Any, ...]:
                buffers = [prepare(x) for x in inputs] + [allocate(shape, dtype) for shape, dtype in temporaries]
                for step in self.steps:
                    (step.compiled or self._kernel(step)).simulate(step.grid, [buffers[i] for i in step.slots])
                return tuple(finish(buffers[i]) for i in outputs)

            return simulate

        launches = []  # every buffer is device memory: addresses go straight to the driver's launcher
        for step in self.steps:
            kernel = self._kernel(step)
            launches.append((kernel.launcher.launch, step.grid, kernel.threads, step.slots))

        torch_inputs, host_results = memory.torch_inputs, memory.host_results

        def launch(inputs: list[Any]) -> tuple[Any, ...]:
            stream = current_stream(torch_inputs)
            buffers = [prepare(x) for x in inputs] + [allocate(shape, dtype) for shape, dtype in temporaries]
            addresses = [address(b) for b in buffers]
            for run, grid, threads, slots in launches:
                run(grid, threads, 0, stream, tuple([addresses[i] for i in slots]))
            if stream and host_results:  # the copies back below run on the default stream
                driver.stream_synchronize(stream)
            return tuple([finish(buffers[i]) for i in outputs])

        return launch

    def kernels(self) -> list[CompiledKernel]:
        """The compiled kernels (CompiledKernel objects), compiling them for the GPU if needed."""
        return [self._kernel(step) for step in self.steps]


@dataclass(frozen=True)
class _Memory:
    """Where one call's arrays live, chosen from the kind of its inputs (and cached per kind).

    torch CUDA inputs: every buffer is a torch tensor on their device (results are torch tensors);
    other device arrays: `DeviceArray`s; host arrays (NumPy, CPU torch): copied to the GPU once and the
    results copied back, or used in place by the simulator when there is no GPU."""

    prepare: Callable[[Any], Any]
    allocate: Callable[[tuple[int, ...], np.dtype], Any]
    finish: Callable[[Any], Any]
    address: Callable[[Any], int] | None = None
    """Device address of a buffer; None when the kernels run on the simulator."""
    torch_inputs: bool = False
    """torch CUDA tensors come in: launches follow torch's current stream."""
    host_results: bool = False
    """Results are copied back to the host after the launches."""

    @staticmethod
    def for_inputs(sample: Any, on_gpu: bool) -> _Memory:
        torch_input = is_torch(sample)
        if torch_input and sample.is_cuda:
            import torch

            device, empty = sample.device, torch.empty
            return _Memory(
                lambda x: x.contiguous(),
                lambda shape, dtype: empty(shape, dtype=torch_dtype(dtype), device=device),
                _identity,
                torch.Tensor.data_ptr,
                torch_inputs=True,
            )
        host = sample is None or isinstance(sample, np.ndarray) or torch_input
        to_caller = from_host if torch_input else _identity
        if not on_gpu:
            return _Memory(_host_array, np.empty, to_caller)
        def prepare(x: Any) -> Any:
            return x if hasattr(x, "__cuda_array_interface__") else arrays.to_device(_host_array(x))

        finish = (lambda b: to_caller(b.numpy()) if isinstance(b, arrays.DeviceArray) else b) if host else _identity
        return _Memory(prepare, arrays.empty, finish, lambda b: arrays.as_kernel_argument(b).value, host_results=host)


def _identity(x: Any) -> Any:
    return x


def _host_array(x: Any) -> np.ndarray:
    """A C-contiguous NumPy array of a host input (a CPU torch tensor is viewed, not copied); a 0-d array
    stays 0-d (np.ascontiguousarray would make it 1-d)."""
    return np.asarray(host_view(x) if is_torch(x) else x, order="C")


def sm_count() -> int:
    """The GPU's multiprocessors, the target fact that decides flash-decoding splits (a nominal H100's
    without a GPU, so the simulator runs the kernels an H100 would)."""
    return driver.device().sm_count if driver.is_available() else NOMINAL_SM_COUNT


def build_program(
    graph: ModuleOp, name: str, input_positions: Sequence[int], fuse: bool | None = None
) -> ArrayProgram:
    """Fuse, generate the kernels and plan the buffers of a traced program.

    `input_positions` are the indices of the Python arguments that are arrays (the program's inputs, in
    the order of the traced function's arguments); the others were baked into the trace."""
    from tinyton.lowering.fusion import (  # on first use, as the fusion passes
        Scratch,
        fusion_to_kernels,
    )

    with stage("fuse"):
        fused = fused_module(graph, fuse)
    with stage("generate kernels (tta.fusion -> tt)"):
        launches = list(fusion_to_kernels(fused, matmul_tiles, attention_blocks, sm_count()))
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
    results = set(body.last_op.operands)
    steps: list[_Step] = []
    for k in launches:
        if k.alias is not None and k.outputs[0] not in results:  # a contiguous reshape: share the buffer
            slot[k.outputs[0]] = buffer(k.inputs[k.alias])
            continue
        grid = normalize_grid(k.grid)
        if 0 not in grid:
            steps.append(_Step(k, grid, tuple(buffer(v) for v in k.bindings)))
    outputs = tuple(buffer(v) for v in body.last_op.operands)

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
    )
    makers: dict[str, Callable[[], str]] = {"graph": lambda: str(graph), "fused": lambda: str(fused)}
    for i, step in enumerate(steps):
        makers[f"kernel{i}:tt"] = lambda launch=step.launch: str(launch.module)
    makers["ptx"] = lambda: "\n".join(k.asm["ptx"] for k in program.kernels())
    program.asm = _LazyAsm(makers)
    return program
