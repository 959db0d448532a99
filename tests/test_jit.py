"""`@tt.jit` kernels: launching, specialisation caching, argument checks, simulator runs, launch overhead."""

from __future__ import annotations

import subprocess
import sys
import timeit
from pathlib import Path

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import CompiledKernel
from tinyton.runtime import driver
from tinyton.runtime.arrays import DeviceArray, KernelArgument

ROOT = Path(__file__).resolve().parents[1]


@tt.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


@tt.jit
def scale_in_place(x_ptr, n, factor, BLOCK: tt.constexpr = 32):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(x_ptr + offsets, tt.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def arrays(n=100, dtype=np.float32):
    rng = np.random.default_rng(0)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype), np.zeros(n, dtype)


# ---- specialisation -----------------------------------------------------------------------------


def test_same_key_same_variant_and_new_variants_for_new_keys():
    a, b, c = arrays()
    first = add_kernel.compile(a, b, c, 100, BLOCK=64)
    assert add_kernel.compile(a, b, c, 100, BLOCK=64) is first
    assert add_kernel.compile(a, b, c, 99, BLOCK=64) is first  # same kind, same divisibility
    assert add_kernel.compile(a, b, c, 100, BLOCK=128) is not first  # constexpr value
    assert add_kernel.compile(a, b, c, 96, BLOCK=64) is not first  # n divisible by 16
    assert add_kernel.compile(a, b, c, 100, BLOCK=64, num_warps=8) is not first
    half = add_kernel.compile(*arrays(dtype=np.float16), 100, BLOCK=64)
    assert half is not first and "!tt.ptr<f16>" in half.asm["tt"]
    assert add_kernel.compile(a, b, c, 100, 64) is first  # constexpr passed positionally
    assert isinstance(first, CompiledKernel) and first.param_kinds == ("ptr", "ptr", "ptr", "int32")
    assert first.written_params == frozenset({2})


def test_constexpr_type_is_part_of_the_key():
    @tt.jit
    def k(x_ptr, S: tt.constexpr):
        tt.store(x_ptr + tt.arange(0, 16), tt.arange(0, 16) * S)

    x = np.zeros(16, np.float32)
    assert k.compile(x, S=2) is not k.compile(x, S=2.0)
    assert "tt.cast" not in k.compile(x, S=2).asm["tt"].split("tt.mul")[0]


def test_bound_launchers_are_cached_per_grid():
    assert add_kernel[(4,)] is add_kernel[(4,)]
    assert add_kernel[(4, 1)] is not add_kernel[(4,)]


# ---- argument and grid errors -------------------------------------------------------------------


def test_calling_a_kernel_without_a_grid():
    with pytest.raises(TypeError, match=r"launch kernels with kernel\[grid\]\(...\)"):
        add_kernel(*arrays(), 100, BLOCK=64)


def test_wrong_arguments_name_the_parameters():
    a, b, c = arrays()
    with pytest.raises(TypeError, match="missing argument.*for n, BLOCK"):
        add_kernel[(1,)](a, b, c)
    with pytest.raises(TypeError, match="unexpected or repeated argument.*BLOCKK"):
        add_kernel[(1,)](a, b, c, 100, BLOCKK=64)
    with pytest.raises(TypeError, match=r"takes 5 argument\(s\) \(a_ptr, b_ptr, c_ptr, n, BLOCK\) but 6 were given"):
        add_kernel[(1,)](a, b, c, 100, 64, 1)
    with pytest.raises(ValueError, match="num_warps"):
        add_kernel[(1,)](a, b, c, 100, BLOCK=64, num_warps=3)
    with pytest.raises(tt.CompilationError, match="argument `n`: unsupported argument of type str"):
        add_kernel[(1,)](a, b, c, "100", BLOCK=64)


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (1.5,), (-1,), "x"])
def test_bad_grids(grid):
    with pytest.raises(ValueError, match="grid"):
        add_kernel[grid]


