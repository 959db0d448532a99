"""Memory builtins beyond load and store: block pointers and tensor descriptors, atomics, barriers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyton.lazy import lazy_module
from tinyton.language.core import builtin, kernel

block_pointers = lazy_module("tinyton.frontend.block_pointers")
"""Its `TensorDescriptor` is `tl.tensor_descriptor`, the type of a kernel's tensor descriptors
(`isinstance(x, tl.tensor_descriptor)` while compiling), served by tinyton/language/__init__.py's `__getattr__`."""


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any) -> Any:
    """A pointer to a `block_shape` block at `offsets` of the `shape`/`strides` array at `base`."""
    return kernel().make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base: Any, offsets: Any) -> Any:
    """The block pointer moved by `offsets` (elements, per dimension)."""
    return kernel().advance(base, offsets)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: str = "zero") -> Any:
    """A descriptor of the `shape`/`strides` array at `base` whose `.load(offsets)` / `.store(offsets, v)`
    move `block_shape` blocks, elements outside the array reading 0 (NaN with `padding_option="nan"`) and
    not written."""
    return kernel().make_tensor_descriptor(base, shape, strides, block_shape, padding_option)


def _atomic(kind: str, doc: str) -> Callable[..., Any]:
    def fn(pointer: Any, val: Any, mask: Any = None, sem: str | None = None, scope: str | None = None) -> Any:
        return kernel().atomic_rmw(kind, pointer, val, mask, sem, scope)

    fn.__name__ = fn.__qualname__ = f"atomic_{kind}"
    fn.__doc__ = doc + (
        " Gives the old values; masked-off lanes do nothing. `sem`: 'relaxed', 'acquire', 'release' or "
        "'acq_rel' (default); `scope`: 'gpu' (default), 'cta' or 'sys'."
    )
    return builtin(fn)


atomic_add = _atomic("add", "`*pointer += val` atomically, per lane.")
atomic_max = _atomic("max", "`*pointer = max(*pointer, val)` atomically, per lane.")
atomic_min = _atomic("min", "`*pointer = min(*pointer, val)` atomically, per lane.")
atomic_and = _atomic("and", "`*pointer &= val` atomically, per lane (integers).")
atomic_or = _atomic("or", "`*pointer |= val` atomically, per lane (integers).")
atomic_xor = _atomic("xor", "`*pointer ^= val` atomically, per lane (integers).")
atomic_xchg = _atomic("xchg", "`*pointer = val` atomically, per lane.")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: str | None = None, scope: str | None = None) -> Any:
    """Where `*pointer == cmp`, store `val`, atomically per lane; gives the old values."""
    return kernel().atomic_cas(pointer, cmp, val, sem, scope)


@builtin
def debug_barrier() -> None:
    """Wait until every thread of the program gets here (CUDA's `__syncthreads()`)."""
    kernel().debug_barrier()
