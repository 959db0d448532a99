"""Puts bench/ on `sys.path`: the probes share the benchmarks' modules (common, bench_fusion, triton_reference...).

Each probe imports it first (`import bench_path`), so `python bench/probes/NAME.py` works from any folder."""

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parent.parent)
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
