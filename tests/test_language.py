"""The Triton language surface on the simulator: each builtin against NumPy, and the compile-time ones."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernels import INDEXING_CASES
from language_kernels import ALL_CASES, int64_offsets_kernel, run, scalar_minmax_kernel
from memory_kernels import MEMORY_CASES

import tinyton as triton
import tinyton.language as tl
from tinyton.lowering.ptx import assemble_ptx
from tinyton.runtime.simulator import DeviceAssertionError
from toolchains import needs_ptxas


def test_language_module_is_importable_as_tl():
    assert tl.constexpr is triton.constexpr and tl.math.exp is tl.exp and tl.program_id is triton.program_id
    assert callable(tl.math.sqrt_rn) and triton.language is tl


CASES = {**ALL_CASES, **MEMORY_CASES, **INDEXING_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_numpy(name):
    case = CASES[name]()
    got = run(case)
    want = case.reference(*case.inputs)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=case.rtol, atol=case.atol)


def test_runtime_min_max_and_cdiv():
    x = np.arange(64, dtype=np.int32)
    out = np.full(64, -1, np.int32)
    scalar_minmax_kernel[(1,)](x, out, 40, N=64)
    want = np.where((x < 32) & (x >= 3), x + 3, -1)
    np.testing.assert_array_equal(out, want)


@triton.jit
def assert_kernel(x_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.device_assert(x >= 0, "x must be non-negative")


def test_device_assert_names_the_lane():
    assert_kernel[(1,)](np.arange(8, dtype=np.int32), N=8)
    x = np.arange(8, dtype=np.int32)
    x[5] = -1
    with pytest.raises(DeviceAssertionError, match=r"program \(0, 0, 0\) lane \(5,\).*x must be non-negative"):
        assert_kernel[(1,)](x, N=8)


@triton.jit
def print_kernel(x_ptr, N: tl.constexpr):
    tl.device_print("x: ", tl.load(x_ptr + tl.arange(0, N)))


def test_device_print(capsys):
    print_kernel[(1,)](np.array([3, 4], np.int32), N=2)
    assert capsys.readouterr().out.splitlines() == ["pid (0, 0, 0) idx (0) x: 3", "pid (0, 0, 0) idx (1) x: 4"]


@triton.jit
def static_kernel(x_ptr, N: tl.constexpr):
    tl.static_assert(N % 2 == 0, "N must be even")
    tl.static_print("N is", N)
    tl.store(x_ptr + tl.arange(0, N), 1)


def test_static_assert_and_print(capsys):
    static_kernel[(1,)](np.zeros(4, np.int32), N=4)
    assert "N is 4" in capsys.readouterr().out
    with pytest.raises(triton.CompilationError, match="static_assert failed: N must be even"):
        static_kernel[(1,)](np.zeros(3, np.int32), N=3)


@triton.jit
def assume_kernel(x_ptr, stride, N: tl.constexpr):
    tl.assume(stride > 0)
    tl.assume(N > 0)
    tl.store(x_ptr + tl.arange(0, N) * stride, 1)


def test_assume_is_accepted_and_a_false_constexpr_refused():
    x = np.zeros(8, np.int32)
    assume_kernel[(1,)](x, 2, N=4)
    np.testing.assert_array_equal(x, [1, 0] * 4)
    with pytest.raises(triton.CompilationError, match="tl.assume: the condition is false"):
        assume_kernel[(1,)](x, 2, N=0)


@needs_ptxas
@pytest.mark.parametrize("name", sorted(CASES))
def test_case_ptx_is_accepted_by_ptxas(name):
    case = CASES[name]()
    ptx = case.kernel.compile(*case.inputs, case.out, **case.constexprs).asm["ptx"]
    assemble_ptx(ptx, "sm_90")


def test_cache_hints_and_assert_reach_the_ptx():
    case = ALL_CASES["bitcast"]()
    ptx = case.kernel.compile(*case.inputs, case.out, **case.constexprs).asm["ptx"]
    assert "ld.global.L1::evict_last" in ptx and "st.global.cs" in ptx
    ptx = assert_kernel.compile(np.arange(8, dtype=np.int32), N=8).asm["ptx"]
    assert "trap;" in ptx


def test_bad_cache_modifier_is_an_error():
    @triton.jit
    def k(x_ptr):
        tl.store(x_ptr, 1, cache_modifier=".zz")

    with pytest.raises(triton.CompilationError, match="cache_modifier must be one of"):
        k[(1,)](np.zeros(1, np.int32))


def test_int64_offsets_and_int64_scalars():
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    kernel = int64_offsets_kernel.compile(x, out, 2**40 + 5, N=64)
    assert "%n: i64" in kernel.asm["tt"] and "tensor<64xi64>" in kernel.asm["tt"]
    int64_offsets_kernel[(1,)](x, out, 2**40 + 5, N=64)
    np.testing.assert_array_equal(out, x + np.arange(64) + 64)


def test_pointer_dtype_and_float8_arithmetic_error():
    @triton.jit
    def k(x_ptr, o_ptr):
        tl.static_assert(x_ptr.dtype.element_ty == tl.float8e4nv)
        tl.store(o_ptr, tl.load(x_ptr) * 2)

    x = np.zeros(1, tl.float8e4nv.np)
    with pytest.raises(triton.CompilationError, match="float8 tiles are for storage"):
        k[(1,)](x, x)


def test_type_of_scalars_pointers_and_tiles():
    @triton.jit
    def k(x_ptr, o_ptr, N: tl.constexpr):
        tl.static_assert(o_ptr.type.element_ty == tl.float16)
        offs = tl.arange(0, N)
        tl.static_assert((x_ptr + offs).type.element_ty.element_ty == tl.float32)
        x = tl.load(x_ptr + offs)
        tl.static_assert(x.type.element_ty == tl.float32 and x.type.shape == (N,))
        tl.static_assert(tl.sum(x, 0).type == tl.float32)
        tl.store(o_ptr + offs, x.to(o_ptr.type.element_ty))

    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float16)
    k[(1,)](x, out, N=4)
    np.testing.assert_array_equal(out, x)


@needs_ptxas
def test_device_print_calls_vprintf():
    kernel = print_kernel.compile(np.array([3, 4], np.int32), N=2)
    ptx = kernel.asm["ptx"]
    assert "call.uni (retval0), vprintf" in ptx
    assemble_ptx(ptx, "sm_90")


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def whole_tile_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    flat = tl.reshape(x, M * N)
    tl.store(o_ptr + 0, tl.argmax(flat, 0))
    tl.store(o_ptr + 1, tl.reduce(x, None, _mul))
    tl.store(o_ptr + 2, tl.sum(tl.reduce(x, 0, _mul, keep_dims=True)))
    tl.store(o_ptr + 3, tl.max(tl.xor_sum(x, 1, keep_dims=True)))


def test_whole_tile_reductions():
    x = np.random.default_rng(3).integers(1, 3, (4, 8)).astype(np.int32)
    out = np.zeros(4, np.int32)
    whole_tile_kernel[(1,)](x, out, M=4, N=8)
    with np.errstate(over="ignore"):
        want = [np.argmax(x), np.prod(x), np.prod(x, axis=0).sum(), np.bitwise_xor.reduce(x, axis=1).max()]
    np.testing.assert_array_equal(out, np.array(want, np.int64).astype(np.int32))
    ptx = whole_tile_kernel.compile(x, out, M=4, N=8).asm["ptx"]
    assert "shfl.sync.bfly" in ptx
