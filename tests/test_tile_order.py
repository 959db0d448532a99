"""The order a matmul's programs walk its output tiles (lowering/fusion/geometry.py `GROUP_ROWS`,
program_indices.py `_grouped_tiles`): `GROUP_ROWS` row tiles down before the next column, the last group of rows
shorter when the row tiles do not divide into groups. Every tile is computed once whatever the order: checked on the
simulator (and on a GPU, marked gpu) against NumPy over row and column tile counts that are not multiples of the
group, with a batch, K ranges (split-K) and persistent programs around the tiles."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import program
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.geometry import GROUP_ROWS
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.rewrites.pipeline import fuse_module

BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


def batched(a, b):
    return a @ b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("tiles", [MatmulTiles(16, 16, 32, 1, 2), MatmulTiles(16, 16, 32, 1, 2, split_k=2),
                                   MatmulTiles(64, 64, 32, 4, 3, warp_specialize=True)],
                         ids=["tiles", "split-K", "persistent"])
@pytest.mark.parametrize("m, n", [(11 * 16, 5 * 16), (3 * 16 + 5, 9 * 16), (16 * 16, 2 * 16)])
def test_every_tile_is_computed_once(monkeypatch, backend, tiles, m, n):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, m, 96)).astype(np.float16), rng.standard_normal((2, 96, n)).astype(np.float16)
    got = np.asarray(tt.jit(batched)(a, b)).astype(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)


def test_programs_walk_a_group_of_row_tiles_before_the_next_column():
    """The kernel's row index is the program's position in its group of GROUP_ROWS rows (a `tt.minimum` gives the
    last group's height), its column index the program's group position divided by that height."""
    a, b = np.zeros((1000, 64), np.float16), np.zeros((64, 512), np.float16)
    (spec,) = fusion_to_kernels(fuse_module(trace(batched, [a, b])), choose_tiles=lambda _: MatmulTiles(64, 64, 32, 4, 3))
    text = str(spec.module)
    assert GROUP_ROWS == 8 and "tt.minimum" in text and f"tt.constant {GROUP_ROWS * 8} : i32" in text
