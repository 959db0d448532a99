"""
The accumulator layout of Hopper's warpgroup MMA (`wgmma.mma_async.m64nNk16`, k32 for float8), and when a dot uses it.

A warpgroup is 4 consecutive warps; one instruction computes a 64 x N block, warp w of the group owning
rows 16w..16w+15 with, per thread, the registers of N/8 `mma.m16n8` accumulators side by side (PTX ISA,
"wgmma .m64nNk16 register fragment"): d[4i..4i+3] = (g, 8i+2t), (g, 8i+2t+1), (g+8, 8i+2t), (g+8, 8i+2t+1)
with g = lane / 4, t = lane % 4. The register order is therefore

    bit 0: column +1, bit 1: row +8, bits 2..: column +8, +16, ... (one instruction's registers, in order),
    then N repetitions, then M repetitions,

and the warp bits are rows +16, +32, then warpgroups along M (+64, ...), then along N. Warpgroups go to M
first (as Triton's `warpsPerTileV3`); an instruction is at most 256 wide, a promoted float8 dot's narrower where
its registers call for it (`PROMOTED_REGISTERS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.mma_layout import k_major_b, m_major_a

WARPGROUP = 4
"""Warps of one warpgroup."""
ROWS = 64
"""Rows of one instruction (the M of m64nNk16)."""
MAX_N = 256
PROMOTED_REGISTERS = 192
"""f32 registers a thread gives a float8 dot promoted in f32 (`promotes`): its accumulator and two partials, one
being added while the next block's chain runs (N / 2 registers each). A 64 x 256 `p @ v` of float8 attention at head
dim 256 in 256-wide instructions needed 128 + 2 x 128: ptxas used 255, spilled 304 bytes and serialised the wgmmas
(C7512); in 64-wide ones it spills 88 bytes, serialises nothing. Only 256-wide instructions are narrowed: the
matmuls' 128-wide promoted tiles were measured as they are (`matmul_tiles.FLOAT8_CANDIDATES`)."""
SWIZZLES = (32, 64, 128)
"""wgmma's swizzle widths in bytes: the row of a shared-memory panel (`swizzle.Swizzle.row_bytes`)."""


def _log2(n: int) -> int:
    return n.bit_length() - 1


def wgmma_target(arch: str) -> bool:
    """Whether `arch` has `wgmma` (sm_90a: the architecture-specific Hopper target)."""
    return arch.startswith("sm_9") and arch.endswith("a")


