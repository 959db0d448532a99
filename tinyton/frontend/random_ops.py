"""Kernel semantics of `tl.philox`, `tl.randint`, `tl.randint4x`, `tl.rand`, `tl.rand4x`, `tl.randn` and
`tl.randn4x`, as a mixin of `TileBuilder`: Triton's Philox 4x32 counter-based generator, built from tt ops.

As Triton's: the key is the seed as 64 bits (low word `k0`, high word `k1`; a signed 32-bit seed is sign
extended); each of the `n_rounds` rounds (default 10) maps the counters `(c0, c1, c2, c3)` to
`(hi(B*c2) ^ c1 ^ k0, B*c2, hi(A*c0) ^ c3 ^ k1, A*c0)` and raises the key by the Weyl constants; randint's
counters are `(offset, 0, 0, 0)`. A random int becomes a float in [0, 1) as `(x < 0 ? -x - 1 : x) *
4.6566127342e-10` of its int32 bits; randn is the first Box-Muller output of two uniforms. The ints are
int32 tiles holding the bits of Triton's uint32.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import i32

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, describe, f32, is_number

N_ROUNDS_DEFAULT = 10
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
"""Philox 4x32 multipliers."""
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85
"""Weyl sequence increments of the key (golden ratio, sqrt(3) - 1)."""
UNIFORM_SCALE = 4.6566127342e-10
"""The largest float32 with `(2**31 - 1) * scale < 1`: int32 magnitudes to [0, 1)."""
TWO_PI = 6.283185307179586
NORMAL_FLOOR = 1.0e-7
"""Box-Muller takes log(max(u1, NORMAL_FLOOR)), so u1 = 0 gives a finite sample."""


def signed32(value: int) -> int:
    """The int32 with the low 32 bits of `value`."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


class RandomOps:
    """Random-number builtins of `TileBuilder`, whose `emit`, `operand`, `binary`, `where` and `cast` they use."""

    def philox(self, seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[Tile, ...]:
        counters = [self._counter(c, "tl.philox") for c in (c0, c1, c2, c3)]
        shape = next((c.shape for c in counters if isinstance(c, Tile) and c.shape), ())
        c0, c1, c2, c3 = (self.operand(c, i32, shape) for c in counters)
        k0, k1 = self._key(seed)
        for _ in range(self._rounds(n_rounds)):
            hi_b = self.emit(tt.UmulhiOp(self.operand(signed32(ROUND_B), i32, shape).value, c2.value))
            hi_a = self.emit(tt.UmulhiOp(self.operand(signed32(ROUND_A), i32, shape).value, c0.value))
            c0, c1, c2, c3 = (
                self.binary("^", self.binary("^", hi_b, c1), k0),
                self.binary("*", c2, signed32(ROUND_B)),
                self.binary("^", self.binary("^", hi_a, c3), k1),
                self.binary("*", c0, signed32(ROUND_A)),
            )
            k0, k1 = self._raise(k0, KEY_A), self._raise(k1, KEY_B)
        return c0, c1, c2, c3

    def randint4x(self, seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[Tile, ...]:
        return self.philox(seed, offset, 0, 0, 0, n_rounds)

    def rand4x(self, seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[Tile, ...]:
        return tuple(self.uint_to_uniform_float(x) for x in self.randint4x(seed, offset, n_rounds))

    def randn4x(self, seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[Tile, ...]:
        u = self.rand4x(seed, offset, n_rounds)
        return (*self.pair_uniform_to_normal(u[0], u[1]), *self.pair_uniform_to_normal(u[2], u[3]))

    def uint_to_uniform_float(self, x: Tile) -> Tile:
        """A float in [0, 1) from the bits of a random int32."""
        magnitude = self.where(self.binary("<", x, 0), self.binary("-", self.unary("neg", x), 1), x)
        return self.binary("*", self.cast(magnitude, f32), UNIFORM_SCALE)

    def pair_uniform_to_normal(self, u1: Tile, u2: Tile) -> tuple[Tile, Tile]:
        """Box-Muller: two independent N(0, 1) samples from two uniforms."""
        u1 = self.binary("maximum", NORMAL_FLOOR, u1)
        theta = self.binary("*", TWO_PI, u2)
        r = self.unary("sqrt", self.binary("*", -2.0, self.unary("log", u1)))
        return self.binary("*", r, self.emit(tt.CosOp(theta.value))), self.binary("*", r, self.emit(tt.SinOp(theta.value)))

    def _counter(self, c: Any, what: str) -> Any:
        if is_number(c) and not isinstance(c, float):
            return signed32(int(c))
        if isinstance(c, Tile) and not c.is_pointer and c.element == i32:
            return c
        raise CompilationError(f"{what}: offsets and counters must be int32 tiles or ints, got {describe(c)}")

    def _key(self, seed: Any) -> tuple[Any, Any]:
        """(low word, high word) of the seed taken as a 64-bit integer."""
        if is_number(seed) and not isinstance(seed, float):
            return signed32(int(seed)), signed32(int(seed) >> 32)
        if not (isinstance(seed, Tile) and not seed.shape and seed.element == i32):
            raise CompilationError(f"the seed must be an int scalar, got {describe(seed)}")
        return seed, self.binary(">>", seed, 31)

    def _raise(self, key: Any, increment: int) -> Any:
        return signed32(key + increment) if isinstance(key, int) else self.binary("+", key, signed32(increment))

    @staticmethod
    def _rounds(n_rounds: Any) -> int:
        if not isinstance(n_rounds, int) or isinstance(n_rounds, bool) or n_rounds < 0:
            raise CompilationError(f"n_rounds must be a constexpr non-negative int, got {describe(n_rounds)}")
        return n_rounds
