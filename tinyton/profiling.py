"""`TINYTON_PROFILE=1`: where compile time went, stage by stage, printed to stderr.

Every layer may mark a stage (`with stage("fuse"):`); stages nest, and when the outermost one ends the
tree is printed, wall milliseconds per stage:

    tinyton profile: compile rmsnorm                     41.2 ms
    tinyton profile:   trace                              3.1 ms
    tinyton profile:   fuse                              12.0 ms
    ...

Off (the default), `stage` costs one environment lookup. It sits at the bottom of the import graph.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

_OFF = ("", "0", "false", "off", "no")
_records: list[list] = []  # [depth, name, start, seconds] of the stages of the current outermost stage
_depth = 0


def enabled() -> bool:
    return os.environ.get("TINYTON_PROFILE", "").strip().lower() not in _OFF


def stage(name: str) -> AbstractContextManager[None]:
    """Time the enclosed code as stage `name` when TINYTON_PROFILE is set."""
    return _timed(name) if enabled() else nullcontext()


@contextmanager
def _timed(name: str) -> Iterator[None]:
    global _depth
    record = [_depth, name, time.perf_counter(), 0.0]
    _records.append(record)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        record[3] = time.perf_counter() - record[2]
        if _depth == 0:
            report = [f"tinyton profile: {'  ' * d}{n:<{44 - 2 * d}} {s * 1e3:9.1f} ms" for d, n, _, s in _records]
            _records.clear()
            print("\n".join(report), file=sys.stderr, flush=True)
