"""NumPy's elementwise functions in array programs, property-tested against NumPy itself (hypothesis): every
ufunc as `tt.<name>`, as `np.<name>(traced)` and through its operator, on every dtype of array programs
(bool, int8, uint8, int16, int32, int64, uint64, float16, bfloat16, float32, float64), with broadcasting, size-0 and
size-1 arrays and NaN/inf. The result dtype must be NumPy's exactly, ints and bools bit-exact, floats within a
tolerance of the dtype; a dtype NumPy refuses must be a CompilationError naming the ufunc.

The same properties run on the GPU (`-m gpu`: the GPU variant of each test; the lead runs them on an H100).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyton as tt
from tinyton.errors import CompilationError
from tinyton.frontend.tracing import trace
from tinyton.runtime import driver

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(n) for n in ("bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16",
                                "float32", "float64")] + [BF16]  # fmt: skip
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 1, 5)]
"""Few shapes, so that compiled programs are reused across examples (each new signature compiles)."""
PAIRED = {(): [(), (7,)], (0,): [(0,), (1,), ()], (1,): [(1,), (7,)], (7,): [(7,), (1,), ()],
          (3, 5): [(3, 5), (5,), (3, 1)], (2, 1, 5): [(2, 1, 5), (3, 5), (1,)]}  # fmt: skip
"""Shapes each shape broadcasts with."""
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 1e-30, 65504.0, 3e38]

DEVICES = ["default", pytest.param("gpu", marks=pytest.mark.gpu)]
"""Where the programs run: the process's backend (here the simulator), and the GPU variant."""

UNARY = [
    "negative", "positive", "absolute", "sign", "square", "reciprocal", "exp", "exp2", "expm1", "log", "log2",
    "log10", "log1p", "sqrt", "sin", "cos", "tan", "tanh", "floor", "ceil", "trunc", "rint", "isnan", "isinf",
    "isfinite", "logical_not", "invert", "bitwise_not",
]  # fmt: skip
BINARY = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod", "fmod", "power",
    "maximum", "minimum", "fmax", "fmin", "copysign", "arctan2", "hypot", "logaddexp", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
]  # fmt: skip
OPERATORS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
    "true_divide": lambda a, b: a / b, "floor_divide": lambda a, b: a // b, "remainder": lambda a, b: a % b,
    "power": lambda a, b: a**b, "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b, "left_shift": lambda a, b: a << b, "right_shift": lambda a, b: a >> b,
    "less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b, "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "negative": lambda a: -a, "positive": lambda a: +a, "absolute": lambda a: abs(a), "invert": lambda a: ~a,
}  # fmt: skip
TRIG = {"sin", "cos", "tan"}
APPROXIMATE = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "tanh",
               "power", "logaddexp", "arctan2", "hypot", "divide", "true_divide"}  # fmt: skip
"""Functions the GPU computes with approximate instructions (the simulator with NumPy's float32)."""


def on_gpu(device: str) -> bool:
    if device == "gpu":
        assert driver.backend() == "cuda", "the GPU variant runs with TINYTON_BACKEND=cuda or auto on a GPU"
        return True
    return driver.backend() == "cuda"


@cache
def program(kind: str, name: str) -> Any:
    """One jitted program per (spelling, function), so its compiled signatures are reused."""
    if kind == "tt":
        fn = getattr(tt, name)
    elif kind == "np":
        fn = getattr(np, name)
    else:
        fn = OPERATORS[name]
    return tt.jit(lambda *args: fn(*args))


