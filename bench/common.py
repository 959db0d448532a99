"""Shared timing and reporting helpers for tinyton's benchmarks (run on a GPU host with torch + Triton).

Every figure is a median over many repetitions, timed with CUDA events (`triton.testing.do_bench`), after a
warm-up that keeps compilation and module loading out of the numbers; inputs are fresh random data.

One-shot mode (`TINYTON_BENCH_ONESHOT=1`, what bench/sanitize.py runs under compute-sanitizer): every script
keeps to small shapes that are not multiples of its blocks (`pick`), each measured tinyton function runs once
in place of being timed (figures are NaN), the peers (torch, Triton, cuBLAS, NumPy: `peer`) do not run, and
without a GPU the tensors live on the CPU and tinyton runs on its simulator.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import torch
import triton.testing

from tinyton.runtime import driver

ONESHOT = os.environ.get("TINYTON_BENCH_ONESHOT", "") == "1"
DEVICE = "cuda" if driver.backend() == "cuda" else "cpu"
"""Where the benchmarks' tensors live: the CPU when tinyton runs on its simulator (one-shot mode only)."""

T = TypeVar("T")


def pick(full: T, oneshot: T) -> T:
    """The benchmark's own value, or its small stand-in in one-shot mode."""
    return oneshot if ONESHOT else full


def synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def device_name() -> str:
    return torch.cuda.get_device_name() if DEVICE == "cuda" else "tinyton simulator (CPU)"


def peer(measure: Callable[..., float], *args: object, **kwargs: object) -> float:
    """`measure(*args)` for a peer (torch, Triton, cuBLAS, NumPy); NaN in one-shot mode, without running it."""
    return math.nan if ONESHOT else measure(*args, **kwargs)


def median_ms(fn: Callable[[], object], *, warmup_ms: int = 50, rep_ms: int = 300) -> float:
    """Median device time of `fn` in milliseconds (CUDA events, L2 flushed between runs); one-shot: one run, NaN."""
    if ONESHOT:
        return _run_once(fn)
    return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def back_to_back_ms(fn: Callable[[], object], repeats: int, *, warmup: bool = True) -> float:
    """Mean time of `repeats` calls of `fn` in a row (no L2 flush between), for steps that must run in order,
    such as decode steps moving their position on, or CUDA-graph replays: wall time between two device-wide
    synchronisations, so work on any stream counts (a tinyton graph replays on its own non-blocking stream,
    which CUDA events on torch's stream do not wait for: they timed the H200's Llama decode at 4 µs a step)."""
    if warmup:
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / repeats


def host_us_per_call(fn: Callable[[], object], calls: int = 10_000, rounds: int = 5) -> float:
    """Median over `rounds` of wall time per call for `calls` back-to-back calls, synchronising once;
    one-shot: one call, NaN."""
    if ONESHOT:
        return _run_once(fn)
    results = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        results.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(results)


def _run_once(fn: Callable[[], object]) -> float:
    fn()
    synchronize()
    return math.nan


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


def run_sections(doc: str, sections: dict[str, Callable[[], None]], default: str | None = None) -> None:
    """A probe's command line: `--sections a,b` runs those of `sections`, in that order (default: `default`,
    else all of them), after printing the device's name."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sections", default=default or ",".join(sections))
    print(torch.cuda.get_device_name())
    for name in parser.parse_args().sections.split(","):
        sections[name]()
