"""bfloat16 end to end and Triton's `tt.dot(a, b, acc, input_precision, out_dtype)`.

Simulator runs check against NumPy (f32 accumulation; bf16 through ml_dtypes), ptxas checks the bf16 and
dot kernels for sm_80 and sm_90 on both PTX paths, and the `gpu` tests rerun the same on the GPU.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from dot_kernels import (
    bf16_math,
    dot_accumulate,
    dot_bad_precision,
    dot_mismatch,
    dot_small,
    matmul_kernel,
)

import tinyton as tt
from tinyton.compiler import compile_module, matmul_tuning
from tinyton.compiler.autotune import Tuner
from tinyton.errors import CompilationError
from tinyton.frontend.promotion import result_element
from tinyton.lowering.fusion.matmul_tiles import (
    MatmulProblem,
    MatmulTiles,
    candidates,
    default_tiles,
)
from tinyton.lowering.ptx import assemble_ptx
from tinyton.runtime.cache import KernelCache
from tinyton.runtime.simulator.tiles import round_tf32
from toolchains import TOOLCHAINS, needs_ptxas

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32
on_gpu = pytest.mark.gpu


@pytest.fixture
def simulator(monkeypatch):
    monkeypatch.setenv("TINYTON_BACKEND", "sim")


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


def _r(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 and back (one bf16 op computed in f32)."""
    return x.astype(BF16).astype(F32)


def _bf16_math_case(n: int = 100):
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(n).astype(BF16) for _ in range(2))
    i = rng.integers(-5, 5, n).astype(np.int32)
    h = rng.standard_normal(n).astype(np.float16)
    xf, yf = x.astype(F32), y.astype(F32)
    z = _r(_r(xf * yf) + 1.5)
    z = _r(np.where(z > 2, _r(z / yf), _r(np.exp(z))) - np.maximum(xf, -xf))
    for term in (i.astype(F32), (xf > 0).astype(F32), _r(h.astype(F32)), np.trunc(xf)):
        z = _r(z + term)
    return (x, y, i, h), z.astype(BF16), np.float32(xf.sum()).astype(BF16)


def _run_bf16_math():
    (x, y, i, h), expected, total = _bf16_math_case()
    out, s = np.zeros(100, BF16), np.zeros(1, BF16)
    bf16_math[(1,)](x, y, i, h, out, s, 100, BLOCK=128)
    return out, expected, s[0], total


def test_bf16_elementwise_rounds_like_f32_then_bf16(simulator):
    out, expected, s, total = _run_bf16_math()
    assert np.array_equal(_bits(out), _bits(expected))
    assert abs(float(s) - float(total)) <= 2 ** -7 * abs(float(total)) + 1e-2


def test_bf16_types_and_promotion(simulator):
    bf16, f16, f32 = tt.bfloat16.ir, tt.float16.ir, tt.float32.ir
    from xdsl.dialects.builtin import i1, i32

    assert tt.dtype_of("bfloat16") is tt.bfloat16 and tt.dtype_of(BF16) is tt.bfloat16
    f64 = tt.float64.ir  # array programs: NumPy's (ml_dtypes') promotion
    assert [result_element([bf16, t], []) for t in (i1, i32, f16, bf16, f32)] == [bf16, f64, f32, bf16, f32]
    text = bf16_math.compile(*_bf16_math_case()[0], np.zeros(100, BF16), np.zeros(1, BF16), 100, BLOCK=128).asm["tt"]
    assert re.search(r"tt.mul %\d+, %\d+ : tensor<128xbf16>", text)  # bf16 stays bf16 (no f32 in the IR)


def _matmul(a, b, *, block=(32, 32, 32), precision="ieee", out=F32, out_f16=False):
    M, K = a.shape
    N = b.shape[1]
    c = np.zeros((M, N), out)
    bm, bn, bk = block
    grid = (tt.cdiv(M, bm), tt.cdiv(N, bn))
    matmul_kernel[grid](a, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision, OUT_F16=out_f16)
    return c


def _reference(a, b):
    return a.astype(F32) @ b.astype(F32)


SHAPES = [(64, 64, 64), (50, 70, 40), (33, 17, 50), (16, 16, 16), (100, 40, 200)]


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("block", [(32, 32, 32), (16, 64, 16)], ids=["b32", "b16x64"])
def test_half_dot_matches_numpy_f32_accumulation(simulator, dtype, shape, block):
    M, N, K = shape
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    np.testing.assert_allclose(_matmul(a, b, block=block), _reference(a, b), rtol=1e-5, atol=1e-4)


