"""Descriptor loads and stores outside dot loops (issue 8): an elementwise scale on host tensor descriptors
(`desc.store(offs, desc.load(offs) * 2)`, the masked loads and stores they stand for, the last stride
compiled in as 1), on descriptors made in the kernel from a stride argument equal to 1, and on pointers,
torch's `x * 2` the bandwidth roof. If the descriptor kernels are as fast as the pointer one, what a TMA copy
of these blocks could still win is the pointer kernel's distance to torch.

    python bench/probes/bench_descriptors.py         # on a GPU host with torch; prints a Markdown table
"""

from __future__ import annotations

import time

import torch

import tinyton as tt
import tinyton.language as tl
from tinyton.tools.tensor_descriptor import TensorDescriptor
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from common import DEVICE, check_close, device_name, gbps, median_ms, peer, print_table


@tt.jit
def scale_desc(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]) * 2)


@tt.jit
def scale_made(x, y, M, N, S1, BM: tl.constexpr, BN: tl.constexpr):
    """`scale_desc` on descriptors made here; the last stride `S1` is an int argument (1: compiled in)."""
    xd = tl.make_tensor_descriptor(x, [M, N], [N, S1], [BM, BN])
    yd = tl.make_tensor_descriptor(y, [M, N], [N, S1], [BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    yd.store([m, n], xd.load([m, n]) * 2)


@tt.jit
def scale_ptr(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    tl.store(y + rows * N + cols, tl.load(x + rows * N + cols, mask=mask) * 2, mask=mask)


SHAPES = [(4096, 4096), (8192, 8192), (4000, 4000), (16384, 1024), (3000, 3001)]
BLOCKS = [(64, 64), (128, 128)]


def row(m: int, n: int, block: tuple[int, int]) -> list[object]:
    x = torch.randn(m, n, device=DEVICE, dtype=torch.float16)
    y = torch.empty_like(x)
    bm, bn = block
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    xd, yd = TensorDescriptor.from_tensor(x, [bm, bn]), TensorDescriptor.from_tensor(y, [bm, bn])
    moved = 2 * x.numel() * x.element_size()
    scale_desc[grid](xd, yd, bm, bn)
    check_close("descriptor scale", y, x * 2)
    t_desc = gbps(moved, median_ms(lambda: scale_desc[grid](xd, yd, bm, bn)))
    y.zero_()
    scale_made[grid](x, y, m, n, 1, bm, bn)
    check_close("in-kernel descriptor scale", y, x * 2)
    t_made = gbps(moved, median_ms(lambda: scale_made[grid](x, y, m, n, 1, bm, bn)))
    y.zero_()
    scale_ptr[grid](x, y, m, n, bm, bn)
    check_close("pointer scale", y, x * 2)
    t_ptr = gbps(moved, median_ms(lambda: scale_ptr[grid](x, y, m, n, bm, bn)))
    t_torch = gbps(moved, peer(median_ms, lambda: torch.mul(x, 2, out=y)))
    return [f"{m}x{n}", f"{bm}x{bn}", t_desc, t_made, t_ptr, t_torch, f"{100 * t_desc / t_ptr:.0f}%", f"{100 * t_ptr / t_torch:.0f}%"]


def main() -> None:
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n", flush=True)
    rows = []
    for m, n in SHAPES:
        for block in BLOCKS:
            rows.append(row(m, n, block))
            print("  " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in rows[-1]), flush=True)
    print_table("fp16 x * 2 on 2-D blocks (GB/s, median)",
                ["shape", "block", "host descriptors", "in-kernel descriptors", "pointers", "torch",
                 "host descriptors/pointers", "pointers/torch"], rows)


if __name__ == "__main__":
    main()
