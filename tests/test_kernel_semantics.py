"""Kernel semantics that used to give silently wrong results (issues 8 and 11), each on the simulator and,
marked `gpu`, on the GPU against the simulator (the same compiled variant run by both backends).

Sections: `%` and `//` (Triton's truncation; NumPy's floor in array programs), integer division by zero,
globals read at compile time, load/store shapes, strided NumPy views, `abs` of bools, runtime ternaries,
grid limits. docs/reliability.md says what each one was and what it does now.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tinyton as tt
from tinyton.errors import CompilationError
from tinyton.frontend.arguments import simulator_argument
from tinyton.runtime.simulator import OutOfBoundsError

gpu = pytest.mark.gpu


def on_both(kernel, grid, args, **constexprs):
    """Run one compiled variant of `kernel` on the simulator and on the GPU with copies of `args` (runtime
    arguments, in order); the two lists of arguments after the runs."""
    compiled = kernel.compile(*args, **constexprs)
    sim, dev = copy.deepcopy(list(args)), copy.deepcopy(list(args))
    compiled.simulate(grid, [simulator_argument(a) for a in sim])
    compiled.launch(grid, dev)
    return sim, dev


def assert_same(sim, dev):
    for s, d in zip(sim, dev):
        if isinstance(s, np.ndarray):
            np.testing.assert_array_equal(s, d)


# ---- % and // : Triton's in kernels, NumPy's in array programs --------------------------------------


@tt.jit
def div_mod(a_ptr, b_ptr, q_ptr, r_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    a, b = tt.load(a_ptr + offs), tt.load(b_ptr + offs)
    tt.store(q_ptr + offs, a // b)
    tt.store(r_ptr + offs, a % b)


@tt.jit
def float_mod(a_ptr, b_ptr, r_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    tt.store(r_ptr + offs, tt.load(a_ptr + offs) % tt.load(b_ptr + offs))


@tt.jit
def scalar_div_mod(out_ptr, a, b, A: tt.constexpr, B: tt.constexpr):
    tt.store(out_ptr + 0, a // b)  # runtime scalars: truncate
    tt.store(out_ptr + 1, a % b)
    tt.store(out_ptr + 2, A // B)  # compile-time values: Python's floor, as Triton's constexprs
    tt.store(out_ptr + 3, A % B)
    tt.store(out_ptr + 4, a // 2)  # a weak int divisor of a runtime value: still truncates


def _int_operands():
    values = [-7, -6, -1, 0, 1, 6, 7, -(2**31), 2**31 - 1]
    divisors = [-3, -2, -1, 1, 2, 3, 5, 0]
    a = np.array([x for x in values for _ in divisors], np.int32)
    b = np.array([d for _ in values for d in divisors], np.int32)
    pad = 128 - len(a)
    return np.concatenate([a, np.arange(pad, dtype=np.int32) - 40]), np.concatenate([b, np.full(pad, -7, np.int32)])


def c_division(a, b):
    """C's int32 / and % with tinyton's zero-divisor values (-1 and the dividend); INT_MIN / -1 wraps."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.where(b64 == 0, -1, np.trunc(a64 / safe).astype(np.int64))
    q = np.where((a64 == -(2**31)) & (b64 == -1), -(2**31), q)
    r = np.where(b64 == 0, a64, a64 - np.trunc(a64 / safe).astype(np.int64) * safe)
    return q.astype(np.int32), r.astype(np.int32)


def test_kernel_division_truncates_and_remainder_takes_the_dividends_sign():
    a, b = _int_operands()
    q, r = np.zeros_like(a), np.zeros_like(a)
    div_mod[(1,)](a, b, q, r, BLOCK=128)
    expected_q, expected_r = c_division(a, b)
    np.testing.assert_array_equal(q, expected_q)
    np.testing.assert_array_equal(r, expected_r)
    assert q[list(zip(a, b)).index((-7, 2))] == -3 and r[list(zip(a, b)).index((-7, 2))] == -1


