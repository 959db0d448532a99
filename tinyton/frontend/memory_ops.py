"""Kernel semantics of `tl.load` and `tl.store` through tiles of pointers, as a mixin of `TileBuilder`.

As Triton: mask and other (or the stored value) broadcast to the pointer's shape, never the pointer to theirs;
`other` is converted to the pointee type and used only with a mask; `cache_modifier` and `eviction_policy` become
the ops' PTX cache hints.
"""

from __future__ import annotations

from typing import Any

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, broadcast_shapes, describe, is_number, shape

LOAD_CACHE, STORE_CACHE = (".ca", ".cg", ".cv"), (".wb", ".cg", ".cs", ".wt")
EVICTION = ("evict_normal", "evict_first", "evict_last")


def cache_hints(cache: str, evict: str, allowed: tuple[str, ...], what: str) -> dict[str, str]:
    """The `cache`/`evict` properties of a load or store (Triton's cache_modifier, eviction_policy)."""
    if cache and cache not in allowed:
        raise CompilationError(f"{what}: cache_modifier must be one of {', '.join(allowed)}, got {cache!r}")
    if evict and evict not in EVICTION:
        raise CompilationError(f"{what}: eviction_policy must be one of {', '.join(EVICTION)}, got {evict!r}")
    return {k: v for k, v in (("cache", cache), ("evict", evict)) if v and v != "evict_normal"}


class MemoryOps:
    """Loads and stores of `TileBuilder`, whose `emit`, `insert`, `operand`, `broadcast` and `truth` they use;
    `_pointer` is shared with the atomic and block-pointer builtins."""

    def _pointer(self, ptr: Any, what: str) -> Tile:
        if not (isinstance(ptr, Tile) and ptr.is_pointer):
            raise CompilationError(
                f"{what} needs a pointer or a tile of pointers (e.g. x_ptr + offsets), got {describe(ptr)}"
            )
        return ptr

    def load(self, ptr: Any, mask: Any, other: Any, cache: str = "", evict: str = "", volatile: bool = False) -> Tile:
        ptr = self._pointer(ptr, "tt.load")
        mask = None if mask is True else mask
        other = None if mask is None else other
        to = ptr.shape
        self._fits_pointer(ptr, {"mask": mask, "other": other}, "tt.load")
        mask_value = None if mask is None else self.broadcast(self.truth(mask, "mask"), to).value
        other_value = None if other is None else self.operand(other, ptr.element.pointee, to).value
        hints = cache_hints(cache, evict, LOAD_CACHE, "tl.load")
        if volatile not in (True, False):
            raise CompilationError(f"tl.load: volatile must be a constexpr bool, got {describe(volatile)}")
        return self.emit(tt.LoadOp(ptr.value, mask_value, other_value, volatile, **hints))

    def store(self, ptr: Any, value: Any, mask: Any, cache: str = "", evict: str = "") -> None:
        ptr = self._pointer(ptr, "tt.store")
        mask = None if mask is True else mask
        if not (isinstance(value, Tile) or is_number(value)):
            raise CompilationError(f"tt.store needs a number or a tile to store, got {describe(value)}")
        to = ptr.shape
        self._fits_pointer(ptr, {"value": value, "mask": mask}, "tt.store")
        mask_value = None if mask is None else self.broadcast(self.truth(mask, "mask"), to).value
        value = self.operand(value, ptr.element.pointee, to)
        hints = cache_hints(cache, evict, STORE_CACHE, "tl.store")
        self.insert(tt.StoreOp(ptr.value, value.value, mask_value, **hints))

    @staticmethod
    def _fits_pointer(ptr: Tile, operands: dict[str, Any], what: str) -> None:
        """Triton's rule: value, mask and other broadcast to the pointer's shape, never the pointer to theirs
        (a scalar pointer with a tile value would have every lane write one address)."""
        for name, x in operands.items():
            if x is not None and shape(x) and len(shape(x)) < len(ptr.shape):
                raise CompilationError(
                    f"{what}: the {name} has shape {list(shape(x))} but the pointer tile {list(ptr.shape)}; as in "
                    f"Triton a tile broadcasts to the pointer's shape only at the same rank: give it "
                    f"{len(ptr.shape)} dimensions (x[None, :], x[:, None], tl.reshape)"
                )
            if x is None or broadcast_shapes([ptr.shape, shape(x)], what) == ptr.shape:
                continue
            pointer = f"a tile of pointers of shape {list(ptr.shape)}" if ptr.shape else "a scalar pointer"
            fix = (
                "build a tile of pointers, e.g. ptr + tt.arange(0, BLOCK)"
                if not ptr.shape
                else f"make the pointer tile {list(shape(x))} too (e.g. ptr + rows[:, None] * stride + cols[None, :])"
            )
            raise CompilationError(
                f"{what}: the {name} has shape {list(shape(x))} but the pointer is {pointer}; {name} must "
                f"broadcast to the pointer's shape, not the other way round: {fix}"
            )
