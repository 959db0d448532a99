"""TMA + mbarrier on sm_90: descriptor-fed dot operands of a pipelined loop (a hand kernel on host tensor
descriptors, one on in-kernel descriptors, the array program `a @ b`) are copied by `cp.async.bulk.tensor`
with one mbarrier per slot. Checked: the simulator (which runs the masked loads the descriptor loads stand
for) against NumPy, out-of-range boxes and NaN padding included; ptxas accepts the PTX on both PTX paths;
sm_80 and `TINYTON_TMA=0` keep cp.async; the runtime's tensor-map checks; on the GPU, results against NumPy
at shapes that are and are not multiples of the box, and a cached launch encodes no map."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
import tinyton.language as tl
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.runtime import driver, tensor_maps
from tinyton.tools.tensor_descriptor import TensorDescriptor
from toolchains import TOOLCHAINS, needs_ptxas

BF16 = np.dtype(ml_dtypes.bfloat16)
on_gpu = pytest.mark.gpu


@tt.jit
def desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    rm = pid_m * BM + tl.arange(0, BM)[:, None]
    rn = pid_n * BN + tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


@tt.jit
def made_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """`desc_matmul` (called: inlined) on descriptors made in the kernel from its parameters (TMA reads them
    too)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM, BN, BK)


