"""Measure the fused-reduction strategies issue 10 asks about, to set geometry.py's constants from figures.

- split rows (16x262144): one kernel with grid barriers against the two-kernel form, fp32 and fp16, next to a
  copy of the same size; the grid's occupancy; a cooperative launch against a plain one; other few-row shapes;
- split rows in two kernels: where the time goes (each kernel alone), programs aimed at, warps;
- long rows (1024x32768): the whole row in registers (warps), or the looped walk (chunk, warps);
- where splitting starts: few rows of 8192-65536, split or not.

    python bench/probes/probe_reductions.py [--sections grid,split,long,threshold]   # GB/s per variant, do_bench medians
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_fusion import layernorm, log_softmax, rmsnorm, softmax
from common import check_close, gbps, median_ms, run_sections

from tinyton.compiler import compile_module
from tinyton.dialects import tt
from tinyton.frontend import programs
from tinyton.lowering.fusion import geometry, grid
from tinyton.runtime.launch import Launcher

TWO_KERNELS = {"GRID_PROGRAMS_PER_SM": 0}
"""No grid fits: split rows take the two-kernel form."""


@contextmanager
def patched(**values):
    """geometry's and grid's constants (and `warps` for every kernel) set for a while; programs recompiled."""
    where = {k: grid if hasattr(grid, k) else geometry for k in values if k != "warps"}
    saved = {k: getattr(where[k], k) for k in where}
    heuristic = geometry.warps_for
    for k, v in values.items():
        if k == "warps":
            geometry.warps_for = lambda elements, w=v: w
        else:
            setattr(where[k], k, v)
    programs._PROGRAMS.clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(where[k], k, v)
        geometry.warps_for = heuristic
        programs._PROGRAMS.clear()


def launches(fn, args) -> str:
    """Launches of the program as the GPU runs it: a grid-barrier kernel's fallback counts when it is taken."""
    program = fn.compile(*args)
    n = 0
    for step in program.steps:
        kernel = program._kernel(step)
        if step.fallback and kernel.resident_programs() < step.grid[0]:
            n += len(step.fallback)
        else:
            n += 1
    return str(n)


def run(label: str, shape, dtype, variants: dict[str, dict], names=("softmax", "rmsnorm", "layernorm")) -> None:
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    w, b = (torch.randn(shape[-1], device="cuda", dtype=dtype) for _ in range(2))
    cases = {"softmax": (softmax, (x,), lambda: torch.softmax(x.double(), -1)),
             "log_softmax": (log_softmax, (x,), lambda: torch.log_softmax(x.double(), -1)),
             "rmsnorm": (rmsnorm, (x, w), lambda: x.double() * torch.rsqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6) * w.double()),
             "layernorm": (layernorm, (x, w, b), lambda: torch.nn.functional.layer_norm(x.double(), (shape[-1],), w.double(), b.double(), 1e-5))}
    for name in names:
        fn, args, ref = cases[name]
        want = ref()
        cells = []
        for vlabel, values in variants.items():
            with patched(**values):
                check_close(f"{name} {shape} {vlabel}", fn(*args), want, 1e-5 if dtype == torch.float32 else 5e-3)
                n = launches(fn, args)
                ms = median_ms(lambda fn=fn, args=args: fn(*args), warmup_ms=5, rep_ms=30)
                cells.append(f"{vlabel}: {gbps(2 * x.nbytes, ms):.0f} ({n})")
        print(f"{label} {name} {shape[0]}x{shape[1]} {str(dtype)[6:]} | " + " | ".join(cells), flush=True)


def split_kernels(name: str, fn, args) -> None:
    """Where a split program's time goes: the program three times, each kernel alone (do_bench flushes L2
    before every run: a kernel alone reads from DRAM), and 200 back-to-back calls (no flush) timed by events."""
    program = fn.compile(*args)
    fn(*args)
    buffers = list(args) + [torch.empty(shape, dtype=getattr(torch, str(dtype)), device="cuda")
                            for shape, dtype in program.buffer_specs[len(args):]]
    addresses = [b.data_ptr() for b in buffers]
    alone = []
    for step in program.steps:
        kernel = program._kernel(step)
        values = tuple(addresses[i] for i in step.slots)
        alone.append(median_ms(lambda k=kernel, s=step, v=values: k.launcher.launch(s.grid, k.threads, 0, 0, v)) * 1e3)
    whole = [median_ms(lambda: fn(*args), warmup_ms=5, rep_ms=30) * 1e3 for _ in range(3)]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(200):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    print(f"split kernels {name}: program µs {[round(w, 1) for w in whole]}; kernels alone µs "
          f"{[round(a, 1) for a in alone]}; back-to-back µs/call {start.elapsed_time(end) / 200 * 1e3:.1f}", flush=True)


