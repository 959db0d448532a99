"""Block pointers and tensor descriptors reassigned in a runtime `if` (and a runtime ternary) or carried by a
runtime `while`: the `scf.if`/`scf.while` carry their scalars. Against NumPy on the simulator, through
ptxas, and on the GPU against the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool


@tt.jit
def branch_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Even programs copy their block, odd ones the block below it (clamped by the boundary check)."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    if pm % 2 == 1:
        src = tl.advance(src, (BM, 0))
    else:
        src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.advance(dst, (0, 0)) if pn >= 0 else dst
    tl.store(dst, tl.load(src, boundary_check=(0, 1)), boundary_check=(0, 1))


def branch_copy_reference(x: np.ndarray, bm: int) -> np.ndarray:
    m = x.shape[0]
    rows = np.arange(m)
    source = np.where((rows // bm) % 2 == 1, rows + bm, rows)
    return np.where((source < m)[:, None], x[np.minimum(source, m - 1)], 0)


@tt.jit
def while_row_sums(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    p = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BM, 0), (BM, BN), (1, 0))
    d = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    acc = tl.zeros((BM,), tl.float32)
    k = 0
    while k < N:
        acc += tl.sum(tl.load(p, boundary_check=(0, 1)), axis=1) + tl.sum(d.load([pm * BM, k]), axis=1)
        p = tl.advance(p, (0, BN))
        k += BN
    o = tl.make_block_ptr(out_ptr, (M,), (1,), (pm * BM,), (BM,), (0,))
    tl.store(o, acc, boundary_check=(0,))


@tt.jit
def mismatched_blocks(x_ptr, flag):
    p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (8,), (0,))
    if flag > 0:
        p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (4,), (0,))
    tl.store(p, tl.load(p) + 1)


X = np.arange(30 * 20, dtype=np.float32).reshape(30, 20)

KERNELS = [
    (branch_copy, lambda: (X.copy(), np.zeros_like(X), 30, 20), {"BM": 4, "BN": 16}, (8, 2)),
    (while_row_sums, lambda: (X.copy(), np.zeros(30, np.float32), 30, 20), {"BM": 16, "BN": 8}, (2,)),
]


def test_block_pointer_reassigned_in_a_runtime_if():
    y = np.zeros_like(X)
    run_sim(branch_copy, (8, 2), X, y, 30, 20, BM=4, BN=16)
    np.testing.assert_array_equal(y, branch_copy_reference(X, 4))


def test_block_pointer_and_descriptor_carried_by_a_runtime_while():
    out = np.zeros(30, np.float32)
    run_sim(while_row_sums, (2,), X, out, 30, 20, BM=16, BN=8)
    np.testing.assert_allclose(out, 2 * X.sum(axis=1))


def test_block_pointers_of_different_blocks_in_the_branches_are_refused():
    with pytest.raises(CompilationError, match=r"different kind of block pointer.*give it one in both"):
        mismatched_blocks.compile(np.zeros(16, np.float32), 1)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_ptx_is_accepted_by_ptxas(kernel, make, constexprs, grid):
    ptx = kernel.compile(*make(), **constexprs).asm["ptx"]
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, make, constexprs, grid", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_gpu_matches_the_simulator(kernel, make, constexprs, grid):
    sim_args, gpu_args = make(), make()
    run_sim(kernel, grid, *sim_args, **constexprs)
    kernel.compile(*gpu_args, **constexprs).launch(grid, list(gpu_args))
    for s, g in zip(sim_args, gpu_args):
        if isinstance(s, np.ndarray):
            np.testing.assert_array_equal(s, g)
