"""Array programs seen from `@tt.jit`: trace once per call signature, compile, run.

The signature is what a traced program is specialised on: the shapes and dtypes of the array arguments
and the values of the others (baked into the trace as constants), the values of the globals and closure
variables the function's code mentions (read while tracing), plus the fusion setting. Strides are not part
of it: every buffer of a program is contiguous (the memory makes inputs so, tinyton/runtime/memory.py).

A call `fn(*args)` goes through `ProgramCalls`, the per-function fast path: per tuple of argument types a
generated function returns the call's key (per array its shape, dtype and device; per other argument its
value) in one Python frame; the key finds the compiled program's runner for that memory and a generated
identity check of the globals. A miss, or a global that changed, takes `compile_array_program`.
`TINYTON_FUSION` is read when a signature is first compiled (reading the environment costs half a µs);
`fn.compile(..., fuse=)` chooses explicitly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from tinyton.compiler import ArrayProgram, build_program, fused_module, fusion_enabled
from tinyton.compiler.collector import collector_paused
from tinyton.compiler.launch_plan import Runner
from tinyton.compiler.target import requested_arch
from tinyton.frontend.names import globals_guard, globals_key
from tinyton.frontend.tracing import is_array, trace
from tinyton.lowering.matmul_precision import fp32_matmul_precision
from tinyton.profiling import stage
from tinyton.runtime.devices import current_device, device_of
from tinyton.runtime.torch_interop import is_torch


def _signature_key(args: Sequence[Any]) -> tuple[Any, ...]:
    """What a compiled program is specialised on: array shapes and dtypes, and the other arguments."""
    return tuple(map(_argument_key, args))


def _argument_key(a: Any) -> Any:
    if is_array(a):
        return a.shape, a.dtype  # both hashable for NumPy, torch and device arrays; no str() on the hot path
    try:
        hash(a)
        return type(a), a
    except TypeError:
        return type(a), repr(a)


_PROGRAMS: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], ArrayProgram]] = weakref.WeakKeyDictionary()


def compile_array_program(fn: Callable[..., Any], args: Sequence[Any], *, fuse: bool | None = None) -> ArrayProgram:
    """The compiled program of `fn` for `args` (cached per signature, fusion setting, `TINYTON_ARCH` and
    `TINYTON_FP32_MATMUL`)."""
    fn = getattr(fn, "fn", fn)
    fuse = fusion_enabled(fuse)
    programs = _PROGRAMS.get(fn)
    if programs is None:
        programs = _PROGRAMS[fn] = {}
    key = (_signature_key(args), globals_key(fn), fuse, requested_arch(), fp32_matmul_precision())
    program = programs.get(key)
    if program is None:
        inputs = [i for i, a in enumerate(args) if is_array(a)]
        name = getattr(fn, "__name__", "program")
        with collector_paused(), stage(f"compile array program {name}"):
            with stage("trace"):
                graph = trace(fn, args)
            program = programs[key] = build_program(graph, name, inputs, fuse)
    return program


MAX_ENTRIES = 4096
"""Call keys kept per function and argument types before that table is reset (scalar values are unbounded)."""


class ProgramCalls:
    """The calls of one array program: argument types -> key function and its entries, key -> the runner
    of the compiled program for that memory and the guard of the globals it was traced with."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self._tables: dict[tuple[type, ...], tuple[Callable[[tuple], Any], dict[Any, tuple[Callable[[], bool], Runner]]]] = {}
        self._last: tuple[Callable[[tuple], Any], dict] = (_no_key, {})  # the last call's types' table, read
        # as one attribute: a key is only ever looked up among the entries of its own key function

    def call(self, args: tuple) -> Any:
        """The program's result for the call's positional arguments (a method, not `__call__`: called through
        a bound method, a Python object's `__call__` costs an extra lookup per call)."""
        key, entries = self._last
        try:
            guard, run = entries[key(args)]  # other types: KeyError (None), or TypeError,
            hit = guard()  # ValueError (another count of arguments, an emptied closure cell)
        except (KeyError, TypeError, ValueError):
            hit = False
        return run(args) if hit else self._miss(args)  # outside the try: the call's own errors propagate

    def _miss(self, args: tuple) -> Any:
        """The slow path: the table of these argument types, the program (compiled if new), a new entry."""
        types = tuple(map(type, args))
        table = self._tables.get(types)
        if table is None:
            table = self._tables[types] = (_key_function(args), {})
        self._last = table
        key, entries = table
        guard = globals_guard(self.fn)
        run = compile_array_program(self.fn, args).runner(args)
        try:
            call_key = key(args)
            if len(entries) >= MAX_ENTRIES:
                entries.clear()
            entries[call_key] = (guard, run)
        except TypeError:  # an unhashable argument: such calls always take this path
            pass
        return run(args)


def _no_key(args: tuple) -> None:
    """The key function before the first call: matches nothing."""


def _key_function(sample: Sequence[Any]) -> Callable[[tuple], Any]:
    """`key(args)`: for arguments of the types of `sample`, what decides the compiled program and its memory
    (None for other types): torch tensors give shape, dtype and device index (`get_device()`, -1 on the CPU:
    an int, cheaper to read and hash than a torch.device); DeviceArrays shape, dtype and device; other arrays
    shape and dtype, and the call's current device (host data runs there); other arguments their value (the
    types are checked, so 1, 1.0 and True differ)."""
    namespace: dict[str, Any] = {"CURRENT": current_device}
    names = [f"a{i}" for i in range(len(sample))]
    checks, parts = [], []
    for a, value in zip(names, sample):
        namespace[f"T_{a}"] = type(value)
        checks.append(f"type({a}) is T_{a}")
        if not is_array(value):
            parts.append(a)
        elif is_torch(value):
            parts.append(f"{a}.shape, {a}.dtype, {a}.get_device()")
        elif hasattr(value, "device_ordinal"):
            parts.append(f"{a}.shape, {a}.dtype, {a}.device_ordinal")
        else:
            parts.append(f"{a}.shape, {a}.dtype")
    if any(is_array(v) and device_of(v) is None for v in sample):
        parts.append("CURRENT()")  # host arrays run on the current device: its runner
    source = (
        f"def key(args):\n    ({''.join(f'{a}, ' for a in names)}) = args\n"
        f"    if {' and '.join(checks) or 'True'}:\n        return ({''.join(f'{p}, ' for p in parts)})"
    )
    exec(source, namespace)  # noqa: S102 - numbered names and attribute reads only
    return namespace["key"]


def run_array_program(fn: Callable[..., Any], args: Sequence[Any], *, fuse: bool | None = None) -> Any:
    """`fn(*args)` as an array program: compile (cached) and run."""
    return compile_array_program(fn, args, fuse=fuse)(*args)


def fused_modules(fn: Callable[..., Any], args: Sequence[Any], fuse: bool | None = None) -> tuple[ModuleOp, ModuleOp]:
    """The traced module of `fn(*args)` and its fused copy (for `tinyton graph` and tests)."""
    graph = trace(fn, args)
    return graph, fused_module(graph, fuse)
