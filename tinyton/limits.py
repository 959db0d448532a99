"""Limits of the language that both the dialects and the user-facing `tt` namespace state."""

MAX_TILE_ELEMENTS = 1 << 16
"""Largest tile one program may hold (elements); larger blocks are rejected by the verifier."""

SORTED_ROW_BYTES = 1 << 15
"""Bytes of the longest row one program sorts whole in its registers (`tta.sort`, `tta.argsort`): 8192 values of up to
32 bits. The network is unrolled, log2(n)(log2(n)+1)/2 compare-and-swap steps over a thread's n / (32 x 16 warps)
pairs, so its code grows as n log2(n)^2 and its registers with n: on sm_90 through llvmlite a sort and an argsort of
rows of 8192 float32, both directions, are 2.3 MiB of PTX (~50 s to PTX and cubin, 128 registers, no spills); rows of
32768 were 8.7 MiB (~10 min, ptxas spilling 240 KB a thread). The exchanges between warps also go through shared
memory (the row's bytes). Longer rows are sorted in chunks, merged pairwise (`tinyton-split-long-sorts`)."""


def max_sorted_row(bitwidth: int) -> int:
    """Longest row of `bitwidth`-bit values one program sorts whole: 8192, 4096 for 64-bit values."""
    return SORTED_ROW_BYTES // (max(bitwidth, 32) // 8)


MAX_SORTED_ROW = max_sorted_row(32)
"""Longest row of values of up to 32 bits one program sorts whole."""
