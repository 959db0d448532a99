"""Issue 3 benchmarks: fused array programs (softmax, rmsnorm) next to torch eager, torch.compile and Triton.

    python bench/bench_fusion.py             # on a GPU host with torch and Triton; prints Markdown tables
"""

from __future__ import annotations

import time

import torch

import tinyton as tt
from common import DEVICE, ONESHOT, check_close, device_name, gbps, median_ms, peer, pick, print_table
import triton_reference

SHAPES = pick([(4096, 4096), (57344, 2048), (8192, 1024), (32, 2048)], [(33, 4000), (301, 2047), (130, 1000), (3, 20000)])
"""One-shot: the four row schedules (wide rows, several rows per program, a long row in chunks) with tails."""
LATENCY_BOUND = {(32, 2048)}


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def torch_softmax(x):
    return torch.softmax(x, -1)


def torch_rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def figure(shape, ms: float, nbytes: int) -> float:
    return ms * 1e3 if shape in LATENCY_BOUND else gbps(nbytes, ms)


def bench_shape(shape) -> list[list[object]]:
    x = torch.randn(*shape, device=DEVICE)
    w = torch.randn(shape[-1], device=DEVICE)
    y = torch.empty_like(x)
    nbytes = 2 * x.nbytes
    xd = x.double()
    rows = []
    cases = {
        "softmax": (
            lambda: softmax(x),
            lambda: torch_softmax(x),
            torch.compile(torch_softmax),
            lambda: triton_reference.softmax(x, y),
            torch.softmax(xd, -1),
            (x,),
            softmax,
        ),
        "rmsnorm": (
            lambda: rmsnorm(x, w),
            lambda: torch_rmsnorm(x, w),
            torch.compile(torch_rmsnorm),
            lambda: triton_reference.rmsnorm(x, w, y),
            xd * torch.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double(),
            (x, w),
            rmsnorm,
        ),
    }
    for name, (ours, eager, compiled, triton_fn, reference, args, program) in cases.items():
        check_close(f"tinyton {name} {shape}", ours(), reference)
        compiled_fn = (lambda c=compiled, a=args: c(*a))
        if not ONESHOT:
            check_close(f"torch.compile {name} {shape}", compiled_fn(), reference)
            triton_fn()
            check_close(f"triton {name} {shape}", y, reference)
        peers = [peer(median_ms, f) for f in (eager, compiled_fn, triton_fn)]
        figures = [figure(shape, ms, nbytes) for ms in (median_ms(ours), *peers)]
        fused = program.compile(*args).num_launches
        unfused = program.compile(*args, fuse=False).num_launches
        unit = "µs" if shape in LATENCY_BOUND else "GB/s"
        ratio = figures[3] / figures[0] if unit == "µs" else figures[0] / figures[3]
        rows.append([f"{name} {shape[0]}x{shape[1]}", unit, *figures, f"{100 * ratio:.0f}%", f"{fused} / {unfused}"])
    return rows


def main() -> None:
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n")
    rows = [row for shape in SHAPES for row in bench_shape(shape)]
    print_table(
        "Fused array programs, fp32 (GB/s, one read + one write; µs for the latency-bound shape)",
        ["program", "unit", "tinyton", "torch eager", "torch.compile", "Triton", "tinyton vs Triton", "launches fused / unfused"],
        rows,
    )


if __name__ == "__main__":
    main()
