"""Limits of the language that both the dialects and the user-facing `tt` namespace state."""

MAX_TILE_ELEMENTS = 1 << 16
"""Largest tile one program may hold (elements); larger blocks are rejected by the verifier."""
