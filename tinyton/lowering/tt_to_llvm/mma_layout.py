"""
The tensor-core layouts of `tt.dot`: the accumulator of `mma.sync.m16n8k16` and its A/B operands.

The analogue of Triton's `NvidiaMmaEncoding` (version 2) and `DotOperandEncoding`, written as
`Layout` bases. One `mma.m16n8k16` leaves, per thread, c0..c3 at (row g, cols 2t, 2t+1) and
(row g+8, same cols), with g = lane / 4 and t = lane % 4. A warp owns 16x16 blocks (two n8
instructions side by side), warps tile M and N by 16, and repetitions over the rest of the
tile are further registers, N first. The register order is therefore

    bit 0: column +1, bit 1: row +8, bit 2: column +8, then N repetitions, then M repetitions,

so the four registers of one instruction are consecutive, which `mma` relies on. With this
order the accumulator of a 16x16 block is also exactly the A operand fragment of a 16x16
block (a0..a3), as in Triton's flash-attention trick.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type

from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.layouts import Basis, Layout

BLOCK = 16
"""Rows and columns of one warp's block (and the K of one instruction)."""

MMA_ELEMENT_TYPES = (Float16Type, BFloat16Type)
"""16-bit operand element types that run on tensor cores (`mma.m16n8k16`); f32 operands do too with
`input_precision="tf32"` or `"tf32x3"` (`mma.m16n8k8.tf32`)."""
TF32_PRECISIONS = ("tf32", "tf32x3")
"""The `input_precision`s that put f32 operands on the tensor cores."""


def _log2(n: int) -> int:
    return n.bit_length() - 1


def uses_mma(op: tt.DotOp) -> bool:
    """Whether `op` runs on tensor cores: f16 operands with an f16 or f32 accumulator, bf16 ones with an
    f32 accumulator (the only one the instruction has), f32 ones with `input_precision` "tf32" or "tf32x3", or float8
    ones with an f32 accumulator (wgmma's); tiles of at least 16."""
    (m, k), (_, n) = tt.shape_of(op.a.type), tt.shape_of(op.b.type)
    operands, acc = tt.element_type(op.a.type), tt.element_type(op.acc.type)
    if min(m, n, k) < BLOCK:
        return False
    if isinstance(operands, Float32Type):
        return op.input_precision.data in TF32_PRECISIONS and isinstance(acc, Float32Type)
    if isinstance(operands, tt.FLOAT8_TYPES):  # on wgmma: the lowering widened the others (`float8_dot`)
        return isinstance(acc, Float32Type)
    return isinstance(operands, MMA_ELEMENT_TYPES) and (
        isinstance(acc, Float32Type) or isinstance(acc, Float16Type) and isinstance(operands, Float16Type)
    )


def k_major_b(op: tt.DotOp) -> SSAValue | None:
    """The N x K tile whose transpose is B (`tt.trans` of a key block as stored, `w` of `x @ w.T`) when the
    dot can read it K-major (16-bit elements and tf32: `ldmatrix` without `.trans`, wgmma's K-major B;
    float8: wgmma's only B); None otherwise."""
    b = op.b.owner
    transposed = isinstance(b, tt.TransOp) and tuple(b.order.get_values()) == (1, 0)
    element = tt.element_type(op.b.type)
    tf32 = isinstance(element, Float32Type) and op.input_precision.data in TF32_PRECISIONS
    return b.input if transposed and (tf32 or isinstance(element, (*MMA_ELEMENT_TYPES, *tt.FLOAT8_TYPES))) else None


def m_major_a(op: tt.DotOp) -> SSAValue | None:
    """The K x M tile whose transpose is A (`a.T @ b`: A stored K x M, a weight gradient's `x.T @ dy`; the attention
    backward's `ds` from `dsᵀ` in registers), for a 16-bit A that wgmma then reads M-major from shared memory
    (`imm-trans-a`) as it reads a K x N B, with no transpose in registers: a loaded tile as stored, a computed one
    staged in its own orientation (the elements a thread holds side by side, along M, stored together: staged
    K-major, `dsᵀ`'s were stored two bytes at a time). None otherwise. Only wgmma uses it: mma.sync transposes
    such an A in registers."""
    a = op.a.owner
    transposed = isinstance(a, tt.TransOp) and tuple(a.order.get_values()) == (1, 0)
    return a.input if transposed and isinstance(tt.element_type(op.a.type), MMA_ELEMENT_TYPES) else None