def test_array_program_cannot_be_launched_with_a_grid():
    @tt.jit
    def program(x):
        return x * 2

    assert not program.is_kernel and add_kernel.is_kernel
    with pytest.raises(TypeError, match="array program"):
        program[(1,)]


# ---- end to end on the simulator ---------------------------------------------------------------


def test_launch_on_the_simulator_updates_numpy_arrays_in_place():
    a, b, c = arrays(1000)
    add_kernel[(tt.cdiv(1000, 128),)](a, b, c, 1000, BLOCK=128)
    np.testing.assert_array_equal(c, a + b)
    x = np.arange(40, dtype=np.float32)
    scale_in_place[(2,)](x, 40, 0.5)  # BLOCK from the default
    np.testing.assert_array_equal(x, np.arange(40, dtype=np.float32) * 0.5)


def test_callable_grid_gets_the_meta_parameters():
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (tt.cdiv(meta["n"], meta["BLOCK"]),)

    a, b, c = arrays(300)
    add_kernel[grid](a, b, c, 300, BLOCK=64, num_warps=2)
    np.testing.assert_array_equal(c, a + b)
    assert seen["BLOCK"] == 64 and seen["num_warps"] == 2 and seen["n"] == 300


def test_empty_grid_launches_nothing():
    a, b, c = arrays()
    add_kernel[(0,)](a, b, c, 100, BLOCK=64)
    assert not c.any()


