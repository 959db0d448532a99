"""Shapes of fused row kernels (one program per row or per few rows): the problem, the default, the
tuner's candidates.

The compiler driver picks one `RowShape` per row region through a `RowChooser`: measured on the GPU
(tinyton/compiler/row_tuning.py) or `default_row_shape` without one. The lowering applies what it is given
(`geometry.plan`); every candidate is a correct kernel, so the simulator and the GPU run the same choice.
Rows split over several programs (`geometry._split_rows`) are not tuned here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float
from tinyton.dtypes import dtype_of
from tinyton.intmath import cdiv, next_power_of_2

MAX_ROW_BLOCK = 32768
"""Longest row kept whole in registers (elements, 16 warps: 64 per thread); longer rows are reduced in a
loop. On an H100 (docs/benchmarks-history.md) a looped 1024x32768 softmax reads its row twice and ran at 66 % of
Triton's whole-row kernel; ptxas keeps 32768-element softmax/rmsnorm/layernorm rows without spilling
(86-117 registers)."""
LOOP_CHUNK = 4096
"""Chunk of a looped row (elements per iteration)."""
SHORT_ROW_TILE = 2048
"""Rows of at most 512 elements are packed `SHORT_ROW_TILE // BLOCK` to a program."""
MIN_PROGRAMS = 264
"""Keep at least ~2 programs per SM (132 SMs on H100) when packing short rows."""
PAIRED_ROW = 1024
"""Rows up to this long (past SHORT_ROW_TILE's packing) are also measured two to a program: an fp16
8192x768 softmax is one 16-byte load per thread at one row per program, a quarter of the lanes masked."""
CAPPED_TILE = 32768
"""Whole rows this long (64 elements per thread on 16 warps) are also measured with two programs per SM: an
fp16 rmsnorm 1024x32768 row takes 66 registers, one 512-thread program per SM; capped at 64 (no spills)
two fit, as they do for Triton's kernel. 32-bit rows would spill 344-412 bytes (softmax, rmsnorm): not measured."""
LONG_ROW = 8192
"""Rows from this long on may also run looped: the tuner measures both."""


def k_block(K: int) -> int:
    """Tile extent covering a reduced axis of K; an empty axis gets 2 fully masked lanes."""
    return next_power_of_2(K) if K else 2


def warps_for(elements: int) -> int:
    """num_warps from the tile size: 8 elements per thread up to 8 warps (4 at 1024, 8 at 2048), then 16
    per thread (8 warps at 4096, 16 from 8192); fewer warps below 1024 elements.

    Measured on an H200 (warp sweeps that bench/probes/sweep_rows.py replaced; docs/benchmarks-history.md): rows of 2048
    gain from 8 warps when few rows make the kernel latency-bound and lose nothing when there are many;
    at 4096, 16 warps help softmax by ~2 % but cost rmsnorm 1-2 %, so 8 it is."""
    if elements >= 1024:
        return min(16, elements // 256 if elements <= 2048 else elements // 512)
    return max(1, min(4, elements // 256))


@dataclass(frozen=True)
class RowShape:
    """`rows` rows per program, each whole in registers (`chunk` 0) or walked in chunks of `chunk`
    elements, on `num_warps` warps; `per_sm` programs resident on each SM at once (ptxas caps the
    registers for it, `.minnctapersm`; 0: no cap)."""

    num_warps: int
    rows: int = 1
    chunk: int = 0
    per_sm: int = 0

    def tile(self, K: int) -> int:
        """Elements of the program's tile for rows of K."""
        return self.rows * (self.chunk or k_block(K))


@dataclass(frozen=True)
class RowProblem:
    """`rows` rows of `length` elements of `dtype` reduced by the region `fingerprint` names."""

    rows: int
    length: int
    dtype: str
    """The element type of every input and output; "" when they differ, an input is a scalar or the region
    gathers (`take`): such a region is not tuned (the tuner times it on random arrays of one type)."""
    fingerprint: str = ""
    region: tta.FusionOp | None = field(default=None, compare=False, hash=False, repr=False)

    def shape_class(self) -> tuple[int, int, int]:
        """Power-of-two buckets of (rows, length) and the row's fill of its block in quarters: problems of
        one class share a tuned shape. 768 and 1024 share a block but not a winner: with a quarter of the
        lanes masked two rows per program pay (H100, fp16 softmax, bench/probes/sweep_rows.py: 8192x768 r2 1779
        against r1 1708 GB/s; 8192x1024 r1 2076 against r2 2048)."""
        block = k_block(self.length)
        return next_power_of_2(max(1, self.rows)), block, cdiv(4 * self.length, block)


RowChooser = Callable[[RowProblem], RowShape]


def default_row_shape(p: RowProblem) -> RowShape:
    """Without a GPU to measure on: whole rows up to MAX_ROW_BLOCK, short rows packed while ~2 programs per
    SM remain, warps by tile size (`warps_for`)."""
    block = k_block(p.length)
    if block > MAX_ROW_BLOCK:
        return RowShape(warps_for(LOOP_CHUNK), 1, LOOP_CHUNK)
    per = 1
    if block <= 512:
        per = min(SHORT_ROW_TILE // block, next_power_of_2(p.rows))
        while per > 1 and cdiv(p.rows, per) < MIN_PROGRAMS:
            per //= 2
    return RowShape(warps_for(per * block), per)


def candidates(p: RowProblem) -> list[RowShape]:
    """The default and its neighbours: half and twice the warps (of whole rows and of the default); half and
    twice the rows per program of short rows, two rows per program of rows up to PAIRED_ROW (while
    MIN_PROGRAMS remain); 16-bit whole rows of CAPPED_TILE with two programs per SM; for long rows one looped walk (8192 elements, 16 warps) where whole rows fit, and
    walks of 2048-8192 elements on 8 or 16 warps where they do not. On an H100 (bench/probes/sweep_rows.py) no
    looped walk beat a whole 32768-element row, so that case measures one."""
    d, block = default_row_shape(p), k_block(p.length)
    shapes = [d]
    if block <= 512:
        packed: tuple[int, ...] = (d.rows // 2, d.rows * 2)
    else:
        packed = (2,) if block <= PAIRED_ROW and cdiv(p.rows, 2) >= MIN_PROGRAMS else ()
    for rows in packed:
        if 1 <= rows <= next_power_of_2(p.rows) and rows * block <= 2 * SHORT_ROW_TILE:
            shapes.append(RowShape(warps_for(rows * block), rows))
    for s in [s for s in shapes if not s.chunk] + ([d] if d.chunk else []):
        for w in (s.num_warps // 2, s.num_warps * 2):
            if 1 <= w <= 16 and 32 * w <= s.tile(p.length):
                shapes.append(RowShape(w, s.rows, s.chunk))
    if not d.chunk and d.tile(p.length) >= CAPPED_TILE and p.dtype and dtype_of(p.dtype).primitive_bitwidth <= 16:
        shapes.append(RowShape(d.num_warps, d.rows, 0, 2))
    if block >= LONG_ROW:
        walks = [RowShape(w, 1, c) for c in (2048, 4096, 8192) for w in (8, 16)] if d.chunk else [RowShape(16, 1, 8192)]
        shapes += [s for s in walks if s.chunk < block]
    return list(dict.fromkeys(shapes))


def fingerprint(ops: list[Operation], inputs: list[SSAValue]) -> str:
    """What a region computes, shapes aside: its ops and how they are wired (constants' values and the
    array sizes do not change which shape is fastest; the shape class does)."""
    names = {v: f"in{i}:{element_type(v.type)}" for i, v in enumerate(inputs)}
    lines = []
    for i, op in enumerate(ops):
        lines.append(f"{op.name}({','.join(names.get(v, '?') for v in op.operands)})")
        for j, r in enumerate(op.results):
            names[r] = f"%{i}.{j}"
    return hashlib.sha256(";".join(lines).encode()).hexdigest()[:16]


def row_problem(fusion: tta.FusionOp, rows: int, length: int) -> RowProblem:
    """The problem of row region `fusion` reducing `rows` rows of `length` elements."""
    ops = [op for op in fusion.block.ops if not isinstance(op, tta.YieldOp)]
    elements = {element_type(v.type) for v in (*fusion.block.args, *fusion.yield_op.values)}
    (element, *others) = elements
    uniform = not others and is_float(element) and all(isinstance(v.type, TensorType) for v in fusion.block.args)
    uniform = uniform and not any(isinstance(op, tta.TakeOp) for op in ops)
    dtype = dtype_of(element).name if uniform else ""
    return RowProblem(rows, length, dtype, fingerprint(ops, list(fusion.block.args)), fusion)
