"""Where the time of a one-kernel split row goes (16x262144, `lowering/fusion/grid.py`), next to what a kernel
moving the same bytes can reach.

- fixed costs: an empty kernel under do_bench, a cooperative kernel that only meets at the grid barrier;
- anchors: torch's copy, a Triton copy and tinyton copies of the same tensor (16-byte vectors, every load
  issued before the first store), a kernel that only loads (and reduces) and one that only stores;
- the grid kernel: as compiled, without its barriers, without its output stores; its variants (rows per
  program, slices, programs per SM, warps, streaming stores) and the two-kernel form;
- the same few kernels timed three ways: do_bench (L2 flushed by writing 256 MB: the flush's dirty lines
  are written back while the kernel runs), a flush that only reads (clean lines), and back-to-back calls.

    python bench/probes/probe_grid.py [--sections anchors,kernel,variants]
"""

# Every lambda below is timed at once, inside the loop that binds its variables:
# ruff: noqa: B023

from __future__ import annotations

import statistics

import torch
import triton
import triton.language as tl
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_fusion import layernorm, log_softmax, rmsnorm, softmax
from common import check_close, gbps, median_ms, run_sections
from probe_reductions import TWO_KERNELS, launches, patched
from xdsl.parser import Parser

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.dialects import tinyton_context
from tinyton.dialects import tt as ttd
from tinyton.dialects.tt import shape_of

ROWS, COLS = 16, 262144
PROGRAMS = {"softmax": softmax, "rmsnorm": rmsnorm, "layernorm": layernorm, "log_softmax": log_softmax}


@tt.jit
def empty_kernel(x_ptr):
    pass


@tt.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    tt.store(y_ptr + offs, tt.load(x_ptr + offs))


@tt.jit
def copy_cs_kernel(x_ptr, y_ptr, BLOCK: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    tt.store(y_ptr + offs, tt.load(x_ptr + offs), cache_modifier=".cs")


@tt.jit
def load_kernel(x_ptr, s_ptr, BLOCK: tt.constexpr):
    pid = tt.program_id(0)
    x = tt.load(x_ptr + pid * BLOCK + tt.arange(0, BLOCK))
    tt.store(s_ptr + pid, tt.sum(x.to(tt.float32), axis=0))


@tt.jit
def store_kernel(x_ptr, y_ptr, BLOCK: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    tt.store(y_ptr + offs, tt.load(x_ptr + tt.arange(0, BLOCK)))


@triton.jit
def triton_copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


BARRIER_ONLY = """
builtin.module attributes {tt.num_warps = 8 : i32, tt.min_programs_per_sm = 4 : i32} {
  func.func @barrier_only(%c: !tt.ptr<i32>) {
    %pid = tt.program_id 0 : i32
    %n = tt.constant 32 : i32 -> i32
    %slice = tt.mod %pid, %n : i32
    %row = tt.floordiv %pid, %n : i32
    %stride = tt.constant 32 : i32 -> i32
    %off = tt.mul %row, %stride : i32
    %p = tt.addptr %c, %off : !tt.ptr<i32>, i32
    %z = tt.constant 0 : i32 -> i32
    %lead = tt.cmp "eq", %slice, %z : i32 -> i1
    tt.grid_barrier %p, %lead programs 32 : !tt.ptr<i32>
    func.return
  }
}
"""


def three_ways(fn, cleaner: torch.Tensor, reps: int = 40) -> tuple[float, float, float]:
    """µs of `fn`: do_bench (a 256 MB zero flush, dirty lines), after a read-only flush of `cleaner` (clean
    lines), back-to-back (no flush, median of 5 runs of 50 calls)."""
    bench = median_ms(fn, warmup_ms=5, rep_ms=40) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    clean = []
    for _ in range(reps):
        cleaner.sum(dtype=torch.float32)  # reads 256 MB: L2 holds clean lines
        start.record()
        fn()
        end.record()
        end.synchronize()
        clean.append(start.elapsed_time(end) * 1e3)
    runs = []
    for _ in range(5):
        start.record()
        for _ in range(50):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) * 1e3 / 50)
    return bench, statistics.median(clean), statistics.median(runs)


def line(label: str, nbytes: int, times: tuple[float, float, float]) -> None:
    cells = " | ".join(f"{t:.2f} µs {gbps(nbytes, t * 1e-3):.0f} GB/s" for t in times)
    print(f"| {label} | {cells} |", flush=True)


