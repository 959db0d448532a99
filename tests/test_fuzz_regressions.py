"""Focused regression tests of the mismatches the differential fuzzer (tests/test_fuzz.py) found, each run
fused and unfused against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fuzz.generate import Case
from fuzz.reference import Ref
from fuzz.reference_ops import SHIM
from fuzz.run import check

import tinyton as tt
import tinyton.compiler.program as program_module
from tinyton.errors import CompilationError
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.lowering.tt_to_llvm.math import ERF_SERIES

BOTH = pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])


def run(program, *args, fuse: bool):
    return program.compile(*args, fuse=fuse)(*args)


# ---- softmax / logsumexp / log-softmax over long rows that start with -inf ---------------------


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def logsumexp(x):
    m = tt.max(x, axis=-1, keepdims=True)
    return m + tt.log(tt.sum(tt.exp(x - m), axis=-1, keepdims=True))


@tt.jit
def log_softmax(x):
    m = tt.max(x, axis=-1, keepdims=True)
    return x - m - tt.log(tt.sum(tt.exp(x - m), axis=-1, keepdims=True))


def _np_logsumexp(x):
    m = x.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return m + np.log(np.exp(x - m).sum(-1, keepdims=True))


@BOTH
@pytest.mark.parametrize("n", [8192, 20000, 70000])
def test_row_reductions_with_a_neg_inf_prefix(n: int, fuse: bool) -> None:
    """Long rows are reduced in chunks (few of them: in slices) with an online max+sum: a chunk that is all -inf
    computed exp(-inf - -inf) = NaN. An all -inf row is NaN, as in NumPy."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    x[:, :4096] = -np.inf
    x[2] = -np.inf
    lse = _np_logsumexp(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        expected_softmax = np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
    np.testing.assert_allclose(run(logsumexp, x, fuse=fuse), lse, rtol=1e-5)
    np.testing.assert_allclose(run(log_softmax, x, fuse=fuse), x - lse, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(run(softmax, x, fuse=fuse), expected_softmax, rtol=1e-5, atol=1e-9)
    assert np.isnan(run(logsumexp, x, fuse=fuse)[2]).all()


# ---- bool arithmetic and NumPy's result dtypes ---------------------------------------------------


@tt.jit
def bool_ops(a, b, ones):
    return a + b, a * b, a // ones, a % ones, a**2, abs(a)


@BOTH
def test_bool_arithmetic_follows_numpy(fuse: bool) -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    ones = np.ones(4, np.bool_)  # integer division by zero is the kernel language's concern
    add, mul, floordiv, mod, square, absolute = run(bool_ops, a, b, ones, fuse=fuse)
    np.testing.assert_array_equal(add, a | b)  # NumPy's bool + is or (i1 addition would be xor)
    np.testing.assert_array_equal(mul, a & b)
    assert add.dtype == mul.dtype == absolute.dtype == np.bool_
    np.testing.assert_array_equal(floordiv, a.astype(np.int8))
    np.testing.assert_array_equal(mod, np.zeros(4))
    np.testing.assert_array_equal(square, a.astype(np.int64))
    assert floordiv.dtype == mod.dtype == np.int8 and square.dtype == np.int64  # NumPy's: bool ** 2 is int64
    np.testing.assert_array_equal(absolute, a)


@tt.jit
def bool_sub(a, b):
    return a - b


def test_bool_subtract_is_refused_like_numpy() -> None:
    a = np.array([True, False])
    with pytest.raises(CompilationError, match=r"test_fuzz_regressions.py:\d+.*boolean subtract"):
        bool_sub(a, a)


@tt.jit
def float_of_bool(a, i):
    return tt.exp(a), tt.sqrt(i), i**2.0, i**2


def test_math_of_bool_and_int_has_numpys_dtype() -> None:
    a, i = np.array([True, False]), np.array([3, 4], np.int32)
    e, s, f, sq = float_of_bool(a, i)
    assert e.dtype == np.float16 and s.dtype == np.float64  # NumPy's
    assert f.dtype == np.float64 and sq.dtype == np.int32
    np.testing.assert_allclose(e, np.exp(a))
    np.testing.assert_array_equal(f, [9.0, 16.0])


@tt.jit
def half_times(x):
    return x * 1e6, x + 70000


def test_weak_scalars_overflow_like_numpy() -> None:
    """A Python float is converted to the array's dtype first: 1e6 in float16 is inf."""
    x = np.array([0.0, 1e-3, -2.0], np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x * 1e6, x + 70000
    for got, want in zip(half_times(x), expected):
        np.testing.assert_array_equal(got, want)


@tt.jit
def int_plus_big(x):
    return x + 2**40


def test_int_scalar_out_of_range_is_an_error() -> None:
    with pytest.raises(CompilationError, match="Python integer 1099511627776 out of bounds for int32"):
        int_plus_big(np.array([1], np.int32))


# ---- int32 sums ----------------------------------------------------------------------------------


@tt.jit
def int_sum(x):
    return x.sum()


@tt.jit
def count(x):
    return tt.sum(x > 0, axis=-1)


def test_int32_sum_is_int64_and_bool_counts_are_exact() -> None:
    """NumPy sums int32 (and bools) in int64: no overflow at 8 * 2**30."""
    got = int_sum(np.full(8, 2**30, np.int32))
    assert got.dtype == np.int64 and got == 8 * 2**30
    x = np.random.default_rng(0).standard_normal((3, 70000)).astype(np.float32)
    got = count(x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, (x > 0).sum(-1))


# ---- 0-d and zero-size arrays ---------------------------------------------------------------------


@tt.jit
def zero_d(x):
    return x, x.sum(), x.astype(tt.float16), x * 2


@BOTH
def test_zero_d_stays_zero_d(fuse: bool) -> None:
    x = np.array(1.5, np.float32)
    outs = run(zero_d, x, fuse=fuse)
    assert [o.shape for o in outs] == [()] * 4
    assert [float(o) for o in outs] == [1.5, 1.5, 1.5, 3.0]


@tt.jit
def empty_ops(x, w):
    y = tt.exp(x) * 2 + w
    return y, x.sum(axis=0), x.mean(axis=0), tt.max(y, axis=-1), tt.exp(w)


@BOTH
def test_zero_size_arrays_just_work(fuse: bool) -> None:
    x, w = np.zeros((0, 4), np.float32), np.arange(4, dtype=np.float32)
    y, s, m, mx, ew = run(empty_ops, x, w, fuse=fuse)
    assert y.shape == (0, 4) and mx.shape == (0,)
    np.testing.assert_array_equal(s, np.zeros(4))
    assert np.isnan(m).all() and m.shape == (4,)  # NumPy: mean of nothing is NaN
    np.testing.assert_allclose(ew, np.exp(w), rtol=1e-6)


@tt.jit
def empty_max(x):
    return x.max(axis=0)


def test_max_over_an_empty_axis_is_numpys_error() -> None:
    with pytest.raises(CompilationError, match="zero-size array to reduction operation maximum"):
        empty_max(np.zeros((0, 3), np.float32))


@tt.jit
def bool_minmax(a, b):
    return tt.maximum(a, b), tt.minimum(a, b), a.max(axis=0), b.min()


def test_bool_max_and_min_do_not_use_signed_i1() -> None:
    """i1 is signed in the kernel lowering (True = -1), so max/min of bools would pick False on the GPU:
    array programs use or/and, and reduce bools as int32."""
    a = np.array([[True, False], [False, False]])
    b = np.array([[True, True], [False, True]])
    mx, mn, rmax, rmin = bool_minmax(a, b)
    np.testing.assert_array_equal(mx, a | b)
    np.testing.assert_array_equal(mn, a & b)
    np.testing.assert_array_equal(rmax, [True, False])
    assert rmin.dtype == np.bool_ and not rmin
    graph = bool_minmax.compile(a, b).asm["graph"]
    assert "tta.maximum" not in graph and "tta.minimum" not in graph
    assert "tta.reduce_max" in graph and "tensor<2x2xi1>" not in graph.split("tta.reduce_max")[1].split("\n")[0]


# ---- pow and float16 reductions ---------------------------------------------------------------------


@tt.jit
def power(a, b):
    return a**b


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pow_special_values_match_numpy(dtype) -> None:
    """exp(b log|a|) alone gets -0.0 bases, infinite exponents and pow(1, nan) wrong."""
    base = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 3.0])
    exponent = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -2.5, np.inf, -np.inf, np.nan, 3.0])
    a, b = (np.repeat(base, 12).astype(dtype), np.tile(exponent, 12).astype(dtype))
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    got = power(a, b)
    np.testing.assert_allclose(got, want, rtol=2e-3)
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


