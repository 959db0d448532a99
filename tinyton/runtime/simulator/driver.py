"""`run`: bind a launch's arguments to a kernel and interpret it over the grid.

Programs are numbered linearly with x fastest (`x + gx * (y + gy * z)`, CUDA's linear block index), and
one-by-one execution follows that order. The batched path runs a chunk of consecutive programs at once with
a leading program dimension on every value that differs between them; each op then handles the whole
chunk in one NumPy call, and stores land in program order. Programs of one launch are unordered on the GPU,
so a kernel whose outcome depends on that order (one program reading what another writes, or two writing
one element) has a race; the batched path then matches one-by-one execution only where writes overlap
(the last program wins), not where a program reads another's writes. A kernel with a grid barrier runs its
whole grid as one batch, every program reaching the barrier before any goes on. A kernel whose programs may
wait on each other (a spin lock, a polled counter) runs them cooperatively, one at a time, a waiting program
giving way to the others (schedule.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Attribute, Operation

from tinyton.dialects import tt
from tinyton.runtime.driver import GRID_LIMITS
from tinyton.runtime.spans import memory_span

from .atomics import AtomicFunctions
from .combine import CombineFunctions
from .control import ControlFunctions
from .debug import DebugFunctions
from .elementwise import ElementwiseFunctions
from .errors import KernelArgumentError, SimulatorError
from .indexing import IndexingFunctions, refuse_inline_asm
from .memory import MemoryFunctions
from .random import RandomFunctions
from .schedule import Program, run_cooperatively, spin_loops
from .shapes import ShapeFunctions
from .state import Launch, SimFunctions
from .tiles import TileFunctions
from .values import Pointer, np_dtype

FUNCTIONS: tuple[type[InterpreterFunctions], ...] = (
    TileFunctions,
    ElementwiseFunctions,
    MemoryFunctions,
    AtomicFunctions,
    RandomFunctions,
    ControlFunctions,
    ShapeFunctions,
    CombineFunctions,
    IndexingFunctions,
    DebugFunctions,
    FuncFunctions,
)
SUPPORTED: frozenset[type[Operation]] = frozenset(t for f in FUNCTIONS for t, _ in f._impls())  # pyright: ignore

BATCH_ELEMENTS = 1 << 20
"""Default bound on (programs per batch) x (elements of the kernel's largest tile)."""


def run(
    module: ModuleOp,
    grid: tuple[int, ...],
    args: Sequence[np.ndarray | int | float | bool],
    *,
    kernel: str | None = None,
    batched: bool | None = None,
    batch_elements: int = BATCH_ELEMENTS,
) -> None:
    """Run `kernel` (the module's only kernel by default) over `grid`; stores update the arrays in `args`.

    Pointer parameters take NumPy arrays of the pointee's dtype (the memory), scalar parameters Python or
    NumPy numbers. `batched=None` runs chunks of programs at once when a chunk of more than one program fits
    in `batch_elements`, else one program at a time; True/False force either way.
    """
    kernel_op = find_kernel(module, kernel)
    max_tile = _check_ops(kernel_op)
    grid3 = normalize_grid(grid)
    launch, values = bind(kernel_op, args, grid3)
    interpreter = _interpreter(module, launch)

    total = math.prod(grid3)
    if total == 0:
        return
    chunk = min(total, max(1, batch_elements // max_tile))
    use_batches = (chunk > 1) if batched is None else batched
    spin = spin_loops(kernel_op, launch.share_memory)
    if any(isinstance(op, tt.GridBarrierOp) for op in kernel_op.walk()):
        if batched is False and total > 1:
            raise SimulatorError("a kernel with tt.grid_barrier runs all its programs at once (batched)")
        chunk, use_batches, spin = total, True, frozenset()
    try:
        with np.errstate(all="ignore"):
            if spin and total > 1:
                run_cooperatively(total, spin, lambda program: _run_program(module, kernel_op, launch, values, program))
            elif use_batches:
                for start in range(0, total, chunk):
                    _set_batch(launch, start, min(total, start + chunk))
                    interpreter.call_op(kernel_op, values)
            else:
                for program in _program_ids(grid3):
                    launch.pid = tuple(np.int32(p) for p in program)
                    interpreter.call_op(kernel_op, values)
    except SimulatorError as error:
        if hasattr(error, "__notes__"):
            del error.__notes__  # xDSL attaches the whole module once per enclosing op; the message says where
        raise


def _interpreter(module: ModuleOp, launch: Launch) -> Interpreter:
    interpreter = Interpreter(module)
    for functions in FUNCTIONS:
        interpreter.register_implementations(functions())
    interpreter.set_data(SimFunctions, "launch", launch)
    return interpreter


def _run_program(module: ModuleOp, kernel: func.FuncOp, launch: Launch, values: tuple, program: Program) -> None:
    """Run one program of a cooperative launch, on an interpreter and launch state of its own."""
    gx, gy, _ = launch.grid
    ids = (program.index % gx, program.index // gx % gy, program.index // (gx * gy))
    own = dataclasses.replace(launch, pid=tuple(np.int32(i) for i in ids), turns=program)
    with np.errstate(all="ignore"):
        _interpreter(module, own).call_op(kernel, values)


def find_kernel(module: ModuleOp, name: str | None) -> func.FuncOp:
    """The `func.func` named `name`, or the module's only function with a body."""
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks]
    if name is not None:
        funcs = [f for f in funcs if f.sym_name.data == name]
    if len(funcs) != 1:
        names = ", ".join(f.sym_name.data for f in funcs) or "none"
        wanted = f"named '{name}'" if name else "(pass kernel=...)"
        raise SimulatorError(f"expected exactly one kernel {wanted} in the module, found: {names}")
    return funcs[0]


def normalize_grid(grid: Iterable[int] | int) -> tuple[int, int, int]:
    """A grid as three non-negative sizes (missing axes are 1)."""
    sizes = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(sizes) <= 3 or any(int(s) != s or s < 0 for s in sizes):
        raise SimulatorError(f"grid must be 1 to 3 non-negative ints, got {grid!r}")
    if any(int(s) > limit for s, limit in zip(sizes, GRID_LIMITS)):
        raise SimulatorError(f"grid {grid!r} exceeds CUDA's limits (x < 2**31, y and z < 65536)")
    return tuple(int(s) for s in sizes) + (1,) * (3 - len(sizes))  # type: ignore[return-value]


def bind(kernel: func.FuncOp, args: Sequence[object], grid: tuple[int, int, int]) -> tuple[Launch, tuple]:
    """Check `args` against the kernel's parameters; the launch state and the interpreter's arguments."""
    params = kernel.body.block.args
    if len(args) != len(params):
        raise KernelArgumentError(f"kernel @{kernel.sym_name.data} takes {len(params)} arguments, got {len(args)}")
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else [None] * len(params)
    buffers: list[np.ndarray] = []
    buffer_args: list[tuple[int, str]] = []
    values: list[object] = []
    for i, (param, arg, attr) in enumerate(zip(params, args, attrs)):
        name = param.name_hint or f"arg{i}"
        divisible = attr is not None and "tt.divisibility" in attr.data
        if tt.is_pointer(param.type):
            values.append(Pointer(len(buffers), np.int64(0)))
            buffers.append(_memory(arg, param.type, i, name, divisible))
            buffer_args.append((i, name))
        else:
            values.append(_scalar(arg, param.type, i, name, divisible))
    return Launch(buffers, buffer_args, grid), tuple(values)


def _memory(arg: object, t: Attribute, i: int, name: str, divisible: bool) -> np.ndarray:
    """A flat view of array `arg` covering every element reachable from its first one."""
    dtype = np_dtype(t.pointee)  # type: ignore[attr-defined]
    if not isinstance(arg, np.ndarray):
        raise KernelArgumentError(f"argument {i} ('{name}') is a pointer to {dtype}: pass a NumPy array, got {type(arg).__name__}")
    if arg.dtype != dtype:
        raise KernelArgumentError(f"argument {i} ('{name}') points to {dtype} elements, got an array of {arg.dtype}")
    if divisible and arg.ctypes.data % 16:
        raise KernelArgumentError(f"argument {i} ('{name}') is specialised as 16-byte aligned but is not")
    try:
        return memory_span(arg)
    except ValueError as e:
        raise KernelArgumentError(f"argument {i} ('{name}'): {e}") from None


def _scalar(arg: object, t: Attribute, i: int, name: str, divisible: bool) -> np.generic:
    """`arg` as a NumPy scalar of type `t`, checking that it fits."""
    dtype = np_dtype(t)
    if isinstance(arg, np.ndarray) and arg.ndim == 0:
        arg = arg[()]
    ok = isinstance(arg, (int, float, bool, np.number, np.bool_)) and not isinstance(arg, np.ndarray)
    if ok and dtype.kind in "ib":
        ok = isinstance(arg, (int, bool, np.integer, np.bool_))
    if not ok:
        raise KernelArgumentError(f"argument {i} ('{name}') is a {dtype} scalar, got {type(arg).__name__}")
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        if not info.min <= int(arg) <= info.max:
            raise KernelArgumentError(f"argument {i} ('{name}') = {arg} does not fit in {dtype}")
        if divisible and int(arg) % 16:
            raise KernelArgumentError(f"argument {i} ('{name}') = {arg} is specialised as a multiple of 16")
    return dtype.type(arg)


def _check_ops(kernel: func.FuncOp) -> int:
    """Reject ops the simulator cannot run; the number of elements of the kernel's largest tile."""
    refuse_inline_asm(kernel)
    unsupported = sorted({op.name for op in kernel.walk() if op is not kernel and type(op) not in SUPPORTED})
    if unsupported:
        raise SimulatorError(f"the simulator cannot run {', '.join(unsupported)}")
    sizes = [
        math.prod(tt.shape_of(v.type))
        for op in kernel.walk()
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
    ]
    return max(sizes, default=1)


def _program_ids(grid: tuple[int, int, int]) -> Iterable[tuple[int, int, int]]:
    gx, gy, gz = grid
    return ((x, y, z) for z in range(gz) for y in range(gy) for x in range(gx))


def _set_batch(launch: Launch, start: int, stop: int) -> None:
    """Make programs `start..stop-1` (linear ids) the batch; an id equal across the batch stays a scalar."""
    gx, gy, _ = launch.grid
    linear = np.arange(start, stop, dtype=np.int64)
    ids = (linear % gx, linear // gx % gy, linear // (gx * gy))
    launch.programs = np.stack(ids, axis=1)
    launch.pid = tuple(np.int32(a[0]) if a.min() == a.max() else a.astype(np.int32) for a in ids)  # type: ignore
    launch.active = None
