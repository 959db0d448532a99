"""Issue 2 benchmarks: launch overhead, vector-add bandwidth, hand-written softmax/rmsnorm, compile times.

    python bench/bench_kernels.py            # on a GPU host with torch and Triton; prints Markdown tables
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import torch
from cuda.bindings import driver as cu

import tinyton as tt
from common import (
    DEVICE,
    ONESHOT,
    check_close,
    device_name,
    gbps,
    host_us_per_call,
    median_ms,
    peer,
    pick,
    print_table,
)
import triton_reference

VECTOR = pick((1 << 26, "2^26"), (3 * 4096 + 77, "3x4096+77"))
ROWS = pick((4096, 4096), (37, 3001))
"""Hand-written row kernels' shape (4096-wide blocks, 8 warps, at every size)."""


@tt.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


@tt.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tt.constexpr):
    row = tt.program_id(0)
    offsets = tt.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tt.load(x_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
    e = tt.exp(x - tt.max(x, axis=0))
    tt.store(y_ptr + row * n_cols + offsets, e / tt.sum(e, axis=0), mask=mask)


@tt.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tt.constexpr):
    row = tt.program_id(0)
    offsets = tt.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tt.load(x_ptr + row * n_cols + offsets, mask=mask, other=0.0)
    w = tt.load(w_ptr + offsets, mask=mask, other=0.0)
    r = tt.rsqrt(tt.sum(x * x, axis=0) / n_cols + eps)
    tt.store(y_ptr + row * n_cols + offsets, x * r * w, mask=mask)


def launch_overhead() -> list[list[object]]:
    a, b, c = (torch.randn(1024, device=DEVICE) for _ in range(3))
    add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    check_close("tiny add", c, a + b)
    tiny = ["tinyton kernel[grid](...) (cached)", host_us_per_call(lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024))]
    if ONESHOT:  # the other rows launch the same kernel through the driver, or peers
        return [tiny]

    compiled = add_kernel.compile(a, b, c, 1024, BLOCK=1024)
    module = cu.cuModuleLoadData(compiled.asm["ptx"].encode() + b"\0")[1]
    function = cu.cuModuleGetFunction(module, compiled.name.encode())[1]
    slots = [np.array([a.data_ptr()], np.uint64), np.array([b.data_ptr()], np.uint64),
             np.array([c.data_ptr()], np.uint64), np.array([1024], np.int32)]
    params = np.array([s.ctypes.data for s in slots], np.uint64)
    threads = compiled.num_warps * 32
    raw = lambda: cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0)
    triton_add = triton_reference.add
    return [
        ["raw cuLaunchKernel (cuda-python, prebuilt params)", host_us_per_call(raw)],
        tiny,
        ["Triton kernel[grid](...)", host_us_per_call(lambda: triton_add(a, b, c))],
        ["torch.add(out=)", host_us_per_call(lambda: torch.add(a, b, out=c))],
    ]


def vector_add_bandwidth() -> list[list[object]]:
    n, size = VECTOR
    a, b = torch.randn(n, device=DEVICE), torch.randn(n, device=DEVICE)
    c = torch.full_like(a, float("nan"))
    block = 4096
    run = lambda: add_kernel[(tt.cdiv(n, block),)](a, b, c, n, BLOCK=block, num_warps=8)
    run()
    check_close("vector add", c, a + b)
    copy_src, copy_dst = torch.randn(n * 2, device=DEVICE), torch.empty(n * 2, device=DEVICE)
    copy_gbps = gbps(2 * copy_src.nbytes, peer(median_ms, lambda: copy_dst.copy_(copy_src)))
    add_gbps = gbps(3 * a.nbytes, median_ms(run))
    torch_gbps = gbps(3 * a.nbytes, peer(median_ms, lambda: torch.add(a, b, out=c)))
    return [
        [f"device-to-device copy ({copy_src.nbytes / 2**20:g} MiB)", copy_gbps, "100%"],
        [f"tinyton vector add {size} fp32", add_gbps, f"{100 * add_gbps / copy_gbps:.1f}%"],
        [f"torch.add {size} fp32", torch_gbps, f"{100 * torch_gbps / copy_gbps:.1f}%"],
    ]


