"""Measure `tl.cumsum` on long rows (issue 25: top-p sampling over a 128k vocabulary) against torch.cumsum and
Triton's `tl.cumsum` compiling the same kernel.

- rows: one program per row walks the row in blocks of BLOCK elements, `tl.cumsum` of each block plus the
  carry of the blocks before it (the kernel a top-p sampler writes), fp32 rows of 32768 and 131072 elements,
  1 to 256 rows, per (BLOCK, num_warps), next to torch.cumsum and Triton;
- tile: one `tl.cumsum` over a whole 65536-element tile (tinyton's largest), per num_warps: compile time, PTX
  lines and registers/spills beside the time, the cost of holding a row in registers.

    python bench/probes/probe_scan.py [--sections rows,tile]   # GB/s (read + write) per variant, do_bench medians
"""

from __future__ import annotations

import time

import torch
import triton
import triton.language as triton_tl
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from common import check_close, gbps, median_ms, peer, pick, print_table, run_sections

import tinyton as tt
import tinyton.language as tl

VARIANTS = [(1024, 4), (2048, 4), (4096, 8), (8192, 16)]
"""(BLOCK, num_warps) of the row kernels."""


@tt.jit
def row_cumsum(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.zeros([1], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + offs, tl.cumsum(x, 0) + carry, mask=offs < n_cols)
        carry += tl.sum(x, 0)


@triton.jit
def triton_row_cumsum(x_ptr, y_ptr, n_cols, BLOCK: triton_tl.constexpr):
    row = triton_tl.program_id(0)
    carry = triton_tl.zeros([1], triton_tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + triton_tl.arange(0, BLOCK)
        x = triton_tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        triton_tl.store(y_ptr + row * n_cols + offs, triton_tl.cumsum(x, 0) + carry, mask=offs < n_cols)
        carry += triton_tl.sum(x, 0)


@tt.jit
def tile_cumsum(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(y_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0))


def _triton_ms(x: torch.Tensor, y: torch.Tensor, block: int, warps: int) -> float:
    rows, cols = x.shape
    def run() -> None:
        triton_row_cumsum[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)

    run()
    check_close(f"triton cumsum {tuple(x.shape)} {block}/{warps}", y, x.double().cumsum(-1), 1e-5)
    return median_ms(run)


def rows() -> None:
    table = []
    for cols in pick([32768, 131072], [5000]):
        for n_rows in pick([1, 16, 64, 256], [3]):
            x = torch.rand(n_rows, cols, device="cuda" if torch.cuda.is_available() else "cpu")
            y = torch.empty_like(x)
            want = x.double().cumsum(-1)
            moved = 2 * x.nbytes
            torch_ms = peer(median_ms, lambda x=x, y=y: torch.cumsum(x, -1, out=y))
            cells: list[object] = [f"{n_rows}x{cols}", gbps(moved, torch_ms)]
            for block, warps in VARIANTS:
                def run(b=block, w=warps, x=x, y=y, cols=cols, n_rows=n_rows) -> None:
                    row_cumsum[(n_rows,)](x, y, cols, BLOCK=b, num_warps=w)

                run()
                check_close(f"tinyton cumsum {tuple(x.shape)} {block}/{warps}", y, want, 1e-5)
                ms = median_ms(run)
                cells.append(f"{gbps(moved, ms):.0f} / {gbps(moved, peer(_triton_ms, x, y, block, warps)):.0f}")
            table.append(cells)
    header = ["rows x cols (fp32)", "torch.cumsum GB/s", *(f"{b}/{w} warps: tinyton / Triton GB/s" for b, w in VARIANTS)]
    print_table("cumsum over long rows: one program per row, blocks with a carry", header, table)


def tile() -> None:
    n = pick(65536, 4096)
    x = torch.rand(pick(132, 2), n, device="cuda" if torch.cuda.is_available() else "cpu")
    y = torch.empty_like(x)
    table = []
    for warps in pick([4, 8, 16], [4]):
        start = time.perf_counter()
        compiled = tile_cumsum.warmup(x, y, N=n, num_warps=warps, grid=(x.shape[0],))
        compile_s = time.perf_counter() - start
        def run(w=warps) -> None:
            tile_cumsum[(x.shape[0],)](x, y, N=n, num_warps=w)

        run()
        check_close(f"tile cumsum {n} x{warps}", y, x.double().cumsum(-1), 1e-5)
        ms = median_ms(run)
        lines = compiled.asm["ptx"].count("\n")
        table.append([warps, f"{compile_s:.1f}", lines, compiled.n_regs, compiled.n_spills, gbps(2 * x.nbytes, ms)])
    header = ["warps", "compile s", "PTX lines", "registers", "spills", "GB/s"]
    print_table(f"one tl.cumsum over a {n}-element tile, {x.shape[0]} programs", header, table)


if __name__ == "__main__":
    run_sections(__doc__, {"rows": rows, "tile": tile})
