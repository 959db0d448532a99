"""Timing GPU work, as Triton's `do_bench`: CUDA events around each run, the L2 cache flushed before
each, with torch's events when torch drives CUDA, else the driver's; a host timer on the simulator.

The run count follows from a first estimate: `warmup` ms of warm-up runs, then `rep` ms of timed ones.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyton.runtime import device_memory, driver

L2_FLUSH_BYTES = 256 << 20
"""Bytes written before each timed run so that it starts with a cold L2 (Triton writes 256 MB too)."""


class _HostClock:
    """The simulator's clock: wall time, nothing to flush."""

    def __init__(self) -> None:
        self.now = time.perf_counter

    def flush(self) -> None:
        pass

    def time(self, fn: Callable[[], Any]) -> float:
        start = self.now()
        fn()
        return (self.now() - start) * 1e3


class _TorchClock:
    """torch's CUDA events on its current stream (where torch and tinyton's torch launches go)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def flush(self) -> None:
        self.buffer.zero_()

    def time(self, fn: Callable[[], Any]) -> float:
        start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


class _DriverClock:
    """The driver's events on the default stream."""

    def __init__(self) -> None:
        self.buffer = device_memory.alloc(L2_FLUSH_BYTES)
        api = driver.driver_api()
        self.api = api
        self.events = [driver.call(api.cuEventCreate, api.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(2)]

    def flush(self) -> None:
        device_memory.memset(self.buffer, 0, L2_FLUSH_BYTES)

    def time(self, fn: Callable[[], Any]) -> float:
        start, end = self.events
        driver.call(self.api.cuEventRecord, start, 0)
        fn()
        driver.call(self.api.cuEventRecord, end, 0)
        driver.call(self.api.cuEventSynchronize, end)
        return float(driver.call(self.api.cuEventElapsedTime, start, end))

    def __del__(self) -> None:
        device_memory.free(self.buffer)


def clock() -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and driver.is_available():
        return _TorchClock(torch)
    return _DriverClock() if driver.is_available() else _HostClock()


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    grad_to_none: Sequence[Any] | None = None,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
) -> float | list[float]:
    """Milliseconds per call of `fn`: the `quantiles` of the timed runs if given, else their `return_mode`
    (mean, min, max, median or all)."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be min, max, mean, median or all, got {return_mode!r}")
    timer = clock()
    fn()
    if driver.is_available():
        driver.synchronize()
    estimate = statistics.fmean(timer.time(fn) for _ in range(5)) or 1e-3
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate))):
        for tensor in grad_to_none or ():
            tensor.grad = None
        timer.flush()
        times.append(timer.time(fn))
    if quantiles is not None:
        result = [float(q) for q in np.quantile(times, quantiles)]
        return result[0] if len(result) == 1 else result
    if return_mode == "all":
        return times
    return float(getattr(np, return_mode)(times))
