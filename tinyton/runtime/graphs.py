"""CUDA graphs: capture a sequence of launches once, replay it with one `cuGraphLaunch`.

A captured graph holds the kernels' parameters as they were during capture, device pointers included, so
replays read and write the same buffers. `CudaGraph.capture()` therefore keeps every `DeviceArray`
allocated inside the capture alive as long as the graph (intermediates of array programs too: their
memory is baked into the graph). Inputs change between replays by copying new values into the buffers
the capture read, which is what `tinyton.graphed` (tinyton/frontend/graphed.py) automates.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tinyton.runtime import arrays, driver, streams


class CudaGraph:
    """One captured graph, its executable instance and the device memory it uses, on the device current
    when it is made."""

    def __init__(self) -> None:
        self.stream = driver.Stream()
        self.buffers: list[arrays.DeviceArray] = []
        """Device arrays allocated during the capture: the graph's static memory."""
        self._graph: Any = None
        self._exec: Any = None

    @contextmanager
    def capture(self) -> Iterator[CudaGraph]:
        """Record the launches made inside the block (on this graph's stream) instead of running them.

        Relaxed mode: allocations are allowed inside (they are not recorded, they just stay alive)."""
        if self._exec is not None:
            raise RuntimeError("this CudaGraph is already captured; make a new one to capture again")
        drv = driver.driver_api()
        driver.use_device(self.stream.ordinal)
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        driver.call(drv.cuStreamBeginCapture, self.stream.raw, mode)
        try:
            with arrays.keep_allocations(self.buffers), streams.stream(self.stream):
                yield self
        finally:
            graph = driver.call(drv.cuStreamEndCapture, self.stream.raw)  # ends a failed capture too
        self._graph = graph
        self._exec = driver.call(drv.cuGraphInstantiate, graph, 0)

    def replay(self) -> None:
        """Launch the captured work on this graph's stream (asynchronously)."""
        if self._exec is None:
            raise RuntimeError("replay() needs a captured graph: record one with `with graph.capture(): ...`")
        driver.use_device(self.stream.ordinal)
        driver.call(driver.driver_api().cuGraphLaunch, self._exec, self.stream.raw)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def __del__(self) -> None:
        driver.release("cuGraphExecDestroy", getattr(self, "_exec", None))
        driver.release("cuGraphDestroy", getattr(self, "_graph", None))
