"""Split-K (lowering/fusion/split_k.py): a skinny product's K cut into ranges, a program each, the last program of
a tile to finish summing the ranges and running the epilogue, in one launch; with NumPy's results for the
region kinds of a decode step (a normed projection with a residual, SwiGLU's two products, RoPE with a cache
row stored, the GEMV form), ragged and empty ranges, and on every call (the counters are back at 0)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from test_rope_rotation import _inputs as rope_inputs
from test_rope_rotation import _reference as rope_reference
from test_rope_rotation import _rope_projection
from test_skinny_matmul import _inputs, _normed_projection, _reference

import tinyton as tt
from tinyton.compiler import matmul_tuning, program
from tinyton.dtypes import BF16
from tinyton.lowering.fusion.matmul_tiles import (
    SPLIT_K_PROGRAMS,
    MatmulProblem,
    MatmulTiles,
    candidates,
    wave_fill,
    wave_split,
)

F32 = np.float32
BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


def _with_tiles(monkeypatch, backend: str, tiles: MatmulTiles) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))


def test_split_candidates_for_few_tiles_only():
    """A decode batch's key/value projection (8 heads of 64 columns, 8 rows) gains split forms up to
    SPLIT_K_PROGRAMS programs; a projection with programs for every SM, and a square product, none."""
    kv = MatmulProblem(8, 8, 64, 2048, "bfloat16", dots=2)
    splits = [t for t in candidates(kv) if t.split_k > 1]
    assert splits and all(t.programs(kv) <= SPLIT_K_PROGRAMS and t.block_m == 16 for t in splits)
    assert {t.split_k for t in splits} == {2, 4, 8, 16}
    assert not any(t.split_k > 1 for t in candidates(MatmulProblem(1, 8, 32768, 2048, "bfloat16")))
    gate_up = MatmulProblem(1, 1, 8192, 2048, "bfloat16", dots=2)  # 256 programs of [16, 32]: cut in two too
    assert MatmulTiles(16, 32, 128, 2, 4, split_k=2) in candidates(gate_up)
    assert not any(t.split_k > 1 for t in candidates(MatmulProblem(1, 4096, 4096, 4096, "bfloat16")))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k, splits", [(1000, 2), (1000, 3), (1000, 8), (300, 4)])
def test_normed_projection_split(monkeypatch, backend, k, splits):
    """RMSNorm into the product (its statistic in a loop of its own over all of K), a residual; 3 rows, 300
    columns, K in steps of 64: 1000 (16 steps, the last ragged) in 2, 3 or 8 ranges; 300 (5 steps) in 4 ranges
    of 2 steps, the last empty."""
    tiles = MatmulTiles(16, 32, 64, 4, 3, split_k=splits)
    _with_tiles(monkeypatch, backend, tiles)
    args = _inputs(3, 300, k)
    fresh = tt.jit(lambda *a: _normed_projection(*a))
    compiled = fresh.compile(*args)
    assert compiled.num_launches == 1 and compiled.steps[0].grid == (splits * 10, 1, 1)
    for _ in range(2):  # the second call finds the counters at 0 again
        np.testing.assert_allclose(np.asarray(fresh(*args)), _reference(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("tiles", [MatmulTiles(16, 64, 128, 4, 4, split_k=4), MatmulTiles(128, 64, 64, 4, 3, split_k=4),
                                   MatmulTiles(1, 8, 128, 4, 3, split_k=4)], ids=["mma", "mid-rows", "gemv"])
def test_swiglu_products_split(monkeypatch, backend, tiles):
    """Two products of one K loop, each range's partials stored per product; tensor-core tiles of 16 and of 128
    rows (130 rows: the second row block masked), and the GEMV form."""
    _with_tiles(monkeypatch, backend, tiles)
    rng = np.random.default_rng(3)
    rows = 1 if tiles.gemv else 130 if tiles.block_m == 128 else 5
    x = rng.standard_normal((rows, 512)).astype(BF16)
    w1, w3 = ((rng.standard_normal((192, 512)) * 0.05).astype(BF16) for _ in range(2))
    got = tt.jit(lambda x, w1, w3: tt.sigmoid(x @ w1.T) * (x @ w1.T) * (x @ w3.T))(x, w1, w3)
    g, u = (x.astype(F32) @ w.astype(F32).T for w in (w1, w3))
    g, u = g.astype(BF16).astype(F32), u.astype(BF16).astype(F32)
    np.testing.assert_allclose(np.asarray(got).astype(F32), g / (1 + np.exp(-g)) * u, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [1, 3])
def test_rope_projection_split(monkeypatch, backend, batch):
    """RoPE's halves from the paired tile, in the last program of each tile."""
    _with_tiles(monkeypatch, backend, MatmulTiles(16, 32, 32, 4, 3, split_k=4))
    args = rope_inputs(batch, 3, 64)
    got = tt.jit(lambda *a: _rope_projection(*a))(*args)
    np.testing.assert_allclose(np.asarray(got), rope_reference(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("splits", [4, 7])
def test_wide_tile_split(monkeypatch, backend, splits):
    """A 128 x 256 tensor-core tile in 4 or 7 K ranges (LARGE_SPLIT_TILES' widest; 7 a `wave_split`), with a bias
    epilogue: 130 rows and 300 columns mask the second row block and the second column block, K 700 a ragged last
    step (in 7 ranges of two K steps, the last range is empty)."""
    _with_tiles(monkeypatch, backend, MatmulTiles(128, 256, 64, 8, 3, split_k=splits))
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((130, 700)).astype(BF16), (rng.standard_normal((300, 700)) * 0.05).astype(BF16)
    b = rng.standard_normal(300).astype(F32)
    got = tt.jit(lambda x, w, b: x @ w.T + b)(x, w, b)
    want = x.astype(F32) @ w.astype(F32).T
    np.testing.assert_allclose(np.asarray(got).astype(F32), want.astype(BF16).astype(F32) + b, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_statistic_of_the_left_operand_split(monkeypatch, backend):
    """`(x @ w.T) * rsqrt(mean(x * x))`: the statistic of the product's own left operand, which an unsplit loop
    accumulates beside the dot, comes from a loop over all of K before the split one."""
    _with_tiles(monkeypatch, backend, MatmulTiles(16, 32, 64, 4, 3, split_k=4))
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 700)).astype(F32), rng.standard_normal((100, 700)).astype(F32)
    got = tt.jit(lambda x, w: (x @ w.T) * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-5))(x, w)
    want = (x.astype(np.float64) @ w.T) / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)


