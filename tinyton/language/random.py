"""Random numbers: Philox 4x32 as Triton's (`rand`, `randn`, `randint` and their 4x forms)."""

from __future__ import annotations

from typing import Any

from tinyton.language.core import builtin, kernel


@builtin
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: int = 10) -> Any:
    """`n_rounds` rounds of Philox 4x32 on counters `(c0..c3)` keyed by `seed`: four int32 tiles."""
    return kernel().philox(seed, c0, c1, c2, c3, n_rounds)


@builtin
def randint4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of random 32-bit ints (as int32) for a seed and a block of int offsets."""
    return kernel().randint4x(seed, offset, n_rounds)


@builtin
def randint(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of random 32-bit ints (as int32): the first of `randint4x`."""
    return kernel().randint4x(seed, offset, n_rounds)[0]


@builtin
def rand4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of float32 uniform in [0, 1)."""
    return kernel().rand4x(seed, offset, n_rounds)


@builtin
def rand(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of float32 uniform in [0, 1): the same offset and seed give the same number."""
    return kernel().rand4x(seed, offset, n_rounds)[0]


@builtin
def randn4x(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """Four blocks of float32 standard normal samples."""
    return kernel().randn4x(seed, offset, n_rounds)


@builtin
def randn(seed: Any, offset: Any, n_rounds: int = 10) -> Any:
    """A block of float32 standard normal samples (Box-Muller of the first two of `randint4x`)."""
    return kernel().randn4x(seed, offset, n_rounds)[0]


@builtin
def uint_to_uniform_float(x: Any) -> Any:
    """A float32 in [0, 1) from the bits of a random 32-bit int."""
    return kernel().uint_to_uniform_float(x)


@builtin
def pair_uniform_to_normal(u1: Any, u2: Any) -> Any:
    """Box-Muller: two standard normal samples from two uniforms."""
    return kernel().pair_uniform_to_normal(u1, u2)