def test_f32_dot_ieee_exact_and_tf32_rounded(simulator):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 40)).astype(F32), rng.standard_normal((40, 24)).astype(F32)
    np.testing.assert_allclose(_matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    tf32 = _matmul(a, b, precision="tf32")
    np.testing.assert_allclose(tf32, round_tf32(a) @ round_tf32(b), rtol=1e-5, atol=1e-5)
    assert np.abs(tf32 - a @ b).max() > 1e-5  # the operands really were rounded
    np.testing.assert_allclose(_matmul(a, b, precision="tf32x3"), a @ b, rtol=1e-5, atol=1e-5)


def test_round_tf32_keeps_ten_mantissa_bits():
    x = np.array([1 + 2**-10, 1 + 2**-11, 1 + 2**-11 + 2**-20, -(1 + 2**-12), np.inf, np.nan], F32)
    r = round_tf32(x)
    assert list(r[:4]) == [1 + 2**-10, 1 + 2**-10, 1 + 2**-10, -1.0]
    assert np.isinf(r[4]) and np.isnan(r[5])


def test_f16_accumulator_out_dtype(simulator):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 32)).astype(np.float16)
    c = _matmul(a, b, out=np.float16, out_f16=True)
    np.testing.assert_allclose(c.astype(F32), _reference(a, b), rtol=2e-2, atol=2e-2)
    tt_text = matmul_kernel.compile(a, b, c, 32, 32, 64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, PRECISION="ieee",
                                    OUT_F16=True).asm["tt"]
    assert "tensor<32x32xf16> -> tensor<32x32xf16>" in tt_text


def test_dot_keywords_and_accumulate(simulator):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((16, 16)).astype(BF16), rng.standard_normal((16, 16)).astype(BF16)
    c = np.zeros((16, 16), F32)
    dot_accumulate[(1,)](a, b, c, BLOCK=16)
    ref = _reference(a, b)
    np.testing.assert_allclose(c, ref + _r(ref), rtol=1e-5, atol=1e-4)
    text = dot_accumulate.compile(a, b, c, BLOCK=16).asm["tt"]
    assert "tt.dot" in text and "input_precision" not in text  # "ieee" is the default, not printed


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (dot_mismatch, "tt.dot inner dimensions differ"),
        (dot_small, "tt.dot needs blocks of at least 16"),
        (dot_bad_precision, "input_precision must be one of"),
    ],
)
def test_bad_dot_names_the_line(simulator, kernel, message):
    a = np.zeros(64 * 64, np.float16)
    with pytest.raises(CompilationError, match=message) as info:
        kernel[(1,)](a, BLOCK=16 if kernel is not dot_small else 8)
    assert "dot_kernels.py:" in str(info.value)


# ---- array programs --------------------------------------------------------------------------


@tt.jit
def linear_gelu_like(x, w, bias, residual):
    return tt.maximum(x @ w + bias, 0.0) + residual


@tt.jit
def batched(x, y):
    return x @ y


@pytest.mark.parametrize("dtype", [np.float16, BF16, F32], ids=["f16", "bf16", "f32"])
def test_array_matmul_batched_with_epilogue(simulator, dtype):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 40, 50)).astype(dtype)
    w = rng.standard_normal((50, 72)).astype(dtype)
    bias, residual = rng.standard_normal(72).astype(dtype), rng.standard_normal((3, 40, 72)).astype(dtype)
    out = linear_gelu_like(x, w, bias, residual)
    assert out.dtype == dtype and out.shape == (2, 3, 40, 72)
    xw = (x.astype(F32) @ w.astype(F32)).astype(dtype).astype(F32)
    ref = np.maximum(xw + bias.astype(F32), 0)
    if dtype != F32:
        ref = ref.astype(dtype).astype(F32)
    ref = ref + residual.astype(F32)
    tol = {np.dtype(np.float16): 2e-2, BF16: 1e-1, np.dtype(F32): 1e-4}[np.dtype(dtype)]
    np.testing.assert_allclose(out.astype(F32), ref, rtol=tol, atol=tol)
    assert linear_gelu_like.compile(x, w, bias, residual).asm["fused"].count("tta.fusion") == 1


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_array_matmul_broadcast_batch_dims(simulator, dtype):
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((4, 1, 17, 33)).astype(dtype), rng.standard_normal((3, 33, 20)).astype(dtype)
    out = batched(x, y)
    ref = np.matmul(x.astype(F32), y.astype(F32))
    assert out.shape == (4, 3, 17, 20)
    np.testing.assert_allclose(out.astype(F32), ref, rtol=1e-2, atol=5e-2)


def test_matmul_tiles_fit_the_problem():
    p = MatmulProblem(1, 16, 4096, 4096, "float16")
    tiles = candidates(p)
    assert all(t.block_m == 16 for t in tiles) and len(set(tiles)) == len(tiles)
    assert default_tiles(MatmulProblem(2, 40, 72, 50, "bfloat16")) == MatmulTiles(64, 64, 32, 4)
    assert MatmulTiles(128, 256, 64, 8).fit(MatmulProblem(1, 20, 20, 20, "float32")) == MatmulTiles(32, 32, 32, 4)