def test_a_split_in_ranges_that_fill_the_waves():
    """Qwen2.5-7B's 512-row down projection: 56 programs of 128 x 256 leave 85 % of the waves busy cut in 2, 4 or 8
    K ranges, 99 % in 7, which the second tuning round measures too; the 112 programs of 128 x 128 fill no better
    in 3 ranges than in 2 or 4 (none)."""
    down = MatmulProblem(1, 512, 3584, 18944, "bfloat16")
    wide, square = MatmulTiles(128, 256, 64, 8), MatmulTiles(128, 128, 64, 8)
    assert wave_fill(wide.programs(down) * 4, 132) == pytest.approx(224 / 264)
    assert wave_split(down, wide, 132) == replace(wide, split_k=7)
    assert wave_split(down, square, 132) is None
    assert replace(wide, split_k=7) in matmul_tuning.split_forms(down, square, 132)


def test_a_winner_with_fewer_programs_than_sms_is_measured_against_its_split_forms(monkeypatch):
    """A 128-row projection's winning 128 x 128 tile is 16 programs on a 132-SM GPU: a second measurement
    puts it against its K cut in 2 to 16 ranges, and against the 128 x 64 and 128 x 256 tiles' forms that fill
    the SMs (8 programs of 128 x 256: only 16 ranges give half the SMs a program). A
    winner with programs for every SM is kept as it is at 4096 rows; at 128 or 512 rows (a 16-row tile that
    reads the weights 8 or 32 times) it meets the large tiles' split forms."""
    measured: list[list[MatmulTiles]] = []
    winner = MatmulTiles(128, 128, 64, 8)

    def choose(key, tiles, prepare, default=None, ahead=None):
        measured.append(list(tiles))
        return winner if len(measured) == 1 else tiles[-1]

    monkeypatch.setattr(matmul_tuning, "tuning_enabled", lambda: True)
    monkeypatch.setattr(matmul_tuning.TUNER, "choose", choose)
    hopper = SimpleNamespace(name="GPU", sm_count=132, compute_capability=(9, 0))
    monkeypatch.setattr(matmul_tuning.driver, "device", lambda: hopper)
    projection = MatmulProblem(1, 128, 2048, 2048, "bfloat16")
    assert matmul_tuning.matmul_tiles(projection) == MatmulTiles(128, 256, 64, 8, split_k=16)
    square, narrow, wide = MatmulTiles(128, 128, 64, 8), MatmulTiles(128, 64, 64, 4), MatmulTiles(128, 256, 64, 8)
    assert measured[1] == [winner, *(replace(square, split_k=s) for s in (2, 4, 8, 16)),
                           *(replace(narrow, split_k=s) for s in (4, 8, 16)), replace(wide, split_k=16)]
    measured.clear()
    winner = MatmulTiles(16, 64, 64, 4)  # 256 programs
    matmul_tuning.matmul_tiles(projection)
    assert measured[1][0] == winner and {t.split_k for t in measured[1][1:]} == {4, 8, 16}
    measured.clear()
    key_value = MatmulProblem(1, 512, 512, 4096, "bfloat16", dots=2)  # a 512-row prompt's k and v: 256 programs
    matmul_tuning.matmul_tiles(key_value)
    assert measured[1][0] == winner and all(t.programs(key_value) >= 66 for t in measured[1][1:])
    measured.clear()
    winner = MatmulTiles(128, 128, 64, 8)
    assert matmul_tuning.matmul_tiles(MatmulProblem(1, 4096, 4096, 4096, "bfloat16")) == winner
    assert len(measured) == 1


def test_a_gemv_winner_that_fills_a_quarter_of_the_sms_is_not_split():
    """A decode step's key/value projection in the GEMV form (1 x 4 tiles, two dots; 128 programs in Llama-3.2-1B, 64
    in TinyLlama-1.1B) is not measured split: split, it would keep partials in scratch and lose the launch it shares
    with the query projection. A GEMV of 16 programs (64 columns over a deep K) still is."""
    gemv = MatmulTiles(1, 4, 512, 4, 2)
    for width, programs in ((512, 128), (256, 64)):
        key_value = MatmulProblem(1, 1, width, 2048, "bfloat16", dots=2)
        assert gemv.programs(key_value) == programs and matmul_tuning.split_forms(key_value, gemv, 132) == []
    narrow = MatmulProblem(1, 1, 64, 16384, "bfloat16")
    assert {t.split_k for t in matmul_tuning.split_forms(narrow, gemv, 132)} >= {2, 4}
