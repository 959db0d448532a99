"""Integer helpers for tile and grid sizes, shared by the language, the fusion codegen and user code."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """Ceiling division, for grid sizes: `cdiv(n, BLOCK)` programs cover `n` elements."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (tile dimensions must be powers of two)."""
    return 1 << max(int(n) - 1, 0).bit_length()
