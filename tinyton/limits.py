"""Limits of the language that both the dialects and the user-facing `tt` namespace state."""

MAX_TILE_ELEMENTS = 1 << 16
"""Largest tile one program may hold (elements); larger blocks are rejected by the verifier."""

MAX_SORTED_ROW = 1 << 15
"""Longest row an array program sorts (`np.sort`, `np.argsort`): a row is sorted whole in one program's registers."""
