"""Tile configurations of array-program matmul kernels: the problem, the candidates, the default.

The compiler driver picks one configuration per matmul region through a `TileChooser`: by measurement on
a GPU (tinyton/compiler/matmul_tuning.py), or `default_tiles` without one. The lowering only applies
what it is given, clamped to the problem (`fit`), so that every configuration is a correct kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from tinyton.analysis.domain import Domain
from tinyton.dialects.tt import DOT_MIN, element_type, shape_of
from tinyton.dtypes import FLOAT8, dtype_of
from tinyton.intmath import next_power_of_2


@dataclass(frozen=True)
class MatmulProblem:
    """`batch` products of `[m, k] @ [k, n]` with operands of element type `dtype` (`float16`, `bfloat16`...)."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str

    @staticmethod
    def of(dom: Domain) -> MatmulProblem:
        op = dom.matmul
        assert op is not None
        *batch, m, n = shape_of(op.result.type)
        k = shape_of(op.lhs.type)[-1]
        return MatmulProblem(prod(batch), m, n, k, dtype_of(element_type(op.lhs.type)).name)

    def shape_class(self) -> tuple[int, ...]:
        """Power-of-two buckets of (batch, m, n, k): problems in one class share a tuned configuration."""
        return tuple(next_power_of_2(max(1, d)) for d in (self.batch, self.m, self.n, self.k))


@dataclass(frozen=True)
class MatmulTiles:
    """Output tile `[block_m, block_n]`, K step `block_k`, and the warps of a program."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int

    def fit(self, p: MatmulProblem) -> MatmulTiles:
        """The same configuration with no block larger than the problem needs (and none below DOT_MIN)."""

        def clamp(block: int, extent: int) -> int:
            return max(DOT_MIN, min(block, next_power_of_2(extent)))

        bm, bn, bk = clamp(self.block_m, p.m), clamp(self.block_n, p.n), clamp(self.block_k, p.k)
        return MatmulTiles(bm, bn, bk, max(1, min(self.num_warps, bm * bn // 256)))


TileChooser = Callable[[MatmulProblem], MatmulTiles]
FLOAT8_NAMES = frozenset(d.name for d in FLOAT8)

CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(16, 64, 64, 4),
    MatmulTiles(32, 32, 32, 4),
    MatmulTiles(64, 64, 32, 4),
    MatmulTiles(64, 128, 32, 4),
    MatmulTiles(128, 64, 32, 4),
    MatmulTiles(128, 128, 32, 8),
    MatmulTiles(128, 128, 64, 8),
    MatmulTiles(128, 256, 32, 8),
    MatmulTiles(128, 128, 64, 4),
    MatmulTiles(128, 256, 64, 8),
)
"""The small set the tuner measures (each `fit` to the problem, duplicates dropped): skinny tiles for
decode-like shapes, square ones, and the large tiles that tensor cores want (64-deep K steps of whole
warpgroups for wgmma on Hopper)."""


FLOAT8_ACC_REGISTERS = 64
"""Most f32 accumulator registers per thread of a float8 matmul's tile: its wgmmas sum into partial
accumulators that are then added to it (`matmul.FLOAT8_IMPRECISE_ACC`), registers beside it. ptxas -v (CUDA
13.0, sm_90a): at 128 (128 x 256 on 8 warps, 128 x 128 on 4) 255 registers and 52 to 580 bytes of spills;
at 64, 70 to 227 registers and none (tests/test_fp8_matmul.py checks the candidates)."""


def candidates(p: MatmulProblem) -> list[MatmulTiles]:
    tiles = dict.fromkeys(t.fit(p) for t in CANDIDATES)
    if p.dtype in FLOAT8_NAMES:
        return [t for t in tiles if t.block_m * t.block_n <= FLOAT8_ACC_REGISTERS * 32 * t.num_warps]
    return list(tiles)


def default_tiles(p: MatmulProblem) -> MatmulTiles:
    """Without a GPU to measure on: 16 to 64 per output side, K steps of 16 or 32, warps by tile area."""
    bm, bn = (max(DOT_MIN, min(64, next_power_of_2(d))) for d in (p.m, p.n))
    bk = max(DOT_MIN, min(32, next_power_of_2(p.k)))
    warps = 4 if bm * bn >= 2048 else 2 if bm * bn >= 512 else 1
    return MatmulTiles(bm, bn, bk, warps)
