"""float8 arrays moved by array programs: reshaped, sliced, gathered, repeated, joined, broadcast, reordered, copied,
selected and assigned with their dtype and bits kept, as NumPy with ml_dtypes moves them (NaN payloads included);
arithmetic on them stays an error asking for a cast (NumPy computes it in float32 and rounds).

Each program runs on every one of the 256 bit patterns of its float8 type (shuffled), and on a larger array that
spans several tiles; results are compared bit for bit (`.view(np.uint8)`).
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool

FLOAT8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]
SHAPES = [(16, 16), (72, 200)]


def _positive(x):
    """A condition read from x itself (NaN is not positive)."""
    return x.astype(np.float32) > 0


def _assign(x):
    """Windows and index arrays assigned into a copy."""
    y = x.copy()
    y[1:3] = x[:2]
    y[:, np.array([0, 5])] = x[:, 3:5]
    return y


MOVES: dict[str, tuple[Callable, Callable]] = {
    "reshape": (lambda x: x.reshape(-1, 8), lambda x: x.reshape(-1, 8)),
    "ravel": (lambda x: x.ravel(), lambda x: x.ravel()),
    "slice": (lambda x: x[:, 1:3], lambda x: x[:, 1:3]),
    "strided_slice": (lambda x: x[::-1, 1::3], lambda x: x[::-1, 1::3]),
    "row": (lambda x: x[1], lambda x: x[1]),
    "element": (lambda x: x[3, 5], lambda x: x[3, 5]),
    "gather": (lambda x: x[np.array([2, 0, 1, 2])], lambda x: x[np.array([2, 0, 1, 2])]),
    "take": (lambda x: np.take(x, [5, 0, 3], axis=1), lambda x: np.take(x, [5, 0, 3], axis=1)),
    "tt_repeat": (lambda x: tt.repeat(x, 2, axis=1), lambda x: np.repeat(x, 2, axis=1)),
    "repeat_method": (lambda x: x.repeat(3, axis=0), lambda x: x.repeat(3, axis=0)),
    "tile": (lambda x: np.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1))),
    "concatenate": (lambda x: np.concatenate([x, x[::-1]], axis=1), lambda x: np.concatenate([x, x[::-1]], axis=1)),
    "stack": (lambda x: np.stack([x, x[:, ::-1]]), lambda x: np.stack([x, x[:, ::-1]])),
    "broadcast_to": (lambda x: np.broadcast_to(x[:, None], (x.shape[0], 3, x.shape[1])),
                     lambda x: np.broadcast_to(x[:, None], (x.shape[0], 3, x.shape[1]))),
    "expand_dims": (lambda x: np.expand_dims(x, 1), lambda x: np.expand_dims(x, 1)),
    "squeeze": (lambda x: np.squeeze(x[None, :, None]), lambda x: np.squeeze(x[None, :, None])),
    "swapaxes": (lambda x: np.swapaxes(x, 0, 1), lambda x: np.swapaxes(x, 0, 1)),
    "transpose": (lambda x: np.transpose(x[None], (2, 0, 1)), lambda x: np.transpose(x[None], (2, 0, 1))),
    "moveaxis": (lambda x: np.moveaxis(x[None], 0, 2), lambda x: np.moveaxis(x[None], 0, 2)),
    "T": (lambda x: x.T, lambda x: x.T),
    "flip": (lambda x: np.flip(x, 1), lambda x: np.flip(x, 1)),
    "copy": (lambda x: np.copy(x), lambda x: np.copy(x)),
    "where": (lambda x: tt.where(_positive(x), x, x[::-1]), lambda x: np.where(_positive(x), x, x[::-1])),
    "assign": (_assign, _assign),
}


def _every_value(dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Every bit pattern of a float8 type (NaNs, infinities and signed zeros among them) in shuffled order, repeated
    to fill `shape`."""
    bits = np.resize(np.random.default_rng(0).permutation(256).astype(np.uint8), shape)
    return bits.view(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", MOVES)
def test_a_move_keeps_the_bits(name, dtype, shape):
    """The result has NumPy's dtype, shape and bits."""
    program, reference = MOVES[name]
    x = _every_value(dtype, shape)
    got, want = np.asarray(tt.jit(program)(x)), np.asarray(reference(x))
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.__name__)
def test_assignment_into_an_argument_keeps_the_bits(dtype):
    def program(x):
        x[2:4, ::2] = x[5:7, 1::2]
        return x

    got, want = _every_value(dtype, (16, 16)), _every_value(dtype, (16, 16))
    tt.jit(program)(got)
    np.testing.assert_array_equal(got.view(np.uint8), program(want).view(np.uint8))


@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.__name__)
def test_moves_mixing_types_widen_as_numpys(dtype):
    """Two float8 types joined, or float8 selected against float32, give float32 (ml_dtypes' promotion): the float8
    values cast exactly."""
    other = ml_dtypes.float8_e5m2 if dtype is ml_dtypes.float8_e4m3fn else ml_dtypes.float8_e4m3fn
    x = _every_value(dtype, (16, 16))
    for program in (lambda a: np.concatenate([a, a[::-1].astype(other)]),
                    lambda a: np.where(_positive(a), a, a.astype(np.float32) * 2)):
        got, want = np.asarray(tt.jit(program)(x)), program(x)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


ARITHMETIC = {
    "add": lambda x: x + x,
    "scale": lambda x: x * 2,
    "exp": lambda x: tt.exp(x),
    "sum": lambda x: tt.sum(x),
    "where_scalar": lambda x: tt.where(_positive(x), x, 0.0),
    "augmented_assign": lambda x: x.__setitem__(1, x[1] + x[2]),
}


@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", ARITHMETIC)
def test_arithmetic_asks_for_a_cast(name, dtype):
    """NumPy computes float8 arithmetic in float32 and rounds to float8; array programs ask for that cast (a Python
    scalar with a float8 array would be a float8 constant, which kernels do not make)."""
    with pytest.raises(CompilationError, match=r"float8 .*x\.astype\(np\.float32\)"):
        tt.jit(ARITHMETIC[name])(_every_value(dtype, (16, 16)))


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("name", ["tt_repeat", "strided_slice", "concatenate", "where", "gather"])
def test_moves_assemble_for_the_gpu(name):
    """The kernels of float8 moves lower to PTX that ptxas takes (their loads, stores and selects of bytes)."""
    steps = tt.jit(MOVES[name][0]).compile(_every_value(ml_dtypes.float8_e4m3fn, (72, 200))).steps
    for launch in (step.launch for step in steps):
        ptx = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90", toolchain="llvmlite").asm["ptx"]
        assert assemble_ptx(ptx, "sm_90")
