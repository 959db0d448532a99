"""Compile-time checks, device-side debugging and compiler hints: `static_assert`, `static_print`,
`device_assert`, `device_print`, `multiple_of`, `max_contiguous`, `max_constancy`, `assume`.

`device_assert` is checked by the simulator (which names the program and the lane) and on the GPU
stops the kernel with a trap after printing the message; `device_print` prints from both.
"""

from __future__ import annotations

from typing import Any

from tinyton.errors import CompilationError
from tinyton.language.core import builtin, kernel, values


@builtin
def static_assert(condition: Any, msg: str = "") -> None:
    """Fail compilation unless the constexpr `condition` holds."""
    if isinstance(condition, values.Tile):
        raise CompilationError("tl.static_assert needs a constexpr condition; use tl.device_assert for runtime values")
    if not condition:
        raise CompilationError(f"static_assert failed: {msg}" if msg else "static_assert failed")


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n") -> None:
    """Print constexpr values (and the types of tiles) while compiling."""
    print(*(getattr(v, "type", v) for v in values), sep=sep, end=end)


@builtin
def device_assert(cond: Any, msg: str = "", mask: Any = None) -> None:
    """Stop the kernel with `msg` (and the kernel's file:line) where `cond` is false (and `mask` true)."""
    kernel().device_assert(cond, msg, mask)


@builtin
def device_print(prefix: str, *args: Any, hex: bool = False) -> None:
    """Print `prefix` and each element of `args`, with the program id and the element's index."""
    kernel().device_print(prefix, args, hex)


@builtin
def multiple_of(input: Any, values: int | tuple[int, ...]) -> Any:
    """`input`, promised to be a multiple of `values` (per dimension), for wider memory accesses."""
    return kernel().hint("multiple_of", input, values)


@builtin
def max_contiguous(input: Any, values: int | tuple[int, ...]) -> Any:
    """`input`, promised to hold runs of `values` consecutive integers along its last dimension."""
    return kernel().hint("max_contiguous", input, values)


@builtin
def max_constancy(input: Any, values: int | tuple[int, ...]) -> Any:
    """`input`, promised to hold runs of `values` equal elements along its last dimension."""
    return kernel().hint("max_constancy", input, values)


@builtin
def assume(cond: Any) -> None:
    """A promise that `cond` holds (Triton's `llvm.assume`, e.g. `tl.assume(stride > 0)`): accepted and
    not used by tinyton's analyses; a constexpr that is false fails compilation."""
    if not isinstance(cond, values.Tile) and not cond:
        raise CompilationError("tl.assume: the condition is false while compiling")
