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

import torch
from cuda.bindings import driver as cu

import tinyton as tt
from common import check_close, gbps, host_us_per_call, median_ms, print_table
import triton_reference


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
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    check_close("tiny add", c, a + b)

    compiled = add_kernel.compile(a, b, c, 1024, BLOCK=1024)
    module = cu.cuModuleLoadData(compiled.asm["ptx"].encode() + b"\0")[1]
    function = cu.cuModuleGetFunction(module, compiled.name.encode())[1]
    import numpy as np

    slots = [np.array([a.data_ptr()], np.uint64), np.array([b.data_ptr()], np.uint64),
             np.array([c.data_ptr()], np.uint64), np.array([1024], np.int32)]
    params = np.array([s.ctypes.data for s in slots], np.uint64)
    threads = compiled.num_warps * 32
    raw = lambda: cu.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0)
    tiny = lambda: add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    triton_add = triton_reference.add
    return [
        ["raw cuLaunchKernel (cuda-python, prebuilt params)", host_us_per_call(raw)],
        ["tinyton kernel[grid](...) (cached)", host_us_per_call(tiny)],
        ["Triton kernel[grid](...)", host_us_per_call(lambda: triton_add(a, b, c))],
        ["torch.add(out=)", host_us_per_call(lambda: torch.add(a, b, out=c))],
    ]


def vector_add_bandwidth() -> list[list[object]]:
    n = 1 << 26
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    block = 4096
    run = lambda: add_kernel[(n // block,)](a, b, c, n, BLOCK=block, num_warps=8)
    run()
    check_close("vector add", c, a + b)
    copy_src, copy_dst = torch.randn(n * 2, device="cuda"), torch.empty(n * 2, device="cuda")
    copy_gbps = gbps(2 * copy_src.nbytes, median_ms(lambda: copy_dst.copy_(copy_src)))
    add_gbps = gbps(3 * a.nbytes, median_ms(run))
    torch_gbps = gbps(3 * a.nbytes, median_ms(lambda: torch.add(a, b, out=c)))
    return [
        ["device-to-device copy (512 MiB)", copy_gbps, "100%"],
        ["tinyton vector add 2^26 fp32", add_gbps, f"{100 * add_gbps / copy_gbps:.1f}%"],
        ["torch.add 2^26 fp32", torch_gbps, f"{100 * torch_gbps / copy_gbps:.1f}%"],
    ]


def row_kernels() -> list[list[object]]:
    rows = []
    x = torch.randn(4096, 4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    y = torch.full_like(x, float("nan"))
    nbytes = 2 * x.nbytes
    block, warps = 4096, 8

    tt_softmax = lambda: softmax_kernel[(4096,)](x, y, 4096, BLOCK=block, num_warps=warps)
    tt_softmax()
    check_close("softmax", y, torch.softmax(x.double(), -1))
    tr_softmax = lambda: triton_reference.softmax(x, y)
    torch_softmax = lambda: torch.softmax(x, -1)
    s = {name: gbps(nbytes, median_ms(f)) for name, f in
         [("tinyton", tt_softmax), ("triton", tr_softmax), ("torch", torch_softmax)]}
    rows.append(["softmax 4096x4096", s["tinyton"], s["triton"], s["torch"], f"{100 * s['tinyton'] / s['triton']:.0f}%"])

    tt_rms = lambda: rmsnorm_kernel[(4096,)](x, w, y, 4096, 1e-6, BLOCK=block, num_warps=warps)
    tt_rms()
    xd = x.double()
    check_close("rmsnorm", y, xd * torch.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * w.double())
    tr_rms = lambda: triton_reference.rmsnorm(x, w, y)
    torch_rms = lambda: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    r = {name: gbps(nbytes, median_ms(f)) for name, f in
         [("tinyton", tt_rms), ("triton", tr_rms), ("torch", torch_rms)]}
    rows.append(["rmsnorm 4096x4096", r["tinyton"], r["triton"], r["torch"], f"{100 * r['tinyton'] / r['triton']:.0f}%"])
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
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n")
    print_table("Launch overhead (µs per launch, 10,000 back-to-back launches, median of 5)", ["what", "µs"], launch_overhead())
    print_table("Vector add bandwidth (GB/s, read a+b, write c)", ["what", "GB/s", "of copy"], vector_add_bandwidth())
    print_table("Hand-written row kernels, fp32 (GB/s, one read + one write)",
                ["kernel", "tinyton", "Triton", "torch", "tinyton/Triton"], row_kernels())
    print_table("Compile time (ms): import, cold compile to PTX, in-process cache hit",
                ["toolchain", "import tinyton", "cold compile", "cache hit"], compile_times())


if __name__ == "__main__":
    main()
