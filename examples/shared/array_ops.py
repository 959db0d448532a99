"""The functions NumPy and tinyton spell differently, for models written once and run by both.

A model function takes an `ops` class first: `NumpyOps` makes it the CPU reference, `TinytonOps` (inside
`@tt.jit` array programs) the traced program. Everything else in a model is operators and array methods that
NumPy arrays and traced arrays both understand. examples/microgpt uses these as they are; examples/llama
adds its bf16 matmul (`linear`) in subclasses.
"""

from __future__ import annotations

import numpy as np

import tinyton as tt


class NumpyOps:
    """The CPU reference."""

    exp, log, where, take, maximum, swapaxes, concatenate = (
        np.exp, np.log, np.where, np.take, np.maximum, np.swapaxes, np.concatenate
    )  # fmt: skip

    @staticmethod
    def rsqrt(x: np.ndarray) -> np.ndarray:
        return (1 / np.sqrt(x)).astype(x.dtype)

    @staticmethod
    def arange(n: int) -> np.ndarray:
        return np.arange(n, dtype=np.int32)

    @staticmethod
    def f32(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32)


class TinytonOps:
    """The same functions on traced arrays (inside `@tt.jit` array programs)."""

    exp, log, where, take, maximum, swapaxes, rsqrt, arange = (
        tt.exp, tt.log, tt.where, tt.take, tt.maximum, tt.swapaxes, tt.rsqrt, tt.arange
    )  # fmt: skip

    @staticmethod
    def concatenate(arrays, axis: int = 0):
        return tt.concatenate(arrays, axis=axis)

    @staticmethod
    def f32(x):
        return x.to(tt.float32)