def _check_pow_of_a_base_near_one(fuse: bool) -> None:
    x = np.array([1.000876, 0.99912, 1.0001, 1.5, 1e-3], np.float32)
    for exponent in (10000.0, -3333.0, 7.5):
        got = run(power, x, np.full_like(x, exponent), fuse=fuse)
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.float64), exponent).astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=2e-6)


@BOTH
def test_pow_of_a_base_near_one_is_accurate(fuse: bool) -> None:
    """GPU fuzz seed 20261205 case 2947: `x ** 10000.0` at x = 1.000876 gave 6448.4 for NumPy's 6445.6: the f32
    log of a base near 1 errs by ~2**-22 absolutely on the GPU (`lg2.approx`), and the exponent multiplies it."""
    _check_pow_of_a_base_near_one(fuse)


@pytest.mark.gpu
@BOTH
def test_pow_of_a_base_near_one_is_accurate_on_gpu(fuse: bool) -> None:
    _check_pow_of_a_base_near_one(fuse)


@tt.jit
def mean_13(x):
    return tt.mean(x, axis=(1, 3)), x.sum(axis=(0, 2))


def test_float16_multi_axis_reductions_round_once() -> None:
    """Reducing axis by axis rounded the partial results to float16 (NumPy rounds once)."""
    x = np.random.default_rng(309).standard_normal((4, 8, 7, 8)).astype(np.float16)
    m, s = mean_13(x)
    assert m.dtype == s.dtype == np.float16
    np.testing.assert_array_equal(m, x.astype(np.float64).mean(axis=(1, 3)).astype(np.float16))
    np.testing.assert_allclose(s, x.astype(np.float64).sum(axis=(0, 2)), rtol=1e-3, atol=1e-2)


@tt.jit
def float_mod(x, y):
    return x % y


@BOTH
def test_float_mod_of_infinities_is_nan(fuse: bool) -> None:
    """Found on the GPU (seed 20261123): NVPTX expands `frem` as `isinf(b) ? a : ...`, so `inf % inf` gave
    inf there; NumPy (and the simulator) give NaN. The lowering now makes an infinite dividend NaN."""
    x = np.array([np.inf, -np.inf, np.inf, 5.0, -5.0, 7.5, np.nan], np.float32)
    y = np.array([np.inf, np.inf, 2.0, np.inf, np.inf, -2.0, 1.0], np.float32)
    with np.errstate(invalid="ignore"):
        expected = np.mod(x, y)
    got = float_mod.compile(x, y, fuse=fuse)(x, y)
    np.testing.assert_array_equal(got, expected)


# ---- -0.0 as a divisor next to a 0.0 constant ---------------------------------------------------


@tt.jit
def scale_and_divide_by_negative_zero(x):
    return x * 0.0, x / -0.0


@BOTH
def test_negative_zero_constant_keeps_its_sign(fuse: bool) -> None:
    """Found on the GPU (seed 20261123, cases 7393 and 7547): the LLVM lowering made each constant once per
    value, and -0.0 == 0.0 in Python, so `x / -0.0` divided by +0.0 (inf for -inf) when the kernel also used
    0.0. Both constants must reach the PTX, and the results must be NumPy's on every backend."""
    x = np.array([1.0, -2.0, 0.5, np.inf], np.float32)
    compiled = scale_and_divide_by_negative_zero.compile(x, fuse=fuse)
    ptx = compiled.asm["ptx"]
    assert "0f80000000" in ptx and "0f00000000" in ptx
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (x * 0.0, x / -0.0)
    for got, want in zip(compiled(x), expected):
        np.testing.assert_array_equal(got, want)


# ---- NaN through exp into a comparison ----------------------------------------------------------