@dataclass(frozen=True)
class MmaTiling:
    """How the warps of a program split an `m` x `n` accumulator into 16x16 blocks."""

    m: int
    n: int
    warps_m: int
    warps_n: int
    num_warps: int

    @staticmethod
    def of(m: int, n: int, num_warps: int) -> MmaTiling:
        """Like Triton's `warpsPerTileV2`: give warps to the dimension with more blocks left
        per warp; warps beyond the tile's blocks hold replicas."""
        wm = wn = 1
        while wm * wn < num_warps:
            can_m, can_n = BLOCK * wm * 2 <= m, BLOCK * wn * 2 <= n
            if can_m and (not can_n or m // wm >= n // wn):
                wm *= 2
            elif can_n:
                wn *= 2
            else:
                break
        return MmaTiling(m, n, wm, wn, num_warps)

    @property
    def reps_m(self) -> int:
        """16-row blocks per warp."""
        return self.m // (BLOCK * self.warps_m)

    @property
    def reps_n(self) -> int:
        """16-column blocks per warp."""
        return self.n // (BLOCK * self.warps_n)

    def _warp_bases(self, m_axis: int | None, n_axis: int | None, rank: int) -> tuple[Basis, ...]:
        """Warp bits: N blocks first, then M blocks, then replicas; an axis of None replicates."""

        def unit(axis: int | None, value: int) -> Basis:
            return tuple(value if d == axis else 0 for d in range(rank))

        bases = [unit(n_axis, BLOCK << i) for i in range(_log2(self.warps_n))]
        bases += [unit(m_axis, BLOCK << i) for i in range(_log2(self.warps_m))]
        bases += [(0,) * rank] * (_log2(self.num_warps) - len(bases))
        return tuple(bases)

    def accumulator(self) -> Layout:
        """The layout of the dot's result (and accumulator), `m` x `n`."""
        reg = [(0, 1), (8, 0), (0, 8)]
        reg += [(0, BLOCK * self.warps_n << i) for i in range(_log2(self.reps_n))]
        reg += [(BLOCK * self.warps_m << i, 0) for i in range(_log2(self.reps_m))]
        lane = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
        return Layout((self.m, self.n), tuple(reg), lane, self._warp_bases(0, 1, 2))

    def operand(self, index: int, k: int) -> Layout:
        """
        The fragment layout of operand `index` (0: A, `m` x `k`; 1: B, `k` x `n`), per 16x16
        block the registers a0..a3 (or b0, b1 of two n8 instructions) two halves each, as
        `ldmatrix.x4` (`.trans` for B) leaves them: then K repetitions, then M (N) ones.
        Warps along the other operand's dimension hold replicas.
        """
        k_reps = [BLOCK << i for i in range(_log2(k // BLOCK))]
        if index == 0:
            reg = [(0, 1), (8, 0), (0, 8), *((0, s) for s in k_reps)]
            reg += [(BLOCK * self.warps_m << i, 0) for i in range(_log2(self.reps_m))]
            lane = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
            return Layout((self.m, k), tuple(reg), lane, self._warp_bases(0, None, 2))
        reg = [(1, 0), (8, 0), (0, 8), *((s, 0) for s in k_reps)]
        reg += [(0, BLOCK * self.warps_n << i) for i in range(_log2(self.reps_n))]
        lane = ((2, 0), (4, 0), (0, 1), (0, 2), (0, 4))
        return Layout((k, self.n), tuple(reg), lane, self._warp_bases(None, 1, 2))


def mma_tiling(op: tt.DotOp, num_warps: int) -> MmaTiling:
    m, n = tt.shape_of(op.result.type)
    return MmaTiling.of(m, n, num_warps)