def test_kernel_float_remainder_is_fmod():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(64) * 10).astype(np.float32)
    b = (rng.standard_normal(64) * 3).astype(np.float32)
    b[0] = 0.0
    r = np.zeros(64, np.float32)
    float_mod[(1,)](a, b, r, BLOCK=64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(r, np.fmod(a, b))
    assert np.isnan(r[0])


def test_compile_time_values_fold_like_triton_constexprs():
    out = np.zeros(5, np.int32)
    scalar_div_mod[(1,)](out, -7, 2, A=-7, B=2)
    assert out.tolist() == [-3, -1, -4, 1, -3]


def test_integer_division_by_zero_is_defined_in_kernels():
    a = np.array([5, -5, 0, 7] * 4, np.int32)
    b = np.zeros(16, np.int32)
    q, r = np.zeros(16, np.int32), np.zeros(16, np.int32)
    div_mod[(1,)](a, b, q, r, BLOCK=16)  # no error: the values the GPU lowering guarantees
    assert (q == -1).all() and (r == a).all()


@pytest.mark.parametrize("fuse", [True, False])
def test_array_programs_keep_numpys_floor_semantics(fuse):
    @tt.jit
    def floor_ops(a, b):
        return a // b, a % b, (a * 1.0) % (b * 1.0)

    a, b = _int_operands()
    b = np.where(b == 0, 3, b).astype(np.int32)
    q, r, f = floor_ops.compile(a, b, fuse=fuse)(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)
        assert f.dtype == np.float64  # NumPy's int32 * 1.0
        np.testing.assert_allclose(f, (a * 1.0) % (b * 1.0), rtol=1e-12)
    assert q[list(zip(a, b)).index((-7, 2))] == -4 and r[list(zip(a, b)).index((-7, 2))] == 1


@pytest.mark.parametrize("fuse", [True, False])
def test_array_program_integer_division_by_zero_gives_numpys_zero(fuse):
    @tt.jit
    def floor_ops(a, b):
        return a // b, a % b

    a = np.array([5, -5, 0, 7, -8, 9], np.int32)
    b = np.array([0, 0, 0, 2, 3, -4], np.int32)
    q, r = floor_ops.compile(a, b, fuse=fuse)(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)
    assert (q[:3] == 0).all() and (r[:3] == 0).all()


@gpu
def test_division_on_the_gpu():
    a, b = _int_operands()
    sim, dev = on_both(div_mod, (1,), [a, b, np.zeros_like(a), np.zeros_like(a)], BLOCK=128)
    assert_same(sim, dev)
    np.testing.assert_array_equal(dev[2], c_division(a, b)[0])
    f = (np.random.default_rng(0).standard_normal((2, 64)) * 10).astype(np.float32)
    assert_same(*on_both(float_mod, (1,), [f[0], f[1], np.zeros(64, np.float32)], BLOCK=64))
    assert_same(*on_both(scalar_div_mod, (1,), [np.zeros(5, np.int32), -7, 2], A=-7, B=2))


@gpu
@pytest.mark.parametrize("fuse", [True, False])
def test_array_program_division_on_the_gpu(fuse):
    @tt.jit
    def floor_ops(a, b):
        return a // b, a % b

    a, b = _int_operands()
    q, r = floor_ops.compile(a, b, fuse=fuse)(a, b)  # on the GPU when there is one
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)


# ---- abs of bool tiles ---------------------------------------------------------------------------


