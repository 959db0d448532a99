"""Programs that wait on each other: every atomic spin-lock pattern of Triton's tests and tutorials.

On the simulator such kernels run cooperatively (runtime/simulator/schedule.py): a program spinning in a loop
that reads memory gives way to the others, so locks are released and counters reached, as on the GPU. Each
pattern's result does not depend on the order the programs take the lock in, so the simulator, NumPy and the
GPU agree exactly. The simulator tests run through `run_sim` (the simulator on any machine: a deadlock must
not hang a GPU host's run); the `gpu` test compares the GPU with it.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as triton
import tinyton.language as tl
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.runtime import simulator
from tinyton.runtime.simulator import schedule


@triton.jit
def serialized_add(data, Lock, SEM: tl.constexpr):
    """Triton's test_atomic_cas: only one program at a time in the critical section."""
    ptrs = data + tl.arange(0, 128)
    while tl.atomic_cas(Lock, 0, 1, SEM) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def change_value(Lock):
    tl.atomic_cas(Lock, 0, 1)


@triton.jit
def layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                            GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """Triton's layer-norm backward tutorial, stage 1: rows of one group accumulate dw/db under a lock."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def arrive_and_wait(counter, out, N: tl.constexpr):
    """A grid-wide barrier made of a counter: every program adds 1, then polls until all arrived."""
    pid = tl.program_id(0)
    tl.atomic_add(counter, 1)
    while tl.atomic_add(counter, 0) < N:
        pass
    tl.store(out + pid, tl.load(counter))


@triton.jit
def in_reverse_order(turn, out, N: tl.constexpr):
    """Program i waits (volatile loads of a flag) until program i + 1 is done: the last program goes first."""
    pid = tl.program_id(0)
    while tl.load(turn, volatile=True) != N - 1 - pid:
        pass
    tl.store(out + pid, tl.atomic_add(turn, 1))


@triton.jit
def ticket_lock(tickets, serving, data, BLOCK: tl.constexpr):
    """A ticket lock: draw a ticket with atomic_add, spin until it is served, then serve the next."""
    my = tl.atomic_add(tickets, 1)
    while tl.atomic_add(serving, 0) != my:
        pass
    ptrs = data + tl.arange(0, BLOCK)
    tl.store(ptrs, tl.load(ptrs) * 2 + my)
    tl.atomic_add(serving, 1)


@triton.jit
def deadlock(lock, out):
    """Takes the lock and never releases it: the second program waits forever."""
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(out + tl.program_id(0), 1)


@triton.jit
def guarded_out_of_bounds(lock, out):
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(out + tl.program_id(0) * 100, 1)
    tl.atomic_xchg(lock, 0)


def _layer_norm_case(m: int = 64, n: int = 200, group: int = 8):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, n)).astype(np.float32)
    dy = rng.standard_normal((m, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    mean = x.mean(1).astype(np.float32)
    rstd = (1 / np.sqrt(x.var(1) + 1e-5)).astype(np.float32)
    args = [np.zeros_like(x), dy, np.zeros((group, n), np.float32), np.zeros((group, n), np.float32), x, w, mean,
            rstd, np.zeros(2 * group, np.int32), n, n]
    xhat = (x - mean[:, None]) * rstd[:, None]
    wdy = w * dy
    dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdims=True) + wdy.mean(1, keepdims=True))) * rstd[:, None]
    groups = np.arange(m) % group
    dw = np.stack([(dy * xhat)[groups == g].sum(0) for g in range(group)])
    db = np.stack([dy[groups == g].sum(0) for g in range(group)])
    return args, (dx, dw, db), {"GROUP_SIZE_M": group, "BLOCK_SIZE_N": 256}


@pytest.mark.parametrize("sem", [None, "acquire", "release", "acq_rel", "relaxed"])
def test_atomic_cas_lock_serialises_2000_programs_in_seconds(sem):
    lock = np.zeros(1, np.int32)
    run_sim(change_value, (1,), lock)
    assert lock[0] == 1
    lock, data = np.zeros(1, np.int32), np.zeros(128, np.float32)
    run_sim(serialized_add, (2000,), data, lock, SEM=sem)  # compiles; the launch below is timed
    lock[:], data[:] = 0, 0
    start = time.perf_counter()
    run_sim(serialized_add, (2000,), data, lock, SEM=sem)
    assert time.perf_counter() - start < 20
    np.testing.assert_array_equal(data, np.full(128, 2000.0, np.float32))
    assert lock[0] == 0


def test_layer_norm_backward_lock_and_accumulate():
    args, (dx, dw, db), meta = _layer_norm_case()
    run_sim(layer_norm_bwd_dx_fused, (64,), *args, **meta)
    np.testing.assert_allclose(args[0], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(args[2], dw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(args[3], db, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(args[8], [0] * 8 + [1] * 8)  # locks released, every group counted


def test_counter_polled_in_a_while_loop_is_a_barrier():
    counter, out = np.zeros(1, np.int32), np.zeros(64, np.int32)
    run_sim(arrive_and_wait, (64,), counter, out, N=64)
    np.testing.assert_array_equal(out, np.full(64, 64))


def test_a_program_waits_for_a_later_one():
    turn, out = np.zeros(1, np.int32), np.full(16, -1, np.int32)
    run_sim(in_reverse_order, (16,), turn, out, N=16)
    np.testing.assert_array_equal(out, np.arange(16)[::-1])


def test_ticket_lock():
    tickets, serving, data = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(16, np.int32)
    run_sim(ticket_lock, (10,), tickets, serving, data, BLOCK=16)
    expected = 0
    for t in range(10):
        expected = expected * 2 + t
    np.testing.assert_array_equal(data, np.full(16, expected))
    assert tickets[0] == serving[0] == 10


def test_programs_that_wait_forever_raise_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(schedule, "STALL_ROUNDS", 20)
    with pytest.raises(simulator.SimulatorError, match="wait on each other forever: programs 1"):
        run_sim(deadlock, (2,), np.zeros(1, np.int32), np.zeros(2, np.int32))


def test_an_error_in_one_program_stops_the_launch():
    with pytest.raises(simulator.OutOfBoundsError, match="program \\(1, 0, 0\\)"):
        run_sim(guarded_out_of_bounds, (4,), np.zeros(1, np.int32), np.zeros(8, np.int32))


@triton.jit
def search(table, out, N: tl.constexpr):
    """A while loop that reads memory the kernel never writes: no program waits for another."""
    i = 0
    while tl.load(table + i) < tl.program_id(0):
        i += 1
    tl.store(out + tl.program_id(0), i)


@triton.jit
def handoff(flag, signal, out):
    """Program 0 waits for `flag`, which program 1 sets through `signal`: the same memory, another argument."""
    if tl.program_id(0) == 0:
        while tl.load(flag, volatile=True) == 0:
            pass
        tl.store(out, tl.load(out + 1) + 1)
    else:
        tl.store(out + 1, 41)
        tl.store(signal, 1)


def _spin_loops(kernel, args, meta, share_memory=lambda a, b: False):
    compiled = kernel.compile(*args, **meta)
    return schedule.spin_loops(simulator.driver.find_kernel(compiled.module, None), share_memory)


def test_only_loops_that_read_memory_the_kernel_writes_give_way():
    assert len(_spin_loops(serialized_add, (np.zeros(128, np.float32), np.zeros(1, np.int32)), {"SEM": None})) == 1
    args = (np.arange(8, dtype=np.int32), np.zeros(8, np.int32))
    assert not _spin_loops(search, args, {"N": 8})  # reads `table`, writes `out`: batched as before
    run_sim(search, (8,), *args, N=8)
    np.testing.assert_array_equal(args[1], np.arange(8))
    flag_args = (np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(2, np.int32))
    assert not _spin_loops(handoff, flag_args, {})  # `flag` is never written...
    assert _spin_loops(handoff, flag_args, {}, lambda a, b: {a, b} == {0, 1})  # ...unless `signal` is it


def test_a_flag_set_through_an_aliasing_argument_is_waited_for():
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    run_sim(handoff, (2,), flag, flag, out)
    np.testing.assert_array_equal(out, [42, 41])


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["serialized_add", "layer_norm", "barrier", "reverse", "ticket"])
def test_spin_locks_gpu_matches_simulator(case):
    def make():
        if case == "serialized_add":
            return serialized_add, (500,), [np.zeros(128, np.float32), np.zeros(1, np.int32)], {"SEM": "acq_rel"}
        if case == "layer_norm":
            args, _, meta = _layer_norm_case()
            return layer_norm_bwd_dx_fused, (64,), args, meta
        if case == "barrier":
            return arrive_and_wait, (64,), [np.zeros(1, np.int32), np.zeros(64, np.int32)], {"N": 64}
        if case == "reverse":
            return in_reverse_order, (16,), [np.zeros(1, np.int32), np.full(16, -1, np.int32)], {"N": 16}
        return ticket_lock, (10,), [np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(16, np.int32)], {"BLOCK": 16}

    kernel, grid, sim_args, meta = make()
    _, _, gpu_args, _ = make()
    run_sim(kernel, grid, *sim_args, **meta)
    kernel.compile(*gpu_args, **meta).launch(grid, list(gpu_args))
    for s, g in zip(sim_args, gpu_args):
        if isinstance(s, np.ndarray):
            np.testing.assert_allclose(s, g, rtol=1e-4, atol=1e-4)


def test_a_volatile_load_stays_in_its_loop_and_is_ld_volatile_on_the_gpu():
    compiled = in_reverse_order.compile(np.zeros(1, np.int32), np.zeros(16, np.int32), N=16)
    assert "scf.while" in compiled.asm["tt"] and "volatile" in compiled.asm["tt"]
    assert "ld.volatile.global.b32" in compiled.asm["ptx"]


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_the_spin_lock_kernels_compile_to_ptx_that_ptxas_takes():
    args, _, meta = _layer_norm_case()
    kernels = [
        (serialized_add, (np.zeros(128, np.float32), np.zeros(1, np.int32)), {"SEM": "acquire"}),
        (layer_norm_bwd_dx_fused, tuple(args), meta),
        (arrive_and_wait, (np.zeros(1, np.int32), np.zeros(64, np.int32)), {"N": 64}),
        (in_reverse_order, (np.zeros(1, np.int32), np.zeros(16, np.int32)), {"N": 16}),
        (ticket_lock, (np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(16, np.int32)), {"BLOCK": 16}),
    ]
    for kernel, kernel_args, kernel_meta in kernels:
        assert kernel.compile(*kernel_args, **kernel_meta).n_regs > 0
