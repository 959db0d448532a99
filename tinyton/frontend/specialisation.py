"""What a kernel variant assumes of its runtime ints and pointers (Triton's rules), per parameter.

An int equal to 1 is compiled as the constant 1: a unit stride (`x + cols * stride`, a tensor descriptor's
last stride) makes the accesses contiguous, so they become 16-byte vectors. An int that is a multiple of
16, or an address that is 16-byte aligned, is marked `tt.divisibility = 16`: vector accesses start aligned
and masks such as `cols < n` are constant over vectors. Anything else is assumed nothing of. Each value
of `of_int`/`of_address` compiles its own variant, so the launch key holds them too.
"""

from __future__ import annotations

NONE = ""
DIVISIBLE = "16"
ONE = "1"


def of_int(n: int) -> str:
    return ONE if n == 1 else DIVISIBLE if n % 16 == 0 else NONE


def of_address(address: int) -> str:
    return DIVISIBLE if address % 16 == 0 else NONE
