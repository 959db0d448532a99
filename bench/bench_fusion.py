"""Issue 10 benchmarks: fused array programs next to torch eager, torch.compile and Triton, every shape.

softmax, rmsnorm, layernorm, log-softmax and a SiLU gate at the issue's nine shapes in fp32 and fp16 (µs at
the latency-bound 32x2048, GB/s elsewhere: one read + one write of x, two reads + one write for the gate),
the percent of the best peer (the faster of torch.compile and Triton) and of the device copy bandwidth (a 1 GiB
copy, and in parentheses the best copy of x's own size, torch's or a tinyton vectorized kernel with plain or
`evict_last` loads: small tensors do not reach the big copy's figure);
then the model blocks of bench/model_blocks.py (GELU-tanh MLP epilogue, SwiGLU, RoPE, cross-entropy, top-p
sampling scan; fp32 and bf16, µs); then cold compile, import, cache hits and call overhead. One run takes
~6 minutes on an H100.

    python bench/bench_fusion.py [--quick] [--only softmax,rmsnorm] [--shapes 16x262144,1024x32768]
    python bench/bench_fusion.py --blocks      # only the model blocks
    python bench/bench_fusion.py --overhead    # only the compile and call-overhead figures (~1 minute)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable

import host_overhead
import model_blocks
import torch
import torch.nn.functional as F
import triton
import triton_reference
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

import tinyton as tt

SHAPES = pick([(4096, 4096), (57344, 2048), (8192, 1024), (8192, 768), (4096, 3000), (1024, 32768), (16, 262144),
               (65536, 128), (32, 2048)], [(33, 4000), (301, 2047), (130, 1000), (3, 20000), (4, 20001)])
"""One-shot: the row schedules (wide rows, several rows per program, few long rows split: one row per program
of the grid kernel at 3 rows, two at 4) with tails."""
LATENCY_BOUND = {(32, 2048)}
LATENCY_ROUNDS = 7
ROUNDS = 5
"""Rounds of the bandwidth-bound shapes: 10-100 µs kernels whose single windows moved by 2-4 % between runs."""
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3}
"""fp16 programs compute in fp16 between their (f32) reductions, as NumPy would: exp(x - max) of a 262144-wide
row carries ~3e-3 of relative error against the float64 reference."""


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


@tt.jit
def layernorm(x, w, b):
    d = x - tt.mean(x, axis=-1, keepdims=True)
    return d * tt.rsqrt(tt.mean(d * d, axis=-1, keepdims=True) + 1e-5) * w + b


@tt.jit
def log_softmax(x):
    s = x - tt.max(x, axis=-1, keepdims=True)
    return s - tt.log(tt.sum(tt.exp(s), axis=-1, keepdims=True))


@tt.jit
def silu_gate(a, b):
    return a / (1.0 + tt.exp(-a)) * b


def torch_rmsnorm(x, w):
    return x * torch.rsqrt((x.float() * x.float()).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w


def torch_layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def torch_silu_gate(a, b):
    return F.silu(a) * b


def _inputs(name: str, shape, dtype) -> list[torch.Tensor]:
    x = torch.randn(*shape, device=DEVICE, dtype=dtype)
    vec = lambda: torch.randn(shape[-1], device=DEVICE, dtype=dtype)
    return {"rmsnorm": [x, vec()], "layernorm": [x, vec(), vec()], "silu_gate": [x, torch.randn_like(x)]}.get(name, [x])


def _reference(name: str, args: list[torch.Tensor]) -> torch.Tensor:
    d = [a.double() for a in args]
    return {
        "softmax": lambda: torch.softmax(d[0], -1),
        "rmsnorm": lambda: d[0] * torch.rsqrt((d[0] * d[0]).mean(-1, keepdim=True) + 1e-6) * d[1],
        "layernorm": lambda: torch_layernorm(*d),
        "log_softmax": lambda: torch.log_softmax(d[0], -1),
        "silu_gate": lambda: torch_silu_gate(*d),
    }[name]()


PROGRAMS: dict[str, tuple[Callable, Callable, Callable | None]] = {
    # name: (tinyton program, torch function, Triton launcher writing its last argument or None)
    "softmax": (softmax, lambda x: torch.softmax(x, -1), triton_reference.softmax),
    "rmsnorm": (rmsnorm, torch_rmsnorm, triton_reference.rmsnorm),
    "layernorm": (layernorm, torch_layernorm, triton_reference.layernorm),
    "log_softmax": (log_softmax, lambda x: torch.log_softmax(x, -1), triton_reference.log_softmax),
    "silu_gate": (silu_gate, torch_silu_gate, triton_reference.silu_gate),
}


@tt.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tt.constexpr, EVICT: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    tt.store(y_ptr + offs, tt.load(x_ptr + offs, mask=offs < n, eviction_policy=EVICT), mask=offs < n)


COPY_SHAPES = ((2048, 4), (8192, 8), (16384, 16))
"""(BLOCK, num_warps) of the tinyton copies tried for the same-size anchor: 16-byte vectors, every load of a
program issued before its stores; on an H100 the best at 16x262144 was 2048/4 in fp32, 16384/16 in fp16."""
COPY_POLICIES = ("", "evict_last")
"""Load policies of those copies: `evict_last` ran a 16x262144 copy 5 % (fp32) and 19 % (fp16) faster on an
H100 under do_bench (docs/benchmarks-history.md, branch `split4`), within 2 % at 64x262144."""


def same_size_copy_ms(x: torch.Tensor) -> float:
    """The faster of torch's copy and tinyton's vectorized copies of x's bytes, with plain and `evict_last`
    loads: what a kernel moving the same bytes can reach (small tensors do not reach the 1 GiB copy's
    figure, nor always torch's copy)."""
    y = torch.empty_like(x)
    flat_x, flat_y, n = x.reshape(-1), y.reshape(-1), x.numel()
    timing = {"warmup_ms": 5, "rep_ms": 20}
    times = [peer(median_ms, lambda: y.copy_(x), **timing)]
    for (block, warps), evict in itertools.product(COPY_SHAPES, COPY_POLICIES):
        run = lambda b=block, w=warps, e=evict: copy_kernel[(triton.cdiv(n, b),)](
            flat_x, flat_y, n, BLOCK=b, EVICT=e, num_warps=w)
        times.append(peer(median_ms, run, **timing))
    return min(times)


def copy_gbps() -> float:
    """Device-to-device copy of 1 GiB (read + write), the practical bandwidth ceiling."""
    a = torch.empty(pick(1 << 28, 1), device=DEVICE)
    b = torch.empty_like(a)
    return gbps(2 * a.nbytes, peer(median_ms, lambda: b.copy_(a)))


def bench_case(name: str, shape, dtype, copy: float, quick: bool) -> list[object]:
    program, eager, triton_fn = PROGRAMS[name]
    args = _inputs(name, shape, dtype)
    reference = _reference(name, args)
    tol = TOLERANCE[dtype]
    check_close(f"tinyton {name} {shape} {dtype}", program(*args), reference, tol)
    compiled = eager if ONESHOT else torch.compile(eager, dynamic=False)  # one-shot: peers do not run
    if not ONESHOT:
        check_close(f"torch.compile {name} {shape} {dtype}", compiled(*args), reference, tol)
    out = torch.empty_like(args[0])
    x = args[0]
    copy_same = gbps(2 * x.nbytes, same_size_copy_ms(x))
    fits = triton_fn is not None and (name == "silu_gate" or triton.next_power_of_2(shape[-1]) <= triton_reference.ROW_BLOCK_LIMIT)
    fns = {"tinyton": lambda: program(*args), "torch eager": lambda: eager(*args), "torch.compile": lambda: compiled(*args)}
    if fits:
        fns["Triton"] = lambda: triton_fn(*args, out)
        if not ONESHOT:
            fns["Triton"]()
            check_close(f"triton {name} {shape} {dtype}", out, reference, tol)
    nbytes = (len(args) + 1 if name == "silu_gate" else 2) * args[0].nbytes
    latency = shape in LATENCY_BOUND
    timing = {"warmup_ms": 5 if quick else 10, "rep_ms": 20 if quick else 40}
    ms = _each_ms(fns, timing) if ONESHOT else _rounds_ms(fns, timing, LATENCY_ROUNDS if latency else ROUNDS)
    fig = {k: v * 1e3 if latency else gbps(nbytes, v) for k, v in ms.items()}
    peers = [fig[k] for k in ("torch.compile", "Triton") if k in fig]
    best = min(peers) if latency else max(peers)
    of_best = best / fig["tinyton"] if latency else fig["tinyton"] / best
    of_copy = "" if latency else f"{100 * fig['tinyton'] / copy:.0f}% ({100 * fig['tinyton'] / copy_same:.0f}%)"
    launches = program.compile(*args).num_launches
    row = [name, f"{shape[0]}x{shape[1]}", "µs" if latency else "GB/s", fig["tinyton"], fig["torch eager"],
           fig["torch.compile"], fig.get("Triton", "—"), f"{100 * of_best:.0f}%", of_copy, launches]
    print("  as measured: " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in row), flush=True)
    return row