@tt.jit
def abs_kernel(x_ptr, o_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    tt.store(o_ptr + offs, tt.abs(tt.load(x_ptr + offs)))


def _bools():
    return np.arange(64) % 3 == 0


def test_abs_of_bool_is_identity_on_the_simulator():
    x, o = _bools(), np.zeros(64, bool)
    abs_kernel[(1,)](x, o, BLOCK=64)
    np.testing.assert_array_equal(o, x)


def test_abs_of_bool_lowers_to_ptx_that_ptxas_takes():
    from test_lowering import needs_ptxas, ptxas

    if needs_ptxas.args[0]:
        pytest.skip("ptxas not found")
    ptxas(abs_kernel.compile(_bools(), np.zeros(64, bool), BLOCK=64).asm["ptx"])


def test_abs_of_a_bool_array_program():
    @tt.jit
    def absolute(x):
        return abs(x)

    np.testing.assert_array_equal(absolute(_bools()), np.abs(_bools()))


@gpu
def test_abs_of_bool_on_the_gpu():
    assert_same(*on_both(abs_kernel, (1,), [_bools(), np.zeros(64, bool)], BLOCK=64))


# ---- grid limits -------------------------------------------------------------------------------


@tt.jit
def nothing(x_ptr):
    pass


@pytest.mark.parametrize("grid", [(2**31,), (1, 65536), (1, 1, 65536)])
def test_grid_beyond_cuda_limits_is_refused_before_launching(grid):
    with pytest.raises(ValueError, match="more than CUDA allows"):
        nothing[grid](np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="more than CUDA allows"):
        nothing[lambda meta: grid](np.zeros(1, np.float32))


def test_simulator_refuses_grids_beyond_cuda_limits_too():
    from tinyton.runtime.simulator import SimulatorError, run

    module = nothing.compile(np.zeros(1, np.float32)).module
    with pytest.raises(SimulatorError, match="exceeds CUDA's limits"):
        run(module, (1, 65536), [np.zeros(1, np.float32)])


# ---- load/store shapes follow the pointer ------------------------------------------------------------


@tt.jit
def store_tile_through_scalar_pointer(p):
    tt.store(p, tt.arange(0, 16))


@tt.jit
def store_2d_through_1d_pointers(p):
    offs = tt.arange(0, 16)
    tt.store(p + offs, offs[:, None] + offs[None, :])


@tt.jit
def load_with_2d_mask(p, o):
    offs = tt.arange(0, 16)
    x = tt.load(p + offs, mask=offs[:, None] < offs[None, :])
    tt.store(o + offs, x)


@tt.jit
def store_with_2d_mask(p):
    offs = tt.arange(0, 16)
    tt.store(p + offs, 1, mask=offs[:, None] < 4)


@pytest.mark.parametrize(
    "kernel, args, message",
    [
        (store_tile_through_scalar_pointer, 1, "the value has shape [16] but the pointer is a scalar pointer"),
        (store_2d_through_1d_pointers, 1, "the value has shape [16, 16] but the pointer is a tile of pointers of shape [16]"),
        (load_with_2d_mask, 2, "the mask has shape [16, 16] but the pointer is a tile of pointers of shape [16]"),
        (store_with_2d_mask, 1, "the mask has shape [16, 1]"),
    ],
)
def test_value_and_mask_must_broadcast_to_the_pointer(kernel, args, message):
    arrays = [np.zeros(256, np.int32) for _ in range(args)]
    with pytest.raises(CompilationError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
        kernel[(1,)](*arrays)
    assert "test_kernel_semantics.py:" in str(e.value) and "tt.store" in str(e.value) or "tt.load" in str(e.value)


@tt.jit
def broadcast_up(p, o):
    rows = tt.arange(0, 4)
    cols = tt.arange(0, 8)
    ptrs = p + rows[:, None] * 8 + cols[None, :]
    tt.store(ptrs, rows[:, None], mask=cols[None, :] < 6)  # value [4,1] and mask [1,8] grow to [4,8]
    x = tt.load(ptrs, mask=rows[:, None] < 2, other=-1)
    tt.store(o + rows[:, None] * 8 + cols[None, :], x)


def test_value_and_mask_broadcast_up_to_the_pointer():
    p, o = np.full(32, 9, np.int32), np.zeros(32, np.int32)
    broadcast_up[(1,)](p, o)
    expected = np.where(np.arange(8) < 6, np.arange(4)[:, None], 9)
    np.testing.assert_array_equal(p.reshape(4, 8), expected)
    np.testing.assert_array_equal(o.reshape(4, 8), np.where(np.arange(4)[:, None] < 2, expected, -1))


# ---- runtime ternaries branch ------------------------------------------------------------------------


@tt.jit
def ternary(x_ptr, n, out_ptr):
    v = tt.load(x_ptr + n) if n < 4 else -1.0
    tt.store(out_ptr, v)


@tt.jit
def ternary_tiles(x_ptr, n, out_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    pid = tt.program_id(0)
    v = tt.load(x_ptr + n * BLOCK + offs) if pid == 0 else tt.zeros((BLOCK,), tt.int32) + pid
    tt.store(out_ptr + pid * BLOCK + offs, v)


def test_runtime_ternary_runs_only_the_taken_arm():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(1, np.float32)
    ternary[(1,)](x, 2, out)
    assert out[0] == 2.0
    ternary[(1,)](x, 10, out)  # the load of x[10] is in the arm not taken: it must not run
    assert out[0] == -1.0


def test_runtime_ternary_is_an_scf_if():
    text = ternary.compile(np.zeros(4, np.float32), 1, np.zeros(1, np.float32)).asm["tt"]
    assert "scf.if" in text and "tt.select" not in text


def test_runtime_ternary_per_program_on_the_batched_simulator():
    x, out = np.arange(16, dtype=np.int32), np.zeros(64, np.int32)
    ternary_tiles[(4,)](x, 0, out, BLOCK=16)  # programs 1-3 skip the load (x + 0 * 16 is in bounds anyway)
    np.testing.assert_array_equal(out, np.concatenate([x, np.repeat([1, 2, 3], 16)]))


def test_runtime_ternary_out_of_bounds_in_the_taken_arm_still_fails():
    with pytest.raises(OutOfBoundsError):
        ternary_tiles[(4,)](np.arange(16, dtype=np.int32), 1, np.zeros(64, np.int32), BLOCK=16)


@gpu
def test_runtime_ternary_on_the_gpu():
    x = np.arange(4, dtype=np.float32)
    for n in (2, 10):
        assert_same(*on_both(ternary, (1,), [x, n, np.zeros(1, np.float32)]))
    assert_same(*on_both(ternary_tiles, (4,), [np.arange(16, dtype=np.int32), 0, np.zeros(64, np.int32)], BLOCK=16))


# ---- globals are read when a variant compiles, and a change compiles it again --------------------------

SCALE = 2.0
OFFSET = tt.constexpr(1)


@tt.jit
def scaled(x_ptr, o_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    tt.store(o_ptr + offs, tt.load(x_ptr + offs) * SCALE + OFFSET)


@tt.jit
def uses_later_global(o_ptr):
    tt.store(o_ptr + tt.arange(0, 4), DEFINED_LATER)


@tt.jit
def array_scaled(x):
    return x * SCALE


def _scaled(x):
    o = np.zeros_like(x)
    scaled[(1,)](x, o, BLOCK=16)
    return o


def test_kernel_sees_a_changed_global():
    global SCALE
    x = np.arange(16, dtype=np.float32)
    try:
        np.testing.assert_array_equal(_scaled(x), x * 2 + 1)
        SCALE = 3.0
        np.testing.assert_array_equal(_scaled(x), x * 3 + 1)
        compiled = scaled.compile(x, x, BLOCK=16)
        SCALE = 3.0 * 1  # an equal value, another object: the variant is kept
        assert scaled.compile(x, x, BLOCK=16) is compiled
        OFFSET.value = 5  # a tt.constexpr changed in place
        np.testing.assert_array_equal(_scaled(x), x * 3 + 5)
    finally:
        SCALE, OFFSET.value = 2.0, 1


def test_global_defined_after_the_decorator_resolves_at_first_launch():
    global DEFINED_LATER
    o = np.zeros(4, np.int32)
    DEFINED_LATER = 7
    try:
        uses_later_global[(1,)](o)
        assert (o == 7).all()
    finally:
        del DEFINED_LATER
    with pytest.raises(CompilationError, match="name `DEFINED_LATER` is not defined"):
        uses_later_global[(1,)](o)


def test_closure_variables_are_read_at_compile_time_too():
    factor = 2

    @tt.jit
    def times(o_ptr):
        tt.store(o_ptr + tt.arange(0, 4), tt.full((4,), factor, tt.int32))

    o = np.zeros(4, np.int32)
    times[(1,)](o)
    assert (o == 2).all()
    factor = 5
    times[(1,)](o)
    assert (o == 5).all()


def test_cached_array_program_sees_a_changed_global():
    global SCALE
    x = np.arange(8, dtype=np.float32)
    try:
        np.testing.assert_array_equal(array_scaled(x), x * 2)
        SCALE = 3.0
        np.testing.assert_array_equal(array_scaled(x), x * 3)
    finally:
        SCALE = 2.0


def test_the_launch_check_is_cheap():
    """The fast path's added work, a generated identity check of the globals read, against the classifier
    that every launch already runs (measured numbers in docs/reliability.md)."""
    import timeit

    x = np.arange(16, dtype=np.float32)
    _scaled(x)
    plan = next(iter(scaled._plans.values()))
    check = min(timeit.repeat(plan.reads.fresh, number=20000, repeat=5)) / 20000
    call_shape = next(iter(scaled._call_shapes.values()))
    classify = min(timeit.repeat(lambda: call_shape.classify((x, x), {"BLOCK": 16}), number=20000, repeat=5)) / 20000
    assert plan.reads.fresh() and plan.reads.names == {"tt", "SCALE", "OFFSET"}
    assert check < classify


# ---- NumPy views: a pointer is the memory from the view's first element ---------------------------------


@tt.jit
def double_2d(x_ptr, sx0, sx1, y_ptr, sy0, sy1, R: tt.constexpr, C: tt.constexpr):
    r, c = tt.arange(0, R), tt.arange(0, C)
    v = tt.load(x_ptr + r[:, None] * sx0 + c[None, :] * sx1)
    tt.store(y_ptr + r[:, None] * sy0 + c[None, :] * sy1, v * 2)


@tt.jit
def fill_contiguous(p, N: tt.constexpr):
    tt.store(p + tt.arange(0, N), 7)


def _views():
    """A transposed, column-strided input and a row-strided output, with the arrays they view."""
    base = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    x = base[::2, ::2].T  # 8 x 16, strides (2, 32) elements
    out = np.zeros((16, 16), np.float32)
    y = out[:, ::2].T  # 8 x 16 view of every other column
    return base, x, out, y


def _strides(a):
    return [s // a.itemsize for s in a.strides]


def test_strided_views_follow_their_strides():
    base, x, out, y = _views()
    double_2d[(1,)](x, *_strides(x), y, *_strides(y), R=8, C=16)
    np.testing.assert_array_equal(y, 2 * x)
    assert (out[:, 1::2] == 0).all()  # the other columns are untouched


def test_a_pointer_is_the_memory_from_the_first_element():
    out = np.zeros(16, np.int32)
    fill_contiguous[(1,)](out[::2], N=8)  # Triton's meaning: 8 consecutive elements from out[0]
    assert out.tolist() == [7] * 8 + [0] * 8


def test_read_only_arrays_are_read_but_never_written():
    _, x, _, _ = _views()
    x = x.copy()
    x.flags.writeable = False
    y = np.zeros((8, 16), np.float32)
    double_2d[(1,)](x, *_strides(x), y, *_strides(y), R=8, C=16)  # only read: fine
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(ValueError, match=r"argument 3 \('y_ptr'\) is a read-only array.*x.copy\(\)"):
        double_2d[(1,)](y, *_strides(y), x, *_strides(x), R=8, C=16)


def test_negative_strides_are_refused():
    a = np.arange(16, dtype=np.int32)
    with pytest.raises(ValueError, match="negative strides"):
        fill_contiguous[(1,)](a[::-1], N=8)


@gpu
def test_strided_views_on_the_gpu():
    results = []
    for backend in ("sim", "gpu"):
        base, x, out, y = _views()
        compiled = double_2d.compile(x, *_strides(x), y, *_strides(y), R=8, C=16)
        run = compiled.simulate if backend == "sim" else compiled.launch
        run((1,), [x, *_strides(x), y, *_strides(y)])
        results.append(out.copy())
        np.testing.assert_array_equal(base, np.arange(32 * 16, dtype=np.float32).reshape(32, 16))
    np.testing.assert_array_equal(results[0], results[1])
    out = np.zeros(16, np.int32)
    fill_contiguous.compile(out[::2], N=8).launch((1,), [out[::2]])
    assert out.tolist() == [7] * 8 + [0] * 8


@tt.jit
def bool_max_min(a_ptr, b_ptr, max_ptr, min_ptr, BLOCK: tt.constexpr):
    offsets = tt.arange(0, BLOCK)
    a, b = tt.load(a_ptr + offsets), tt.load(b_ptr + offsets)
    tt.store(max_ptr + offsets, tt.maximum(a, b))
    tt.store(min_ptr + offsets, tt.minimum(a, b))


def test_maximum_and_minimum_of_bools_in_kernels():
    """True is the larger bool (NumPy); the lowering compares i1 unsigned (signed i1 reads True as -1)."""
    a = np.array([True, True, False, False] * 4)
    b = np.array([True, False, True, False] * 4)
    got_max, got_min = np.zeros(16, bool), np.zeros(16, bool)
    bool_max_min[(1,)](a, b, got_max, got_min, BLOCK=16)
    np.testing.assert_array_equal(got_max, a | b)
    np.testing.assert_array_equal(got_min, a & b)
    ptx = bool_max_min.compile(a, b, got_max, got_min, BLOCK=16).asm["llvm-ir"]
    assert "icmp sgt i1" not in ptx and "icmp slt i1" not in ptx
