"""Which GPU a call runs on: the device its arrays live on, else the one the caller chose.

A call whose arguments are device memory (torch CUDA tensors, tinyton DeviceArrays, other
`__cuda_array_interface__` objects) runs on their device; arguments on two devices are an error. A call
with only host data runs on the current device: `with tt.device(n):` (a context variable, so threads and
asyncio tasks each keep their own), else torch's current device once torch has initialised CUDA (so
`torch.cuda.set_device(rank)` in a `torchrun` job is honoured), else device 0.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CHOSEN: ContextVar[int | None] = ContextVar("tinyton_device", default=None)


def index_of(device: Any) -> int:
    """The ordinal of `1`, `"cuda:1"`, `torch.device("cuda", 1)` or a DeviceArray's device."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    text = str(device)
    kind, _, index = text.partition(":")
    if kind == "cuda":
        return int(index) if index else current_device()
    raise ValueError(f"not a CUDA device: {device!r} (pass an index, 'cuda:N' or a torch.device)")


@contextmanager
def device(which: Any) -> Iterator[None]:
    """Run the calls made inside the block on GPU `which` (an index, `"cuda:N"` or a torch.device)
    unless their arrays live on another device."""
    token = _CHOSEN.set(index_of(which))
    try:
        yield
    finally:
        _CHOSEN.reset(token)


def set_device(which: Any) -> None:
    """Make `which` the current device of this thread (or task) from now on (`torch.cuda.set_device`'s
    counterpart; Triton's `driver.active.set_current_device`)."""
    _CHOSEN.set(index_of(which))


def current_device() -> int:
    """The device a call with only host data runs on."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def device_of(value: Any) -> int | None:
    """The GPU a device-resident argument lives on (None for host data and scalars)."""
    ordinal = getattr(value, "device_ordinal", None)  # tinyton's DeviceArray
    if ordinal is not None:
        return ordinal
    get_device = getattr(value, "get_device", None)  # torch tensors: -1 on the CPU
    if get_device is not None and type(value).__module__.partition(".")[0] == "torch":
        index = get_device()
        return index if index >= 0 else None
    return None


class MixedDevicesError(ValueError):
    """Arguments of one call live on different GPUs."""


def device_of_call(values: Iterable[Any], what: str = "this call") -> int:
    """The device of a call's arguments (all on one GPU), else the current device."""
    found: dict[int, int] = {}
    for position, value in enumerate(values):
        ordinal = device_of(value)
        if ordinal is not None:
            found.setdefault(ordinal, position)
    if len(found) > 1:
        (a, i), (b, j) = list(found.items())[:2]
        raise MixedDevicesError(
            f"{what} mixes devices: argument {i} is on cuda:{a}, argument {j} on cuda:{b}; move them to one "
            f"device first (x.to('cuda:{a}'))"
        )
    return next(iter(found)) if found else current_device()


@contextmanager
def running_on(ordinal: int) -> Iterator[None]:
    """Make `ordinal` the current device for the block (what the call paths do with a call's device)."""
    token = _CHOSEN.set(ordinal)
    try:
        yield
    finally:
        _CHOSEN.reset(token)
