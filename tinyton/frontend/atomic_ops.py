"""Kernel semantics of `tl.atomic_*` and `tl.debug_barrier`, as a mixin of `TileBuilder`.

As Triton: the value is converted to the pointee type, pointer, value and mask broadcast together, `sem`
defaults to "acq_rel" and `scope` to "gpu", and the call gives the old values.
"""

from __future__ import annotations

from typing import Any

from tinyton.dialects import tt
from tinyton.dialects.tt_atomics import SCOPES, SEMANTICS
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, broadcast_shapes, describe, is_number, shape


def _choice(value: Any, default: str, allowed: tuple[str, ...], what: str) -> str:
    value = default if value is None else value
    if value not in allowed:
        raise CompilationError(f"{what} must be one of {', '.join(map(repr, allowed))}, got {describe(value)}")
    return value


class AtomicOps:
    """Atomic builtins of `TileBuilder`, whose `emit`, `insert`, `operand`, `broadcast`, `truth` and
    `_pointer` they use."""

    def atomic_rmw(self, kind: str, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Tile:
        what = f"tl.atomic_{kind}"
        ptr = self._pointer(ptr, what)
        mask = None if mask is True else mask
        self._check_value(val, what)
        to = broadcast_shapes([ptr.shape, shape(val), *([shape(mask)] if mask is not None else [])], what)
        mask_value = None if mask is None else self.broadcast(self.truth(mask, "mask"), to).value
        value = self.operand(val, ptr.element.pointee, to)
        sem, scope = self._ordering(sem, scope, what)
        return self.emit(tt.AtomicRMWOp(kind, self.broadcast(ptr, to).value, value.value, mask_value, sem, scope))

    def atomic_cas(self, ptr: Any, cmp: Any, val: Any, sem: Any, scope: Any) -> Tile:
        ptr = self._pointer(ptr, "tl.atomic_cas")
        for v in (cmp, val):
            self._check_value(v, "tl.atomic_cas")
        to = broadcast_shapes([ptr.shape, shape(cmp), shape(val)], "tl.atomic_cas")
        cmp_value, value = (self.operand(v, ptr.element.pointee, to).value for v in (cmp, val))
        sem, scope = self._ordering(sem, scope, "tl.atomic_cas")
        return self.emit(tt.AtomicCASOp(self.broadcast(ptr, to).value, cmp_value, value, sem, scope))

    def debug_barrier(self) -> None:
        self.insert(tt.DebugBarrierOp())

    @staticmethod
    def _check_value(val: Any, what: str) -> None:
        if not (isinstance(val, Tile) or is_number(val)) or (isinstance(val, Tile) and val.is_pointer):
            raise CompilationError(f"{what} needs a number or a tile of numbers, got {describe(val)}")

    @staticmethod
    def _ordering(sem: Any, scope: Any, what: str) -> tuple[str, str]:
        return _choice(sem, "acq_rel", SEMANTICS, f"{what}: sem"), _choice(scope, "gpu", SCOPES, f"{what}: scope")
