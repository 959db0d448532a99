"""Tracing array programs into tta IR: the IR of softmax/rmsnorm, NumPy promotion and errors at the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tinyton.dialects import tta
from tinyton.dialects.tta import returns_tuple
from tinyton.errors import CompilationError
from tinyton.frontend import array_ops as tt
from tinyton.frontend.traced import ARRAY_IMPLS
from tinyton.frontend.tracing import trace

X = np.zeros((4, 8), np.float32)
W = np.ones(8, np.float32)


def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def body(module) -> list[str]:
    """The func's ops as text lines, without the func/return boilerplate."""
    lines = str(module).splitlines()
    return [line.strip() for line in lines if "tta." in line]


def test_softmax_trace() -> None:
    assert body(trace(softmax, [X])) == [
        "%0 = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>",
        "%1 = tta.sub %x, %0 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>",
        "%2 = tta.exp %1 : tensor<4x8xf32>",
        "%3 = tta.reduce_sum %2 axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>",
        "%4 = tta.div %2, %3 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>",
    ]


def test_rmsnorm_trace() -> None:
    module = trace(rmsnorm, [X, W])
    assert "func.func @rmsnorm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32>" in str(module)
    assert body(module) == [
        "%0 = tta.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>",
        "%1 = tta.reduce_mean %0 axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>",
        "%2 = tta.constant 1.000000e-06 : f32 -> f32",
        "%3 = tta.add %1, %2 : tensor<4x1xf32>, f32 -> tensor<4x1xf32>",
        "%4 = tta.rsqrt %3 : tensor<4x1xf32>",
        "%5 = tta.mul %x, %4 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>",
        "%6 = tta.mul %5, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>",
    ]


def test_ops_carry_the_user_line() -> None:
    module = trace(softmax, [X])
    exp = next(op for op in module.walk() if isinstance(op, tta.ExpOp))
    assert exp.location.filename.data == __file__
    assert exp.location.line.data == softmax.__code__.co_firstlineno + 1


def test_numpy_promotion_with_weak_scalars() -> None:
    ints = np.zeros(4, np.int32)
    assert body(trace(lambda i: i * 2, [ints]))[-1].endswith("tensor<4xi32>, i32 -> tensor<4xi32>")
    assert "tta.cast %i : tensor<4xi32> -> tensor<4xf64>" in body(trace(lambda i: i * 0.5, [ints]))[0]  # NEP 50
    half = np.zeros(4, np.float16)
    assert body(trace(lambda h: h + 1.0, [half]))[-1].endswith("tensor<4xf16>, f16 -> tensor<4xf16>")
    mixed = body(trace(lambda i, x: i + x, [ints, np.zeros(4, np.float32)]))
    assert mixed[0].startswith("%0 = tta.cast %i") and "-> tensor<4xf64>" in mixed[0]  # int32 + float32: float64
    assert "tta.add %0, %1" in mixed[2]
    assert "tta.div" in body(trace(lambda i: i / i, [ints]))[-1]  # true division casts to float64
    assert body(trace(lambda i: i / i, [ints]))[-1].endswith("-> tensor<4xf64>")
    small = np.zeros(4, np.int8)
    assert body(trace(lambda s: s + 1, [small]))[-1].endswith("-> tensor<4xi8>")
    assert body(trace(lambda s, h: s + h, [small, half]))[-1].endswith("-> tensor<4xf16>")
    assert body(trace(lambda i, h: i + h, [ints, half]))[-1].endswith("-> tensor<4xf64>")


