"""The driver's `Launcher` without a GPU: what its bound launches hand to `cuLaunchKernelEx`.

A ctypes callback stands in for the driver function: it reads the `CUlaunchConfig` and the parameter array
the launch passes, as the driver would.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from tinyton.runtime import driver
from tinyton.runtime.launch import (
    LAUNCH_ATTRIBUTE_COOPERATIVE,
    LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    LaunchConfig,
    Launcher,
)

LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class FakeDriver:
    """`cuLaunchKernelEx(config, function, params, extra)`: records what a launch passes, returns `result`."""

    def __init__(self, kinds: list[str], result: int = 0):
        self.kinds, self.result, self.seen = kinds, result, []
        self.entry = LAUNCH_EX(self._launch)

    def _launch(self, config: int, function: int, params: int, extra: int) -> int:
        c = LaunchConfig.from_address(config)
        pointers = (ctypes.c_void_p * len(self.kinds)).from_address(params)
        values = [
            np.frombuffer(ctypes.string_at(p, 8 if k == driver.POINTER else np.dtype(k).itemsize),
                          np.uint64 if k == driver.POINTER else k)[0].item()
            for p, k in zip(pointers, self.kinds)
        ]
        attributes = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.num_attrs)]
        self.seen.append((tuple(c.grid), tuple(c.block), c.shared_bytes, c.stream or 0, function, values, extra, attributes))
        return self.result


def launcher(kinds: list[str], result: int = 0, **options) -> tuple[Launcher, FakeDriver]:
    fake = FakeDriver(kinds, result)
    return Launcher(SimpleNamespace(address=0xABC0), kinds, launch_kernel=fake.entry, **options), fake


def test_bound_launch_passes_grid_block_shared_stream_and_values():
    kinds = [driver.POINTER, "i4", "f4", "i8"]
    bound, fake = launcher(kinds, dynamic_shared=1024)
    launch = bound.bind((3, 2, 1), 256, 512)
    launch(0, (0x7F00_0000_0010, -5, 2.5, 1 << 40))
    launch(0xDEAD_BEEF_0000, (16, 7, -1.0, 3))
    assert fake.seen == [
        ((3, 2, 1), (256, 1, 1), 1536, 0, 0xABC0, [0x7F00_0000_0010, -5, 2.5, 1 << 40], None, []),
        ((3, 2, 1), (256, 1, 1), 1536, 0xDEAD_BEEF_0000, 0xABC0, [16, 7, -1.0, 3], None, []),
    ]


def test_cooperative_launches_carry_the_attribute():
    bound, fake = launcher(["i4"], cooperative=True)
    bound.launch((4, 1, 1), 128, 0, 0, (9,))
    assert fake.seen[0][-1] == [(LAUNCH_ATTRIBUTE_COOPERATIVE, 1)]


def test_overlapping_launches_carry_programmatic_stream_serialization():
    """A launch bound with `overlap` may start before the one before it completes; a cooperative one keeps its
    attribute beside it."""
    bound, fake = launcher(["i4"], cooperative=True)
    bound.bind((4, 1, 1), 128, overlap=True)(0, (9,))
    bound.bind((4, 1, 1), 128)(0, (9,))
    assert fake.seen[0][-1] == [(LAUNCH_ATTRIBUTE_COOPERATIVE, 1), (LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)]
    assert fake.seen[1][-1] == [(LAUNCH_ATTRIBUTE_COOPERATIVE, 1)]


def test_launch_reuses_one_bound_launch_per_grid_block_and_shared_size():
    bound, fake = launcher(["i4"])
    for value in range(3):
        bound.launch((2, 1, 1), 64, 0, 0, (value,))
    bound.launch((5, 1, 1), 64, 0, 0, (7,))
    assert list(bound._bound) == [((2, 1, 1), 64, 0, False), ((5, 1, 1), 64, 0, False)]
    assert [(grid, values) for grid, _, _, _, _, values, _, _ in fake.seen] == [
        ((2, 1, 1), [0]), ((2, 1, 1), [1]), ((2, 1, 1), [2]), ((5, 1, 1), [7])
    ]


def test_appended_pointers_follow_the_values():
    fake = FakeDriver(["i4", driver.POINTER])
    bound = Launcher(SimpleNamespace(address=0), ["i4"], 0, [lambda values, stream: 0x1000 + values[0]], fake.entry)
    bound.bind((1, 1, 1), 32)(0, (5,))
    assert fake.seen[0][5] == [5, 0x1005]


def test_a_failed_launch_names_the_call():
    bound, _ = launcher(["i4"], result=1)  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(driver.CudaError, match="cuLaunchKernelEx failed"):
        bound.bind((1, 1, 1), 32)(0, (1,))