@tt.jit
def exp_compared(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e.astype(tt.float16) > -1, e > -1, tt.exp(x) >= 0.0


def _check_exp_keeps_nan(fuse: bool) -> None:
    x = np.zeros((3, 16), np.float32)
    x[0, 14] = np.inf  # inf - inf: one NaN
    x[1, 7] = np.nan  # the row's max is NaN: a NaN row
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        expected = (e.astype(np.float16) > -1, e > -1, np.exp(x) >= 0.0)
    for got, want in zip(run(exp_compared, x, fuse=fuse), expected):
        np.testing.assert_array_equal(got, want)


@BOTH
def test_exp_of_nan_compares_false(fuse: bool) -> None:
    """Found on an H100 (seed 20261123, case 9171): ptxas takes `ex2.approx`'s result to be >= 0 and folded
    `exp(x) > -1` to true where x was NaN; the lowering now passes NaN through a select."""
    _check_exp_keeps_nan(fuse)


@pytest.mark.gpu
@BOTH
def test_exp_of_nan_compares_false_on_gpu(fuse: bool) -> None:
    _check_exp_keeps_nan(fuse)


# ---- a select on a size-1 mask, transposed, in a group whose shapes do not broadcast together ---------


@tt.jit
def transposed_select(x1, x2):
    mask = x1.astype(tt.int1)
    picked = tt.where(mask, x2[None], -1)
    m = tt.max(x1, axis=-1, keepdims=True)
    logsumexp = m + tt.log(tt.sum(tt.exp(x1 - m), axis=-1, keepdims=True))
    return logsumexp, picked.T, tt.min(tt.transpose(picked, (1, 0)), axis=0), mask


@BOTH
def test_select_on_a_size_one_mask_fuses_with_its_transpose(fuse: bool) -> None:
    """Found by the CI fuzzer (seed 20261123, case 459) after the planner learnt to take the outputs' shape
    as the domain: a size-1 register operand counted as fixing the select's dims, so the kernel's domain
    analysis refused a group the planner had accepted (NotFusable escaped to the user)."""
    x1 = np.array([1.0], np.float32)
    x2 = np.array([3, -7, 5, 0], np.int32)
    picked = np.where(x1.astype(bool), x2[None], -1)
    got = run(transposed_select, x1, x2, fuse=fuse)
    np.testing.assert_allclose(got[0], x1, rtol=1e-6)
    np.testing.assert_array_equal(got[1], picked.T)
    np.testing.assert_array_equal(got[2], picked.T.min(axis=0))
    np.testing.assert_array_equal(got[3], x1.astype(bool))


# ---- NumPy's op set (issue 25): result types and index arrays of the reductions ------------------


@BOTH
@pytest.mark.parametrize(
    "program, reference, arg",
    [
        (tt.jit(lambda x: tt.argmax(x, axis=-1)), lambda x: np.argmax(x, axis=-1), np.float32([[1, 3, 2]])),
        (tt.jit(lambda x: tt.cumsum(x, axis=-1)), lambda x: np.cumsum(x, axis=-1), np.array([[True, False, True]])),
        (tt.jit(lambda x: tt.cumsum(x)), np.cumsum, np.int8([3, -1, 127])),
        (tt.jit(lambda x: tt.prod(x)), np.prod, np.int32([3, -1, 2])),
        (tt.jit(lambda x: tt.var(x)), np.var, np.int8([3, -1, 2])),
        (tt.jit(lambda x: tt.logsumexp(x)), lambda x: np.log(np.sum(np.exp(x.astype(np.float64)))), np.array([True, False])),
    ],
    ids=["argmax-int64", "cumsum-bool-int64", "cumsum-int8-int64", "prod-int32-int64", "var-int-float64", "logsumexp-bool-float64"],
)
def test_reductions_give_numpys_int64_and_float64(program, reference, arg, fuse: bool) -> None:
    """Seed 1 cases 6, 25 and others: argmax, cumsum/prod of bools and narrow ints and var/logsumexp of ints
    gave int32/float32 (written before array programs had int64 and float64); NumPy gives int64/float64."""
    got, expected = run(program, arg, fuse=fuse), np.asarray(reference(arg))
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@BOTH
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int64])
def test_take_along_axis_takes_narrow_and_unsigned_indices(dtype, fuse: bool) -> None:
    """Seed 2 cases 78, 136: uint8 indices raised "Python integer -1 out of bounds for uint8" (the wrap of
    negative indices computed `idx < -n` in the index type) and int64 indices "take indices must be int32"."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[3], [0], [2]], dtype)
    np.testing.assert_array_equal(run(tt.jit(lambda a, i: tt.take_along_axis(a, i, axis=-1)), x, idx, fuse=fuse), np.take_along_axis(x, idx, -1))


@BOTH
def test_sign_of_unsigned_ints(fuse: bool) -> None:
    """Seed 3 case 185: `tt.sign` of uint8 raised "Python integer -1 out of bounds for uint8"."""
    x = np.array([0, 1, 200], np.uint8)
    got = run(tt.jit(lambda a: tt.sign(a)), x, fuse=fuse)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.sign(x))


@BOTH
def test_float64_matmul_computes_in_float64(fuse: bool) -> None:
    """Seed 4 case 123: `x @ y` of float64 gave NaN for `subnormal * inf` (the subnormal flushed to 0 in
    float32) where NumPy gives inf; `(1 + 1e-12) * 1 - 1` gives 0 instead of 1e-12."""
    a, b = np.array([[1 + 1e-12, 5.56268465e-309]]), np.array([[1.0], [np.inf]])
    program = tt.jit(lambda x, y: x @ y)
    np.testing.assert_array_equal(run(program, a, b, fuse=fuse), a @ b)
    assert run(program, a, np.array([[1.0], [0.0]]), fuse=fuse)[0, 0] - 1 == pytest.approx(1e-12, rel=1e-3)


@BOTH
def test_float64_prod_over_several_axes_stays_float64(fuse: bool) -> None:
    """Seed 6 case 180: `tt.prod` of a float64 array over several axes computed in float32 (meant for
    float16's single rounding) and was off by 1e-6 relative."""
    x = np.full((2, 3), 1 + 1e-9)
    got = run(tt.jit(lambda a: tt.prod(a, axis=None)), x, fuse=fuse)
    assert got.dtype == np.float64 and got == pytest.approx(np.prod(x), rel=1e-14)


@BOTH
def test_pad_of_a_0d_array_is_the_array(fuse: bool) -> None:
    """Seed 8 case 53: `tt.pad` of a 0-d array failed in the IR verifier ("f16 should be of base attribute
    tensor"); NumPy returns the 0-d array."""
    x = np.float16(2.5)
    got = run(tt.jit(lambda a: tt.pad(a, 1)), x, fuse=fuse)
    assert got.shape == () and got.dtype == np.float16 and got == np.pad(x, 1)


@pytest.mark.parametrize(
    "program, args",
    [
        (lambda a, b: tt.isfinite(a).T > b, (np.ones((5, 5), bool), np.ones((5, 5), np.float32))),
        (lambda a, j: tt.take_along_axis(tt.isfinite(a), j, axis=0), (np.ones(1, np.int64), np.zeros(1, np.int64))),
        (lambda a: (tt.take_along_axis(tt.isinf(a), tt.argmax(tt.isinf(a), axis=-1, keepdims=True), axis=-1), a >> 25),
         (np.arange(-8, 8, dtype=np.int32),)),
        (lambda a: (tt.isfinite(a)[a % 1], tt.repeat(tt.isfinite(a), 1, axis=-1)), (np.array([7], np.int32),)),
    ],
    ids=["transpose", "take_along_axis", "take_along_argmax", "index"],
)
def test_constant_arrays_transposed_or_gathered_fuse(program, args) -> None:
    """Seed 8 cases 88 and 121, seed 20261123 cases 4849 and 9598 (fused only): `isfinite` of an int or bool
    array is a constant, and the planner raised NotFusable ("tta.transpose of a computed value changes the
    layout", "take reads its table from memory; a computed table needs its own kernel") instead of giving the
    constant its own kernel: it saw the broadcast of the scalar as a view (the scalar is outside its groups),
    but every region gets its own copy of the scalar, where the broadcast computes in registers."""
    fn = tt.jit(program)
    unfused = fn.compile(*args, fuse=False)(*args)
    fused = fn(*args)
    for got, want in zip(fused if isinstance(fused, tuple) else (fused,), unfused if isinstance(unfused, tuple) else (unfused,)):
        np.testing.assert_array_equal(got, want)


@BOTH
def test_float16_logaddexp_rounds_once(fuse: bool) -> None:
    """Seed 9 cases 47 and 166: float16 `logaddexp(x, x)` near x = -log 2 was off by 1% (`x + log 2` with log 2
    rounded to float16 and every step rounded); NumPy's half loop computes in float32 and rounds once."""
    x = np.float16([-0.6753, -0.7, 1.5, -np.inf])
    y = np.float16([-0.6753, -0.6, 1.5, -np.inf])
    got = run(tt.jit(lambda a, b: tt.logaddexp(a, b)), x, y, fuse=fuse)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.logaddexp(x, y))