def arrays(dtype: np.dtype, shape: tuple[int, ...], data: st.DataObject, gpu_trig: bool = False) -> np.ndarray:
    """An array of `dtype` with NumPy-style edge values: NaN, infinities, signed zeros, extremes."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "b":
        values = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        return np.array(values, dtype=bool).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        small = st.integers(-9, 9).filter(lambda v: info.min <= v <= info.max)
        values = data.draw(st.lists(st.one_of(small, st.integers(int(info.min), int(info.max))), min_size=n, max_size=n))
        return np.array(values, dtype=dtype).reshape(shape)
    limit = 100.0 if gpu_trig else 2.0**127
    finite = st.floats(-limit, limit, allow_nan=False, width=32)
    special = st.sampled_from([v for v in SPECIALS if gpu_trig is False or not math.isfinite(v) or abs(v) <= limit])
    values = data.draw(st.lists(st.one_of(finite, special, st.floats(-4, 4, width=32)), min_size=n, max_size=n))
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np.float64).astype(dtype).reshape(shape)


def tolerance(dtype: np.dtype, name: str, gpu: bool) -> tuple[float, float]:
    """(rtol, atol) of a float result: the simulator computes as NumPy does (compositions round a few more
    times); the GPU's approximate instructions add relative errors of a few float32 ulps."""
    if dtype == np.float64:
        return 1e-12, 1e-300
    base = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2}.get(dtype, 2e-6)
    if gpu and name in APPROXIMATE:
        base = max(base, 2e-5 if name not in TRIG else 1e-4)
    return base, (1e-5 if name in TRIG and gpu else 1e-30 if dtype != np.float16 else 1e-7)


def expected(name: str, args: list[np.ndarray]) -> np.ndarray | Exception:
    """NumPy's answer (computed on float32 for bfloat16 where ml_dtypes has no loop), or its refusal."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(getattr(np, name)(*args))
    except (TypeError, ValueError) as e:
        return e


def compare(got: Any, want: np.ndarray, name: str, gpu: bool, where: np.ndarray | None = None) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, NumPy's {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape}, NumPy's {want.shape}"
    if where is not None:
        got, want = got[where], want[where]
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    rtol, atol = tolerance(want.dtype, name, gpu)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=name)


def undefined(name: str, args: list[np.ndarray]) -> np.ndarray | None:
    """Elements where NumPy's result is platform-defined (a C undefined behaviour): not compared."""
    a = args[0]
    if name == "reciprocal" and a.dtype.kind in "iu":
        return np.broadcast_to(a != 0, a.shape)
    if name in ("floor_divide", "remainder", "mod", "fmod") and a.dtype.kind == "i":
        b = args[1]
        shape = np.broadcast_shapes(a.shape, b.shape)
        return np.broadcast_to(~((a == np.iinfo(a.dtype).min) & (b == -1)), shape)  # INT_MIN // -1 overflows
    return None


def run_case(name: str, kind: str, args: list[np.ndarray], gpu: bool) -> None:
    want = expected(name, args)
    fn = program(kind, name)
    if isinstance(want, Exception):
        if isinstance(want, ValueError) and name == "power":  # ints to negative int powers: a runtime error
            return
        with pytest.raises(CompilationError, match=r"not supported|is not supported|boolean"):
            fn(*args)
        return
    got = fn(*args)
    compare(got, want, name, gpu, undefined(name, args))


FAST = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", UNARY)
@FAST
@given(data=st.data())
def test_unary_ufuncs_match_numpy(name: str, device: str, data: st.DataObject) -> None:
    gpu = on_gpu(device)
    dtype = data.draw(st.sampled_from(DTYPES))
    shape = data.draw(st.sampled_from(SHAPES))
    x = arrays(dtype, shape, data, gpu_trig=gpu and name in TRIG)
    kind = data.draw(st.sampled_from(["tt", "np", *(["op"] if name in OPERATORS else [])]))
    run_case(name, kind, [x], gpu)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", BINARY)
@FAST
@given(data=st.data())
def test_binary_ufuncs_match_numpy(name: str, device: str, data: st.DataObject) -> None:
    gpu = on_gpu(device)
    da, db = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    sa = data.draw(st.sampled_from(SHAPES))
    sb = data.draw(st.sampled_from(PAIRED[sa]))
    a, b = arrays(da, sa, data), arrays(db, sb, data)
    if name == "power" and (a.dtype.kind == "f" or b.dtype.kind == "f" or BF16 in (a.dtype, b.dtype)):
        a, b = np.clip(a, -1e3, 1e3).astype(a.dtype), np.clip(b, -8, 8).astype(b.dtype)  # away from overflow
    kind = data.draw(st.sampled_from(["tt", "np", *(["op"] if name in OPERATORS else [])]))
    run_case(name, kind, [a, b], gpu)


