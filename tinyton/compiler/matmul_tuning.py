"""Tile configurations of array-program matmuls: measured once per GPU, shape class and dtype.

On a GPU, the first matmul of a shape class times every candidate of `matmul_tiles.candidates` on the
region alone at the problem's exact shape (the kernel the program launches: an epilogue's registers and a
sibling's accumulator change which tile is fastest; int and bool inputs are zeros, tuning_runs.py), or as a
standalone `a @ b` kernel of the shape for a region with scalar operands, and keeps the fastest in the disk
cache. Without a GPU (or with `TINYTON_TUNE=0`), and for problems too small for the tiling to matter (few
FLOPs and few bytes: `worth_tuning`), the lowering's default is used: compiling and timing ten candidates
costs seconds per shape class, for microseconds of work. A winner with fewer programs than the GPU has SMs
(a 128-row projection in 128 x 128 tiles: 16 programs) is measured again against its split-K forms (the
skinny candidates carry theirs from the start); a product of more rows than the skinny ones is measured again
against the split-K forms of LARGE_SPLIT_TILES that fill the SMs, too (its 16-row winner reads the weights
once per 16 rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from tinyton.compiler.autotune import Timer, Tuner, tuning_enabled
from tinyton.compiler.tuning_runs import Samples, compile_candidates_ahead, program_timer, region_program
from tinyton.dialects import tta
from tinyton.dtypes import dtype_of
from tinyton.lowering.fusion.matmul_tiles import (
    MatmulProblem,
    SKINNY_ROWS,
    MatmulTiles,
    candidates,
    default_tiles,
    fits,
    split_k_candidates,
    warp_specialized,
    wave_split,
)
from tinyton.lowering.matmul_precision import fp32_matmul_precision
from tinyton.runtime import driver

TUNER: Tuner[MatmulTiles] = Tuner("matmul", decode=lambda d: MatmulTiles(**d))
TUNE_MIN_FLOPS = 1 << 29
"""Problems below this many FLOPs (2 x batch x M x N x K; 512 x 1024 x 512) take the default tiles: a few
microseconds on a tensor-core GPU (examples/matmul.py's fp16 part, tuning two classes at 2^27-2^29 FLOPs,
took 39 s on an H100 host). A 16-row decode step at LLM width (16x4096x4096, 2^29) is tuned: on default
tiles it ran at 10.5 TFLOPS on an H100, tuned at 15.3."""


TUNE_MIN_BYTES = 1 << 21
"""...or reading at least this many operand bytes: a decode step's `x @ w.T` has few FLOPs but streams the
weights (2 MiB: a Llama-3.2-1B key projection), and its tile decides how close to the copy bandwidth it gets."""


def worth_tuning(p: MatmulProblem) -> bool:
    """Whether `p` takes long enough on a GPU, by its FLOPs or by the bytes of its operands, to be measured.
    Sibling dots count each: a 128-row key/value projection (two 256-wide dots over K 2048, one left operand)
    is twice one dot's FLOPs and reads both weights; counted as one it fell under both bars and ran on the
    default tiles, 8 programs (77 µs on the H200 in a TinyLlama block, 2026-12-03)."""
    flops = 2 * p.batch * p.m * p.n * p.k * p.dots
    operand_bytes = p.batch * (p.m + p.dots * p.n) * p.k * p.itemsize
    return flops >= TUNE_MIN_FLOPS or operand_bytes >= TUNE_MIN_BYTES


def matmul_tiles(problem: MatmulProblem) -> MatmulTiles:
    """The tiles for `problem`: tuned on this GPU, or the default without one or for a small problem."""
    p = problem
    if not tuning_enabled() or not worth_tuning(p):
        return default_tiles(problem)
    dtype = f"{p.dtype}:{fp32_matmul_precision()}" if p.dtype == "float32" else p.dtype  # tf32x3 and ieee tile differently
    device = driver.device()
    key = (device.name, dtype, p.dots, p.fingerprint, problem.shape_class())
    samples: Samples = {}
    timer = lambda tiles: _timer(problem, tiles, samples)  # noqa: E731
    hopper = device.compute_capability[0] == 9  # wgmma, TMA and setmaxnreg: sm_90a
    options = candidates(problem, warp_specialize=hopper and warp_specialized(), hopper=hopper)
    tiles = TUNER.choose(key, options, timer, default=default_tiles(problem), ahead=partial(_compile_ahead, problem))
    splits = split_forms(p, tiles, device.sm_count)
    if splits:  # a second measurement: K cut in ranges, so that large tiles' programs fill the SMs
        tiles = TUNER.choose((*key, "split_k"), [tiles, *splits], timer, default=tiles,
                             ahead=partial(_compile_ahead, problem))
    return tiles


LARGE_SPLIT_TILES: tuple[MatmulTiles, ...] = (
    MatmulTiles(128, 64, 64, 4), MatmulTiles(128, 128, 64, 8), MatmulTiles(128, 256, 64, 8))
"""Tensor-core tiles whose split-K forms a product of more than SKINNY_ROWS rows is measured against when they
leave SMs idle. Its winner is often a 16-row tile that has programs for every SM but reads the weights once per
16 rows: on the H200 (2026-12-03) TinyLlama's 128-row down projection (128 x 2048 x 5632 bf16) took 34.4 µs on
16 x 64 tiles, 17.9 as 128 x 64 tiles in 4 K ranges (its 23 MiB of weights take 5 at the copy bandwidth), and
Qwen2.5-7B's 512-row key/value projections (two 512-wide dots) ran at 124 TFLOPS on 16 x 64 tiles. Or a 128 x 128
tile one wave short of the SMs: a 512-row prompt's projections of 3584 columns are 112 programs on 132 SMs
(355-474 TFLOPS in Qwen2.5-7B's block), where the 128 x 256 tile runs at ~690 when it has the programs."""


GEMV_SPLIT_BELOW = 4
"""A one-row product in the GEMV form is measured split only when it has fewer programs than 1/GEMV_SPLIT_BELOW of
the SMs. A split GEMV keeps its partials in scratch, so it cannot share a launch with its sibling projection
(lowering/fusion/launch_groups.py), whose programs fill the SMs it leaves idle; a measurement in isolation sees
neither. On the H200 (2026-12-04) a Llama-3.2-1B key/value projection of 128 programs measured 13.3 µs split in
two against 13.7 unsplit, and the decode step with it split took 0.905 ms and 101 launches, against 0.872 and 86
(2.3 µs a launch lost); TinyLlama-1.1B's of 64 programs (4 key/value heads) measured 12.5 µs split against 13.0,
and its step took 0.958 ms in 137 launches, 22 more than its 22 layers' 5 each (half the SMs was the bar then)."""


def split_forms(p: MatmulProblem, winner: MatmulTiles, sms: int) -> list[MatmulTiles]:
    """The split-K forms to measure `winner` against: its own when it has fewer programs than the GPU has SMs
    (a GEMV form fewer than `sms // GEMV_SPLIT_BELOW`), and for a product of more than SKINNY_ROWS rows those of
    LARGE_SPLIT_TILES that leave SMs idle unsplit and give at least half as many programs as SMs split (and whose
    accumulators fit in registers, their stages in SKINNY_SHARED), each also in the number of ranges that fills the
    SMs' waves best where no power of two does (`wave_split`). A large product's tiles fill the SMs: it gets none."""
    forms = []
    if winner.split_k == 1 and winner.programs(p) < (sms // GEMV_SPLIT_BELOW if winner.gemv else sms):
        forms += [*split_k_candidates(p, winner), wave_split(p, winner, sms)]
    if p.m > SKINNY_ROWS:  # fewer rows: the skinny candidates carry their split forms
        for t in dict.fromkeys(t.fit(p) for t in LARGE_SPLIT_TILES):
            if fits(p, t) and t.programs(p) < sms:
                splits = [*split_k_candidates(p, t), wave_split(p, t, sms)]
                forms += [s for s in splits if s is not None and s.programs(p) >= sms // 2]
    return list(dict.fromkeys(f for f in forms if f is not None and f != winner))


def _matmul_module(p: MatmulProblem) -> ModuleOp:
    """`a @ b` as a traced program: `[batch, m, k] @ [batch, k, n]`."""
    element = dtype_of(p.dtype).ir
    shapes = [(p.batch, p.m, p.k), (p.batch, p.k, p.n)]
    block = Block(arg_types=[tta.array_type(element, s) for s in shapes])
    product = tta.MatmulOp(*block.args)
    block.add_ops([product, func.ReturnOp(product.result)])
    function = func.FuncOp("tune_matmul", ([a.type for a in block.args], [product.result.type]), Region(block))
    return ModuleOp([function])


def _program(p: MatmulProblem) -> tuple[ModuleOp, bool]:
    """What the tuner times for `p`: its region as a program (fused), or a plain `a @ b` of its shape."""
    return (region_program(p.region), True) if p.region is not None else (_matmul_module(p), False)


def _timer(p: MatmulProblem, tiles: MatmulTiles, samples: Samples | None = None) -> Timer:
    """A timer of the region of `p` (or a plain `a @ b` of its shape) tiled by `tiles`."""
    module, fuse = _program(p)
    return program_timer(module, fuse=fuse, samples=samples, choose_tiles=lambda _: tiles)


def _compile_ahead(p: MatmulProblem, options: Sequence[MatmulTiles]) -> None:
    """Every candidate's kernels compiled at once, in worker processes, before they are timed one by one."""
    compile_candidates_ahead(*_program(p), "choose_tiles", options)
