"""RoPE's rotated halves of a decode step's projection (lowering/fusion/rotations.py): computed from the
projection's own tile, whose programs hold both columns of each rotated pair (no second and third dot reading
the weights again), with NumPy's results for every tile form on both backends, and the window dots kept
where a tile cannot hold whole pairs."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import program
from tinyton.dialects import tt as tt_dialect
from tinyton.dtypes import BF16
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.rewrites.pipeline import fuse_module

F32 = np.float32
TILES = [MatmulTiles(1, 4, 256, 4, 3), MatmulTiles(1, 8, 128, 4, 2), MatmulTiles(1, 16, 64, 4, 3),
         MatmulTiles(16, 16, 64, 4, 3), MatmulTiles(16, 32, 32, 4, 3), MatmulTiles(16, 64, 64, 4, 3)]


def _rope_projection(x, w, cos, sin):
    """`heads(x @ w.T)` rotated: Llama's query projection of a decode step, `d` columns a head."""
    b, _, _ = x.shape
    d = cos.shape[-1]
    q = (x.astype(tt.bfloat16) @ w.T).astype(tt.float32)
    q = tt.swapaxes(q.reshape(b, 1, -1, d), 1, 2)
    h = d // 2
    return q * cos + tt.concatenate([-q[..., h:], q[..., :h]], axis=-1) * sin


def _reference(x, w, cos, sin):
    b, d = x.shape[0], cos.shape[-1]
    q = (x.astype(BF16).astype(F32) @ w.astype(F32).T).astype(BF16).astype(F32)
    q = np.swapaxes(q.reshape(b, 1, -1, d), 1, 2)
    h = d // 2
    return q * cos + np.concatenate([-q[..., h:], q[..., :h]], axis=-1) * sin


def _inputs(batch: int, heads: int, d: int, k: int = 200):
    rng = np.random.default_rng(batch * 100 + d)
    angles = rng.uniform(0, 6.3, (1, d // 2))
    angles = np.concatenate([angles, angles], axis=-1)
    return (rng.standard_normal((batch, 1, k)).astype(F32), (rng.standard_normal((heads * d, k)) * 0.1).astype(BF16),
            np.cos(angles).astype(F32), np.sin(angles).astype(F32))  # fmt: skip


def _kernel_ops(tiles: MatmulTiles, *args) -> tuple[int, int, int]:
    """(dots, gathers, products the tuner is told of) in the one kernel of the program with `tiles`."""
    graph = tt.jit(_rope_projection).compile(*args).graph
    problems = []
    (spec,) = fusion_to_kernels(fuse_module(graph.clone(), fuse=True),
                                choose_tiles=lambda p: problems.append(p) or tiles.fit(p))
    ops = list(spec.module.walk())
    dots = sum(isinstance(op, tt_dialect.DotOp) for op in ops)
    if tiles.gemv:  # the GEMV form's products: one K-lane sum each after the loop
        dots = sum(isinstance(op, tt_dialect.ReduceSumOp) for op in ops)
    return dots, sum(isinstance(op, tt_dialect.GatherOp) for op in ops), problems[0].dots


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("tiles", TILES, ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}")
@pytest.mark.parametrize("batch", [1, 3])
def test_rotated_halves_match_numpy(monkeypatch, backend, tiles, batch):
    """Heads of 64: every tile holds whole pairs (two runs of BN/2 columns 32 apart, one run at BN 64)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    args = _inputs(batch, 3, 64)
    got = tt.jit(lambda *a: _rope_projection(*a))(*args)
    np.testing.assert_allclose(np.asarray(got), _reference(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("tiles", TILES, ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}")
def test_one_product_where_the_tile_holds_the_pairs(tiles):
    """Heads of 64: one product and one gather, and the tuner is told of one dot (its register and shared
    memory limits count the accumulators there are)."""
    assert _kernel_ops(tiles, *_inputs(1, 3, 64)) == (1, 1, 1)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_halves_a_tile_cannot_pair_stay_products(monkeypatch, backend):
    """Heads of 80 (halves of 40): a 16-column tile pairs (runs of 8), a 32-column one cannot (runs of 16
    do not tile 40) and keeps the window products; both with NumPy's results."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    args = _inputs(2, 2, 80)
    paired, unpaired = MatmulTiles(16, 16, 64, 4, 3), MatmulTiles(16, 32, 64, 4, 3)
    assert _kernel_ops(paired, *args)[:2] == (1, 1)
    assert _kernel_ops(unpaired, *args) == (3, 0, 3)
    for tiles in (paired, unpaired, MatmulTiles(1, 8, 64, 4, 3)):
        monkeypatch.setattr(program, "matmul_tiles", lambda p, t=tiles: t.fit(p))
        got = tt.jit(lambda *a: _rope_projection(*a))(*args)
        np.testing.assert_allclose(np.asarray(got), _reference(*args), rtol=2e-2, atol=2e-2)