@dataclass(frozen=True)
class WgmmaTiling:
    """How the warpgroups of a program split an `m` x `n` accumulator into instructions."""

    m: int
    n: int
    groups_m: int
    groups_n: int
    max_n: int = MAX_N

    @staticmethod
    def of(m: int, n: int, num_warps: int, max_n: int = MAX_N) -> WgmmaTiling:
        groups = num_warps // WARPGROUP
        gm = 1
        while gm < groups and ROWS * gm * 2 <= m:
            gm *= 2
        return WgmmaTiling(m, n, gm, groups // gm, max_n)

    @property
    def instr_n(self) -> int:
        """The N of one instruction."""
        return min(self.max_n, self.n // self.groups_n)

    @property
    def reps_m(self) -> int:
        return self.m // (ROWS * self.groups_m)

    @property
    def reps_n(self) -> int:
        return self.n // (self.instr_n * self.groups_n)

    def accumulator(self) -> Layout:
        reg = [(0, 1), (8, 0), *((0, 8 << i) for i in range(_log2(self.instr_n // 8)))]
        reg += [(0, self.instr_n * self.groups_n << i) for i in range(_log2(self.reps_n))]
        reg += [(ROWS * self.groups_m << i, 0) for i in range(_log2(self.reps_m))]
        lane = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
        warp = [(16, 0), (32, 0), *((ROWS << i, 0) for i in range(_log2(self.groups_m)))]
        warp += [(0, self.instr_n << i) for i in range(_log2(self.groups_n))]
        return Layout((self.m, self.n), tuple(reg), lane, tuple(warp))


def uses_wgmma(op: tt.DotOp, num_warps: int, arch: str) -> bool:
    """Whether `op` lowers to `wgmma` on `arch`: f16/bf16 operands (K steps of 16) or float8 ones (e4m3/e5m2,
    K steps of 32, B K-major: `k_major_b`) with an f32 accumulator, whole warpgroups each owning at least one
    64-row instruction, and operand tiles whose swizzled rows (`Swizzle`) are wgmma's 32, 64 or 128-byte
    swizzles, an instruction covering whole panels of B (MN-major B; a K-major B is swizzled along K as A
    is)."""
    return wgmma_fits(op, num_warps, arch, k_major_b(op) is not None)


def runs_on_wgmma(op: tt.DotOp, num_warps: int, arch: str) -> bool:
    """Whether `op` runs on wgmma once its float8 operands are prepared (`float8_dot`: B made K-major)."""
    float8 = isinstance(tt.element_type(op.a.type), tt.FLOAT8_TYPES)
    return wgmma_fits(op, num_warps, arch, float8 or k_major_b(op) is not None)


def k_step(op: tt.DotOp) -> int:
    """The K of one wgmma instruction: 32 bytes of each operand row (16 f16/bf16, 32 float8)."""
    return 32 // (tt.element_type(op.a.type).bitwidth // 8)


def wgmma_fits(op: tt.DotOp, num_warps: int, arch: str, k_major: bool) -> bool:
    """`uses_wgmma` for B read K-major or not (a float8 dot's B must be: wgmma has no transposed 8-bit B)."""
    (m, k), (_, n) = tt.shape_of(op.a.type), tt.shape_of(op.b.type)
    operands, acc = tt.element_type(op.a.type), tt.element_type(op.acc.type)
    float8 = isinstance(operands, tt.FLOAT8_TYPES)
    if not (wgmma_target(arch) and isinstance(operands, (Float16Type, BFloat16Type, *tt.FLOAT8_TYPES))):
        return False
    if not isinstance(acc, Float32Type) or num_warps % WARPGROUP or m % ROWS or k % k_step(op) or float8 and not k_major:
        return False
    size = operands.bitwidth // 8
    tiling = WgmmaTiling.of(m, n, num_warps)
    if m_major_a(op) is None:
        a_row = min(size * k, SWIZZLES[-1])
    else:  # A stored K x M: rows of M, an instruction's 64 rows whole panels of them
        a_row = min(size * m, SWIZZLES[-1])
        if ROWS * size % a_row:
            return False
    if k_major:  # B read as an N x K tile, like A
        return tiling.reps_m >= 1 and tiling.instr_n >= 8 and tiling.instr_n % 8 == 0 and a_row in SWIZZLES
    b_row = min(size * n, SWIZZLES[-1])
    return (
        tiling.reps_m >= 1
        and tiling.instr_n >= 8
        and tiling.instr_n * size % b_row == 0
        and a_row in SWIZZLES
        and b_row in SWIZZLES
    )


def promotes(op: tt.DotOp | tt.PromotedDotOp) -> bool:
    """Whether `op` adds its wgmma chains' partial sums to its accumulator in f32 (float8 operands and
    `max_num_imprecise_acc`: `float8_dot.promotion_steps`)."""
    return op.max_num_imprecise_acc is not None and isinstance(tt.element_type(op.a.type), tt.FLOAT8_TYPES)


def wgmma_tiling(op: tt.DotOp | tt.PromotedDotOp, num_warps: int) -> WgmmaTiling:
    m, n = tt.shape_of(op.result.type)
    max_n, tiling = MAX_N, WgmmaTiling.of(m, n, num_warps)
    if promotes(op) and tiling.instr_n > MAX_N // 2:
        while max_n > 8 and m * n // (32 * num_warps) + max_n > PROMOTED_REGISTERS:
            max_n //= 2
    return WgmmaTiling.of(m, n, num_warps, max_n)


def register_a(op: tt.DotOp, layout: Layout | None, num_warps: int) -> bool:
    """Whether A can be read from registers: it is held in the accumulator layout of an m x k wgmma (the
    probabilities of attention, cast from the scores), which is exactly the A fragment of m64k16 blocks
    (16-bit types only: an 8-bit A fragment packs four K-consecutive elements per register)."""
    fragment = register_a_layout(op, num_warps)
    return fragment is not None and layout == fragment


def register_a_layout(op: tt.DotOp, num_warps: int) -> Layout | None:
    """The layout in which `op`'s A would be read from registers (`register_a`), if A may be: a 16-bit A of at
    most `MAX_N` columns, not a shared-memory slot or read M-major, both products' warpgroups split along M."""
    (m, k), (_, n) = tt.shape_of(op.a.type), tt.shape_of(op.b.type)
    if isinstance(op.a.owner, tt.LocalLoadOp) or m_major_a(op) is not None or k > MAX_N or \
            tt.element_type(op.a.type).bitwidth != 16:
        return None
    a_tiling, tiling = WgmmaTiling.of(m, k, num_warps), WgmmaTiling.of(m, n, num_warps)
    return a_tiling.accumulator() if a_tiling.groups_n == 1 and tiling.groups_n == 1 else None
