"""The array program's `@` on operand views next to torch (cuBLAS): `x @ w.T` (the linear layer), batched
and broadcast-batched operands. Run once with TMA (default on sm_90) and once with `TINYTON_TMA=0` to see
what TMA gives these shapes.

    python bench/probes/bench_matmul_views.py        # on a GPU host with torch; prints a Markdown table
"""

from __future__ import annotations

import os
import sys
import time

import torch

import tinyton as tt
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from common import DEVICE, check_close, device_name, median_ms, peer, print_table


@tt.jit
def linear(x, w):
    return x @ w.T


@tt.jit
def matmul(a, b):
    return a @ b


ROWS = [
    ("x @ w.T", linear, (8192, 4096), (4096, 4096)),
    ("x @ w.T", linear, (4, 2048, 4096), (14336, 4096)),
    ("x @ w.T", linear, (4, 2048, 14336), (4096, 14336)),
    ("batched a @ b", matmul, (32, 1024, 1024), (32, 1024, 1024)),
    ("broadcast a @ b", matmul, (8, 2048, 4096), (4096, 4096)),
]
"""(name, program, x/a shape, w/b shape), fp16."""


def row(name, program, xs, ws) -> list[object]:
    x = torch.randn(xs, device=DEVICE, dtype=torch.float16)
    w = torch.randn(ws, device=DEVICE, dtype=torch.float16)
    rhs = (lambda: w.T) if program is linear else (lambda: w)
    want = torch.matmul(x, rhs())
    check_close(f"tinyton {name}", program(x, w), want, tol=2e-2)
    flops = 2 * want.numel() * xs[-1]
    t_tt = flops / median_ms(lambda: program(x, w)) / 1e9
    t_torch = flops / peer(median_ms, lambda: torch.matmul(x, rhs())) / 1e9
    return [name, f"{list(xs)} x {list(ws)}", t_tt, t_torch, f"{100 * t_tt / t_torch:.0f}%"]


def main() -> None:
    tma = os.environ.get("TINYTON_TMA", "1")
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}; TINYTON_TMA={tma}\n", flush=True)
    rows = []
    for spec in ROWS:
        rows.append(row(*spec))
        print("  " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in rows[-1]), flush=True)
    print_table(f"array-program @ on views, fp16, f32 accumulate (TFLOPS, median), TINYTON_TMA={tma}",
                ["case", "shapes", "tinyton", "torch (cuBLAS)", "tinyton/torch"], rows)


if __name__ == "__main__":
    main()
    sys.exit(0)
