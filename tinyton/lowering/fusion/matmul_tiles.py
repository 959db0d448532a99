"""Tile configurations of array-program matmul kernels: the problem, the candidates, the default.

The compiler driver picks one configuration per matmul region through a `TileChooser`: by measurement on
a GPU (tinyton/compiler/matmul_tuning.py), or `default_tiles` without one. The lowering only applies
what it is given, clamped to the problem (`fit`), so that every configuration is a correct kernel.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import prod

from tinyton.analysis.domain import Domain
from tinyton.dialects import tta
from tinyton.dialects.tt import DOT_MIN, element_type, shape_of
from tinyton.dtypes import FLOAT8, dtype_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.rotations import products, rotated_windows
from tinyton.lowering.fusion.row_shapes import fingerprint


@dataclass(frozen=True)
class MatmulProblem:
    """`batch` products of `[m, k] @ [k, n]` with operands of element type `dtype` (`float16`, `bfloat16`...),
    `dots` of them over one output tile (sibling matmuls sharing the left operand, as SwiGLU's gate and up:
    an accumulator each; RoPE's rotated halves are not dots where BN holds them, `rotations.py`), in a region that computes `fingerprint` around them ("" for a plain `a @ b`)."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str
    dots: int = 1
    fingerprint: str = ""
    region: tta.FusionOp | None = field(default=None, compare=False, repr=False)
    """The region itself, which the tuner times alone (random floats, zero ints and bools: a position to gather
    at, a mask; scalars too); None for a plain `a @ b`. (A region with scalar operands, a float8 product's scales,
    was timed as a plain `a @ b` until 2026-12-03: B stored K x N, which float8 wgmma must transpose through
    registers, where `x @ w.T` reads it K-major by TMA; the tuner picked 355-TFLOPS tiles over 1,050-TFLOPS ones.)"""

    @staticmethod
    def of(dom: Domain, fusion: tta.FusionOp | None = None) -> MatmulProblem:
        op = dom.matmul
        assert op is not None
        *batch, m, n = shape_of(op.result.type)
        folded = prod(dom.shape[a] for a in row_axes(dom)[:-1])  # batch axes read as rows
        k = shape_of(op.lhs.type)[-1]
        dtype = dtype_of(element_type(op.lhs.type)).name
        plain = MatmulProblem(prod(batch) // folded, m * folded, n, k, dtype)
        if fusion is None:
            return plain
        ops = [o for o in fusion.block.ops if not isinstance(o, tta.YieldOp)]
        dots = sum(isinstance(o, tta.MatmulOp) for o in ops)
        if n == next_power_of_2(n) >= DOT_MIN:  # every candidate's BN holds whole rotated pairs: no dots of theirs
            dots -= len(rotated_windows(dom, products(dom)))
        if ops == [op]:
            return plain
        return MatmulProblem(plain.batch, plain.m, n, k, dtype, dots, fingerprint(ops, list(fusion.block.args)), fusion)

    @property
    def itemsize(self) -> int:
        """Bytes of one operand element."""
        return max(1, dtype_of(self.dtype).primitive_bitwidth // 8)

    def shape_class(self) -> tuple[int, ...]:
        """Power-of-two buckets of (batch, m, n, k): problems in one class share a tuned configuration. A one-row
        product's N and K are its own: its GEMV programs fill the SMs' waves by its exact width (TinyLlama's
        5632-wide gate/up projection in 8 columns a program is 704 programs, 1.07 waves of five an SM; Llama-3.2-1B's
        8192 is 1024) and its K steps by its exact depth, so one tuned for one model is no pick for another's."""
        if self.m == 1:
            return (next_power_of_2(max(1, self.batch)), 1, self.n, self.k)
        return tuple(next_power_of_2(max(1, d)) for d in (self.batch, self.m, self.n, self.k))


def row_axes(dom: Domain) -> tuple[int, ...]:
    """The domain axes a matmul region's output rows enumerate (row-major): M, after every batch axis along
    which no right operand varies. A decode batch `(B, 1, K) @ w.T` is then one `[B, K] @ [K, N]` product:
    each program's tile holds rows of several batch elements and the weights are read once, not once per
    batch element (as a batched product over B they were read B times)."""
    n = len(dom.shape)
    rights = [dom.view(op.rhs) for op in products(dom)]

    def shared(a: int) -> bool:
        return all(d == 1 or st == 0 for view in rights for d, st in view.dims((a,), n))

    return (*(a for a in range(n - 2) if dom.shape[a] != 1 and shared(a)), n - 2)


@dataclass(frozen=True)
class MatmulTiles:
    """Output tile `[block_m, block_n]`, K step `block_k`, the warps of a program, and the K tiles in flight
    (`num_stages`: the depth of the shared-memory ring the K loop is pipelined through). `block_m` 1 is the
    GEMV form of a one-row product (`matmul.emit_matmul`): CUDA-core lanes, no tensor-core tile, its
    `num_stages - 1` next K steps' tiles in registers. `split_k` > 1 cuts K into that many ranges, a program
    each, the last of a tile's programs to finish summing their partial products (`split_k.py`).
    `warp_specialize` makes the kernel persistent (a program an SM walking over the tiles, `persistent.py`) with a
    producer warpgroup that loads the K steps while the program's warps compute, across the tiles
    (tinyton/lowering/tt_to_llvm/warp_specialize.py; sm_90a, TMA operands). `padded_rows` keeps `block_m` rows for a
    problem of fewer (a decode step's): wgmma's 64 and TMA copies, most rows padding (float8 tiles always do:
    mma.sync has no float8 here)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 3
    split_k: int = 1
    warp_specialize: bool = False
    padded_rows: bool = False

    def fit(self, p: MatmulProblem) -> MatmulTiles:
        """The same configuration with no block larger than the problem needs (and none below DOT_MIN)."""

        least = 1 if self.gemv and p.m == 1 else DOT_MIN

        def clamp(block: int, extent: int, at_least: int = least) -> int:
            return max(at_least, min(block, next_power_of_2(extent)))

        padded = self.padded_rows or p.dtype in FLOAT8_NAMES  # wgmma's 64 rows, for fewer rows
        rows = WGMMA_ROWS if padded and self.block_m >= WGMMA_ROWS else least
        bm, bn, bk = clamp(self.block_m, p.m, rows), clamp(self.block_n, p.n), clamp(self.block_k, p.k)
        lanes = bn * bk if bm == 1 else bm * bn
        splits = max(1, min(self.split_k, cdiv(p.k, bk)))
        per_warp = LANES_PER_SKINNY_WARP if bm == DOT_MIN else 256
        warps = max(1, min(self.num_warps, lanes // per_warp))
        specialized = self.warp_specialize and warps % 4 == 0 and bm >= 64 and splits == 1  # whole warpgroups
        return MatmulTiles(bm, bn, bk, warps, self.num_stages, splits, specialized, self.padded_rows)

    def programs(self, p: MatmulProblem) -> int:
        """Programs of the launch over `p` (its K ranges included)."""
        return p.batch * cdiv(p.m, self.block_m) * cdiv(p.n, self.block_n) * self.split_k

    @property
    def gemv(self) -> bool:
        return self.block_m == 1


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
    MatmulTiles(128, 128, 64, 8, 2),
)
"""The small set the tuner measures (each `fit` to the problem, duplicates dropped): skinny tiles for
decode-like shapes, square ones, and the large tiles that tensor cores want (64-deep K steps of whole
warpgroups for wgmma on Hopper). The two-stage 128 x 128 x 64 tile takes 96 KiB of shared memory, so two
programs share an SM and one's epilogue overlaps the other's K loop: a GELU-tanh epilogue's 16M tanh cost
~60 µs more on the one-program-an-SM tiles (bf16 4096^3 on an H200: 252 µs, against 264 at 128 x 256 x 64)."""


WARP_SPECIALIZED_CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(128, 256, 64, 8, 4, warp_specialize=True),
    MatmulTiles(128, 128, 64, 8, 4, warp_specialize=True),
    MatmulTiles(128, 128, 64, 4, 2, warp_specialize=True),
)
"""The large tiles with a producer warpgroup, persistent (four stages: the consumers release their slots
themselves, no slot is kept for the dots in flight; the last, one consumer warpgroup on two stages, puts two
programs on an SM, one's epilogue beside the other's dots: `persistent.programs_sharing_an_sm`), measured beside
CANDIDATES on Hopper (`candidates(..., warp_specialize=True)`) unless `TINYTON_WARP_SPECIALIZE=0`."""

SIBLING_WARP_SPECIALIZED_CANDIDATES: tuple[MatmulTiles, ...] = (MatmulTiles(128, 64, 64, 4, 2, warp_specialize=True),)
"""For sibling dots (SwiGLU's gate and up), beside WARP_SPECIALIZED_CANDIDATES (whose one-warpgroup tile would hold
two 128 x 128 accumulators, 256 registers a thread): one consumer warpgroup whose two 128 x 64 accumulators take 128,
issued as one 128-wide wgmma, on two stages (80 KiB with the output tile), so that two programs share an SM and one's
epilogue runs beside the other's dots (ptxas, sm_90a: nothing spilled at Qwen2.5-7B's 512 x 18944 x 3584)."""

FLOAT8_CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(128, 128, 128, 8, 4),
    MatmulTiles(128, 128, 128, 8, 4, warp_specialize=True),
    MatmulTiles(64, 128, 128, 4, 4),
    MatmulTiles(128, 128, 256, 8, 3, warp_specialize=True),
)
"""Float8 tiles whose K step is 128 or 256 elements (128 bytes a row: what a 64-deep step of 16-bit operands reads;
or two such panels), measured beside CANDIDATES for float8 products of more than SKINNY_ROWS rows (the
warp-specialised ones where those are). Each iteration's promoted dot runs as two chains, the second left running
into the next iteration, whose top waits for it (`tt.promoted_dot`): the deeper the step, the rarer that wait. On the
H200 (2026-12-03) the 128-deep tiles took `tt.scaled_matmul` from ~350 to ~1,000 TFLOPS at 4096^3 (81 % of
`torch._scaled_mm`); the 256-deep one was added after that run, not yet measured. ptxas -v: no spills for
`x @ w.T`; 21 bytes for the 128-deep warp-specialised one where B is stored K x N and goes through registers to be
transposed."""

WGMMA_ROWS = 64
FLOAT8_SKINNY_CANDIDATES: tuple[MatmulTiles, ...] = (MatmulTiles(64, 128, 128, 4, 4), MatmulTiles(64, 64, 128, 4, 6))
"""Float8 tiles for products of at most SKINNY_ROWS rows (a decode step against float8 weights), measured with
their split-K forms beside the SKINNY_CANDIDATES: 64 rows, most of them padding, so that the dot runs on wgmma
with its B copied by TMA and promoted in flight. The 16- and 32-row tiles widen float8 to f16 for mma.sync in
registers and store B to shared memory element by element, unpipelined: on the H200 (2026-12-03) they read the
weights at ~0.6 TB/s, `torch._scaled_mm` at ~2.4 (21-31 % of it on the suite's M = 16 rows); the 64-row tiles
brought those rows to 89-103 %."""

PADDED_SKINNY_CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(64, 128, 64, 4, 6, padded_rows=True), MatmulTiles(64, 64, 128, 4, 4, padded_rows=True))
"""The same form for 16-bit weights, measured (with their split-K forms) beside the 16- and 32-row mma.sync tiles of
SKINNY_CANDIDATES on Hopper: whether TMA and wgmma stream the weights closer to the copy bandwidth than
`cp.async` and mma.sync do (a decode step's projections ran at ~2.9 TB/s on those, 2026-12-02). Not yet measured."""

WARP_SPECIALIZE_ENV = "TINYTON_WARP_SPECIALIZE"


def warp_specialized() -> bool:
    """Whether the tuner may measure the warp-specialised tiles (`TINYTON_WARP_SPECIALIZE=0`: never)."""
    return os.environ.get(WARP_SPECIALIZE_ENV, "1") != "0"


SKINNY_ROWS = 64
SKINNY_CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(16, 32, 128, 2, 4),
    MatmulTiles(16, 32, 128, 4, 4),
    MatmulTiles(16, 32, 256, 4, 4),
    MatmulTiles(16, 32, 64, 4, 8),
    MatmulTiles(16, 64, 128, 4, 4),
    MatmulTiles(32, 32, 128, 4, 4),
)
"""Added for problems of at most SKINNY_ROWS rows (a decode step's few tokens against a weight matrix: a
projection, SwiGLU's gate and up, Llama's key/value projections with RoPE), which read the weights once and
are bound by memory: narrow tiles, so that there are programs for every SM, and deep K steps four in flight,
so that each keeps enough bytes in flight to stream at the copy bandwidth (or shallow K steps eight in flight,
whose smaller stages let more programs share an SM). None has fewer than 2 warps once
fit: a left operand computed per K tile (RMSNorm's) on one warp made kernels of ~400 KB of PTX."""

LANES_PER_SKINNY_WARP = 128
"""A 16-row tile keeps a warp per 128 of its outputs when fit (other tiles one per 256): the 16 x 32 tiles get 4
warps as well as 2. On the H200 (ncu, 2026-12-02) Llama-3.2-1B's batch-1 gate/up projection at 16 x 32 x 128 on
2 warps ran 4 warps an SM (its 256 programs 1.9 an SM; their stages' shared memory allows 3), stalled on loads,
at 2.8 TB/s."""

GEMV_CANDIDATES: tuple[MatmulTiles, ...] = (
    MatmulTiles(1, 4, 1024, 4, 2),
    MatmulTiles(1, 4, 1024, 4, 3),
    MatmulTiles(1, 8, 512, 4, 2),
    MatmulTiles(1, 8, 512, 4, 3),
    MatmulTiles(1, 4, 2048, 4, 2),
    MatmulTiles(1, 16, 256, 4, 3),
    MatmulTiles(1, 4, 512, 4, 2),
    MatmulTiles(1, 4, 512, 4, 3),
    MatmulTiles(1, 4, 256, 4, 4),
    MatmulTiles(1, 2, 1024, 4, 2),
    MatmulTiles(1, 2, 2048, 4, 2),
)
"""Added for one-row problems (batch-1 decode): the GEMV form, 2 to 16 columns a program, so that even a
512-wide projection has 128 programs, each streaming `[BN, BK]` tiles of 2 KiB to 16 KiB, `num_stages - 1` K
steps loaded ahead in registers (the small tiles for regions of three or four dots: Llama's query and
key/value projections with RoPE; on the H200 of 2026-12-02 one step ahead left their 128 programs waiting on
each load, the 1B key/value projection at 0.45 TB/s). All on 4 warps, so that consecutive GEMV kernels are one launch
(`launch_groups.py` groups kernels of one warp count): on the H200 (2026-12-03) the second layer's key/value region
took an 8-warp tile then (13.4 µs in the tuner against 13.2 for the first layer's 4-warp one), and its query and
key/value projections ran as two launches, 5.1 + 5.6 µs, against 6.4 µs for the first layer's one. Two columns a
program: TinyLlama's key/value region (4 heads, two dots) is 64 programs of 32 KiB at four, twice a query program's
bytes (the tuner timed it alone at 11.9 µs for 2 MiB on the H200, 2026-12-04)."""

SPLIT_K_PROGRAMS = 528
"""Most programs of a split-K candidate of a skinny tile (four an SM of an H200's 132): a decode batch's key/value
projection in `[16, 32]` tiles is 16 programs (8 heads x 2), which stream the weights from 16 SMs (25 µs for
Llama-3.2-1B's 4 MiB at batch 8 on an H200); its K cut in 16 ranges gives 256. Four, not two: batch 1's gate/up
projection in `[16, 32]` tiles is 256 programs, under two an SM, whose shared memory holds three (ncu on the
H200, 2026-12-02: 2.8 TB/s, a third of the stalls on loads); cut in two it fills the SMs."""
SPLIT_K_MAX = 16
"""Most K ranges of a split-K candidate (the last program to finish adds that many partial tiles)."""


def split_k_candidates(p: MatmulProblem, t: MatmulTiles) -> list[MatmulTiles]:
    """`t` with its K split in 2, 4, ... ranges while the launch has at most SPLIT_K_PROGRAMS programs and each
    range a K step (none for a tile that has the programs already)."""
    out, programs, steps = [], t.programs(p), cdiv(p.k, t.block_k)
    splits = 2
    while splits <= SPLIT_K_MAX and programs * splits <= SPLIT_K_PROGRAMS and steps >= splits:
        out.append(replace(t, split_k=splits))
        splits *= 2
    return out


def wave_fill(programs: int, sms: int) -> float:
    """The share of the SMs' program slots a launch of `programs` keeps busy over its waves (a program an SM)."""
    return programs / (cdiv(programs, sms) * sms)


def wave_split(p: MatmulProblem, t: MatmulTiles, sms: int) -> MatmulTiles | None:
    """`t` cut in the number of K ranges (2 to SPLIT_K_MAX, within SPLIT_K_PROGRAMS programs, a K step each) whose
    waves fill the SMs best, when that number is no power of two and fills them better than the powers of two do:
    Qwen2.5-7B's 512-row down projection in 128 x 256 tiles is 56 programs on an H200's 132 SMs; in 2, 4 or 8 ranges
    112, 224 or 448 (85 % of their waves), in 7 ranges 392 (99 %)."""
    programs, steps = t.programs(p), cdiv(p.k, t.block_k)
    splits = [s for s in range(2, SPLIT_K_MAX + 1) if programs * s <= SPLIT_K_PROGRAMS and s <= steps]
    if not splits:
        return None
    best = max(splits, key=lambda s: (wave_fill(programs * s, sms), -s))
    powers = [s for s in splits if s & (s - 1) == 0]
    if best in powers or max(wave_fill(programs * s, sms) for s in powers) >= wave_fill(programs * best, sms) - 0.05:
        return None
    return replace(t, split_k=best)


SKINNY_SHARED = 192 * 1024
"""Most shared memory a skinny candidate's stages may take (each stage: the left tile and one right tile per
sibling dot), so that a left operand staged for the dot and the epilogue still fit in an H100's 227 KiB
(Llama's key/value region of four dots at 16 x 32 x 256 would need 295 KiB: not a candidate; float32
operands of SwiGLU's two dots at that tile 320 KiB)."""


def fits(p: MatmulProblem, t: MatmulTiles) -> bool:
    """Whether `t`'s accumulators fit in registers and its stages in SKINNY_SHARED on `p`."""
    return accumulator_registers(p, t) <= register_budget(p) and stage_bytes(p, t) <= SKINNY_SHARED


def stage_bytes(p: MatmulProblem, t: MatmulTiles) -> int:
    """Shared memory of `t`'s pipelined K steps on `p`: `num_stages` x (left tile + a right tile per dot)."""
    return t.num_stages * (t.block_m + p.dots * t.block_n) * t.block_k * p.itemsize


ACC_REGISTERS = 128
"""Most f32 accumulator registers per thread of a tile, over all of a program's dots: 128 x 256 on 8 warps
holds one accumulator of 128 per thread, the largest tile that runs without spills; two sibling dots (SwiGLU's
gate and up) at that tile would hold 256 and spill (the H200 ran such a SwiGLU at 45 % of torch.compile,
2026-12-01), so siblings get tiles half as wide."""

FLOAT8_ACC_REGISTERS = 64
"""The same for a float8 matmul: its wgmmas sum into partial accumulators that are then added to it
(`matmul.FLOAT8_IMPRECISE_ACC`), two of them live beside it (one added while the next is computed). ptxas -v
(CUDA 13.0, sm_90a): at 128 (128 x 256 on 8 warps, 128 x 128 on 4) 255 registers and 52 to 580 bytes of
spills with one partial, 2 KiB with two; at 64, 70 to 240 registers and none (tests/test_fp8_matmul.py checks
the candidates)."""


GEMV_REGISTERS = 96
"""Most registers per thread a GEMV candidate's partial sums and the tiles it loads ahead may take over all its
dots (`gemv_registers`): ptxas -v (sm_90a) on Llama-3.2-1B's key/value region of four dots gave 92 registers at
96 and spilled at 128."""


def gemv_registers(p: MatmulProblem, t: MatmulTiles) -> int:
    """Registers per thread of a GEMV program's f32 partial sums and the `num_stages - 1` K steps of B tiles
    it holds loaded ahead."""
    lanes = accumulator_registers(p, t)
    return lanes + (t.num_stages - 1) * lanes * p.itemsize // 4


def accumulator_registers(p: MatmulProblem, t: MatmulTiles) -> int:
    """f32 accumulator registers per thread of a program of `p` tiled by `t` (the GEMV form's lanes hold a
    `[BN, BK]` tile of partial sums)."""
    lanes = t.block_n * t.block_k if t.gemv else t.block_m * t.block_n
    return p.dots * lanes // (32 * t.num_warps)


def candidates(p: MatmulProblem, warp_specialize: bool = False, hopper: bool = False) -> list[MatmulTiles]:
    """The CANDIDATES (and for few rows the SKINNY_CANDIDATES whose stages fit, with their split-K forms, on a
    `hopper` GPU the PADDED_SKINNY_CANDIDATES too; with `warp_specialize`, the WARP_SPECIALIZED_CANDIDATES, for
    sibling dots the SIBLING_WARP_SPECIALIZED_CANDIDATES too; for
    float8, the FLOAT8_CANDIDATES) fit to `p`, without those whose accumulators would spill (the smallest if all
    would)."""
    skinny = [t.fit(p) for t in SKINNY_CANDIDATES] if p.m <= SKINNY_ROWS else []
    if p.dtype in FLOAT8_NAMES and p.m <= SKINNY_ROWS:
        skinny += [t.fit(p) for t in FLOAT8_SKINNY_CANDIDATES]
    elif hopper and p.dtype in ("float16", "bfloat16") and p.m <= SKINNY_ROWS:
        skinny += [t.fit(p) for t in PADDED_SKINNY_CANDIDATES]
    skinny = [t for t in skinny if fits(p, t)]
    skinny += [split for t in skinny for split in split_k_candidates(p, t)]
    gemv = [t.fit(p) for t in GEMV_CANDIDATES] if p.m == 1 else []
    gemv = [t for t in gemv if gemv_registers(p, t) <= GEMV_REGISTERS]
    specialized = (*WARP_SPECIALIZED_CANDIDATES, *(SIBLING_WARP_SPECIALIZED_CANDIDATES if p.dots > 1 else ()))
    large = [t.fit(p) for t in specialized] if warp_specialize and p.m > SKINNY_ROWS else []
    if p.dtype in FLOAT8_NAMES and p.m > SKINNY_ROWS:
        large += [t.fit(p) for t in FLOAT8_CANDIDATES if warp_specialize or not t.warp_specialize]
    tiles = list(dict.fromkeys([*(t.fit(p) for t in CANDIDATES), *large, *skinny, *gemv]))
    fitting = [t for t in tiles if accumulator_registers(p, t) <= register_budget(p)]
    return fitting or [min(tiles, key=lambda t: accumulator_registers(p, t))]


def register_budget(p: MatmulProblem) -> int:
    """Most f32 accumulator registers per thread a tile of `p` may hold without spilling."""
    return FLOAT8_ACC_REGISTERS if p.dtype in FLOAT8_NAMES else ACC_REGISTERS


def default_tiles(p: MatmulProblem) -> MatmulTiles:
    """Without a GPU to measure on: 16 to 64 per output side, K steps of 16 or 32, warps by tile area."""
    bm, bn = (max(DOT_MIN, min(64, next_power_of_2(d))) for d in (p.m, p.n))
    bk = max(DOT_MIN, min(32, next_power_of_2(p.k)))
    warps = 4 if bm * bn >= 2048 else 2 if bm * bn >= 512 else 1
    return MatmulTiles(bm, bn, bk, warps)
