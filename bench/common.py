"""Shared timing and reporting helpers for tinyton's benchmarks (run on a GPU host with torch + Triton).

Every figure is a median over many repetitions, timed with CUDA events (`triton.testing.do_bench`), after a
warm-up that keeps compilation and module loading out of the numbers; inputs are fresh random data.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import triton.testing


def median_ms(fn: Callable[[], object], *, warmup_ms: int = 50, rep_ms: int = 300) -> float:
    """Median device time of `fn` in milliseconds (CUDA events, L2 flushed between runs)."""
    return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def host_us_per_call(fn: Callable[[], object], calls: int = 10_000, rounds: int = 5) -> float:
    """Median over `rounds` of wall time per call for `calls` back-to-back calls, synchronising once."""
    results = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        results.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(results)


def gbps(bytes_moved: int, ms: float) -> float:
    return bytes_moved / (ms * 1e-3) / 1e9


def check_close(name: str, got: torch.Tensor, want: torch.Tensor, tol: float = 1e-5) -> None:
    """Relative L2 error against a float64 reference; raise before any timing when wrong."""
    err = (got.double() - want.double()).norm() / want.double().norm()
    if not torch.isfinite(err) or err > tol:
        raise AssertionError(f"{name}: relative error {float(err):.2e} > {tol}")


def print_table(title: str, header: list[str], rows: list[list[object]]) -> str:
    """Print (and return) a Markdown table so results paste straight into docs/benchmarks.md."""
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [f"{c:.1f}" if isinstance(c, float) else str(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    return text