@pytest.mark.parametrize("device", DEVICES)
@FAST
@given(data=st.data())
def test_python_scalars_are_weak(device: str, data: st.DataObject) -> None:
    """NEP 50: `x + 1` keeps x's dtype, `i32 * 0.5` is float64, a Python int out of range is an error."""
    gpu = on_gpu(device)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = arrays(dtype, data.draw(st.sampled_from(SHAPES)), data)
    scalar = data.draw(st.sampled_from([2, -3, 0.5, True, 300, 2**40]))
    name = data.draw(st.sampled_from(["add", "multiply", "maximum", "less", "true_divide"]))
    try:
        with np.errstate(all="ignore"):
            if dtype == BF16:  # NEP 50 as for float16 (ml_dtypes itself makes `bf16 + 1.0` float32)
                as_bf16 = lambda r: r.astype(BF16) if r.dtype.kind == "f" else r
                want = as_bf16(np.asarray(getattr(np, name)(x.astype(np.float32), scalar)))
            else:
                want = np.asarray(getattr(np, name)(x, scalar))
    except (OverflowError, TypeError):
        with pytest.raises(CompilationError, match="out of bounds|not supported"):
            program("tt", name)(x, scalar)
        return
    if name == "true_divide" and scalar == 0:
        return
    got = tt.jit(lambda v: getattr(tt, name)(v, scalar))(x)
    compare(got, want, name, gpu)


@cache
def method_program(name: str, *args: Any) -> Any:
    return tt.jit(lambda x: getattr(x, name)(*args))


@pytest.mark.parametrize("device", DEVICES)
@FAST
@given(data=st.data())
def test_astype_clip_round_methods(device: str, data: st.DataObject) -> None:
    gpu = on_gpu(device)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = arrays(dtype, data.draw(st.sampled_from(SHAPES)), data)
    to = data.draw(st.sampled_from(DTYPES))
    got = method_program("astype", to)(x)
    with np.errstate(all="ignore"):
        want = x.astype(to)
    defined = np.ones(x.shape, bool)
    if x.dtype.kind == "f" or x.dtype == BF16:
        wide = x.astype(np.float64)
        if to.kind in "iu":  # NaN, inf and out-of-range floats to ints are undefined in C (and NumPy)
            info = np.iinfo(to)
            defined = np.isfinite(wide) & (wide > info.min - 1) & (wide < info.max + 1)
    compare(got, want, "astype", gpu, defined)
    lo, hi = data.draw(st.sampled_from([(0, 1), (None, 2), (-1.5, None), (3, -3)]))
    if x.dtype.kind == "u" and any(isinstance(v, int) and v < 0 for v in (lo, hi)):
        return  # NumPy: "Python integer -3 out of bounds for uint8"
    with np.errstate(all="ignore"):
        if x.dtype == BF16:  # NEP 50 as for float16: Python bounds take bfloat16
            want_clip = np.clip(x.astype(np.float32), lo, hi).astype(BF16)
        else:
            want_clip = np.clip(x, lo, hi)
    compare(method_program("clip", lo, hi)(x), np.asarray(want_clip), "clip", gpu)
    decimals = data.draw(st.sampled_from([0, 1, -1, 2]))
    if x.dtype.kind == "b" and decimals:
        return
    with np.errstate(all="ignore"):
        want_round = np.round(x, decimals)
    compare(method_program("round", decimals)(x), np.asarray(want_round), "round", gpu)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["sigmoid", "erf", "rsqrt"])
