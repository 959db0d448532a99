"""`tl.atomic_*` and `tl.debug_barrier` with Triton's spelling: the simulator against NumPy (sequential
semantics: programs in order, lanes in row-major order), PTX that ptxas takes on both toolchains, and the
GPU against the simulator (final memory; old values where the order of the atomics does not matter)."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from toolchains import needs_ptxas




@tt.jit
def histogram(x_ptr, hist_ptr, old_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m)
    old = tl.atomic_add(hist_ptr + x, 1, mask=m, sem="relaxed")
    tl.store(old_ptr + offs, old, mask=m)


@tt.jit
def rmw_all(ptr, val_ptr, old_ptr, KIND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    val = tl.load(val_ptr + offs)
    if KIND == "add":
        old = tl.atomic_add(ptr + offs, val)
    elif KIND == "max":
        old = tl.atomic_max(ptr + offs, val, sem="acquire", scope="cta")
    elif KIND == "min":
        old = tl.atomic_min(ptr + offs, val, sem="release", scope="sys")
    elif KIND == "and":
        old = tl.atomic_and(ptr + offs, val)
    elif KIND == "or":
        old = tl.atomic_or(ptr + offs, val)
    elif KIND == "xor":
        old = tl.atomic_xor(ptr + offs, val)
    else:
        old = tl.atomic_xchg(ptr + offs, val)
    tl.store(old_ptr + offs, old)


@tt.jit
def ticket(counter_ptr, out_ptr):
    """A scalar atomic runs once per program: each program draws a distinct ticket."""
    t = tl.atomic_add(counter_ptr, 1)
    tl.store(out_ptr + tl.program_id(0), t)


@tt.jit
def cas_claim(slots_ptr, out_ptr, BLOCK: tl.constexpr):
    """Each program claims the slots still 0 by writing its id + 1; the first program wins each slot."""
    offs = tl.arange(0, BLOCK)
    pid = tl.program_id(0)
    old = tl.atomic_cas(slots_ptr + offs, 0, pid + 1)
    tl.store(out_ptr + pid * BLOCK + offs, old)


@tt.jit
def float_cas(ptr, out_ptr):
    old = tl.atomic_cas(ptr, 1.5, 2.5)
    tl.store(out_ptr, old)


@tt.jit
def masked_max(ptr, val_ptr, old_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    old = tl.atomic_max(ptr + offs, tl.load(val_ptr + offs), mask=m)
    tl.store(old_ptr + offs, old)


@tt.jit
def half_add(ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(ptr + offs % 4, tl.full((BLOCK,), 0.5, tl.float16))


@tt.jit
def barrier_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.debug_barrier()
    tl.store(y_ptr + offs, x + 1)


@pytest.mark.parametrize("batched", [False, True])
def test_histogram_counts_and_old_values_are_sequential(batched):
    x = np.random.default_rng(0).integers(0, 8, 300).astype(np.int32)
    hist, old = np.zeros(8, np.int32), np.full(300, -1, np.int32)
    run_sim(histogram, (10,), x, hist, old, 300, BLOCK=32, batched=batched)
    np.testing.assert_array_equal(hist, np.bincount(x, minlength=8))
    expected = np.array([np.count_nonzero(x[:i] == x[i]) for i in range(300)])  # lanes in order
    np.testing.assert_array_equal(old, expected)


FLOATS = np.array([1.0, -2.0, 0.0, -0.0, 3.5, -7.0, np.inf, -np.inf], np.float32)
FLOAT_VALUES = np.array([-1.0, -3.0, -0.0, 0.0, 3.5, 2.0, 1.0, 5.0], np.float32)


@pytest.mark.parametrize("kind", ["add", "max", "min", "xchg"])
def test_float_rmw(kind):
    mem, val, old = FLOATS.copy(), FLOAT_VALUES.copy(), np.zeros(8, np.float32)
    run_sim(rmw_all, (1,), mem, val, old, KIND=kind, BLOCK=8)
    expected = {"add": FLOATS + val, "max": np.maximum(FLOATS, val), "min": np.minimum(FLOATS, val), "xchg": val}[kind]
    np.testing.assert_array_equal(old, FLOATS)
    np.testing.assert_array_equal(mem, expected)
    if kind == "max":  # the GPU's integer trick: max(+0, -0) is +0 either way round
        assert not np.signbit(mem[2]) and not np.signbit(mem[3])


@pytest.mark.parametrize("kind", ["add", "max", "min", "and", "or", "xor", "xchg"])
def test_int_rmw(kind):
    rng = np.random.default_rng(1)
    start = rng.integers(-1000, 1000, 32).astype(np.int32)
    val = rng.integers(-1000, 1000, 32).astype(np.int32)
    mem, old = start.copy(), np.zeros(32, np.int32)
    run_sim(rmw_all, (1,), mem, val, old, KIND=kind, BLOCK=32)
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor, "xchg": lambda a, b: b}[kind]
    np.testing.assert_array_equal(old, start)
    np.testing.assert_array_equal(mem, fn(start, val))


@pytest.mark.parametrize("batched", [False, True])
def test_scalar_atomic_runs_once_per_program(batched):
    counter, out = np.zeros(1, np.int32), np.full(40, -1, np.int32)
    run_sim(ticket, (40,), counter, out, batched=batched)
    assert counter[0] == 40
    np.testing.assert_array_equal(out, np.arange(40))  # programs in order


def test_cas_first_program_wins():
    slots, out = np.zeros(16, np.int32), np.zeros(3 * 16, np.int32)
    slots[5] = 9
    run_sim(cas_claim, (3,), slots, out, BLOCK=16)
    expected = np.ones(16, np.int32)
    expected[5] = 9
    np.testing.assert_array_equal(slots, expected)
    np.testing.assert_array_equal(out[:16], np.where(np.arange(16) == 5, 9, 0))
    np.testing.assert_array_equal(out[16:], np.tile(expected, 2))


def test_float_cas_compares_bits():
    mem, out = np.array([1.5], np.float32), np.zeros(1, np.float32)
    run_sim(float_cas, (1,), mem, out)
    assert (mem[0], out[0]) == (2.5, 1.5)


def test_masked_lanes_do_nothing_and_give_zero():
    mem = np.arange(8, dtype=np.float32)
    old = np.full(8, -1.0, np.float32)
    run_sim(masked_max, (1,), mem, np.full(8, 100.0, np.float32), old, 3, BLOCK=8)
    np.testing.assert_array_equal(mem, [100, 100, 100, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(old, [0, 1, 2, 0, 0, 0, 0, 0])


def test_half_add_and_barrier():
    h = np.zeros(4, np.float16)
    run_sim(half_add, (1,), h, BLOCK=16)
    np.testing.assert_array_equal(h, np.full(4, 2.0, np.float16))
    y = np.zeros(16, np.float32)
    run_sim(barrier_kernel, (1,), np.arange(16, dtype=np.float32), y, BLOCK=16)
    np.testing.assert_array_equal(y, np.arange(16) + 1)
    assert "tt.debug_barrier" in barrier_kernel.compile(np.zeros(16, np.float32), y, BLOCK=16).asm["tt"]


@tt.jit
def bad_sem(ptr):
    tl.atomic_add(ptr, 1, sem="seq_cst")


@tt.jit
def bitwise_on_floats(ptr):
    tl.atomic_or(ptr, 1.0)


@tt.jit
def half_max(ptr):
    tl.atomic_max(ptr, 1.0)


@pytest.mark.parametrize(
    "kernel, arg, message",
    [
        (bad_sem, np.zeros(1, np.int32), "sem must be one of"),
        (bitwise_on_floats, np.zeros(1, np.float32), "atomic or needs integers"),
        (half_max, np.zeros(1, np.float16), "atomic max on f16 is not supported"),
    ],
)
def test_refused(kernel, arg, message):
    with pytest.raises(CompilationError, match=message):
        kernel.compile(arg)


# ---- PTX and GPU ------------------------------------------------------------------------------

KERNELS = [
    (histogram, lambda: (np.arange(300, dtype=np.int32) % 8, np.zeros(8, np.int32), np.zeros(300, np.int32), 300), {"BLOCK": 32}, (10,)),
    *(
        (rmw_all, lambda: (np.arange(-16, 16, dtype=np.int32), np.arange(32, dtype=np.int32)[::-1].copy(), np.zeros(32, np.int32)), {"KIND": k, "BLOCK": 32}, (4,))
        for k in ("add", "max", "min", "and", "or", "xor", "xchg")
    ),
    *(
        (rmw_all, lambda: (FLOATS.copy(), FLOAT_VALUES.copy(), np.zeros(8, np.float32)), {"KIND": k, "BLOCK": 8}, (3,))
        for k in ("max", "min")
    ),
    (ticket, lambda: (np.zeros(1, np.int32), np.zeros(64, np.int32)), {}, (64,)),
    (cas_claim, lambda: (np.zeros(16, np.int32), np.zeros(48, np.int32)), {"BLOCK": 16}, (3,)),
    (float_cas, lambda: (np.array([1.5], np.float32), np.zeros(1, np.float32)), {}, (1,)),
    (masked_max, lambda: (np.arange(8, dtype=np.float32), np.full(8, 100.0, np.float32), np.zeros(8, np.float32), 3), {"BLOCK": 8}, (1,)),
    (half_add, lambda: (np.zeros(4, np.float16),), {"BLOCK": 16}, (2,)),
    (barrier_kernel, lambda: (np.arange(16, dtype=np.float32), np.zeros(16, np.float32)), {"BLOCK": 16}, (1,)),
]
IDS = [f"{k[0].__name__}-{k[2].get('KIND', '')}{i}" for i, k in enumerate(KERNELS)]


@needs_ptxas
@pytest.mark.parametrize("toolchain", ["mlir", "llvmlite"])
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=IDS)
def test_atomics_ptx(kernel, make, constexprs, grid, toolchain, monkeypatch):
    monkeypatch.setenv("TINYTON_TOOLCHAIN", toolchain)
    ptx = kernel.compile(*make(), **constexprs).asm["ptx"]
    assert "atom." in ptx or kernel is barrier_kernel
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=IDS)
def test_atomics_gpu_matches_simulator(kernel, make, constexprs, grid):
    sim_args, gpu_args = make(), make()
    run_sim(kernel, grid, *sim_args, **constexprs)
    kernel.compile(*gpu_args, **constexprs).launch(grid, list(gpu_args))
    if kernel is ticket:  # programs draw the tickets in some order
        assert gpu_args[0][0] == 64 and sorted(gpu_args[1]) == list(range(64))
        return
    if kernel is histogram:  # lanes of one bin count in some order
        np.testing.assert_array_equal(sim_args[1], gpu_args[1])
        return
    if kernel is cas_claim:  # some program wins each slot; the others see its id
        assert set(gpu_args[0]) <= {1, 2, 3}
        return
    if kernel is rmw_all and constexprs["KIND"] in ("xchg",):  # the last program to swap is unordered
        return
    for s, g in zip(sim_args, gpu_args):
        if isinstance(s, np.ndarray) and kernel is rmw_all and s is sim_args[2] and grid[0] > 1:
            continue  # old values depend on which program came first
        if isinstance(s, np.ndarray):
            np.testing.assert_array_equal(s, g)


def test_atomic_targets_count_as_written_parameters():
    """Host arrays behind atomics are copied back after a GPU launch (found on the H100: histograms stayed 0)."""
    compiled = histogram.compile(np.zeros(8, np.int32), np.zeros(8, np.int32), np.zeros(8, np.int32), 8, BLOCK=8)
    assert compiled.written_params == frozenset({1, 2})
