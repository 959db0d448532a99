"""`input_precision="tf32x3"`: float32 matmuls at float32 accuracy on tensor cores (3xTF32), in kernels and as
the default of array programs' float32 `@` (`TINYTON_FP32_MATMUL`).

On the simulator: the split into TF32 parts, the accuracy against float64 (a float32 bound that one TF32
product misses), NumPy's infinities and NaN, the array programs' choice of precision. With ptxas: the
kernels assemble on sm_80 and sm_90a, three mmas per piece, B of `x @ w.T` through `ldmatrix`, the full split
only behind a warp vote. On a GPU: the same accuracy and special values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dot_kernels import matmul_kernel, matmul_nt_kernel

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from tinyton.runtime.simulator.tiles import round_tf32, split_tf32x3
from toolchains import needs_ptxas

TF32_MMA = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
MAX = np.finfo(np.float32).max


def _bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A float32 matmul's error bound: (log2 k + k/16 + 4) float32 ulps of |A| |B| (docs/reliability.md)."""
    k = a.shape[1]
    return (math.log2(k) + k / 16 + 4) * 2.0**-23 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))


def _run(a: np.ndarray, b: np.ndarray, precision: str, transposed: bool, block=(64, 32, 32, 4)) -> np.ndarray:
    """`a @ b` by the matmul kernel; with `transposed`, from `w = b.T` as stored (the `x @ w.T` kernel)."""
    (m, k), (_, n) = a.shape, b.shape
    bm, bn, bk, warps = block
    c = np.full((m, n), np.nan, np.float32)
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    if transposed:
        w = np.ascontiguousarray(b.T)
        matmul_nt_kernel[grid](a, w, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision, num_warps=warps)
    else:
        matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision,
                            OUT_F16=False, num_warps=warps)
    return c


def _operands(rng, m: int, n: int, k: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return a, rng.uniform(-1, 1, (k, n)).astype(np.float32)


def _special_operands(rng) -> tuple[np.ndarray, np.ndarray]:
    """Normal values with infinities, NaN, values rounding would overflow (near float32's largest, where
    `b` has small entries so that no sum overflows), zeros in B under an infinity (inf * 0 = NaN), and
    TF32-exact values (lo = 0, whose cross products must not turn inf into NaN)."""
    a, b = _operands(rng, 40, 24, 48)
    a[3, 5], a[7, 0], a[11, 9], a[12, 1] = np.inf, -np.inf, np.nan, MAX
    a[20, 2], a[21, 3] = np.float32(3.4025e38), -MAX
    b[:, 4] = 1.0  # TF32-exact column
    b[5, 6] = 0.0  # inf * 0 in row 3
    b[1:4, :] = rng.uniform(-0.25, 0.25, (3, 24)).astype(np.float32)  # the large values times at most 1/4
    b[5, 10], b[30, 11] = np.inf, np.nan
    return a, b


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


# --- the split -------------------------------------------------------------------------------------------


def test_split_parts_are_tf32_and_represent_x():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200_000) * np.exp(rng.uniform(-70, 80, 200_000))).astype(np.float32)
    x = np.concatenate([x, np.float32([MAX, -MAX, 3.4025e38, 1.0, 0.0, -0.0, 1 / 3])])
    hi, lo, cross = split_tf32x3(x)
    for part in (hi, lo, cross):
        assert not np.any(part.view(np.uint32) & 0x1FFF), "every part is a TF32 value"
    assert np.isfinite(hi).all() and np.array_equal(cross, hi)
    error = np.abs(hi.astype(np.float64) + lo - x) / np.maximum(np.abs(x), 1e-30)
    assert error.max() <= 2.0**-23
    rounded = np.abs(x) < 3.4e38  # the largest values are truncated: lo up to 2^-10 x
    assert (np.abs(lo) <= np.where(rounded, 2.0**-11, 2.0**-10) * np.abs(x)).all()