def row_kernels() -> list[list[object]]:
    n_rows, n_cols = ROWS
    x = torch.randn(n_rows, n_cols, device=DEVICE)
    w = torch.randn(n_cols, device=DEVICE)
    y = torch.full_like(x, float("nan"))
    xd = x.double()
    block, warps = 4096, 8
    cases = {
        "softmax": (
            lambda: softmax_kernel[(n_rows,)](x, y, n_cols, BLOCK=block, num_warps=warps),
            torch.softmax(xd, -1),
            lambda: triton_reference.softmax(x, y),
            lambda: torch.softmax(x, -1),
        ),
        "rmsnorm": (
            lambda: rmsnorm_kernel[(n_rows,)](x, w, y, n_cols, 1e-6, BLOCK=block, num_warps=warps),
            xd * torch.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double(),
            lambda: triton_reference.rmsnorm(x, w, y),
            lambda: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
        ),
    }
    rows = []
    for name, (ours, want, triton_fn, torch_fn) in cases.items():
        ours()
        check_close(name, y, want)
        figures = [gbps(2 * x.nbytes, median_ms(ours))] + [gbps(2 * x.nbytes, peer(median_ms, f)) for f in (triton_fn, torch_fn)]
        rows.append([f"{name} {n_rows}x{n_cols}", *figures, f"{100 * figures[0] / figures[1]:.0f}%"])
    return rows


COLD_COMPILE = textwrap.dedent(
    """
    import time, numpy as np
    t0 = time.perf_counter()
    import tinyton as tt
    t1 = time.perf_counter()
    @tt.jit
    def k(a_ptr, b_ptr, n, BLOCK: tt.constexpr):
        o = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
        tt.store(b_ptr + o, tt.exp(tt.load(a_ptr + o, mask=o < n)), mask=o < n)
    a = np.ones(1024, np.float32); b = np.empty_like(a)
    t2 = time.perf_counter()
    ck = k.compile(a, b, 1024, BLOCK=1024); ptx = ck.asm["ptx"]
    t3 = time.perf_counter()
    for _ in range(100): k.compile(a, b, 1024, BLOCK=1024)
    t4 = time.perf_counter()
    print(f"{(t1-t0)*1e3:.1f} {(t3-t2)*1e3:.1f} {(t4-t3)/100*1e3:.4f}")
    """
)


def compile_times() -> list[list[object]]:
    rows = []
    for toolchain in ("llvmlite", "mlir"):
        env = dict(os.environ, TINYTON_CACHE="0", TINYTON_TOOLCHAIN=toolchain)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:  # kernels need a source file
            script.write(COLD_COMPILE)
        out = subprocess.run([sys.executable, script.name], env=env, capture_output=True, text=True)
        os.unlink(script.name)
        if out.returncode != 0:
            rows.append([f"toolchain {toolchain}", "unavailable: " + out.stderr.strip().splitlines()[-1], "", ""])
            continue
        imp, cold, hit = out.stdout.split()
        rows.append([f"toolchain {toolchain}", imp, cold, hit])
    return rows


def main() -> None:
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n")
    print_table("Launch overhead (µs per launch, 10,000 back-to-back launches, median of 5)", ["what", "µs"], launch_overhead())
    print_table("Vector add bandwidth (GB/s, read a+b, write c)", ["what", "GB/s", "of copy"], vector_add_bandwidth())
    print_table("Hand-written row kernels, fp32 (GB/s, one read + one write)",
                ["kernel", "tinyton", "Triton", "torch", "tinyton/Triton"], row_kernels())
    if not ONESHOT:  # compiles in fresh processes; launches nothing
        print_table("Compile time (ms): import, cold compile to PTX, in-process cache hit",
                    ["toolchain", "import tinyton", "cold compile", "cache hit"], compile_times())


if __name__ == "__main__":
    main()