@tt.jit(do_not_specialize=["unit"])
def unspecialised_matmul(a_ptr, b_ptr, c_ptr, M, N, K, unit, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """`made_matmul` whose last strides are a run-time int (`unit`, 1 at every launch, never specialised)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, unit], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, unit], [BK, BN])
    desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM, BN, BK)


@tt.jit
def matmul_program(a, b):
    return a @ b


def _operands(m, n, k, dtype=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


def _run_desc(a, b, block, warps=4, made=False, padding="zero"):
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = block
    c = np.zeros((m, n), np.float32)
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    if made:
        made_matmul[grid](a, b, c, m, n, k, bm, bn, bk, num_warps=warps)
    else:
        ad = TensorDescriptor.from_tensor(a, [bm, bk], padding)
        bd = TensorDescriptor.from_tensor(b, [bk, bn], padding)
        desc_matmul[grid](ad, bd, c, m, n, k, bm, bn, bk, num_warps=warps)
    return c


def _reference(a, b):
    return a.astype(np.float32) @ b.astype(np.float32)


SHAPES = [(128, 128, 128), (200, 136, 72), (64, 80, 40), (130, 64, 256)]
"""Multiples of the 64 x 64 x 32 box, and not (rows, columns and K with tails)."""


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("made", [False, True], ids=["host", "in-kernel"])
def test_descriptor_matmul_matches_numpy(shape, made):
    a, b = _operands(*shape)
    c = _run_desc(a, b, (64, 64, 32), made=made)
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-2, atol=1e-2)


def test_nan_padding_reaches_the_dot_only_out_of_range():
    """NaN padding: rows past M come out NaN (the dot reads them); the rows inside stay finite."""
    a, b = _operands(100, 64, 64)
    c = _run_desc(a, b, (64, 64, 32), padding="nan")
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-2, atol=1e-2)


def _ptx(kernel, arch, toolchain="llvmlite"):
    return compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch=arch, toolchain=toolchain)


def _desc_kernel(made=False, dtype=np.float16, block=(128, 128, 64)):
    a, b = _operands(256, 256, 256, dtype)
    bm, bn, bk = block
    c = np.zeros((256, 256), np.float32)
    if made:
        return made_matmul.compile(a, b, c, 256, 256, 256, bm, bn, bk, num_warps=8)
    ad, bd = TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn])
    return desc_matmul.compile(ad, bd, c, 256, 256, 256, bm, bn, bk, num_warps=8)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("made", [False, True], ids=["host", "in-kernel"])
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_tma_kernels_assemble(toolchain, made, dtype):
    compiled = _ptx(_desc_kernel(made, dtype), "sm_90a", toolchain)
    ptx = compiled.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "mbarrier.try_wait.parity" in ptx and "mbarrier.init" in ptx and "wgmma.mma_async" in ptx
    assert "cp.async.cg" not in ptx
    assert [m["box"] for m in compiled.tensor_maps] == [[128, 64], [64, 64]]
    assert all(m["swizzle"] == 128 for m in compiled.tensor_maps)
    assert assemble_ptx(ptx, "sm_90a")


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_array_program_matmul_uses_tma(toolchain):
    a, b = _operands(200, 136, 72)
    (kernel,) = matmul_program.compile(a, b).kernels()
    compiled = _ptx(kernel, "sm_90a", toolchain)
    assert "cp.async.bulk.tensor" in compiled.asm["ptx"]
    assert [m["shape"] for m in compiled.tensor_maps] == [[200, 72], [72, 136]]
    assert assemble_ptx(compiled.asm["ptx"], "sm_90a")


def test_sm_80_and_tma_off_keep_cp_async(monkeypatch):
    kernel = _desc_kernel()
    for arch in ("sm_80",):
        ptx = _ptx(kernel, arch).asm["ptx"]
        assert "cp.async.bulk" not in ptx and "mbarrier" not in ptx
    monkeypatch.setenv("TINYTON_TMA", "0")
    compiled = _ptx(kernel, "sm_90a")
    assert "cp.async.bulk" not in compiled.asm["ptx"] and not compiled.tensor_maps


def test_unaligned_rows_keep_cp_async():
    """K = 100 halves: A's rows of 200 bytes are not a multiple of 16, which a tensor map cannot stride; the
    loop then copies B with cp.async too (a loop's copies are all of one kind)."""
    a, b = _operands(64, 64, 100)
    (kernel,) = matmul_program.compile(a, b).kernels()
    compiled = _ptx(kernel, "sm_90a")
    assert compiled.tensor_maps == () and "cp.async.bulk" not in compiled.asm["ptx"]


@pytest.mark.parametrize("made", [False, True], ids=["host", "in-kernel"])
def test_runtime_strides_not_multiples_of_16_keep_cp_async(made):
    """K = 130 halves, a run-time stride: TMA could not stride A's rows of 260 bytes, so the kernel is
    compiled for cp.async (never a launch-time refusal, and the same answer as the simulator)."""
    a, b = _operands(200, 64, 130)
    c = np.zeros((200, 64), np.float32)
    if made:
        kernel = made_matmul.compile(a, b, c, 200, 64, 130, 64, 64, 32, num_warps=4)
    else:
        ad, bd = TensorDescriptor.from_tensor(a, [64, 32]), TensorDescriptor.from_tensor(b, [32, 64])
        kernel = desc_matmul.compile(ad, bd, c, 200, 64, 130, 64, 64, 32, num_warps=4)
    compiled = _ptx(kernel, "sm_90a")
    assert compiled.tensor_maps == () and "cp.async.bulk" not in compiled.asm["ptx"]
    np.testing.assert_allclose(_run_desc(a, b, (64, 64, 32), made=made), _reference(a, b), rtol=1e-2, atol=1e-2)


def test_runtime_last_stride_keeps_cp_async():
    """A last stride known only at launch (1 here, but TMA needs it to be 1 when compiling): cp.async."""
    a, b = _operands(128, 64, 64)
    c = np.zeros((128, 64), np.float32)
    kernel = unspecialised_matmul.compile(a, b, c, 128, 64, 64, 1, 64, 64, 32, num_warps=4)
    compiled = _ptx(kernel, "sm_90a")
    assert compiled.tensor_maps == () and "cp.async.bulk" not in compiled.asm["ptx"]
    unspecialised_matmul[(2, 1)](a, b, c, 128, 64, 64, 1, 64, 64, 32, num_warps=4)
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-2, atol=1e-2)


def test_tensor_map_checks_name_the_requirement():
    spec = {"base": 0, "shape": ["p1", 64], "strides": ["p2", 1], "box": [64, 64], "dtype": "float16",
            "padding": "zero", "swizzle": 128}
    key = tensor_maps.tensor_map_key(spec, (4096, 100, 100))
    assert key[:3] == (4096, (100, 64), (100, 1))
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        tensor_maps.check_tensor_map(key, 2)
    tensor_maps.check_tensor_map(tensor_maps.tensor_map_key(spec, (4096, 100, 64)), 2)


@on_gpu
@pytest.mark.parametrize("shape", SHAPES + [(1000, 520, 264)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("made", [False, True], ids=["host", "in-kernel"])
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_gpu_tma_matmul_matches_numpy(shape, made, dtype):
    a, b = _operands(*shape, dtype)
    for block, warps in (((64, 64, 32), 4), ((128, 128, 64), 8), ((128, 256, 64), 8)):
        c = _run_desc(a, b, block, warps, made)
        np.testing.assert_allclose(c, _reference(a, b), rtol=2e-2, atol=2e-2)


@on_gpu
def test_gpu_nan_padding():
    a, b = _operands(100, 64, 64)
    c = _run_desc(a, b, (64, 64, 32), padding="nan")
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-2, atol=1e-2)


@on_gpu
@pytest.mark.parametrize("shape", [(200, 136, 72), (512, 512, 512), (1000, 520, 264)], ids=lambda s: "x".join(map(str, s)))
def test_gpu_array_program_matmul(shape):
    a, b = _operands(*shape)
    np.testing.assert_allclose(matmul_program(a, b).astype(np.float32), _reference(a, b), rtol=2e-2, atol=2e-2)


@on_gpu
def test_gpu_cached_launch_encodes_no_map(monkeypatch):
    from tinyton.runtime.arrays import empty, to_device

    a, b = _operands(256, 256, 256)
    da, db, dc = to_device(a), to_device(b), empty((256, 256), np.float32)
    ad, bd = TensorDescriptor.from_tensor(da, [64, 32]), TensorDescriptor.from_tensor(db, [32, 64])
    desc_matmul[(4, 4)](ad, bd, dc, 256, 256, 256, 64, 64, 32)
    calls = []
    monkeypatch.setattr(tensor_maps, "encode", lambda key: calls.append(key))
    desc_matmul[(4, 4)](ad, bd, dc, 256, 256, 256, 64, 64, 32)
    driver.synchronize()
    assert calls == []