def test_split_of_infinities_and_nan():
    hi, lo, cross = split_tf32x3(np.array([np.inf, -np.inf, np.nan], np.float32))
    assert hi[0] == np.inf and hi[1] == -np.inf and np.isnan(hi[2])
    assert (lo == 0).all() and (cross == 0).all()
    nan_payload_low = np.array([0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    assert np.isnan(split_tf32x3(nan_payload_low)[0]).all(), "a NaN whose payload is in the dropped bits stays NaN"


# --- kernels on the simulator -----------------------------------------------------------------------------


@pytest.mark.parametrize("transposed", [False, True], ids=["a@b", "x@w.T"])
@pytest.mark.parametrize("m, n, k", [(64, 32, 64), (70, 45, 300)])
def test_kernel_tf32x3_is_float32_accurate(m, n, k, transposed):
    """Within a float32 matmul's bound of the float64 product, as the ieee FMAs are; one TF32 product is not."""
    rng = np.random.default_rng(1)
    a, b = _operands(rng, m, n, k, scale=3.0)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = _bound(a, b)
    for precision in ("tf32x3", "ieee"):
        assert (np.abs(_run(a, b, precision, transposed) - exact) <= bound).all(), precision
    assert (np.abs(_run(a, b, "tf32", transposed) - exact) > bound).any(), "the bound tells TF32 from float32"


@pytest.mark.parametrize("transposed", [False, True], ids=["a@b", "x@w.T"])
def test_kernel_tf32x3_special_values_are_numpys(transposed):
    rng = np.random.default_rng(2)
    a, b = _special_operands(rng)
    got, want = _run(a, b, "tf32x3", transposed), _reference(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    with np.errstate(all="ignore"):
        bound = _bound(np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0))
    assert (np.abs(got[finite].astype(np.float64) - _reference(a, b)[finite]) <= bound[finite] + 1e-30).all()


def test_simulated_tf32x3_is_the_sum_of_the_parts_products():
    """The simulator multiplies exactly the parts the lowering makes: the small products, then hi * hi."""
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 32, 32, 32)
    (a_hi, a_lo, a_cross), (b_hi, b_lo, b_cross) = split_tf32x3(a), split_tf32x3(b)
    parts = a_lo.astype(np.float64) @ b_cross + a_cross.astype(np.float64) @ b_lo + a_hi.astype(np.float64) @ b_hi
    np.testing.assert_allclose(_run(a, b, "tf32x3", False, (32, 32, 32, 4)), parts, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(round_tf32(a), a), "the operands are not TF32 values already"


# --- array programs ---------------------------------------------------------------------------------------


@tt.jit
def linear_gelu(x, w, b):
    h = x @ w.T + b
    return 0.5 * h * (1 + tt.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


def _linear_gelu_reference(x, w, b):
    h = x.astype(np.float64) @ w.T.astype(np.float64) + b
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


@pytest.mark.parametrize("precision", [None, "ieee", "tf32"])
def test_array_program_fp32_matmul_precision(precision, monkeypatch):
    """float32 `@` is tf32x3 by default (`TINYTON_FP32_MATMUL` chooses), each choice its own compile."""
    if precision is None:
        monkeypatch.delenv("TINYTON_FP32_MATMUL", raising=False)
    else:
        monkeypatch.setenv("TINYTON_FP32_MATMUL", precision)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((48, 80)).astype(np.float32), rng.standard_normal((40, 80)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    program = linear_gelu.compile(x, w, b)  # a call reuses the program of its signature's first compile
    kernels = "\n".join(k.asm["tt"] for k in program.kernels())
    expected = precision or "tf32x3"
    assert (f'input_precision = "{expected}"' in kernels) == (expected != "ieee")
    got = program(x, w, b)
    bound = _bound(x, w.T) * 2 + 1e-6  # the epilogue's derivative is below 1.2; its own rounding in atol
    err = np.abs(got - _linear_gelu_reference(x, w, b))
    assert (err <= bound).all() if expected != "tf32" else (err > bound).any()


def test_array_program_tf32x3_matches_float64_with_a_batch_and_views():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 33, 70)).astype(np.float32), rng.standard_normal((70, 50)).astype(np.float32)

    @tt.jit
    def batched(x, w):
        return x @ w

    got = batched(x, w)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    bound = (math.log2(70) + 70 / 16 + 4) * 2.0**-23 * (np.abs(x).astype(np.float64) @ np.abs(w))
    assert (np.abs(got - exact) <= bound).all()


def test_bad_fp32_matmul_precision_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TINYTON_FP32_MATMUL", "fast")
    x = np.ones((16, 16), np.float32)
    with pytest.raises(CompilationError, match=r"TINYTON_FP32_MATMUL='fast' is not a float32 matmul precision; use tf32x3"):
        linear_gelu.compile(x, x, x[0])


# --- PTX ------------------------------------------------------------------------------------------------


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("transposed", [False, True], ids=["a@b", "x@w.T"])
def test_tf32x3_kernels_assemble(transposed, arch):
    """Three tf32 mmas per piece (one per piece for tf32), the full split behind `vote.any`; B of `x @ w.T` and A
    through `ldmatrix`, `cp.async` pipelining."""
    counts = {}
    for precision in ("tf32", "tf32x3"):
        a, c = np.zeros((256, 256), np.float32), np.zeros((256, 256), np.float32)
        kernel = (matmul_nt_kernel.compile(a, a, c, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                           PRECISION=precision, num_warps=8) if transposed else
                  matmul_kernel.compile(a, a, c, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                        PRECISION=precision, OUT_F16=False, num_warps=8))
        ptx = compile_module(kernel.module.clone(), num_warps=8, arch=arch).asm["ptx"]
        assert assemble_ptx(ptx, arch)
        counts[precision] = ptx.count(TF32_MMA)
        assert "cp.async" in ptx
        if precision == "tf32x3":
            assert "vote.sync.any.pred" in ptx and "cvt.rna.tf32" not in ptx
            if transposed:
                assert "ld.shared.f32" not in ptx and "ld.shared.b32" not in ptx  # B by ldmatrix, not element-wise
    assert counts["tf32x3"] == 2 * 3 * counts["tf32"], "three mmas per piece, in each of the two branches"


@needs_ptxas
def test_array_program_fp32_matmul_assembles_on_tensor_cores(monkeypatch):
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    monkeypatch.delenv("TINYTON_FP32_MATMUL", raising=False)
    x = np.zeros((256, 256), np.float32)
    ptx = linear_gelu.compile(x, x, x[0]).asm["ptx"]
    assert TF32_MMA in ptx and "vote.sync.any.pred" in ptx
    assert assemble_ptx(ptx, "sm_90a")


# --- on the GPU -------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("block", [(64, 64, 32, 4), (128, 128, 32, 8), (128, 64, 32, 4)], ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["a@b", "x@w.T"])
def test_gpu_tf32x3_is_float32_accurate(block, transposed):
    rng = np.random.default_rng(6)
    for m, n, k in [(256, 256, 256), (129, 65, 48), (1000, 777, 300), (64, 512, 4096)]:
        a, b = _operands(rng, m, n, k, scale=3.0)
        err = np.abs(_run(a, b, "tf32x3", transposed, block) - a.astype(np.float64) @ b.astype(np.float64))
        assert (err <= _bound(a, b)).all(), f"{m}x{n}x{k}: {(err / _bound(a, b)).max():.2f} of the bound"


@pytest.mark.gpu
@pytest.mark.parametrize("transposed", [False, True], ids=["a@b", "x@w.T"])
def test_gpu_tf32x3_special_values_are_numpys(transposed):
    """The warps that hold an infinity, a NaN or a near-overflow value take the full split."""
    rng = np.random.default_rng(2)
    a, b = _special_operands(rng)
    got, want = _run(a, b, "tf32x3", transposed), _reference(a, b)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))


@pytest.mark.gpu
def test_gpu_tf32x3_matches_the_simulator_on_tiny_values():
    """Values below 2^-115 (lo parts in TF32's subnormal range): the GPU's tensor cores give what the simulator
    does, to float32's rounding or 2^-136, the absolute accuracy docs/matmul.md states for such values (an H200
    differed by up to 2^-138 where a result lies near float32's smallest normal: the tensor cores' sums there
    are not IEEE's)."""
    rng = np.random.default_rng(7)
    a, b = _operands(rng, 64, 64, 64, scale=2.0**-120)
    (a_hi, a_lo, a_cross), (b_hi, b_lo, b_cross) = split_tf32x3(a), split_tf32x3(b)
    parts = a_lo.astype(np.float64) @ b_cross + a_cross.astype(np.float64) @ b_lo + a_hi.astype(np.float64) @ b_hi
    np.testing.assert_allclose(_run(a, b, "tf32x3", False), parts, rtol=1e-5, atol=2.0**-136)