def anchors() -> None:
    cleaner = torch.empty(1 << 26, device="cuda")  # 256 MB
    cleaner.fill_(1.0)
    print("\n### Anchors (do_bench | clean flush | back-to-back)\n", flush=True)
    e = torch.empty(1, device="cuda")
    line("empty kernel, 1 program", 0, three_ways(lambda: empty_kernel[(1,)](e), cleaner))
    line("empty kernel, 512 programs", 0, three_ways(lambda: empty_kernel[(512,)](e), cleaner))
    counters = torch.zeros(ROWS * 32, dtype=torch.int32, device="cuda")
    module = Parser(tinyton_context(), BARRIER_ONLY).parse_module()
    barrier = compile_module(module, num_warps=8)
    barrier.launcher.launch((512, 1, 1), barrier.threads, 0, 0, (counters.data_ptr(),))
    torch.cuda.synchronize()
    line("grid barrier alone, 512 programs of 8 warps (cooperative)", 0, three_ways(
        lambda: barrier.launcher.launch((512, 1, 1), barrier.threads, 0, 0, (counters.data_ptr(),)), cleaner))
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(ROWS, COLS, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        n, nbytes = x.numel(), 2 * x.nbytes
        name = str(dtype)[6:]
        line(f"torch copy_ {name}", nbytes, three_ways(lambda: y.copy_(x), cleaner))
        for block, warps in ((2048, 4), (4096, 8), (8192, 8), (16384, 16)):
            copy_kernel[(n // block,)](x, y, BLOCK=block, num_warps=warps)
            assert torch.equal(x, y)
            y.zero_()
            line(f"tinyton copy {name} block {block} w{warps} ({n // block} programs)", nbytes,
                 three_ways(lambda b=block, w=warps: copy_kernel[(n // b,)](x, y, BLOCK=b, num_warps=w), cleaner))
        copy_cs_kernel[(n // 8192,)](x, y, BLOCK=8192, num_warps=8)
        line(f"tinyton copy {name} block 8192 w8, .cs stores", nbytes,
             three_ways(lambda: copy_cs_kernel[(n // 8192,)](x, y, BLOCK=8192, num_warps=8), cleaner))
        for block, warps in ((4096, 8), (8192, 8), (16384, 16)):
            triton_copy[(n // block,)](x, y, BLOCK=block, num_warps=warps)
            line(f"Triton copy {name} block {block} w{warps}", nbytes,
                 three_ways(lambda b=block, w=warps: triton_copy[(n // b,)](x, y, BLOCK=b, num_warps=w), cleaner))
        s = torch.empty(n // 8192, device="cuda")
        load_kernel[(n // 8192,)](x, s, BLOCK=8192, num_warps=8)
        line(f"loads only {name} (block 8192 w8, one sum per program)", x.nbytes,
             three_ways(lambda: load_kernel[(n // 8192,)](x, s, BLOCK=8192, num_warps=8), cleaner))
        store_kernel[(n // 8192,)](x, y, BLOCK=8192, num_warps=8)
        line(f"stores only {name} (block 8192 w8; every program loads the same 8192 elements)", x.nbytes,
             three_ways(lambda: store_kernel[(n // 8192,)](x, y, BLOCK=8192, num_warps=8), cleaner))


def _args(name: str, x: torch.Tensor) -> tuple:
    vec = lambda: torch.randn(COLS, device="cuda", dtype=x.dtype)
    return {"rmsnorm": (x, vec()), "layernorm": (x, vec(), vec())}.get(name, (x,))


def _surgery(program, drop) -> tuple:
    """The program's grid kernel with the ops `drop` picks removed (wrong results: only its time), and its
    launch arguments."""
    step = program.steps[0]
    kernel = program._kernel(step)
    free = step.launch.module.clone()
    for op in [op for op in free.walk() if drop(op)]:
        op.detach()
        op.erase()
    return compile_module(free, num_warps=kernel.num_warps), step, kernel


def kernel_section() -> None:
    """The grid kernel as compiled, without barriers, without output stores (do_bench | clean | back-to-back)."""
    cleaner = torch.empty(1 << 26, device="cuda")
    cleaner.fill_(1.0)
    print("\n### The grid kernel, parts removed (do_bench | clean flush | back-to-back)\n", flush=True)
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(ROWS, COLS, device="cuda", dtype=dtype)
        for name in ("softmax", "rmsnorm"):
            fn, args = PROGRAMS[name], _args(name, x)
            program = fn.compile(*args)
            fn(*args)
            buffers = list(args) + [torch.empty(shape, dtype=getattr(torch, str(d)), device="cuda")
                                    for shape, d in program.buffer_specs[len(args):]]
            buffers += [torch.zeros(shape, dtype=torch.int32, device="cuda") for shape in program.counters]
            step = program.steps[0]
            values = tuple(buffers[i].data_ptr() for i in step.slots)
            kernel = program._kernel(step)
            label = f"{name} {str(dtype)[6:]} grid {step.grid[0]} {step.launch.tiles}"
            print(f"{label}: regs {kernel.n_regs}, spills {kernel.n_spills}, resident {kernel.resident_programs()}")
            line(f"{name} {str(dtype)[6:]} program call", 2 * x.nbytes, three_ways(lambda: fn(*args), cleaner))
            line(f"{name} {str(dtype)[6:]} kernel alone", 2 * x.nbytes, three_ways(
                lambda: kernel.launcher.launch(step.grid, kernel.threads, 0, 0, values), cleaner))
            for what, drop in (("no barrier", lambda op: isinstance(op, ttd.GridBarrierOp)),
                               ("no output store", lambda op: isinstance(op, ttd.StoreOp) and bool(shape_of(op.value.type)))):
                k, s, _ = _surgery(program, drop)
                line(f"{name} {str(dtype)[6:]} {what}", 2 * x.nbytes, three_ways(
                    lambda k=k, s=s: k.launcher.launch(s.grid, k.threads, 0, 0, values), cleaner))


VARIANTS = {
    "rows 2, slice 4096 (default)": {},
    "rows 1, slice 8192 (before)": {"GRID_ROWS": 1},
    "rows 4, slice 2048": {"GRID_ROWS": 4},
    "2 per SM, rows 2, slice 8192": {"GRID_PROGRAMS_PER_SM": 2, "GRID_TILE": 16384, "GRID_SLICES": (8192, 16384)},
    "2 per SM, rows 1, slice 16384": {"GRID_PROGRAMS_PER_SM": 2, "GRID_TILE": 16384, "GRID_SLICES": (16384,), "GRID_ROWS": 1},
    "1 per SM w16, rows 2, slice 16384": {"GRID_PROGRAMS_PER_SM": 1, "GRID_WARPS": 16, "GRID_TILE": 32768,
                                          "GRID_SLICES": (16384, 32768)},
    "8 per SM w4, rows 2, slice 2048": {"GRID_PROGRAMS_PER_SM": 8, "GRID_WARPS": 4, "GRID_TILE": 4096,
                                        "GRID_SLICES": (2048, 4096)},
    "two kernels": TWO_KERNELS,
}


def variants_section(names=("softmax", "rmsnorm", "layernorm", "log_softmax")) -> None:
    print("\n### Variants (GB/s, do_bench medians; launches)\n", flush=True)
    print("| program | dtype | " + " | ".join(VARIANTS) + " |", flush=True)
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(ROWS, COLS, device="cuda", dtype=dtype)
        ref = {"softmax": lambda: torch.softmax(x.double(), -1), "log_softmax": lambda: torch.log_softmax(x.double(), -1)}
        for name in names:
            fn, args = PROGRAMS[name], _args(name, x)
            d = [a.double() for a in args]
            want = {"rmsnorm": lambda: d[0] * torch.rsqrt((d[0] ** 2).mean(-1, keepdim=True) + 1e-6) * d[1],
                    "layernorm": lambda: torch.nn.functional.layer_norm(d[0], (COLS,), d[1], d[2], 1e-5)}.get(
                name, ref.get(name))()
            cells = []
            for values in VARIANTS.values():
                with patched(**values):
                    check_close(name, fn(*args), want, 1e-5 if dtype == torch.float32 else 5e-3)
                    n = launches(fn, args)
                    cells.append(f"{gbps(2 * x.nbytes, median_ms(lambda: fn(*args), warmup_ms=5, rep_ms=30)):.0f} ({n})")
            print(f"| {name} | {str(dtype)[6:]} | " + " | ".join(cells) + " |", flush=True)


def ncu_section() -> None:
    """One call each of fp16 softmax, rmsnorm and a copy of the same size: what `ncu -k regex:...` profiles."""
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    softmax(x)
    rmsnorm(*_args("rmsnorm", x))
    copy_kernel[(x.numel() // 8192,)](x, y, BLOCK=8192, num_warps=8)
    torch.cuda.synchronize()


SECTIONS = {"ncu": ncu_section, "anchors": anchors, "kernel": kernel_section, "variants": variants_section}


def main() -> None:
    run_sections(__doc__, SECTIONS, "anchors,kernel,variants")


if __name__ == "__main__":
    main()
