"""Compiling with Python's cyclic garbage collector paused.

Tracing, fusion and codegen allocate xDSL objects by the hundred thousand and free few of them until the
compile ends, so every collection the allocations trigger scans a growing heap for almost nothing: pausing
the collector for the compile saves about a fifth of it on long programs (bench/bench_compile.py --scale).
It resumes, as it was, when the compile returns or raises.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