def test_operators_and_methods() -> None:
    def program(x, i):
        a = (x ** 2 + abs(-x)).T.reshape(-1, 2)
        b = tt.where(x > 0, x, 0.0)[:, None]
        c = (i // 3) % 2 & 1
        return a.sum(), b.mean(axis=(0, 1)), c.to(np.float32), x @ x.T, x[0:4] if False else x[None]

    module = trace(program, [X, np.zeros(8, np.int32)])
    names = {op.name for op in module.walk()}
    assert {"tta.mul", "tta.neg", "tta.abs", "tta.transpose", "tta.reshape", "tta.where", "tta.cmp",
            "tta.floordiv", "tta.mod", "tta.and", "tta.cast", "tta.matmul", "tta.reduce_sum",
            "tta.reduce_mean"} <= names
    assert returns_tuple(module)
    assert not returns_tuple(trace(softmax, [X]))


def test_matmul_and_take_shapes() -> None:
    def program(a, v, table, ids):
        return a @ v, v @ a.T, table[ids]

    module = trace(program, [X, W, np.zeros((10, 8), np.float32), np.zeros((2, 3), np.int32)])
    assert "-> (tensor<4xf32>, tensor<4xf32>, tensor<2x3x8xf32>)" in str(module)


def test_axis_none_reduces_the_flattened_array() -> None:
    ops = body(trace(lambda x: tt.max(x, keepdims=True), [X]))
    assert [op.split(" = ")[1].split()[0] for op in ops] == ["tta.reshape", "tta.reduce_max", "tta.reshape"]


def test_scalar_arguments_are_baked_in() -> None:
    module = trace(lambda x, eps: x + eps, [X, 0.5])
    assert "func.func @<lambda>(%x: tensor<4x8xf32>)" in str(module) or "(%x: tensor<4x8xf32>)" in str(module)
    assert "tta.constant 5.000000e-01 : f32" in str(module)


def expect_error(fn, args, message: str, line: int) -> None:
    with pytest.raises(CompilationError) as info:
        trace(fn, args)
    text = str(info.value).splitlines()[0]
    assert re.match(rf"{re.escape(__file__)}:{line}:\d+: {message}", text), text


def test_broadcast_error_names_the_user_line() -> None:
    def add(x, y):
        return x + y

    expect_error(add, [np.zeros(64, np.float32), np.zeros(32, np.float32)],
                 re.escape("operands could not be broadcast together with shapes (64,) (32,)"),
                 add.__code__.co_firstlineno + 1)


def test_builtin_errors_name_the_user_line() -> None:
    def bad_axis(x):
        return tt.sum(x, axis=2)

    def bad_matmul(x):
        return x @ x

    def bad_reshape(x):
        return x.reshape(5, 7)

    line = bad_axis.__code__.co_firstlineno + 1
    expect_error(bad_axis, [X], "axis 2 is out of bounds for array of dimension 2", line)
    expect_error(bad_matmul, [X], "matmul: Input operand 1 has a mismatch in its core dimension 0",
                 bad_matmul.__code__.co_firstlineno + 1)
    expect_error(bad_reshape, [X], re.escape("cannot reshape array of size 32 into shape (5, 7)"),
                 bad_reshape.__code__.co_firstlineno + 1)


def test_unsupported_constructs() -> None:
    def branch(x):
        if x > 0:
            return x
        return -x

    def index(x):
        return x[1.5]

    def bitwise_float(x):
        return x & 2

    def numpy_capture(x):
        return x + np.ones(8, np.float32)

    def returns_scalar(x):
        return 1.0

    expect_error(branch, [X], r"Python control flow on an array .* use tt.where", branch.__code__.co_firstlineno + 1)
    expect_error(index, [X], r"only integers, slices .* are valid indices", index.__code__.co_firstlineno + 1)
    expect_error(bitwise_float, [X], r"ufunc 'bitwise_and' not supported for the input types \(float32, int\)",
                 bitwise_float.__code__.co_firstlineno + 1)
    expect_error(numpy_capture, [X], "cannot mix a ndarray with traced arrays",
                 numpy_capture.__code__.co_firstlineno + 1)
    expect_error(returns_scalar, [X], "array program 'returns_scalar' must return arrays",
                 returns_scalar.__code__.co_firstlineno)
    with pytest.raises(CompilationError, match="argument 'x' has dtype complex64"):
        trace(softmax, [X.astype(np.complex64)])


def test_numpy_functions_registry_is_filled() -> None:
    """`np.mean(traced)` and `np.exp(traced)` dispatch through ARRAY_IMPLS to the array ops themselves."""
    trace(softmax, [X])
    assert ARRAY_IMPLS["mean"] is tt.mean and ARRAY_IMPLS["exp"] is tt.exp