def _each_ms(fns: dict[str, Callable], timing: dict[str, int]) -> dict[str, float]:
    return {k: median_ms(f, **timing) if k == "tinyton" else peer(median_ms, f, **timing) for k, f in fns.items()}


def _rounds_ms(fns: dict[str, Callable], timing: dict[str, int], count: int) -> dict[str, float]:
    """Medians over `count` rounds, each timing every function in turn (tinyton and its peers alike): a
    kernel's window moves by 2-4 % with the GPU's clocks between one window and the next (several percent
    at ~5 µs), and taking turns spreads that drift over all of them alike."""
    rounds = [_each_ms(fns, timing) for _ in range(count)]
    return {k: statistics.median(r[k] for r in rounds) for k in fns}


def compile_and_overhead() -> list[list[object]]:
    """Import, cold compile, disk-cache and in-process cache hits, call overhead (rmsnorm / softmax)."""
    from bench_compile import PROGRAMS as SOURCES
    from bench_compile import child
    from bench_kernels import launch_overhead

    rows = []
    with tempfile.TemporaryDirectory(prefix="tinyton-bench-") as cache:
        first = child(SOURCES["rmsnorm"], "llvmlite", cache)
        second = child(SOURCES["rmsnorm"], "llvmlite", cache)
    if first and second:
        rows += [["import tinyton (fresh process)", first["import"] * 1e3, "ms"],
                 ["cold compile of rmsnorm 32x2048 to PTX (fresh process, empty disk cache)",
                  (first["build"] + first["ptx"]) * 1e3, "ms"],
                 ["same, PTX on disk (fresh process)", (second["build"] + second["ptx"]) * 1e3, "ms"]]
    x = torch.randn(32, 2048, device="cuda")
    softmax(x)
    t0 = time.perf_counter()
    for _ in range(1000):
        softmax.compile(x)
    rows.append(["in-process cache hit (`softmax.compile(x)`)", (time.perf_counter() - t0) * 1e3, "µs"])
    device = median_ms(lambda: softmax(x)) * 1e3
    host = host_us_per_call(lambda: softmax(x), calls=5000)
    rows += [["softmax 32x2048 call, host µs per call (back-to-back)", host, "µs"],
             ["its device time (do_bench)", device, "µs"],
             ["host time above GPU time", host - device, "µs"]]
    rows += [[label, us, "µs"] for label, us in launch_overhead()]
    return rows


