"""L2 eviction policies on the loads of fused kernels (`lowering/fusion/cache_policy.py`), measured.

- ptx: what Triton and tinyton emit for `tl.load(..., eviction_policy="evict_last")`;
- copies: copies of 16x262144 and 64x262144 (fp32, fp16), plain and `evict_last`, torch, Triton and tinyton;
- grid: the one-kernel split rows at 16x262144, the two-kernel ones at 64x262144, with and without the policy
  on their loads; grid variants (programs per SM, rows per program) with it;
- rows: row kernels at 8192x1024, 4096x4096, 1024x32768, 32x2048 with and without it;
- chain: a softmax then an rmsnorm of its output (two calls), both policies: what the first kernel's high-priority
  lines do to the second.

Timings: do_bench (256 MB zero flush: dirty lines), after a read-only flush (clean lines), back-to-back.

    python bench/probes/probe_cache_policy.py [--sections ptx,copies,grid,rows,chain]
"""

# Every lambda below is timed at once, inside the loop that binds its variables:
# ruff: noqa: B023

from __future__ import annotations

from contextlib import contextmanager

import torch
import triton
import triton.language as tl
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_fusion import layernorm, log_softmax, rmsnorm, softmax
from common import check_close, gbps, run_sections
from probe_grid import three_ways
from probe_reductions import patched

import tinyton as tt
from tinyton.frontend import programs
from tinyton.lowering.fusion import cache_policy

PROGRAMS = {"softmax": softmax, "rmsnorm": rmsnorm, "layernorm": layernorm, "log_softmax": log_softmax}
POLICIES = {"plain": None, "evict_last": "evict_last"}


@tt.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tt.constexpr, EVICT: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    tt.store(y_ptr + offs, tt.load(x_ptr + offs, eviction_policy=EVICT))


@triton.jit
def triton_copy(x_ptr, y_ptr, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, eviction_policy=EVICT))


@contextmanager
def policy(**values):
    """cache_policy's constants set for a while; programs recompiled."""
    saved = {k: getattr(cache_policy, k) for k in values}
    for k, v in values.items():
        setattr(cache_policy, k, v)
    programs._PROGRAMS.clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(cache_policy, k, v)
        programs._PROGRAMS.clear()


def cleaner() -> torch.Tensor:
    c = torch.empty(1 << 26, device="cuda")  # 256 MB
    c.fill_(1.0)
    return c


def cells(nbytes: int, times) -> str:
    return " | ".join(f"{t:.2f} µs {gbps(nbytes, t * 1e-3):.0f}" for t in times)


def ptx_section() -> None:
    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    k = triton_copy[(16,)](x, y, BLOCK=4096, EVICT="evict_last", num_warps=8)
    print("\n### Triton's PTX for eviction_policy='evict_last'\n```")
    print("\n".join(ln.strip() for ln in k.asm["ptx"].splitlines() if "createpolicy" in ln or "ld.global" in ln or "st.global" in ln))
    print("```\n### tinyton's\n```")
    ptx = copy_kernel.compile(x, y, BLOCK=4096, EVICT="evict_last", num_warps=8).asm["ptx"]
    print("\n".join(ln.strip() for ln in ptx.splitlines() if "createpolicy" in ln or "ld.global" in ln or "st.global" in ln))
    print("```", flush=True)