def grid_launch(name: str, fn, args) -> None:
    """The grid-barrier kernel alone: its grid and occupancy, cooperative launch against a plain one (safe
    here: the GPU is idle and holds the grid), and back-to-back calls."""
    program = fn.compile(*args)
    fn(*args)
    step = program.steps[0]
    kernel = program._kernel(step)
    buffers = list(args) + [torch.empty(shape, dtype=getattr(torch, str(dtype)), device="cuda")
                            for shape, dtype in program.buffer_specs[len(args):]]
    buffers += [torch.zeros(shape, dtype=torch.int32, device="cuda") for shape in program.counters]
    values = tuple(buffers[i].data_ptr() for i in step.slots)
    cooperative = median_ms(lambda: kernel.launcher.launch(step.grid, kernel.threads, 0, 0, values)) * 1e3
    ordinary = float("nan")
    if kernel.resident_programs() >= step.grid[0]:  # else a plain launch could hang
        plain = Launcher(kernel.launcher.function, kernel.param_kinds)
        ordinary = median_ms(lambda: plain.launch(step.grid, kernel.threads, 0, 0, values)) * 1e3
    free = step.launch.module.clone()  # the same kernel without its barriers (wrong results): what they cost
    for op in [op for op in free.walk() if isinstance(op, tt.GridBarrierOp)]:
        op.detach()
        op.erase()
    unsynced = compile_module(free, num_warps=kernel.num_warps)
    without = median_ms(lambda: unsynced.launcher.launch(step.grid, kernel.threads, 0, 0, values)) * 1e3
    print(f"grid kernel {name}: grid {step.grid[0]}, resident {kernel.resident_programs()}, regs {kernel.n_regs}, "
          f"spills {kernel.n_spills}; µs cooperative {cooperative:.1f}, plain launch {ordinary:.1f}, without the "
          f"barriers {without:.1f}", flush=True)


def grid_section() -> None:
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(16, 262144, device="cuda", dtype=dtype)
        w, b = torch.randn(262144, device="cuda", dtype=dtype), torch.randn(262144, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        print(f"copy 16x262144 {str(dtype)[6:]}: {gbps(2 * x.nbytes, median_ms(lambda: y.copy_(x))):.0f} GB/s",
              flush=True)
        for name, fn, args in (("softmax", softmax, (x,)), ("rmsnorm", rmsnorm, (x, w)),
                               ("layernorm", layernorm, (x, w, b)), ("log_softmax", log_softmax, (x,))):
            grid_launch(f"{name} {str(dtype)[6:]}", fn, args)
        run("grid", (16, 262144), dtype, {
            "one kernel": {}, "two kernels": TWO_KERNELS, "one counter": {"BARRIER_PER_ROW": False},
            "slices 16384, 2 per SM": {"GRID_SLICES": (16384,), "GRID_PROGRAMS_PER_SM": 2}},
            names=("softmax", "rmsnorm", "layernorm", "log_softmax"))
    for shape in ((4, 65536), (48, 65536), (32, 131072), (2, 1048576), (8, 16384)):
        run("grid", shape, torch.float32, {"one kernel": {}, "two kernels": TWO_KERNELS}, names=("softmax", "rmsnorm"))


def split_section() -> None:
    x = torch.randn(16, 262144, device="cuda")
    w, b = torch.randn(262144, device="cuda"), torch.randn(262144, device="cuda")
    with patched(**TWO_KERNELS):
        for name, fn, args in (("softmax", softmax, (x,)), ("rmsnorm", rmsnorm, (x, w)), ("layernorm", layernorm, (x, w, b))):
            split_kernels(name, fn, args)
    run("split", (16, 262144), torch.float32, {
        "default": TWO_KERNELS, "2048 programs": {"SPLIT_PROGRAMS": 2048, **TWO_KERNELS},
        "512 programs": {"SPLIT_PROGRAMS": 512, **TWO_KERNELS}, "4 warps": {"warps": 4, **TWO_KERNELS},
        "16 warps": {"warps": 16, **TWO_KERNELS}})


def long_section() -> None:
    for dtype in (torch.float32, torch.float16):
        run("long", (1024, 32768), dtype, {
            "default": {}, "looped": {"MAX_ROW_BLOCK": 16384}, "looped chunk 8192 w16": {"MAX_ROW_BLOCK": 16384, "LOOP_CHUNK": 8192, "warps": 16},
            "whole row, 8 warps": {"warps": 8}})


def threshold_section() -> None:
    for shape in ((256, 8192), (128, 16384), (64, 32768), (32, 32768), (128, 65536)):
        run("threshold", shape, torch.float32, {"default": {}, "split": {"SPLIT_ROWS": 1 << 30},
                                                "not split": {"SPLIT_MIN_ROW": 1 << 30}}, names=("softmax", "rmsnorm"))


SECTIONS = {"grid": grid_section, "split": split_section, "long": long_section, "threshold": threshold_section}


def main() -> None:
    run_sections(__doc__, SECTIONS)


if __name__ == "__main__":
    main()
