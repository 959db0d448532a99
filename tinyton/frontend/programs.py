"""Array programs seen from `@tt.jit`: trace once per call signature, compile, run.

The signature is what a traced program is specialised on: the shapes and dtypes of the array arguments
and the values of the others (baked into the trace as constants), the values of the globals and closure
variables the function's code mentions (read while tracing), plus the fusion setting.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from tinyton.compiler import ArrayProgram, build_program, fused_module, fusion_enabled
from tinyton.compiler.collector import collector_paused
from tinyton.frontend.names import globals_key
from tinyton.frontend.tracing import is_array, trace
from tinyton.profiling import stage


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
    """The compiled program of `fn` for `args` (cached per signature and fusion setting)."""
    fn = getattr(fn, "fn", fn)
    fuse = fusion_enabled(fuse)
    programs = _PROGRAMS.get(fn)
    if programs is None:
        programs = _PROGRAMS[fn] = {}
    key = (_signature_key(args), globals_key(fn), fuse)
    program = programs.get(key)
    if program is None:
        inputs = [i for i, a in enumerate(args) if is_array(a)]
        name = getattr(fn, "__name__", "program")
        with collector_paused(), stage(f"compile array program {name}"):
            with stage("trace"):
                graph = trace(fn, args)
            program = programs[key] = build_program(graph, name, inputs, fuse)
    return program


def run_array_program(fn: Callable[..., Any], args: Sequence[Any], *, fuse: bool | None = None) -> Any:
    """`fn(*args)` as an array program: compile (cached) and run."""
    return compile_array_program(fn, args, fuse=fuse)(*args)


def fused_modules(fn: Callable[..., Any], args: Sequence[Any], fuse: bool | None = None) -> tuple[ModuleOp, ModuleOp]:
    """The traced module of `fn(*args)` and its fused copy (for `tinyton graph` and tests)."""
    graph = trace(fn, args)
    return graph, fused_module(graph, fuse)