def copies_section() -> None:
    c = cleaner()
    print("\n### Copies (do_bench | clean flush | back-to-back; µs, GB/s)\n", flush=True)
    for rows in (16, 64):
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(rows, 262144, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            n, nbytes, name = x.numel(), 2 * x.nbytes, f"{rows}x262144 {str(dtype)[6:]}"
            print(f"| {name} torch copy_ | {cells(nbytes, three_ways(lambda: y.copy_(x), c))} |", flush=True)
            for label, evict in (("plain", ""), ("evict_last", "evict_last")):
                for block, warps in ((4096, 8),):
                    triton_copy[(n // block,)](x, y, BLOCK=block, EVICT=evict, num_warps=warps)
                    assert torch.equal(x, y)
                    y.zero_()
                    run = lambda: triton_copy[(n // block,)](x, y, BLOCK=block, EVICT=evict, num_warps=warps)
                    print(f"| {name} Triton {label} B{block} w{warps} | {cells(nbytes, three_ways(run, c))} |", flush=True)
                for block, warps in ((2048, 4), (4096, 8), (8192, 8), (16384, 16)):
                    copy_kernel[(n // block,)](x, y, BLOCK=block, EVICT=evict, num_warps=warps)
                    assert torch.equal(x, y)
                    y.zero_()
                    run = lambda: copy_kernel[(n // block,)](x, y, BLOCK=block, EVICT=evict, num_warps=warps)
                    print(f"| {name} tinyton {label} B{block} w{warps} | {cells(nbytes, three_ways(run, c))} |", flush=True)


def _args(name: str, x: torch.Tensor) -> tuple:
    vec = lambda: torch.randn(x.shape[-1], device="cuda", dtype=x.dtype)
    return {"rmsnorm": (x, vec()), "layernorm": (x, vec(), vec())}.get(name, (x,))


def _want(name: str, args) -> torch.Tensor:
    d = [a.double() for a in args]
    return {"softmax": lambda: torch.softmax(d[0], -1), "log_softmax": lambda: torch.log_softmax(d[0], -1),
            "rmsnorm": lambda: d[0] * torch.rsqrt((d[0] ** 2).mean(-1, keepdim=True) + 1e-6) * d[1],
            "layernorm": lambda: torch.nn.functional.layer_norm(d[0], (d[0].shape[-1],), d[1], d[2], 1e-5)}[name]()


def compare(knob: str, shapes, names, c: torch.Tensor, latency: bool = False) -> None:
    print("| program | shape | dtype | " + " | ".join(f"{p} (do_bench / clean / back-to-back)" for p in POLICIES) + " | ratio |")
    for shape in shapes:
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(*shape, device="cuda", dtype=dtype)
            for name in names:
                fn, args = PROGRAMS[name], _args(name, x)
                want = _want(name, args)
                out, firsts = [], []
                for value in POLICIES.values():
                    with policy(**{knob: value}):
                        check_close(name, fn(*args), want, 1e-5 if dtype == torch.float32 else 5e-3)
                        t = three_ways(lambda: fn(*args), c)
                    firsts.append(t[0])
                    out.append(" / ".join(f"{v:.2f} µs" if latency else f"{gbps(2 * x.nbytes, v * 1e-3):.0f}" for v in t))
                ratio = firsts[0] / firsts[1]
                print(f"| {name} | {shape[0]}x{shape[1]} | {str(dtype)[6:]} | " + " | ".join(out) + f" | {ratio:.3f} |",
                      flush=True)


def grid_section() -> None:
    c = cleaner()
    print("\n### Grid kernel (GB/s), GRID_LOADS plain vs evict_last\n", flush=True)
    compare("GRID_LOADS", ((16, 262144),), PROGRAMS, c)
    print("\n### Two-kernel split rows (GB/s), SPLIT_LOADS plain vs evict_last\n", flush=True)
    compare("SPLIT_LOADS", ((64, 262144),), ("softmax", "rmsnorm", "layernorm"), c)
    print("\n### Grid variants with evict_last (GB/s, do_bench / clean / back-to-back)\n", flush=True)
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(16, 262144, device="cuda", dtype=dtype)
        for name in ("softmax", "rmsnorm"):
            fn, args = PROGRAMS[name], _args(name, x)
            want, out = _want(name, args), []
            for label, values in GRID_VARIANTS.items():
                with patched(**values):
                    check_close(name, fn(*args), want, 1e-5 if dtype == torch.float32 else 5e-3)
                    t = three_ways(lambda: fn(*args), c)
                out.append(f"{label}: " + " / ".join(f"{gbps(2 * x.nbytes, v * 1e-3):.0f}" for v in t))
            print(f"| {name} | {str(dtype)[6:]} | " + " | ".join(out) + " |", flush=True)


GRID_VARIANTS = {
    "default": {},
    "2 per SM, slice 8192": {"GRID_PROGRAMS_PER_SM": 2, "GRID_TILE": 16384, "GRID_SLICES": (8192, 16384)},
    "rows 1, slice 8192": {"GRID_ROWS": 1, "GRID_SLICES": (8192,)},
}


def rows_section() -> None:
    c = cleaner()
    print("\n### Row kernels (GB/s), ROW_LOADS plain vs evict_last\n", flush=True)
    compare("ROW_LOADS", ((8192, 1024), (4096, 4096), (1024, 32768)), ("softmax", "rmsnorm"), c)
    print("\n### Row kernels (µs), ROW_LOADS plain vs evict_last\n", flush=True)
    compare("ROW_LOADS", ((32, 2048),), ("softmax", "rmsnorm"), c, latency=True)


def chain_section() -> None:
    """softmax(x) then rmsnorm of its output: the second kernel reads what the first wrote."""
    c = cleaner()
    print("\n### Chain softmax -> rmsnorm (µs for both; do_bench / clean / back-to-back)\n", flush=True)
    for shape, knob in (((16, 262144), "GRID_LOADS"), ((64, 262144), "SPLIT_LOADS"), ((8192, 1024), "ROW_LOADS"),
                        ((4096, 4096), "ROW_LOADS")):
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(*shape, device="cuda", dtype=dtype)
            w = torch.randn(shape[1], device="cuda", dtype=dtype)
            cols = []
            for label, value in POLICIES.items():
                with policy(**{knob: value}):
                    rmsnorm(softmax(x), w)
                    t = three_ways(lambda: rmsnorm(softmax(x), w), c)
                cols.append(f"{label}: " + " / ".join(f"{v:.2f}" for v in t))
            print(f"| {shape[0]}x{shape[1]} {str(dtype)[6:]} {knob} | " + " | ".join(cols) + " |", flush=True)


SECTIONS = {"ptx": ptx_section, "copies": copies_section, "grid": grid_section, "rows": rows_section,
            "chain": chain_section}


def main() -> None:
    run_sections(__doc__, SECTIONS, "ptx,grid,copies,rows,chain")


if __name__ == "__main__":
    main()
