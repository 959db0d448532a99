"""Puts bench/ on `sys.path`: the probes share the benchmarks' modules (common, bench_fusion, triton_reference...).

Each probe calls `bench_path.add()` before those imports, so `python bench/probes/NAME.py` works from any folder."""

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parent.parent)


def add() -> None:
    """bench/ first on `sys.path` (once)."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
