"""Calls from a kernel to other `@tt.jit` functions: the callee's source and the scope its body starts in.

A call is inlined (Triton inlines by default; `noinline=True` is accepted and inlines too): the code
generator walks the callee's body with its parameters bound to the caller's values, so tiles, constexprs,
dtypes and tuples pass as they are and the callee's `return` gives the call's value (a tuple for
`return a, b`). Names in the callee resolve in its own module when the kernel is compiled, so a helper
defined below the kernel is found. Recursion is refused: inlining it would never end.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from tinyton.errors import CompilationError
from tinyton.frontend.source import KernelSource, constexpr_value


def is_jit_function(fn: Any) -> bool:
    """Whether `fn` is a `@tt.jit` function (marked by `JITFunction`, which sits above the code generator)."""
    return getattr(type(fn), "__tt_jit__", False)


def callee_source(fn: Any, active: Sequence[Any]) -> KernelSource:
    """The parsed source of the `@tt.jit` function `fn` called while the Python functions `active`
    (outermost first) are being compiled; refuses recursion."""
    if any(fn.fn is f for f in active):
        chain = " -> ".join(f.__name__ for f in (*active, fn))
        raise CompilationError(
            f"recursive call of `{fn.__name__}` ({chain}): @tt.jit calls are inlined, so kernels cannot "
            "recurse; write the recursion as a loop"
        )
    return fn.kernel_source()


def bind_arguments(source: KernelSource, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The callee's starting scope: its parameters bound to the call's values, defaults filled in."""
    try:
        bound = inspect.signature(source.fn).bind(*args, **kwargs)
    except TypeError as e:
        raise CompilationError(f"{source.name}(): {e}") from None
    bound.apply_defaults()
    # a helper's `tl.constexpr` annotation does not refuse a runtime value: as in Triton, the value passed
    # decides (tutorial 06 passes `offs_m` tiles to constexpr parameters)
    return {p.name: constexpr_value(bound.arguments[p.name]) for p in source.params}