@FAST
@given(data=st.data())
def test_functions_numpy_spells_otherwise(name: str, device: str, data: st.DataObject) -> None:
    """tt.sigmoid (scipy's expit), tt.erf (scipy's erf), tt.rsqrt: np.exp's result types."""
    gpu = on_gpu(device)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = arrays(dtype, data.draw(st.sampled_from(SHAPES)), data)
    with np.errstate(all="ignore"):
        wide = np.exp(x).dtype
        v = x.astype(np.float64)
        want = {"sigmoid": lambda: 1 / (1 + np.exp(-v)), "rsqrt": lambda: 1 / np.sqrt(v),
                "erf": lambda: np.vectorize(math.erf, otypes=[np.float64])(v)}[name]().astype(wide)  # fmt: skip
    got = np.asarray(program("tt", name)(x))
    assert got.dtype == wide
    rtol = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2}.get(wide, 1e-5 if wide == np.float32 else 1e-12)
    atol = 2e-7 if name == "erf" and (gpu or wide != np.float64) else 0.0  # A&S 7.1.26 on the GPU
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def _erfinv(x: np.ndarray) -> np.ndarray:
    """erfinv in float64 by bisection on math.erf (NaN past ±1, ±inf at ±1)."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    lo, hi = np.full(x.shape, -7.0), np.full(x.shape, 7.0)
    for _ in range(80):
        mid = (lo + hi) / 2
        below = erf(mid) < x
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    lo = np.where(np.abs(x) < 1e-8, x * (math.sqrt(math.pi) / 2), lo)  # erfinv's first term: exact in float64 there
    with np.errstate(invalid="ignore"):
        lo = np.where(np.abs(x) == 1, np.copysign(np.inf, x), lo)
        return np.where((np.abs(x) > 1) | np.isnan(x), np.nan, lo)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_erfinv_inverts_erf_to_float32_accuracy(device: str, dtype: np.dtype) -> None:
    """tt.erfinv (scipy's), np.exp's result types, Giles' polynomials: float32's accuracy (NumPy has no erfinv)."""
    gpu = on_gpu(device)
    x = np.concatenate([np.linspace(-0.9999, 0.9999, 4001), [-1, 1, -1.5, 2, np.nan, 0, 1e-30]]).astype(dtype)
    got = np.asarray(program("tt", "erfinv")(x))
    assert got.dtype == np.exp(x).dtype
    rtol = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2}.get(np.dtype(dtype), 1e-6)
    want = _erfinv(x.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=1e-30, equal_nan=True, err_msg=str(gpu))


# ---- refusals --------------------------------------------------------------------------------------


@tt.jit
def float_and(x):
    return tt.bitwise_and(x, x)


@tt.jit
def float_shift(x):
    return np.left_shift(x, 1)


@tt.jit
def int_negative_power(x):
    return x ** -2


def test_refused_dtypes_name_the_ufunc_the_types_and_the_fix() -> None:
    x = np.ones(4, np.float32)
    with pytest.raises(CompilationError, match=r"test_numpy_elementwise.py:\d+.*ufunc 'bitwise_and' not supported "
                                               r"for the input types \(float32, float32\).*astype\(tt.int32\)"):
        float_and(x)
    with pytest.raises(CompilationError, match=r"ufunc 'left_shift' not supported for the input types \(float32, int\)"):
        float_shift(x)
    with pytest.raises(CompilationError, match=r"test_numpy_elementwise.py:\d+.*Integers to negative integer powers"):
        int_negative_power(np.ones(4, np.int32))


# ---- lowering: integer powers multiply, activations fuse into matmul epilogues ----------------------


def test_integer_powers_are_products() -> None:
    ops = [op.name for op in trace(lambda h: (h**3, h**2, h**0.5, h**-1.0), [np.ones(4, np.float32)]).walk()]
    assert "tta.pow" not in ops and ops.count("tta.mul") == 3 and "tta.sqrt" in ops and "tta.div" in ops
    int_ops = [op.name for op in trace(lambda i: i**10, [np.ones(4, np.int32)]).walk()]
    assert "tta.pow" not in int_ops and int_ops.count("tta.mul") == 4  # square-and-multiply


@tt.jit
def gelu_linear(x, w, b):
    h = x @ w.T + b
    return 0.5 * h * (1 + tt.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


@tt.jit
def swiglu(x, w1, w3):
    a = x @ w1.T
    return tt.sigmoid(a) * a * (x @ w3.T)


@pytest.mark.parametrize("device", DEVICES)
def test_activations_fuse_into_matmul_epilogues(device: str) -> None:
    on_gpu(device)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 24)).astype(np.float32)
    w, w3 = rng.standard_normal((2, 20, 24)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    gelu = gelu_linear.compile(x, w, b)
    assert gelu.num_launches == 1
    h = x @ w.T + b
    np.testing.assert_allclose(gelu(x, w, b), 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3))),
                               rtol=1e-4, atol=1e-5)
    glu = swiglu.compile(x, w, w3)
    assert glu.num_launches == 1
    a = x @ w.T
    np.testing.assert_allclose(glu(x, w, w3), a / (1 + np.exp(-a)) * (x @ w3.T), rtol=1e-4, atol=1e-5)


@tt.jit
def f64_linear(x, w):
    return tt.exp(x) @ w.T * 2.0


@pytest.mark.parametrize("device", DEVICES)
def test_f64_matmul_accumulates_in_f64(device: str) -> None:
    on_gpu(device)
    x = np.random.default_rng(3).integers(-120, -100, size=(9, 40)).astype(np.int32)  # exp: ~1e-50, below f32
    w = np.random.default_rng(4).standard_normal((7, 40))
    got = f64_linear(x, w)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.exp(x) @ w.T * 2.0, rtol=1e-12, atol=1e-300)


# ---- int64 sums, f64 reductions --------------------------------------------------------------------


@tt.jit
def sums(i, f):
    return i.sum(), i.sum(axis=-1), f.sum(axis=0), f.mean(), i.mean(axis=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtypes", [(np.int32, np.float64), (np.int8, np.float32), (np.int64, np.float16),
                                    (np.uint8, np.float32)])
def test_sums_have_numpys_dtypes(device: str, dtypes: tuple[type, type]) -> None:
    on_gpu(device)
    rng = np.random.default_rng(1)
    info = np.iinfo(dtypes[0])
    i = rng.integers(info.min // 2, info.max // 2, size=(5, 300), dtype=dtypes[0])
    f = rng.standard_normal((300, 3)).astype(dtypes[1])
    magnitude = np.abs(f.astype(np.float64))
    scales = (None, None, magnitude.sum(axis=0), magnitude.mean(), None)
    for got, want, scale in zip(sums(i, f), (i.sum(), i.sum(axis=-1), f.sum(axis=0), f.mean(), i.mean(axis=0)), scales):
        got = np.asarray(got)
        assert got.dtype == want.dtype
        if want.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want)
        else:  # NumPy's and tinyton's summation orders differ: a few ulps of the sum of magnitudes
            bound = 1e-12 if scale is None else 8 * np.finfo(want.dtype).eps * scale
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=np.max(bound))


def test_every_numpy_name_is_a_documented_builtin() -> None:
    """One `ARRAY_IMPLS` entry per NumPy name (the README's NumPy table is generated from it), each a `tt.`
    builtin with a one-line docstring."""
    from tinyton.frontend.traced import ARRAY_IMPLS

    names = [*UNARY, *BINARY, "clip", "round", "around", "where", "astype", "sigmoid", "erf", "erfinv", "rsqrt", "abs",
             "pow", "atan2", "relu"]  # fmt: skip
    for name in names:
        assert name in ARRAY_IMPLS and hasattr(tt, name), name
        doc = ARRAY_IMPLS[name].__doc__
        assert doc and "\n" not in doc.strip(), name


# ---- the libm functions in kernels (Triton's libdevice names, also tl.math.*) ------------------------


@tt.jit
def libm_kernel(x_ptr, out_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.arange(0, BLOCK)
    mask = offsets < n
    x = tt.load(x_ptr + offsets, mask=mask)
    tt.store(out_ptr + offsets, tt.tanh(x), mask=mask)
    tt.store(out_ptr + BLOCK + offsets, tt.math.tan(x), mask=mask)
    tt.store(out_ptr + 2 * BLOCK + offsets, tt.log10(x), mask=mask)
    tt.store(out_ptr + 3 * BLOCK + offsets, tt.log1p(x), mask=mask)
    tt.store(out_ptr + 4 * BLOCK + offsets, tt.expm1(x), mask=mask)
    tt.store(out_ptr + 5 * BLOCK + offsets, tt.trunc(x), mask=mask)
    tt.store(out_ptr + 6 * BLOCK + offsets, tt.rint(x), mask=mask)


@pytest.mark.parametrize("device", DEVICES)
def test_libm_functions_in_kernels(device: str) -> None:
    gpu = on_gpu(device)
    x = np.array([-3.7, -1.5, -0.5, -1e-4, 0.0, 2.5e-5, 0.3, 0.5, 1.5, 2.5, 9.0, 10.5, -60.0, np.nan, np.inf],
                 np.float32)
    out = np.zeros((7, 16), np.float32)
    libm_kernel[(1,)](x, out, len(x), BLOCK=16)
    with np.errstate(all="ignore"):
        expected = [np.tanh(x), np.tan(x), np.log10(x), np.log1p(x), np.expm1(x), np.trunc(x), np.rint(x)]
    for got, want in zip(out, expected):
        np.testing.assert_allclose(got[: len(x)], want, rtol=4e-6 if gpu else 1e-6, atol=1e-7, equal_nan=True)