def print_blocks() -> None:
    for dname, dtype in model_blocks.DTYPES.items():
        rows = [model_blocks.bench_block(name, dtype) for name in model_blocks.BLOCKS]
        print_table(f"Model blocks, {dname} (µs; of best peer: the faster of torch eager and torch.compile)",
                    model_blocks.BLOCK_HEADER, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing windows")
    parser.add_argument("--only", default=",".join(PROGRAMS))
    parser.add_argument("--shapes", default=",".join(f"{r}x{c}" for r, c in SHAPES))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--no-compile", action="store_true", help="skip the compile and overhead figures")
    parser.add_argument("--overhead", action="store_true", help="only the compile and overhead figures")
    parser.add_argument("--blocks", action="store_true", help="only the model blocks")
    args = parser.parse_args()
    if args.overhead:
        print(f"device: {device_name()}; torch {torch.__version__}; triton {triton.__version__}; "
              f"date {time.strftime('%Y-%m-%d')}\n")
        print_table("Compile time and call overhead", ["what", "figure", "unit"], compile_and_overhead())
        print("### Host time per call (bench/host_overhead.py)\n")
        host_overhead.gpu_report(host_overhead.DEFAULT_ROUNDS)
        return
    if not ONESHOT:  # one recompilation per shape and dtype
        torch._dynamo.config.cache_size_limit = 256
        torch._dynamo.config.accumulated_cache_size_limit = 4096
    print(f"device: {device_name()}; torch {torch.__version__}; triton {triton.__version__}; "
          f"date {time.strftime('%Y-%m-%d')}\n")
    if args.blocks:
        print_blocks()
        return
    copy = copy_gbps()
    print(f"device copy: {copy:.0f} GB/s\n")
    header = ["program", "shape", "unit", "tinyton", "torch eager", "torch.compile", "Triton", "of best peer",
              "of copy (best same-size copy)", "launches"]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    start = time.perf_counter()
    for dname in args.dtypes.split(","):
        rows = [bench_case(n, s, DTYPES[dname], copy, args.quick) for s in shapes for n in args.only.split(",")]
        print_table(f"Fused array programs, {dname} (GB/s, one read + one write; µs for the latency-bound shape)",
                    header, rows)
    print(f"(programs x shapes took {time.perf_counter() - start:.0f} s)\n", flush=True)
    print_blocks()
    if not (args.no_compile or ONESHOT):
        print_table("Compile time and call overhead", ["what", "figure", "unit"], compile_and_overhead())


if __name__ == "__main__":
    main()
