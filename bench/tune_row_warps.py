"""Sweep num_warps of the fused softmax/rmsnorm kernels per shape, to set `warps_for` from measurements.

    python bench/tune_row_warps.py
"""

from __future__ import annotations

import torch
from bench_fusion import SHAPES, rmsnorm, softmax
from common import host_us_per_call, median_ms, print_table

import tinyton.lowering.fusion.geometry as geometry
from tinyton.frontend import programs

heuristic = geometry.warps_for
rows = []
for shape in SHAPES:
    x = torch.randn(*shape, device="cuda")
    w = torch.randn(shape[-1], device="cuda")
    for name, fn, args in (("softmax", softmax, (x,)), ("rmsnorm", rmsnorm, (x, w))):
        times = []
        for warps in (2, 4, 8, 16, None):
            geometry.warps_for = heuristic if warps is None else (lambda elements, w=warps: w)
            programs._PROGRAMS.clear()
            fn(*args)
            times.append(median_ms(lambda fn=fn, args=args: fn(*args)) * 1e3)
        host = host_us_per_call(lambda fn=fn, args=args: fn(*args), calls=2000)
        rows.append([name, f"{shape[0]}x{shape[1]}", *times, fn.compile(*args).kernels()[0].num_warps, host])
geometry.warps_for = heuristic
print_table("Fused row kernels: µs per call by num_warps", ["program", "shape", "2", "4", "8", "16", "heuristic", "heuristic warps", "host µs/call"], rows)
