"""Which CUDA stream launches go to: the caller's choice, else torch's current stream, else the default.

`with tt.stream(s):` makes `s` (a `driver.Stream`, a `torch.cuda.Stream`, or a raw handle) current on this
thread (a context variable, so asyncio tasks and threads each keep their own); kernel launches and
array-program calls made inside go to it. Without one, a call whose inputs are torch CUDA tensors goes to
torch's current stream, as torch's own ops and Triton's launches do, so tinyton orders correctly with the
torch work around it; everything else goes to the default stream (handle 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, partial
from typing import Any

from tinyton.runtime.devices import current_device

_CURRENT: ContextVar[int | None] = ContextVar("tinyton_stream", default=None)


def handle_of(stream: Any) -> int:
    """The raw `CUstream` handle of a tinyton or torch stream (or of an int handle itself)."""
    for attribute in ("handle", "cuda_stream"):  # driver.Stream, torch.cuda.Stream
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    if isinstance(stream, int) and stream >= 0:
        return stream
    raise TypeError(f"not a CUDA stream: {stream!r} (pass a tt.Stream, a torch.cuda.Stream or a handle)")


@contextmanager
def stream(s: Any) -> Iterator[None]:
    """Send the launches made inside the block to stream `s`."""
    token = _CURRENT.set(handle_of(s))
    try:
        yield
    finally:
        _CURRENT.reset(token)


explicit_stream: Callable[[], int | None] = _CURRENT.get
"""The stream chosen with `tt.stream(...)`, or None when the caller chose none: the context variable's own
getter, so the launch paths read it without a Python frame."""


@cache
def torch_raw_stream() -> Callable[[int], int]:
    """`read(device)`: torch's current raw stream of a device. The cheapest way: torch's C entry point (what
    Triton uses), a single C call (~0.1 µs) against several µs for `torch.cuda.current_stream()`, which
    builds a Stream object per call."""
    import torch  # only reached with torch tensors in hand: torch is already imported

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return lambda device: int(torch.cuda.current_stream(device).cuda_stream)
    return raw


@cache
def torch_stream_reader(device: int = 0) -> Callable[[], int]:
    """A function reading torch's current raw stream of `device` (bound once per device)."""
    return partial(torch_raw_stream(), device)


def torch_stream() -> int:
    """torch's current CUDA stream on the current device (only called when torch CUDA tensors came in)."""
    return torch_raw_stream()(current_device())


def current_stream(torch_inputs: bool = False) -> int:
    """The stream a launch goes to: the explicit one, else torch's on the current device (with torch inputs),
    else 0."""
    chosen = _CURRENT.get()
    if chosen is not None:
        return chosen
    return torch_stream() if torch_inputs else 0
