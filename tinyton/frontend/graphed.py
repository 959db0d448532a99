"""`tt.graphed(fn)`: run a Python function of kernel launches and array-program calls as one CUDA graph.

Like torch's CUDA graphs and tinygrad's TinyJit: the first call runs `fn` eagerly (compiling and loading
every kernel it uses), the second captures it into a `CudaGraph`, and every later call is one replay.

Buffers: the device arrays passed to the capturing call become the graph's buffers. A later call with the
same arrays replays on them directly (so state updated in place, such as a KV cache, is seen); a call with
other arrays of the same shapes and dtypes first copies their values into the captured ones (they are
read; writes land in the captured arrays). Non-array arguments are baked in and must not change. The
results are the arrays the captured call returned: each replay overwrites them, as in torch.

Without a GPU (the simulator) `fn` simply runs every time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinyton.lazy import lazy_module

if TYPE_CHECKING:
    from tinyton.runtime.graphs import CudaGraph

# Calls need these (and NumPy), `@tt.graphed` does not (tinyton/lazy.py).
device_memory = lazy_module("tinyton.runtime.device_memory")
driver = lazy_module("tinyton.runtime.driver")
graphs = lazy_module("tinyton.runtime.graphs")


def _is_device_array(value: Any) -> bool:
    return hasattr(value, "__cuda_array_interface__")


def _is_host_array(value: Any) -> bool:
    return hasattr(value, "__array_interface__")  # NumPy's arrays, and whatever speaks its protocol


class Graphed:
    """A function replayed as a CUDA graph after its first two calls (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any]):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.graph: CudaGraph | None = None
        self.calls = 0
        self._captured_args: tuple[Any, ...] = ()
        self._results: Any = None

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if not driver.is_available() or self.calls == 1:
            return self.fn(*args)
        if self.graph is None:
            return self._capture(args)
        self._refresh_inputs(args)
        self.graph.replay()
        return self._results

    def _capture(self, args: tuple[Any, ...]) -> Any:
        if any(_is_host_array(a) for a in args):
            raise TypeError(
                f"tt.graphed({self.__name__}) replays on device memory: pass tinyton DeviceArrays "
                "(tt.to_device(x)) instead of NumPy arrays"
            )
        graph = graphs.CudaGraph()
        with graph.capture():
            results = self.fn(*args)
        self.graph, self._captured_args, self._results = graph, args, results
        graph.replay()  # capturing recorded the work without running it
        return results

    def _refresh_inputs(self, args: tuple[Any, ...]) -> None:
        """Copy the values of arrays that are not the captured ones into the captured buffers."""
        if len(args) != len(self._captured_args):
            raise TypeError(f"{self.__name__}() was captured with {len(self._captured_args)} arguments, got {len(args)}")
        stream = self.graph.stream.handle  # type: ignore[union-attr]
        for i, (new, old) in enumerate(zip(args, self._captured_args)):
            if new is old:
                continue
            if not (_is_device_array(new) and _is_device_array(old)):
                if new != old:
                    raise ValueError(
                        f"{self.__name__}(): argument {i} was {old!r} when the graph was captured and is {new!r} "
                        "now; non-array arguments are baked into the graph (make a new tt.graphed to change it)"
                    )
                continue
            src, dst = new.__cuda_array_interface__, old.__cuda_array_interface__
            if (tuple(src["shape"]), src["typestr"]) != (tuple(dst["shape"]), dst["typestr"]):
                raise ValueError(
                    f"{self.__name__}(): argument {i} has shape {tuple(src['shape'])} {src['typestr']}, the "
                    f"captured graph has {tuple(dst['shape'])} {dst['typestr']}"
                )
            nbytes = math.prod(dst["shape"]) * int(dst["typestr"][2:])  # typestr: byte order, kind, itemsize
            device_memory.memcpy_dtod(dst["data"][0], src["data"][0], nbytes, stream)


def graphed(fn: Callable[..., Any]) -> Graphed:
    """Capture `fn` (kernel launches, array-program calls) as a CUDA graph and replay it on later calls."""
    return Graphed(fn)
