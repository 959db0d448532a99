"""Fused softmax and rmsnorm at 4096x4096 with 4, 8 and 16 warps, next to torch.compile, three times over.

The repetitions show the run-to-run spread that a num_warps choice must beat to count.

    python bench/probe_rms.py
"""

from __future__ import annotations

import torch
from bench_fusion import rmsnorm, softmax, torch_rmsnorm
from common import gbps, median_ms

import tinyton.lowering.fusion.geometry as geometry
from tinyton.frontend import programs


def main() -> None:
    x, w = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, device="cuda")
    compiled = torch.compile(torch_rmsnorm)
    compiled(x, w)
    heuristic = geometry.warps_for
    for _ in range(3):
        row = [f"torch.compile rmsnorm {gbps(2 * x.nbytes, median_ms(lambda: compiled(x, w))):.0f}"]
        for warps in (4, 8, 16):
            geometry.warps_for = lambda elements, warps=warps: warps
            for name, fn, args in (("rmsnorm", rmsnorm, (x, w)), ("softmax", softmax, (x,))):
                programs._PROGRAMS.clear()
                fn(*args)
                row.append(f"{name} {warps} warps {gbps(2 * x.nbytes, median_ms(lambda fn=fn, args=args: fn(*args))):.0f}")
        print(" | ".join(row), flush=True)
    geometry.warps_for = heuristic


if __name__ == "__main__":
    main()