def test_tuner_measures_once_and_keeps_the_choice(tmp_path):
    tiles = [MatmulTiles(16, 16, 16, 1), MatmulTiles(32, 32, 32, 4), MatmulTiles(64, 64, 32, 4)]
    times = {tiles[0]: 3.0, tiles[1]: 1.0}  # the third fails to run
    measured = []

    def prepare(t: MatmulTiles):
        measured.append(t)
        return lambda: times[t]

    decode = lambda d: MatmulTiles(**d)
    tuner = Tuner("test", decode=decode, cache=KernelCache(tmp_path, disk=True))
    assert tuner.choose(("gpu", (1, 2)), tiles, prepare) == tiles[1] and len(measured) == 3
    fresh = Tuner("test", decode=decode, cache=KernelCache(tmp_path, disk=True))  # a later process
    assert fresh.choose(("gpu", (1, 2)), tiles, prepare) == tiles[1] and len(measured) == 3
    assert fresh.choose(("gpu", (1, 4)), tiles, prepare) == tiles[1] and len(measured) == 6


def test_torch_bf16_interop(simulator):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a = torch.from_numpy(rng.standard_normal((32, 32)).astype(F32)).to(torch.bfloat16)
    out = batched(a, a)
    assert out.dtype == torch.bfloat16
    ref = a.float() @ a.float()
    assert torch.allclose(out.float(), ref, rtol=1e-2, atol=1e-1)


# ---- PTX --------------------------------------------------------------------------------------


def _dot_variants():
    z16, zb, z32 = (np.zeros((64, 64), d) for d in (np.float16, BF16, F32))
    common = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    yield matmul_kernel.compile(z16, z16, z32, 64, 64, 64, PRECISION="ieee", OUT_F16=False, **common)
    yield matmul_kernel.compile(zb, zb, zb, 64, 64, 64, PRECISION="ieee", OUT_F16=False, **common)
    yield matmul_kernel.compile(z32, z32, z32, 64, 64, 64, PRECISION="tf32", OUT_F16=False, **common)
    yield matmul_kernel.compile(z16, z16, z16, 64, 64, 64, PRECISION="ieee", OUT_F16=True, **common)
    (x, y, i, h), _, _ = _bf16_math_case(128)
    yield bf16_math.compile(x, y, i, h, x, x, 100, BLOCK=128)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_bf16_and_dot_kernels_assemble(simulator, arch, toolchain):
    for kernel in _dot_variants():
        fresh = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch=arch, toolchain=toolchain)
        ptx = fresh.asm["ptx"]
        assert assemble_ptx(ptx, arch), kernel.name


# ---- GPU --------------------------------------------------------------------------------------


@on_gpu
def test_gpu_bf16_elementwise_matches_simulator():
    out, expected, _, _ = _run_bf16_math()
    # fmul + fadd may contract to one bf16 fma on the GPU: at most one bf16 ulp apart
    np.testing.assert_allclose(out.astype(F32), expected.astype(F32), rtol=2**-7, atol=2**-7)


@on_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("shape", SHAPES + [(256, 256, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_gpu_half_dot(dtype, shape):
    M, N, K = shape
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    for block in [(32, 32, 32), (64, 64, 32), (128, 128, 32)]:
        np.testing.assert_allclose(_matmul(a, b, block=block), _reference(a, b), rtol=1e-3, atol=1e-2)


@on_gpu
def test_gpu_f32_dot_precisions():
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((96, 80)).astype(F32), rng.standard_normal((80, 48)).astype(F32)
    np.testing.assert_allclose(_matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_matmul(a, b, precision="tf32"), a @ b, rtol=1e-2, atol=5e-2)


@on_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16, F32], ids=["f16", "bf16", "f32"])
def test_gpu_array_matmul(dtype, tmp_path, monkeypatch):
    monkeypatch.delenv("TINYTON_TUNE", raising=False)  # measured even where the run turns tuners off
    monkeypatch.setattr(matmul_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))  # measure afresh
    test_array_matmul_batched_with_epilogue(None, dtype)
    if dtype != F32:
        test_array_matmul_broadcast_batch_dims(None, dtype)
    assert not list((tmp_path / "tune-matmul").glob("*.json")), "small problems take the default tiles"
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((1024, 1030)).astype(dtype), rng.standard_normal((1030, 512)).astype(dtype)
    ref = a.astype(F32) @ b.astype(F32)
    np.testing.assert_allclose(batched(a, b).astype(F32), ref, rtol=2e-2, atol=5e-1 if dtype == BF16 else 1e-1)
    assert list((tmp_path / "tune-matmul").glob("*.json")), "the matmul tiles were not measured and stored"


def test_small_matmuls_are_not_tuned(monkeypatch):
    """Below TUNE_MIN_FLOPS the default tiles are taken even on a GPU (the tuner is never asked)."""
    monkeypatch.setattr(matmul_tuning.driver, "is_available", lambda: True)
    monkeypatch.setattr(matmul_tuning.TUNER, "choose", lambda *_: pytest.fail("tuned a small problem"))
    small = MatmulProblem(2, 40, 72, 50, "bfloat16")
    assert matmul_tuning.matmul_tiles(small) == default_tiles(small)



def test_decode_matmul_is_tuned():
    """A 16-row decode step at LLM width is worth tuning (H100: 10.5 TFLOPS on default tiles, 15.3 tuned)."""
    assert 2 * 16 * 4096 * 4096 >= matmul_tuning.TUNE_MIN_FLOPS > 2 * 1000 * 777 * 300
