"""Scalars with Triton's tensor-like API and Python's `range` in kernels, on the simulator (here) and the GPU
(the `gpu` test compares the two): `.dtype` of a scalar argument, `.to()` of a loop-carried constexpr int,
64-bit loop variables when the bounds need them, negative and runtime steps, and the error of a kernel called
as an array program."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as triton
import tinyton.language as tl
from tinyton.errors import CompilationError
from tinyton.lowering.ptx.toolchain import find_tool


@triton.jit
def full_like_value(out, value, B: tl.constexpr):
    tl.store(out + tl.arange(0, B), tl.full([B], value, dtype=value.dtype))


@triton.jit
def widened_sum(out, n):
    acc = 0
    for _ in range(3):  # unrolled: acc stays a constexpr int
        acc += 1
    total = 0
    for i in range(n):
        total += i
    tl.store(out, acc.to(tl.int64) + total.to(tl.int64))


@triton.jit
def wide_induction(out, n):
    for i in range(2**35, 2**35 + 20):  # constexpr bounds beyond int32: an i64 loop variable
        tl.store(out + (i - 2**35), i)
    for i in range(2**35, 2**35 + n):  # a runtime bound too
        tl.store(out + 20 + (i - 2**35), i + 1)


@triton.jit
def python_range(out, start, end, step, SIZE: tl.constexpr):
    k = 0
    for i in range(start, end, step):
        tl.store(out + k, i)
        k += 1
    tl.store(out + SIZE, k)


@triton.jit
def countdown(out, n):
    s = 0
    for i in range(n, 0, -1):
        s = s * 3 + i
    tl.store(out, s)


@triton.jit
def doubled(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    return tl.load(x_ptr + offs) * 2


RANGES = [(0, 10, 3), (10, 0, -3), (10, 0, 3), (0, 10, -1), (-5, 5, 2), (5, -5, -2), (3, 3, 1), (9, 0, -1), (0, 7, 0)]


def _launch(kernel, grid, args, meta, gpu: bool):
    """On the simulator whatever the machine, or through `kernel[grid]`, which a GPU host runs on the GPU."""
    if gpu:
        kernel[grid](*args, **meta)
    else:
        run_sim(kernel, grid, *args, **meta)


def _python_range(start, end, step, size=16):
    values = list(range(start, end, step)) if step else []
    out = np.full(size + 1, -99, np.int32)
    out[: len(values)] = values
    out[size] = len(values)
    return out


@pytest.mark.parametrize("gpu", [False, pytest.param(True, marks=pytest.mark.gpu)], ids=["sim", "gpu"])
def test_scalars_and_ranges(gpu):
    for value, dtype in ((2.5, np.float32), (7, np.int32), (1, np.int32), (2**40, np.int64)):
        out = np.zeros(8, dtype)
        _launch(full_like_value, (1,), (out, value), {"B": 8}, gpu)
        np.testing.assert_array_equal(out, np.full(8, value, dtype))
    out = np.zeros(1, np.int64)
    _launch(widened_sum, (1,), (out, 10), {}, gpu)
    assert out[0] == 3 + 45
    out = np.zeros(40, np.int64)
    _launch(wide_induction, (1,), (out, 20), {}, gpu)
    np.testing.assert_array_equal(out, np.concatenate([2**35 + np.arange(20), 2**35 + 1 + np.arange(20)]))
    for start, end, step in RANGES:
        out = np.full(17, -99, np.int32)
        _launch(python_range, (1,), (out, start, end, step), {"SIZE": 16}, gpu)
        np.testing.assert_array_equal(out, _python_range(start, end, step), err_msg=f"range({start}, {end}, {step})")
    out = np.zeros(1, np.int32)
    _launch(countdown, (1,), (out, 12), {}, gpu)
    expected = 0
    for i in range(12, 0, -1):
        expected = expected * 3 + i
    assert out[0] == np.int32(np.int64(expected).astype(np.int32))


def test_runtime_step_loop_is_one_scf_for_with_a_positive_step():
    compiled = python_range.compile(np.zeros(17, np.int32), 0, 10, 3, SIZE=16)
    text = compiled.asm["tt"]
    assert text.count("scf.for") == 1 and "scf.while" not in text


def test_the_induction_variable_is_i64_only_when_the_bounds_need_it():
    assert "i64" in wide_induction.compile(np.zeros(40, np.int64), 20).asm["tt"].split("scf.for")[1].split("\n")[0]
    assert "i64" not in countdown.compile(np.zeros(1, np.int32), 12).asm["tt"]


def test_a_zero_constexpr_step_is_refused_at_the_users_line():
    @triton.jit
    def zero_step(out, n):
        for i in range(0, n, 0):  # error
            tl.store(out, i)

    with pytest.raises(CompilationError, match="step must not be zero") as info:
        zero_step[(1,)](np.zeros(1, np.int32), 4)
    assert info.value.line > 0


def test_a_kernel_called_as_an_array_program_says_how_to_launch_it():
    with pytest.raises(CompilationError, match=r"tt.load works on pointers and programs.*fn\[grid\]") as info:
        doubled(np.ones(16, np.float32), 16)
    assert info.value.filename == __file__


def test_pow_of_constexprs_folds_and_of_runtime_values_is_refused():
    @triton.jit
    def powers(out, x):
        tl.store(out, 2**10 + x)
        tl.store(out + 1, x**2)  # error

    with pytest.raises(CompilationError, match=r"`\*\*` of runtime values is not supported"):
        powers[(1,)](np.zeros(2, np.int32), 3)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_the_kernels_compile_to_ptx_that_ptxas_takes():
    kernels = [
        (full_like_value, (np.zeros(8, np.int64), 2**40), {"B": 8}),
        (widened_sum, (np.zeros(1, np.int64), 10), {}),
        (wide_induction, (np.zeros(40, np.int64), 20), {}),
        (python_range, (np.zeros(17, np.int32), 0, 10, 3), {"SIZE": 16}),
        (countdown, (np.zeros(1, np.int32), 12), {}),
    ]
    for kernel, args, meta in kernels:
        assert kernel.compile(*args, **meta).n_regs > 0  # ptxas -v read the PTX