def test_fused_float64_long_row_softmax_is_float64_accurate() -> None:
    """Seed 10 cases 25, 65, 178: fused softmax / logsumexp / layernorm of float64 rows longer than 16384
    were off by 1e-8 relative (float32's accuracy); NumPy's float64 is accurate to 1e-15."""
    x = np.random.default_rng(0).standard_normal((2, 16385))
    got = softmax(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-12)


@BOTH
@pytest.mark.parametrize("shape", [(1, 8192), (2, 20000), (1, 262144)], ids=["looped", "looped-2", "split"])
def test_long_row_statistics_of_ints_are_float64(shape: tuple[int, int], fuse: bool) -> None:
    """Seed 20261123 cases 2189, 3247, 7751, 9290: fused `std` and `logsumexp` of int rows of 8192 and more
    (float64 results) were off by 1e-9 relative: the online max+sum and Chan's mean+M2 walk (and the split
    rows' partials) of lowering/fusion/pairs.py ran in float32 whatever the row's type."""
    x = np.random.default_rng(1).integers(-2**31, 2**31 - 1, size=shape).astype(np.int32)
    std, lse = run(tt.jit(lambda a: (tt.std(a, axis=1, keepdims=True), tt.logsumexp(a // 2**24, axis=-1))), x, fuse=fuse)
    wide = x.astype(np.float64)
    small = np.floor_divide(x, 2**24).astype(np.float64)
    m = small.max(-1, keepdims=True)
    assert std.dtype == lse.dtype == np.float64
    np.testing.assert_allclose(std, wide.std(1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(lse, (m + np.log(np.exp(small - m).sum(-1, keepdims=True)))[:, 0], rtol=1e-13)


@BOTH
@pytest.mark.parametrize("shape, axis", [((2, 16385), None), ((2, 16385), -1), ((3, 100), -1)])
def test_float16_var_squares_in_float32(shape: tuple[int, int], axis: int | None, fuse: bool) -> None:
    """Seed 20261123 case 2786: `std(tan(x))` of float16 was inf (deviations of ~2000 squared in float16
    overflow) though the variance, ~2000, fits; the fused long-row walk computed it in float32 (finite), so
    fused and unfused rows disagreed. Computed in float32, rounded to float16 once."""
    x = (np.random.default_rng(2).standard_normal(shape) * 40).astype(np.float16)
    x[:, ::200] = 1500  # squares past float16's 65504; the variance, ~1e4, fits
    var, std = run(tt.jit(lambda a: (tt.var(a, axis=axis), tt.std(a, axis=axis, ddof=1))), x, fuse=fuse)
    wide = x.astype(np.float64)
    assert var.dtype == std.dtype == np.float16
    np.testing.assert_allclose(var, wide.var(axis), rtol=2e-3)
    np.testing.assert_allclose(std, wide.std(axis, ddof=1), rtol=2e-3)


@BOTH
def test_int_arrays_compare_with_out_of_range_python_ints(fuse: bool) -> None:
    """Seed 11 case 247: `uint8_array <= -1` raised "Python integer -1 out of bounds for uint8"; NumPy 2
    compares out-of-range Python ints by value (all False here)."""
    x = np.array([0, 5, 255], np.uint8)
    program = tt.jit(lambda a: (a <= -1, a > 300, a != 300, -1 < a, tt.equal(a, 1000)))
    for got, want in zip(run(program, x, fuse=fuse), (x <= -1, x > 300, x != 300, -1 < x, np.equal(x, 1000))):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


def test_pad_constant_out_of_the_int_range_is_numpys() -> None:
    """CI seed case 356 (found through test_fusion_scale): `tt.pad(uint8, 0, constant_values=-3)` failed in
    the IR verifier; NumPy pads nothing for width 0, and otherwise stores -3 as np.pad does (253 in NumPy
    2.4) or refuses it where that NumPy refuses it."""
    x = np.array([1, 2], np.uint8)
    np.testing.assert_array_equal(tt.jit(lambda a: tt.pad(a, 0, constant_values=-3))(x), np.pad(x, 0, constant_values=-3))
    try:
        want = np.pad(x, 1, constant_values=-3)
    except OverflowError:
        with pytest.raises(CompilationError, match="out of bounds for uint8"):
            tt.jit(lambda a: tt.pad(a, 1, constant_values=-3))(x)
    else:
        np.testing.assert_array_equal(tt.jit(lambda a: tt.pad(a, 1, constant_values=-3))(x), want)


# ---- GPU-only findings of the H200 run of 2026-12-01 (seed 20261123, 10,000 cases) ------------------


@tt.jit
def absolute(x):
    return tt.abs(x), tt.absolute(x.astype(tt.int32))


def _check_trig_is_accurate(fuse: bool) -> None:
    x = np.float32([np.arctan(0.06534968317), np.arcsin(-0.1135931835), 0.1, -3.0, 1e-30, -0.0, 7423.583, 1e6])
    sin, cos, tan = run(tt.jit(lambda a: (tt.sin(a), tt.cos(a), tt.tan(a))), x, fuse=fuse)
    for got, fn in ((sin, np.sin), (cos, np.cos), (tan, np.tan)):
        want = fn(x.astype(np.float64))
        assert got.dtype == np.float32
        np.testing.assert_array_less(np.abs(got - want), 4 * np.spacing(np.abs(want).astype(np.float32)) + 1e-45)
    assert np.signbit(sin[5]) and np.signbit(tan[5])


@BOTH
def test_trig_is_accurate_to_a_few_ulps(fuse: bool) -> None:
    """Found on an H200 (seed 20261123, 10,000 cases): float32 tan 0.06534938514 for 0.06534968317, sin
    -0.1135928556 for -0.1135931835: `sin.approx`/`cos.approx` err by ~2**-21 absolutely. The lowering now
    reduces by pi/2 and evaluates Cephes' polynomials (tests/test_trig_accuracy.py measures it)."""
    _check_trig_is_accurate(fuse)


@pytest.mark.gpu
@BOTH
def test_trig_is_accurate_to_a_few_ulps_on_gpu(fuse: bool) -> None:
    _check_trig_is_accurate(fuse)


@pytest.mark.gpu
@BOTH
def test_abs_of_unsigned_is_the_value_on_gpu(fuse: bool) -> None:
    """Cases 945, 5399, 6181 and four more: `abs` of uint8 tested the sign bit as if signed (195 gave 61)."""
    x = np.array([0, 1, 127, 128, 195, 255], np.uint8)
    got, wide = run(absolute, x, fuse=fuse)
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(wide, x.astype(np.int32))


def _erf_series_float32(x: np.ndarray) -> np.ndarray:
    """The lowering's small-|x| erf, step for step in float32 (each FMA rounded once)."""
    z = (x * x).astype(np.float32)
    p = np.full_like(x, ERF_SERIES[-1])
    for c in reversed(ERF_SERIES[:-1]):
        p = (p.astype(np.float64) * z + np.float32(c)).astype(np.float32)
    return (x * p).astype(np.float32)


def _erf_ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    want = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)


ERF_SMALL = np.concatenate([np.linspace(-1, 1, 20001), 10.0 ** np.linspace(-44, 0, 400), [0.0, 6.2e-5]]).astype(np.float32)


def test_erf_series_is_float32_accurate_below_one() -> None:
    """Case 8949 and 17 more: the rational erf's absolute error (2.5e-7 at erf(6.2e-5)) is 0.4 % near 0; the
    series that replaced it below |x| = 1 is within 3 ulp down to subnormals."""
    assert _erf_ulps(_erf_series_float32(ERF_SMALL[np.abs(ERF_SMALL) < 1]), ERF_SMALL[np.abs(ERF_SMALL) < 1]).max() <= 3


@tt.jit
def erf(x):
    return tt.erf(x)


@pytest.mark.gpu
def test_erf_is_float32_accurate_below_one_on_gpu() -> None:
    small = ERF_SMALL[np.abs(ERF_SMALL) < 1]
    assert _erf_ulps(np.asarray(erf(small)), small).max() <= 3


@BOTH
@pytest.mark.parametrize(
    "x, shape",
    [
        (np.float32(2.0), (3,)),
        (np.float32([2.0]), (4,)),
        (np.float32([[1.0], [3.0]]), (2, 5)),
        (np.float32([[2.0]]), (4, 3000)),
        (np.float32([[2.0]]), (2, 5000)),
    ],
    ids=["scalar", "1d", "rows", "runs", "looped"],
)
def test_scan_of_a_broadcast_counts_each_element(x: np.ndarray, shape: tuple[int, ...], fuse: bool) -> None:
    """Seed 20261123 cases 1079, 3779, 6109, 8338 (fused only): `cumsum` of a value constant along the axis
    (`repeat` of a scalar, `isfinite` of ints, a gather from a size-1 axis) returned the value itself: its
    tile had no lane along the axis and a scan of one lane is the identity. cumsum([2, 2, 2]) is [2, 4, 6]."""
    program = tt.jit(lambda a: (tt.cumsum(tt.broadcast_to(a, shape), axis=-1),
                                tt.cumprod(tt.broadcast_to(a, shape), axis=0)))
    b = np.broadcast_to(x, shape)
    total, product = run(program, x, fuse=fuse)
    np.testing.assert_array_equal(total, np.cumsum(b, axis=-1))
    np.testing.assert_array_equal(product, np.cumprod(b, axis=0))


@BOTH
def test_count_of_a_scanned_softmax_of_a_repeated_scalar(fuse: bool) -> None:
    """Seed 20261123 case 8338 as found: the top-p count of a softmax of `repeat(scalar, 3)` was 3 (the scan
    of the broadcast probabilities stayed 1/3 everywhere) instead of 2."""

    def top_p_count(a):
        r = tt.repeat(a, 3)
        return tt.sum(tt.cumsum(tt.exp(r - tt.logsumexp(r, axis=-1, keepdims=True)), axis=-1) < 0.9, axis=-1)

    assert run(tt.jit(top_p_count), np.float32(0.5), fuse=fuse) == 2


@BOTH
@pytest.mark.parametrize("n", [8192, 70000])
def test_var_of_rows_past_the_f32_square_is_inf(n: int, fuse: bool) -> None:
    """Seed 20261123 case 5444: fused `var` of a float32 row holding 1.7e38 was NaN where NumPy's is inf:
    the chunked mean+M2 merge (Chan's) multiplied an overflowed `delta**2` by the empty side's count 0."""
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    x[1, 5] = 1.7014117e38
    x[2, n - 1] = -3e38
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.var(x, axis=-1)
    np.testing.assert_allclose(run(tt.jit(lambda a: tt.var(a, axis=-1)), x, fuse=fuse), want, rtol=1e-5)


@BOTH
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_int_reciprocal_of_the_largest_ints(dtype: type, fuse: bool) -> None:
    """Seed 20261123 case 3950: `reciprocal` of int32 2147483647 gave 2147483647 (NumPy: 0): ±1 was
    found as `x * x == 1`, and the largest ints' squares wrap to 1 too."""
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -2, -1, 1, 2, info.max - 1, info.max], dtype)
    np.testing.assert_array_equal(run(tt.jit(lambda a: tt.reciprocal(a)), x, fuse=fuse), np.reciprocal(x))


@tt.jit
def concatenated_products(x, y):
    rows = tt.concatenate([x, -x], axis=0) @ y  # pieces along the rows of a left operand's prologue
    columns = tt.concatenate([x, 2 * x], axis=1) @ tt.concatenate([y, y], axis=0)  # ... and along K
    return rows, columns


@BOTH
def test_concatenated_left_operands_read_inside_their_pieces(fuse: bool) -> None:
    """Seed 20261123 cases 1350 and 1744: a concatenation computed in a matmul's K loop loaded each piece
    without its bounds, reading memory before or after the piece's array (the simulator refuses such a load;
    the GPU read whatever lay there and masked it out later)."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    rows, columns = run(concatenated_products, x, y, fuse=fuse)
    np.testing.assert_allclose(rows, np.concatenate([x, -x]) @ y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(columns, np.concatenate([x, 2 * x], 1) @ np.concatenate([y, y]), rtol=1e-5, atol=1e-6)


# ---- fuzz seed 20261202 (H200): abs of NaN, pad values cast as NumPy casts them, float16 logsumexp --------


@tt.jit
def abs_compared(x):
    rotated = tt.concatenate([-x[..., 4:], x[..., :4]], -1) * tt.sin(x * 0.5) + x * tt.cos(x * 0.5)
    return tt.absolute(tt.exp(rotated)) >= -1, tt.absolute(x) >= 0


def _check_abs_keeps_nan(fuse: bool) -> None:
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    x[0, :4] = -np.inf  # sin(-inf) is NaN: NaN rows of `rotated`
    x[1, 2] = np.nan
    with np.errstate(invalid="ignore", over="ignore"):
        rotated = np.concatenate([-x[..., 4:], x[..., :4]], -1) * np.sin(x * 0.5) + x * np.cos(x * 0.5)
        expected = (np.abs(np.exp(rotated)) >= -1, np.abs(x) >= 0)
    for got, want in zip(run(abs_compared, x, fuse=fuse), expected):
        np.testing.assert_array_equal(got, want)


@BOTH
def test_abs_of_nan_compares_false(fuse: bool) -> None:
    """Seed 20261202 case 4651 (H200, fused only): `abs(exp(v)) >= -1` was true where v was NaN: ptxas folds a
    comparison of `abs.f32` as it folded `ex2`'s; the lowering passes NaN through a select."""
    _check_abs_keeps_nan(fuse)


@pytest.mark.gpu
@BOTH
def test_abs_of_nan_compares_false_on_gpu(fuse: bool) -> None:
    _check_abs_keeps_nan(fuse)


@BOTH
def test_pad_values_are_stored_as_numpy_stores_them(fuse: bool) -> None:
    """Seed 20261202 case 5691: `tt.pad(uint8, constant_values=-1.5)` raised xDSL's VerifyException (an ui8
    constant of -1); np.pad stores -1.5 as 255 (its cast), 2.7 into int32 as 2."""
    x, y = np.array([[7]], np.uint8), np.arange(4, dtype=np.int32).reshape(2, 2)
    program = tt.jit(lambda a, b: (tt.pad(a, ((2, 0), (1, 2)), constant_values=-1.5), tt.pad(b, 1, constant_values=2.7)))
    got = run(program, x, y, fuse=fuse)
    np.testing.assert_array_equal(got[0], np.pad(x, ((2, 0), (1, 2)), constant_values=-1.5))
    np.testing.assert_array_equal(got[1], np.pad(y, 1, constant_values=2.7))


def test_pad_value_out_of_the_int_range_names_the_line() -> None:
    """A Python int the array's dtype cannot hold is NumPy's OverflowError, here at the user's line."""
    with pytest.raises(CompilationError, match=r"test_fuzz_regressions.py:\d+.*300 do not fit the int8 array"):
        tt.jit(lambda a: tt.pad(a, 1, constant_values=300))(np.zeros((2, 2), np.int8))


@BOTH
def test_float16_logsumexp_past_the_float16_range_is_inf(fuse: bool) -> None:
    """Seed 20261202 case 9609: the fuzzer's reference summed a float16 row of 70000 near-equal values in
    float64 (11.156); scipy sums the shifted exps in float16, which overflows past 65504: inf, as tinyton."""
    x = np.zeros((1, 70000), np.float16)
    x[0, ::7] = -0.25
    got = run(tt.jit(lambda a: tt.logsumexp(a, axis=1)), x, fuse=fuse)
    assert got.dtype == np.float16 and np.isposinf(got).all()
    short = np.zeros((1, 60000), np.float16)
    np.testing.assert_allclose(run(tt.jit(lambda a: tt.logsumexp(a, axis=1)), short, fuse=fuse).astype(np.float32),
                               [np.log(60000)], rtol=1e-3)


# ---- fuzz seed 41 (simulator): a row division whose quotient overflows ----------------------------------


@tt.jit
def divided_past_the_range(x, s, d):
    return tt.prod(x, axis=(0, 1)), x / tt.cumsum(s, axis=None), x / d  # one divisor for all; one per row


@BOTH
def test_row_division_overflowing_to_inf_is_inf(fuse: bool) -> None:
    """Seed 41 case 2419 (fused only): 1.7e38 / -0.43 was NaN, not -inf. A division by one value per row is
    q = a·r refined by q + (a - q·d)·r; where q overflowed, the residual is -q's infinity and the step added
    inf - inf. q is kept there, as where the residual is NaN."""
    x = np.array([[1.7014117e38, -3e38, 1.0, 0.0], [2e38, 5.0, -1e-30, 3e38]], np.float32)
    s, d = np.array(-0.4316923, np.float32), np.array([[0.5], [-0.75]], np.float32)
    with np.errstate(over="ignore"):
        expected = (np.prod(x), x / np.cumsum(s), x / d)
    for got, want in zip(run(divided_past_the_range, x, s, d, fuse=fuse), expected):
        np.testing.assert_array_equal(got, want)


# ---- fuzz seed 45 (simulator): a fuzzer bug, the bounded sign of an undetermined product ------------------


def test_sign_of_an_undetermined_product_is_unchecked(tmp_path) -> None:
    """Seed 45 case 101: `sign(cumprod(x))` of a row holding -0.0 then 1.7e38. tinyton's scan multiplies in
    tree order, where a partial product overflows (0 · -inf: NaN; NumPy's left-to-right products stay 0); the
    reference leaves such a product unchecked (err inf: the order is the implementation's), but gave its sign
    the bound 1, excluding NaN. An undetermined operand now leaves any elementwise result undetermined."""
    x = np.array([[-5.3, -0.0, 6.4, -2.9, 0.24, 1.7e38, -4.6, -3.4]], np.float32)
    expected = SHIM.sign(SHIM.cumprod(Ref(x, 0.0), axis=1))
    np.testing.assert_array_equal(np.isinf(expected.err), [[False] * 5 + [True] * 3])
    source = "import tinyton as tt\n\n\ndef sign_of_cumprod(x):\n    return tt.sign(tt.cumprod(x, axis=1))\n"
    assert not check(Case(45, 101, "sign_of_cumprod", source, [x], "small"), tmp_path).problems


# ---- fuzz seed 48 (simulator): np.where stores an out-of-range Python int as a cast ------------------------


@BOTH
def test_where_wraps_an_out_of_range_int_as_numpy(fuse: bool) -> None:
    """Seed 48 case 2845: `tt.where(c, uint8_array, -1)` raised "Python integer -1 out of bounds for uint8", as
    NumPy's ufuncs do; np.where instead casts the int to the array's dtype (255; numpy#27006)."""
    c = np.array([[True, False, False]])
    u, i = np.array([[1, 2, 3]], np.uint8), np.array([[1, 2, 3]], np.int8)
    program = tt.jit(lambda c, u, i: (tt.where(c, u, -1), tt.where(c, 300, u), tt.where(c, i, 128), tt.where(c, i, -3)))
    expected = (np.where(c, u, -1), np.where(c, 300, u), np.where(c, i, 128), np.where(c, i, -3))
    for got, want in zip(run(program, c, u, i, fuse=fuse), expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# ---- fuzz seed 20261203 (H200, 9,100 cases): a shared arange, a float16 reference, NaN signs, huge trig ------


@BOTH
def test_an_arange_shared_by_two_regions_is_not_yielded(fuse: bool) -> None:
    """Case 4936 (fused only, both backends): two `take_along_axis` shared one `arange` (cse), which the first
    region then yielded for the second; its (16,) did not fit that region's (16, 16, 1) domain (NotFusable
    escaped). Index ranges are now copied for each reader, as views are."""
    x = np.random.default_rng(0).integers(-100, 100, (16, 16, 1)).astype(np.int32)
    program = tt.jit(lambda x: tt.take_along_axis(tt.take_along_axis(x, tt.argmax(x, axis=1, keepdims=True), axis=1),
                                                   (x // 3) % 1, axis=-2))  # fmt: skip
    want = np.take_along_axis(np.take_along_axis(x, np.argmax(x, axis=1, keepdims=True), axis=1), (x // 3) % 1, axis=-2)
    np.testing.assert_array_equal(run(program, x, fuse=fuse), want)


def test_float16_logsumexp_reference_rounds_each_step(tmp_path) -> None:
    """Case 1534 (both backends, a fuzzer bug): a float16 logsumexp of two values near -0.68 is log(s) ~ 0.69
    rounded to float16 beside the shift, as scipy computes it too; the reference bounded those steps by float32's
    rounding and rejected tinyton's (and scipy's) 0.01196 for 0.01185."""
    x = np.array([[-0.6787, -0.6797], [-0.68, -0.6797]], np.float16)
    source = "import tinyton as tt\n\n\ndef lse(x):\n    return tt.logsumexp(x, axis=-1)\n"
    assert not check(Case(20261203, 1534, "lse", source, [x], "small"), tmp_path).problems


def test_copysign_from_a_nan_is_unchecked(tmp_path) -> None:
    """Case 147 (GPU only, a fuzzer bug): `copysign(x, -log(int8))` takes a NaN's sign bit, which is the
    hardware's (x86 makes -NaN for log(-1), the GPU +NaN); the reference now leaves it unchecked."""
    y = np.array([-1.0, 2.0, np.nan], np.float32)
    expected = SHIM.copysign(Ref(np.float32([1.5, 1.5, 1.5]), 0.0), Ref(y, 0.0))
    np.testing.assert_array_equal(np.isinf(expected.err), [False, False, True])


@tt.jit
def rope_of_huge_values(x):
    return tt.sqrt(tt.concatenate([-x[..., 2:], x[..., :2]], -1) * tt.sin(x * 0.5) + x * tt.cos(x * 0.5))


def _check_huge_trig(fuse: bool) -> None:
    x = np.float32([[-0.36897138, -8.5070587e37, -0.50853038, 1.5285122]])
    with np.errstate(invalid="ignore"):
        want = np.sqrt(np.concatenate([-x[..., 2:], x[..., :2]], -1) * np.sin(x * np.float32(0.5)) + x * np.cos(x * np.float32(0.5)))
    np.testing.assert_allclose(run(rope_of_huge_values, x, fuse=fuse), want, rtol=1e-4)


@BOTH
def test_trig_of_huge_values_is_numpys(fuse: bool) -> None:
    """Case 5771 (H200, both forms): cos(-4.25e37) had the wrong sign on the GPU (`sin.approx`/`cos.approx` took
    arguments past 2**20), so a RoPE-shaped sum went negative and its sqrt NaN; the lowering now reduces such
    arguments by Payne-Hanek (tests/test_trig_accuracy.py checks its IR on the host to 2**128)."""
    _check_huge_trig(fuse)


@pytest.mark.gpu
@BOTH
def test_trig_of_huge_values_is_numpys_on_gpu(fuse: bool) -> None:
    _check_huge_trig(fuse)


def test_prod_underflowing_in_numpys_order_only_is_unchecked() -> None:
    """Seed 53 case 2313 (a fuzzer bug): a float64 `prod` whose left-to-right partial products underflow (NumPy:
    -0.0) while the exact product is -3.2e-34 (tinyton's tree order keeps it): the order is the
    implementation's, so the reference leaves it unchecked, as it did where NumPy's result was not 0."""
    x = np.array([[1e-200, 1e-200, 1e300, -3.2e66]])
    expected = SHIM.prod(Ref(x, 0.0), axis=-1)
    assert np.isinf(expected.err).all()
    exact = np.array([[1e-200, 2.0, 1e100]])  # no partial product leaves the range: checked
    assert np.isfinite(SHIM.prod(Ref(exact, 0.0), axis=-1).err).all()


@tt.jit
def yielded_cast_beside_its_reshapes(x0, x1):
    v3 = tt.expand_dims(x1.astype(tt.float32), -2)
    v4 = v3 - tt.logsumexp(v3, axis=-1, keepdims=True)
    v6 = tt.take_along_axis(x1, x0 % 7, axis=-1)
    return tt.where(v6, v6, v3), tt.maximum(v4, x0 % 7)


@BOTH
def test_yielded_value_takes_its_reshapes_layout(fuse: bool) -> None:
    """Seed 53 case 1415: a row-reduction region yielded the cast `x1.astype(float32)` (7, 1, 7) besides its
    reshapes to (7, 1, 1, 7); the yield counted as a user that was no reshape, so the cast was right-aligned in
    the (7, 1, 1, 7) domain and NotFusable escaped. A yield is stored through the reshapes' placement."""
    rng = np.random.default_rng(1415)
    x0 = rng.integers(-20, 20, (7, 1, 7))
    x1 = rng.random((7, 1, 7)) > 0.5
    v3 = np.expand_dims(x1.astype(np.float32), -2)
    lse = np.log(np.exp(v3).sum(-1, keepdims=True))
    v6 = np.take_along_axis(x1, x0 % 7, axis=-1)
    got = run(yielded_cast_beside_its_reshapes, x0, x1, fuse=fuse)
    np.testing.assert_allclose(got[0], np.where(v6, v6, v3))
    np.testing.assert_allclose(got[1], np.maximum(v3 - lse, x0 % 7), rtol=1e-6)


def test_sqrt_of_a_value_of_either_sign_is_unchecked() -> None:
    """Seed 56 case 3150 (a fuzzer bug): `sqrt` of a GELU of -5.27, which the float64 reference rounds to -0.0
    but float32 (NumPy's too) computes as -1.6e-7: the reference checked -0.0 ± 1.4e-3 against tinyton's NaN.
    Where the operand's bound holds both signs, the root is left unchecked."""
    x = Ref(np.float32([-0.0, 0.0, 4.0, -1.0]), np.array([2e-6, 2e-6, 1e-6, 1e-6]))
    expected = SHIM.sqrt(x)
    np.testing.assert_array_equal(np.isinf(expected.err), [True, True, False, False])


@tt.jit
def yielded_tan_beside_a_wider_reshape(x1):
    v2 = x1.sum(axis=-1)
    v6 = tt.tan(x1)
    return v6, tt.repeat(tt.where(v2 > v2, v2, -1).astype(tt.int64), 2, axis=0), v6[..., None], (x1 <= x1)[..., None]


@BOTH
def test_reshape_to_more_dims_than_the_kernel_leaves_the_layout_alone(fuse: bool) -> None:
    """Seed 58 case 2675: `tan(x)` (2, 32, 2), returned and reshaped to (2, 32, 2, 1) in its kernel of domain
    (2, 32, 2): placing `tan` where the reshape's dims sit, counted from the reshape's last dim, put its first
    dim off the domain and NotFusable escaped (the case 1415 fix had stopped the yield from hiding it)."""
    x1 = np.random.default_rng(2675).standard_normal((2, 32, 2)).astype(np.float32)
    got = run(yielded_tan_beside_a_wider_reshape, x1, fuse=fuse)
    np.testing.assert_allclose(got[0], np.tan(x1), rtol=1e-5)
    np.testing.assert_array_equal(got[1], np.full((4, 32), -1))
    np.testing.assert_allclose(got[2], np.tan(x1)[..., None], rtol=1e-5)
    np.testing.assert_array_equal(got[3], np.ones((2, 32, 2, 1), bool))


@tt.jit
def empty_dot(a, b):
    return tt.matmul(a, b)


@BOTH
@pytest.mark.parametrize("tiles", [(1, 8, 64, 4, 3), (16, 64, 128, 4, 4)], ids=["gemv", "skinny"])
def test_product_over_an_empty_k_reads_nothing(monkeypatch, tiles, fuse: bool) -> None:
    """Seed 61 case 293 with `--tiles drawn`: `float32[0] @ float32[0]` (0) in the GEMV form loaded its first
    K step unmasked, K (0) being a multiple of the step: a read past the arrays. A step is unmasked only
    where it lies inside K whole."""
    monkeypatch.setattr(program_module, "matmul_tiles", lambda p: MatmulTiles(*tiles).fit(p))
    empty = np.zeros(0, np.float32)
    assert run(empty_dot, empty, empty, fuse=fuse) == 0.0
    x, w = np.ones((1, 0), np.float32), np.ones((0, 5), np.float32)
    np.testing.assert_array_equal(run(empty_dot, x, w, fuse=fuse), np.zeros((1, 5), np.float32))


@tt.jit
def divided_beside_a_variance(x1, x2):
    return x1 / x2, tt.var(x1, axis=-3)


@BOTH
def test_row_division_by_a_subnormal_is_finite(fuse: bool) -> None:
    """Seed 64 case 2393: `x1 / x2` in a region reducing another axis divides by one reciprocal per row;
    x2 = 1e-39 (subnormal) has an infinite f32 reciprocal, so -0.22 / 1e-39 was -inf, not -2.2e38. A divisor
    below 2^-64 now scales both operands by 2^64 first (the same quotient)."""
    rng = np.random.default_rng(2393)
    x1 = rng.standard_normal((4, 8, 3, 8)).astype(np.float32)
    x2 = np.array([1e-39, -3e-40, 2e-30, 5e-20, 1.0, 0.0, -0.0, 1e-45], np.float32)
    got = run(divided_beside_a_variance, x1, x2, fuse=fuse)
    with np.errstate(all="ignore"):
        want = x1 / x2
    np.testing.assert_array_equal(np.isfinite(got[0]), np.isfinite(want))
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    np.testing.assert_allclose(got[1], x1.var(axis=-3), rtol=1e-5)


@tt.jit
def column_argmax_of_a_quotient(x1, x2):
    return tt.argmax(x1 / x2, axis=-2), x1 @ x1.T


@BOTH
def test_row_division_broadcasts_both_operands(fuse: bool) -> None:
    """Seed 20261203 case 8714 (GPU, 10,000 cases): in the column reduction `argmax(x1 / x2, axis=-2)` (x1
    `[32, 1]`, x2 `[2]`) the divisor is one value per column, so the quotient takes the per-row reciprocal;
    the 2^64 scale of seed 64's fix was broadcast to x1's `[32, 1]` instead of `[32, 2]`: the simulator
    raised, the GPU gave index 0 where NumPy gives 24. Both operands now broadcast."""
    rng = np.random.default_rng(8714)
    x1 = rng.standard_normal((32, 1)).astype(np.float16)
    x2 = np.array([-0.7, 1.3], np.float32)
    got = run(column_argmax_of_a_quotient, x1, x2, fuse=fuse)
    np.testing.assert_array_equal(got[0], np.argmax(x1 / x2, axis=-2))
    np.testing.assert_allclose(got[1], x1.astype(np.float32) @ x1.T.astype(np.float32), rtol=1e-3)


def test_float64_scan_bound_counts_the_references_own_roundings() -> None:
    """Seed 69 case 1450 (a fuzzer bug): a float64 `cumsum` of 2,048 values differed from the reference by
    1.1e-11 against a bound of 1.12e-11; the reference is itself a float64 sum in NumPy's sequential order,
    whose up to n roundings the bound now counts."""
    x = np.random.default_rng(1450).uniform(0.5, 1.0, 2048)
    bound = SHIM.cumsum(Ref(x, np.zeros_like(x))).err
    assert bound[-1] >= 2048 * np.finfo(np.float64).eps * x.sum()


@tt.jit
def stacked_padding(x):
    p = tt.pad(x, ((0, 1), (0, 0)))
    return tt.stack([p, -p], axis=-1)


@BOTH
def test_broadcast_of_a_padded_view_keeps_the_padding(fuse: bool) -> None:
    """Seed 75 case 3351 (and seed 72 case 2004, drawn tiles): `stack([pad(x), ...], -1)` reshapes the padded
    view to (2, 7, 1) and broadcasts it to (2, 7, 2); the broadcast widened every bound (0, 1) to the whole dim,
    the padded row's (0, 1) of 2 rows too, so the kernel read x's row 1 past its end (the simulator's
    OutOfBoundsError; garbage on a GPU). Only a broadcast dim's bound widens."""
    x = np.arange(1, 8, dtype=np.float32).reshape(1, 7)
    p = np.pad(x, ((0, 1), (0, 0)))
    np.testing.assert_array_equal(run(stacked_padding, x, fuse=fuse), np.stack([p, -p], axis=-1))
