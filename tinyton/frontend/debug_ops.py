"""Kernel semantics of the debugging and hint builtins (`tl.device_assert`, `device_print`,
`multiple_of`, `max_contiguous`, `max_constancy`), as a mixin of `TileBuilder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, describe, is_number

HINTS = {"multiple_of": "divisibility", "max_contiguous": "contiguity", "max_constancy": "constancy"}


class DebugOps:
    """Debug builtins of `TileBuilder`, whose `insert`, `emit`, `tile` and `truth` they use; `location` is
    the user's `file:line` of the call being compiled (set by the code generator)."""

    location: str = "<kernel>"

    def device_assert(self, condition: Any, message: str, mask: Any) -> None:
        if is_number(condition) and mask is None:
            if not condition:
                raise CompilationError(f"device_assert failed at compile time: {message}")
            return
        cond = self.truth(condition, "tl.device_assert")
        if mask is not None:
            cond = self.binary("|", cond, self.logical_not(self.truth(mask, "mask")))
        self.insert(tt.AssertOp(cond.value, f"{self.location}: {message}" if message else self.location))

    def device_print(self, prefix: str, values: Sequence[Any], hex: bool) -> None:
        if not isinstance(prefix, str):
            raise CompilationError(f"tl.device_print takes a string prefix first, got {describe(prefix)}")
        tiles = [self.tile(v, "tl.device_print") for v in values]
        if any(t.is_pointer for t in tiles):
            raise CompilationError("tl.device_print prints numbers, not pointers")
        self.insert(tt.PrintOp(prefix, [t.value for t in tiles], hex=bool(hex)))

    def hint(self, kind: str, x: Any, values: Any) -> Any:
        """`x` with a `HINTS[kind]` fact of its last dimension (one int, or one per dimension)."""
        what = f"tl.{kind}"
        facts = values if isinstance(values, tuple) else (values,)
        if not facts or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in facts):
            raise CompilationError(f"{what} takes positive constexpr ints, got {describe(values)}")
        if not isinstance(x, Tile):
            return x
        v = facts[-1]  # the analyses know powers of two: the largest one the promise implies
        fact = v & -v if kind == "multiple_of" else 1 << (v.bit_length() - 1)
        return self.emit(tt.HintOp(x.value, **{HINTS[kind]: fact}))