def test_compiled_kernels_run_on_the_simulator_directly():
    @tt.jit
    def branchy(x_ptr, y_ptr, n, BLOCK: tt.constexpr):
        pid = tt.program_id(0)
        offsets = pid * BLOCK + tt.arange(0, BLOCK)
        x = tt.load(x_ptr + offsets, mask=offsets < n, other=0.0)
        if pid % 2 == 0:
            y = x * 2.0
        else:
            y = x - 1
        total = 0.0
        for i in range(0, n, BLOCK):  # noqa: B007
            total += 1.0
        tt.store(y_ptr + offsets, y + total, mask=offsets < n)

    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    branchy.compile(x, y, 100, BLOCK=32).simulate((4,), [x, y, 100])
    expected = np.where((np.arange(100) // 32) % 2 == 0, x * 2, x - 1) + 4
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("example", ["vector_add", "softmax", "rmsnorm", "matmul", "indexing_2d"])
def test_examples(example):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{example}.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == ("[11 22 33 44]" if example == "vector_add" else "OK")


# ---- launch overhead ----------------------------------------------------------------------------


class FakeLauncher:
    """Stands in for the driver's Launcher: records the packed values instead of calling cuLaunchKernelEx."""

    def __init__(self):
        self.calls = []

    def bind(self, grid, threads, shared=0):
        def launch(stream, values):
            self.last = (grid, threads, values)

        return launch


def fake_device_array(address: int, n: int = 1024) -> DeviceArray:
    array = DeviceArray.__new__(DeviceArray)  # no allocation: the launch path only reads ptr and dtype
    array.ptr, array.shape, array.dtype, array.nbytes = address, (n,), np.dtype(np.float32), 4 * n
    array.device_ordinal = 0
    array._argument = KernelArgument(address, array.dtype, True)
    return array


def test_fast_path_packs_device_pointers_and_measures_python_overhead(monkeypatch):
    fake = FakeLauncher()
    monkeypatch.setattr(driver, "backend", lambda: "cuda")
    monkeypatch.setattr(CompiledKernel, "launcher", property(lambda self: fake))

    @tt.jit
    def kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
        offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
        tt.store(c_ptr + offsets, tt.load(a_ptr + offsets) + tt.load(b_ptr + offsets), mask=offsets < n)

    a, b, c = (fake_device_array(0x7F0000000000 + i * 4096) for i in range(3))
    launch = lambda: kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    launch()
    assert fake.last == ((1, 1, 1), 128, (a.ptr, b.ptr, c.ptr, 1024))
    plans = len(kernel._plans)
    seconds = min(timeit.repeat(launch, number=20_000, repeat=5)) / 20_000
    assert len(kernel._plans) == plans  # every timed launch hit the cached plan
    print(f"\nPython launch overhead with a fake launcher: {seconds * 1e6:.2f} us per kernel[grid](...)")
    assert seconds < 20e-6


def test_fast_path_takes_keywords_named_like_its_own_locals_and_held_launchers_follow_new_call_shapes(monkeypatch):
    """The fast path's positional parameters are positional-only and its locals never keyword names, so
    kernel parameters called grid, rest, kwargs, plan or s pass by keyword; a `kernel[grid]` held from an
    earlier call shape launches calls of the new shape (through the current fast path, else the slow path)."""
    fake = FakeLauncher()
    monkeypatch.setattr(driver, "backend", lambda: "cuda")
    monkeypatch.setattr(CompiledKernel, "launcher", property(lambda self: fake))

    @tt.jit
    def kernel(grid, rest, kwargs, plan, s, BLOCK: tt.constexpr):
        offsets = tt.arange(0, BLOCK)
        tt.store(grid + offsets, tt.load(rest + offsets) + kwargs + plan + s)

    x, y = fake_device_array(0x7F0000000000), fake_device_array(0x7F0000010000)
    held = kernel[(2,)]
    for _ in range(2):  # the miss, then the fast path
        held(x, y, kwargs=3, plan=4, s=5, BLOCK=16)
        assert fake.last == ((2, 1, 1), 128, (x.ptr, y.ptr, 3, 4, 5))
    assert kernel[(2,)] is not held  # bound to the call shape's fast path now
    kernel[(2,)](grid=x, rest=y, kwargs=6, plan=7, s=8, BLOCK=16)  # another call shape
    assert fake.last == ((2, 1, 1), 128, (x.ptr, y.ptr, 6, 7, 8))
    for _ in range(2):  # a launcher bound to the first shape's fast path, called with the second's arguments
        kernel[(2,)](x, y, 1, 2, 3, BLOCK=16)
        held_first = kernel[(2,)]
        kernel[(2,)](grid=x, rest=y, kwargs=9, plan=9, s=9, BLOCK=16)
        held_first(grid=y, rest=x, kwargs=1, plan=1, s=1, BLOCK=16)
        assert fake.last == ((2, 1, 1), 128, (y.ptr, x.ptr, 1, 1, 1))
    with pytest.raises(tt.CompilationError, match="missing argument"):
        held_first(x, y, 1, 2)


def test_kernels_without_source_say_so_and_array_programs_are_told_apart():
    namespace: dict = {"tt": tt}
    exec(
        "def kernel(x_ptr):\n    tt.store(x_ptr, 1.0)\n\ndef program(x):\n    return x * 2\n",
        namespace,
    )
    kernel, program = tt.jit(namespace["kernel"]), tt.jit(namespace["program"])
    assert kernel.is_kernel and not program.is_kernel
    with pytest.raises(tt.CompilationError, match="cannot read the source of `kernel`"):
        kernel[(1,)](np.zeros(1, np.float32))


def test_list_constexprs_work_through_the_slow_path():
    @tt.jit
    def fill(x_ptr, SHAPE: tt.constexpr):
        rows = tt.arange(0, SHAPE[0])
        cols = tt.arange(0, SHAPE[1])
        tt.store(x_ptr + rows[:, None] * SHAPE[1] + cols[None, :], tt.full(SHAPE, 3.0, tt.float32))

    x = np.zeros((2, 4), np.float32)
    fill[(1,)](x, SHAPE=[2, 4])
    fill[(1,)](x, SHAPE=[2, 4])
    assert (x == 3).all() and len(fill._variants) == 1
