"""Block pointers (`tl.make_block_ptr`, `tl.advance`, `tl.load/store(..., boundary_check=, padding_option=)`)
and tensor descriptors (`tl.make_tensor_descriptor` with `.load`/`.store`): lowered to pointer tiles and masks
by the frontend, so the simulator runs them; checked against NumPy, through ptxas on both toolchains, and on
the GPU against the simulator."""

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
def copy_tile(x_ptr, y_ptr, M, N, sxm, sxn, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (sxm, sxn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero") * 2, boundary_check=(0, 1))

@tt.jit
def row_sums(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    p = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, 0), (BM, BN), (1, 0))
    acc = tl.zeros((BM,), tl.float32)
    for k in range(0, N, BN):
        acc += tl.sum(tl.load(p, boundary_check=(0, 1)), axis=1)
        p = tl.advance(p, (0, BN))
    o = tl.make_block_ptr(out_ptr, (M,), (1,), (pm * BM,), (BM,), (0,))
    tl.store(o, acc, boundary_check=(0,))

@tt.jit
def desc_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    dx = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dy = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    dy.store([pm * BM, pn * BN], dx.load([pm * BM, pn * BN]) + 1)



@tt.jit
def padded_nan(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (BM, BN), (BN, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(1,), padding_option="nan"))


@tt.jit
def block_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (K, 1), (pm * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, pn * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a, boundary_check=(0, 1)), tl.load(b, boundary_check=(0, 1)))
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


X = np.arange(30 * 20, dtype=np.float32).reshape(30, 20)


def test_strided_block_copy_with_boundary_checks():
    y = np.zeros((20, 30), np.float32)
    run_sim(copy_tile, (2, 2), X, y, 20, 30, 1, 20, BM=16, BN=16)  # reads x transposed through its strides
    np.testing.assert_array_equal(y, 2 * X.T)


def test_advance_in_a_runtime_loop():
    out = np.zeros(30, np.float32)
    compiled = run_sim(row_sums, (2,), X, out, 30, 20, BM=16, BN=8)
    np.testing.assert_allclose(out, X.sum(1))
    assert "scf.for" in compiled.asm["tt"]


def test_nan_padding_only_on_checked_dimensions():
    y = np.zeros((4, 8), np.float32)
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    run_sim(padded_nan, (1,), x, y, 4, 6, BM=4, BN=8)
    np.testing.assert_array_equal(y[:, :6], x)
    assert np.isnan(y[:, 6:]).all()


def test_block_pointer_matmul():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 50)).astype(np.float32), rng.standard_normal((50, 24)).astype(np.float32)
    c = np.zeros((40, 24), np.float32)
    run_sim(block_matmul, (3, 2), a, b, c, 40, 24, 50, BM=16, BN=16, BK=16)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tensor_descriptor_load_store():
    y = np.zeros_like(X)
    run_sim(desc_copy, (2, 2), X, y, 30, 20, BM=16, BN=16)
    np.testing.assert_array_equal(y, X + 1)


@tt.jit
def bad_order(x_ptr):
    tl.make_block_ptr(x_ptr, (4, 4), (4, 1), (0, 0), (4, 4), (0, 0))


@tt.jit
def bad_rank(x_ptr):
    tl.make_block_ptr(x_ptr, (4,), (4, 1), (0, 0), (4, 4), (1, 0))


@tt.jit
def bad_check(x_ptr):
    p = tl.make_block_ptr(x_ptr, (4,), (1,), (0,), (4,), (0,))
    tl.load(p, boundary_check=(1,))


@tt.jit
def bad_padding(x_ptr):
    p = tl.make_block_ptr(x_ptr, (4,), (1,), (0,), (4,), (0,))
    tl.load(p, boundary_check=(0,), padding_option="one")


@pytest.mark.parametrize(
    "kernel, message",
    [
        (bad_order, "order must be a permutation"),
        (bad_rank, "shape must have one entry per dimension"),
        (bad_check, "boundary_check must list dimensions"),
        (bad_padding, "padding_option must be"),
    ],
)
def test_refused(kernel, message):
    with pytest.raises(CompilationError, match=message):
        kernel.compile(np.zeros(16, np.float32))


KERNELS = [
    (copy_tile, lambda: (X.copy(), np.zeros((20, 30), np.float32), 20, 30, 1, 20), {"BM": 16, "BN": 16}, (2, 2)),
    (row_sums, lambda: (X.copy(), np.zeros(30, np.float32), 30, 20), {"BM": 16, "BN": 8}, (2,)),
    (desc_copy, lambda: (X.copy(), np.zeros_like(X), 30, 20), {"BM": 16, "BN": 16}, (2, 2)),
    (padded_nan, lambda: (np.arange(24, dtype=np.float32).reshape(4, 6), np.zeros((4, 8), np.float32), 4, 6), {"BM": 4, "BN": 8}, (1,)),
    (
        block_matmul,
        lambda: (np.ones((40, 50), np.float32), np.full((50, 24), 0.5, np.float32), np.zeros((40, 24), np.float32), 40, 24, 50),
        {"BM": 16, "BN": 16, "BK": 16},
        (3, 2),
    ),
]


@needs_ptxas
@pytest.mark.parametrize("toolchain", ["mlir", "llvmlite"])
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_block_pointers_ptx(kernel, make, constexprs, grid, toolchain, monkeypatch):
    monkeypatch.setenv("TINYTON_TOOLCHAIN", toolchain)
    ptx = kernel.compile(*make(), **constexprs).asm["ptx"]
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_block_pointers_gpu_match_simulator(kernel, make, constexprs, grid):
    sim_args, gpu_args = make(), make()
    run_sim(kernel, grid, *sim_args, **constexprs)
    kernel.compile(*gpu_args, **constexprs).launch(grid, list(gpu_args))
    for s, g in zip(sim_args, gpu_args):
        if isinstance(s, np.ndarray):
            np.testing.assert_allclose(s, g, rtol=1e-5, atol=1e-5)
