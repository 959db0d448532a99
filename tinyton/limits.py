"""Limits of the language that both the dialects and the user-facing `tt` namespace state."""

MAX_TILE_ELEMENTS = 1 << 16
"""Largest tile one program may hold (elements); larger blocks are rejected by the verifier."""

SORTED_ROW_BYTES = 1 << 17
"""Bytes of the longest row one program sorts whole in its registers (`tta.sort`, `tta.argsort`): the compare-and-swap
steps between warps exchange the row (its values, then its 32-bit positions) through shared memory, which an A100
or an H100 gives a program 163 or 227 KiB of. Longer rows are sorted in chunks, merged pairwise
(`tinyton-split-long-sorts`)."""


def max_sorted_row(bitwidth: int) -> int:
    """Longest row of `bitwidth`-bit values one program sorts whole: 32768, 16384 for 64-bit values."""
    return SORTED_ROW_BYTES // (max(bitwidth, 32) // 8)


MAX_SORTED_ROW = max_sorted_row(32)
"""Longest row of values of up to 32 bits one program sorts whole."""
