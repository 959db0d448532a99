"""Float `%`, fmod and `//` are exact on the GPU, as NumPy's: NVPTX's expansion of LLVM's `frem`
(`a - b * trunc(a / b)`) gave float32 1 % 1e-30 = -1.8e-08 on an H200 (NumPy: 7.27e-31).

The lowering's fmod (tinyton/lowering/tt_to_llvm/fmod.py) is checked here without a GPU: its LLVM IR, the
function every kernel that computes a float remainder carries, is JIT-compiled for this host and compared
with np.fmod bit for bit (subnormals, exponent gaps of 2,000 bits, NaN and infinities). NumPy's remainder,
floor_divide and divmod cases (the sign of a zero remainder, quotients past 2**24, float16 through
float32) run in array programs and kernels on the simulator and, marked `gpu`, on the GPU.
"""

from __future__ import annotations

import copy
import ctypes

import numpy as np
import pytest

import tinyton as tt
from tinyton.frontend.arguments import simulator_argument

BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module")
def host_fmod():
    """The fmod helper's LLVM IR compiled for this host: a Python callable (double, double) -> double."""
    llb = pytest.importorskip("llvmlite.binding")
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp

    from tinyton.lowering.ptx.llvmlite_ir import to_llvmlite
    from tinyton.lowering.tt_to_llvm.fmod import FMOD_F64, fmod_f64_function

    llb.initialize_native_target()
    llb.initialize_native_asmprinter()
    fn = fmod_f64_function()
    fn.linkage = llvm.LinkageAttr("external")  # internal in kernels (inlined); callable from the host here
    machine = llb.Target.from_default_triple().create_target_machine()
    module = to_llvmlite(ModuleOp([fn]), triple=llb.get_default_triple(), data_layout=str(machine.target_data))
    parsed = llb.parse_assembly(str(module))
    parsed.verify()
    engine = llb.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    address = engine.get_function_address(FMOD_F64)
    yield ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)(address)
    del engine


def _random_doubles(rng: np.random.Generator, n: int) -> np.ndarray:
    """Doubles of every exponent (uniform bit patterns): subnormals, huge, NaN, infinities."""
    return rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False).view(np.float64)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                     1.7976931348623157e308, 1.0, -1.0, 3.0, 0.1, -2.5, 1e-30, 3e38])  # fmt: skip


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))


def test_fmod_helper_is_exact_for_every_double(host_fmod) -> None:
    rng = np.random.default_rng(0)
    a = np.concatenate([_random_doubles(rng, 20000), np.repeat(SPECIALS, len(SPECIALS))])
    b = np.concatenate([_random_doubles(rng, 20000), np.tile(SPECIALS, len(SPECIALS))])
    got = np.array([host_fmod(x, y) for x, y in zip(a, b)])
    with np.errstate(invalid="ignore"):
        want = np.fmod(a, b)
    bad = np.flatnonzero(~_same_bits(got, want))
    assert not bad.size, [(a[i], b[i], got[i], want[i]) for i in bad[:5]]


def test_fmod_helper_is_exact_for_float32_operands(host_fmod) -> None:
    """float32 operands widen exactly and the remainder narrows exactly: float32's fmod, the H200 case first."""
    rng = np.random.default_rng(1)
    a = np.concatenate([[1.0], rng.standard_normal(5000) * 10.0 ** rng.integers(-40, 38, 5000)]).astype(np.float32)
    b = np.concatenate([[1e-30], rng.standard_normal(5000) * 10.0 ** rng.integers(-45, 37, 5000)]).astype(np.float32)
    got = np.array([host_fmod(float(x), float(y)) for x, y in zip(a, b)]).astype(np.float32)
    with np.errstate(invalid="ignore"):
        want = np.fmod(a, b)
    np.testing.assert_array_equal(got, want)
    assert got[0] == np.float32(7.272101e-31)


def _numpy_cases(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Quotients past 2**24 (2**53 for float64), zero remainders of either sign, mixed signs, NaN, inf."""
    big = 3e38 if dtype == np.float32 else 6e4 if dtype == np.float16 else 1e300
    tiny = 1e-30 if dtype == np.float32 else 1e-7 if dtype == np.float16 else 1e-300
    a = [1.0, -1.0, 1.0, big, -big, -4.0, 4.0, -4.0, 7.5, -7.5, 0.0, -0.0, np.inf, 5.0, -5.0, np.nan, 1.0, 2.5]
    b = [tiny, tiny, -tiny, 3.3, 0.7, 2.0, -2.0, -2.0, -2.0, 2.0, 3.0, -3.0, 2.0, np.inf, np.inf, 1.0, 0.0, -0.0]
    return np.array(a, dtype), np.array(b, dtype)


def _assert_numpy_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal, NaN where NumPy's is, and the same sign (of zeros too: -4.0 % 2.0 is +0.0). A NaN's sign bit is
    the hardware's (x86 makes negative NaNs, the GPU positive ones) and means nothing, so it is not compared."""
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_remainder_and_floor_divide_are_numpys(backend: str, dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    a, b = _numpy_cases(dtype)
    got_mod, got_div, np_div, np_mod, py_div, py_mod = tt.jit(lambda x, y: (x % y, x // y, *np.divmod(x, y),
                                                                            *divmod(x, y)))(a, b)
    with np.errstate(all="ignore"):
        for mod, div in ((got_mod, got_div), (np_mod, np_div), (py_mod, py_div)):
            _assert_numpy_bits(mod, np.remainder(a, b))
            _assert_numpy_bits(div, np.floor_divide(a, b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_remainder_of_a_float32_is_exact(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hypothesis case of the H200 run: int8 1 % float32 [0, ..., 1e-30] is float32 7.27e-31 at the end."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    a, b = np.array([1], np.int8), np.array([0.0] * 6 + [1e-30], np.float32)
    with np.errstate(all="ignore"):
        _assert_numpy_bits(tt.jit(lambda x, y: np.remainder(x, y))(a, b), np.remainder(a, b))


@tt.jit
def kernel_fmod(a_ptr, b_ptr, r_ptr, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    tt.store(r_ptr + offs, tt.load(a_ptr + offs) % tt.load(b_ptr + offs))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_remainder_is_fmod_on_the_gpu(dtype: type) -> None:
    """A kernel's `%` (C's fmod): the GPU gives the simulator's np.fmod, bit for bit."""
    a, b = (np.resize(v, 32) for v in _numpy_cases(dtype))
    compiled = kernel_fmod.compile(a, b, np.zeros_like(a), BLOCK=32)
    sim, dev = copy.deepcopy([a, b, np.zeros_like(a)]), copy.deepcopy([a, b, np.zeros_like(a)])
    compiled.simulate((1,), [simulator_argument(x) for x in sim])
    compiled.launch((1,), dev)
    with np.errstate(invalid="ignore"):
        _assert_numpy_bits(sim[2], np.fmod(a, b))
    _assert_numpy_bits(dev[2], sim[2])
