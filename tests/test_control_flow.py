"""Kernel control flow with Triton's spelling: calls to @tt.jit helpers (inlined), `while`, `return`
inside a runtime `if`, branching ternaries, `tt.range` hints and `tt.static_range(step=)`.

Each feature runs on the simulator against NumPy; `test_*_ptx` checks compile to PTX (ptxas when
present); the `gpu` tests run the same kernels on the GPU and compare with the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.lowering.ptx import assemble_ptx
from tinyton.runtime import simulator
from toolchains import needs_ptxas




# ---- calls ----------------------------------------------------------------------------------


@tt.jit
def scale_shift(x, scale, SHIFT: tl.constexpr):
    return x * scale + SHIFT


@tt.jit
def min_max(x):
    return tl.min(x, axis=0), tl.max(x, axis=0)


@tt.jit
def calls_helpers(x_ptr, y_ptr, stats_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, late_helper(scale_shift(x, 2.0, SHIFT=1)))
    lo, hi = min_max(x)
    tl.store(stats_ptr, lo)
    tl.store(stats_ptr + 1, hi)


@tt.jit(noinline=True)
def late_helper(x):  # defined after the kernel that calls it: resolved at its first launch
    return relu_ish(x)


@tt.jit
def relu_ish(x):
    if True:  # a constexpr `if` around a return
        return tl.where(x > 0, x, 0.0)


def test_calls_inline_helpers_with_tuple_returns_and_late_definitions():
    x = np.linspace(-4, 4, 64, dtype=np.float32)
    y, stats = np.zeros_like(x), np.zeros(2, np.float32)
    calls_helpers[(1,)](x, y, stats, BLOCK=64)
    np.testing.assert_allclose(y, np.maximum(x * 2 + 1, 0))
    assert list(stats) == [x.min(), x.max()]
    assert "func.call" not in calls_helpers.compile(x, y, stats, BLOCK=64).asm["tt"]


@tt.jit
def sign_of(v):
    if v > 0:  # runtime: every return becomes a yield of one scf.if
        return 1
    elif v < 0:
        return -1
    return 0


@tt.jit
def early_returns(x_ptr, out_ptr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    tl.store(out_ptr + pid, sign_of(v))


def test_helper_returns_from_runtime_branches():
    x = np.array([3, -2, 0, 7, -9, 0], np.int32)
    out = np.full_like(x, 99)
    early_returns[(len(x),)](x, out)
    assert list(out) == list(np.sign(x))


@tt.jit
def recursive(x):
    return recursive(x)


@tt.jit
def calls_recursive(p):
    tl.store(p, recursive(tl.load(p)))


def test_recursion_is_refused():
    with pytest.raises(tt.CompilationError, match="recursive call of `recursive`"):
        calls_recursive[(1,)](np.zeros(1, np.float32))


@tt.jit
def constexpr_param(x, N: tl.constexpr):
    return x * N


@tt.jit
def passes_runtime_to_constexpr(p, n):
    tl.store(p, constexpr_param(tl.load(p), n))


def test_a_helper_constexpr_parameter_takes_a_runtime_value_as_triton():
    p = np.full(1, 2.0, np.float32)
    passes_runtime_to_constexpr[(1,)](p, 3)
    assert p[0] == 6.0


@tt.jit
def passes_tile_to_constexpr(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, constexpr_param(tl.load(p + offs), offs))


def test_a_helper_constexpr_parameter_takes_a_tile():
    p = np.ones(8, np.float32)
    passes_tile_to_constexpr[(1,)](p, BLOCK=8)
    np.testing.assert_array_equal(p, np.arange(8, dtype=np.float32))


# ---- early return in a kernel ---------------------------------------------------------------


@tt.jit
def masked_rows(x_ptr, y_ptr, n_rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if row >= n_rows:
        return  # early exit: the rest only runs for rows in range
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * BLOCK + offs, tl.load(x_ptr + row * BLOCK + offs) + 1.0)


def test_return_inside_a_runtime_if_exits_early():
    x = np.arange(4 * 16, dtype=np.float32)
    y = np.zeros_like(x)
    masked_rows[(6,)](x, y, 4, BLOCK=16)  # programs 4 and 5 would read and write out of bounds
    np.testing.assert_array_equal(y, x + 1)
    assert "scf.if" in masked_rows.compile(x, y, 4, BLOCK=16).asm["tt"]


# ---- while ----------------------------------------------------------------------------------


@tt.jit
def collatz_steps(x_ptr, out_ptr):
    pid = tl.program_id(0)
    n = tl.load(x_ptr + pid)
    steps = 0
    while n != 1:
        n = tl.where(n % 2 == 0, n // 2, 3 * n + 1)
        steps += 1
    tl.store(out_ptr + pid, steps)


def collatz(n: int) -> int:
    steps = 0
    while n != 1:
        n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
    return steps


@pytest.mark.parametrize("batched", [True, False])
def test_while_runs_per_program_trip_counts(batched):
    x = np.arange(1, 50, dtype=np.int32)
    out = np.zeros_like(x)
    compiled = collatz_steps.compile(x, out)
    simulator.run(compiled.module, (len(x),), [x, out], batched=batched)
    assert list(out) == [collatz(int(v)) for v in x]
    assert "scf.while" in compiled.asm["tt"]


@tt.jit
def halve_until_small(x_ptr, y_ptr, limit, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    total = tl.sum(tl.abs(x))
    while total > limit:
        x = x * 0.5
        total = tl.sum(tl.abs(x))
    tl.store(y_ptr + offs, x)


def test_while_carries_tiles():
    x = np.arange(128, dtype=np.float32)
    y = np.zeros_like(x)
    halve_until_small[(1,)](x, y, 100.0, BLOCK=128)
    expected = x.copy()
    while np.abs(expected).sum() > 100:
        expected *= 0.5
    np.testing.assert_array_equal(y, expected)


@tt.jit
def constexpr_while(p, N: tl.constexpr):
    acc = tl.load(p)
    i = 0
    while i < N:  # a constexpr condition: runs while compiling
        acc = acc * 2
        i += 1
    tl.store(p, acc)


def test_constexpr_while_unrolls():
    p = np.ones(1, np.float32)
    compiled = constexpr_while[(1,)](p, N=5)
    assert p[0] == 32 and "scf.while" not in compiled.asm["tt"]


@tt.jit
def continue_in_while(p, n):
    i = 0
    while i < n:
        i += 1
        continue


def test_break_and_continue_are_refused():
    with pytest.raises(tt.CompilationError, match="`continue` is not supported"):
        continue_in_while[(1,)](np.zeros(1, np.float32), 3)


# ---- ternaries --------------------------------------------------------------------------------


@tt.jit
def guarded_load(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid) if pid < n else -1.0  # only the taken arm loads
    tl.store(out_ptr + pid, v)


def test_runtime_ternary_branches():
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(5, np.float32)
    guarded_load[(5,)](x, out, 3)  # programs 3 and 4 would load out of bounds if both arms ran
    assert list(out) == [0, 1, 2, -1, -1]
    assert "scf.if" in guarded_load.compile(x, out, 3).asm["tt"]


# ---- tt.range / static_range ------------------------------------------------------------------


@tt.jit
def ranged_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.range(0, n, BLOCK, num_stages=3, loop_unroll_factor=2):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n)
    for j in tl.static_range(0, 4, step=2):
        acc += j
    tl.store(out_ptr, tl.sum(acc))


def test_tl_range_hints_and_static_range_step():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(1, np.float32)
    compiled = ranged_sum[(1,)](x, out, 100, BLOCK=32)
    assert out[0] == x.sum() + 32 * (0 + 2)
    text = compiled.asm["tt"]
    assert "tt.num_stages = 3 : i32" in text and "tt.loop_unroll_factor = 2 : i32" in text


@tt.jit
def small_tl_range(p):
    acc = tl.load(p)
    for _ in tl.range(3):  # constexpr bounds: still an scf.for, as in Triton
        acc += 1.0
    tl.store(p, acc)


def test_tl_range_is_never_unrolled():
    p = np.zeros(1, np.float32)
    assert "scf.for" in small_tl_range[(1,)](p).asm["tt"]
    assert p[0] == 3


# ---- PTX and GPU ------------------------------------------------------------------------------

KERNELS = [
    (collatz_steps, lambda: (np.arange(1, 50, dtype=np.int32), np.zeros(49, np.int32)), {}, (49,)),
    (halve_until_small, lambda: (np.arange(128, dtype=np.float32), np.zeros(128, np.float32), 100.0), {"BLOCK": 128}, (1,)),
    (guarded_load, lambda: (np.arange(3, dtype=np.float32), np.zeros(5, np.float32), 3), {}, (5,)),
    (masked_rows, lambda: (np.arange(64, dtype=np.float32), np.zeros(64, np.float32), 4), {"BLOCK": 16}, (6,)),
    (early_returns, lambda: (np.array([3, -2, 0, 7], np.int32), np.zeros(4, np.int32)), {}, (4,)),
    (ranged_sum, lambda: (np.arange(100, dtype=np.float32), np.zeros(1, np.float32), 100), {"BLOCK": 32}, (1,)),
]


@needs_ptxas
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_control_flow_ptx(kernel, make, constexprs, grid):
    ptx = kernel.compile(*make(), **constexprs).asm["ptx"]
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_control_flow_gpu_matches_simulator(kernel, make, constexprs, grid):
    sim_args, gpu_args = make(), make()
    run_sim(kernel, grid, *sim_args, **constexprs)
    kernel.compile(*gpu_args, **constexprs).launch(grid, list(gpu_args))
    for s, g in zip(sim_args, gpu_args):
        if isinstance(s, np.ndarray):
            np.testing.assert_array_equal(s, g)
