"""Measure the fused-reduction strategies issue 10 asks about, to set geometry.py's constants from figures.

- split rows (16x262144): where the time goes (each kernel alone), programs aimed at, warps;
- long rows (1024x32768): the whole row in registers (warps), or the looped walk (chunk, warps);
- where splitting starts: few rows of 8192-65536, split or not.

    python bench/probe_reductions.py        # GB/s per variant (one read + one write, launches), do_bench medians
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from bench_fusion import layernorm, rmsnorm, softmax
from common import check_close, gbps, median_ms

from tinyton.frontend import programs
from tinyton.lowering.fusion import geometry


@contextmanager
def patched(**values):
    """geometry's constants (and `warps` for every kernel) set for a while; programs recompiled."""
    saved = {k: getattr(geometry, k) for k in values if k != "warps"}
    heuristic = geometry.warps_for
    for k, v in values.items():
        if k == "warps":
            geometry.warps_for = lambda elements, w=v: w
        else:
            setattr(geometry, k, v)
    programs._PROGRAMS.clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(geometry, k, v)
        geometry.warps_for = heuristic
        programs._PROGRAMS.clear()


def run(label: str, shape, dtype, variants: dict[str, dict], names=("softmax", "rmsnorm", "layernorm")) -> None:
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    w, b = (torch.randn(shape[-1], device="cuda", dtype=dtype) for _ in range(2))
    cases = {"softmax": (softmax, (x,), lambda: torch.softmax(x.double(), -1)),
             "rmsnorm": (rmsnorm, (x, w), lambda: x.double() * torch.rsqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6) * w.double()),
             "layernorm": (layernorm, (x, w, b), lambda: torch.nn.functional.layer_norm(x.double(), (shape[-1],), w.double(), b.double(), 1e-5))}
    for name in names:
        fn, args, ref = cases[name]
        want = ref()
        cells = []
        for vlabel, values in variants.items():
            with patched(**values):
                check_close(f"{name} {shape} {vlabel}", fn(*args), want, 1e-5 if dtype == torch.float32 else 5e-3)
                launches = fn.compile(*args).num_launches
                ms = median_ms(lambda fn=fn, args=args: fn(*args), warmup_ms=5, rep_ms=30)
                cells.append(f"{vlabel}: {gbps(2 * x.nbytes, ms):.0f} ({launches})")
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


def main() -> None:
    print(torch.cuda.get_device_name())
    x = torch.randn(16, 262144, device="cuda")
    w, b = torch.randn(262144, device="cuda"), torch.randn(262144, device="cuda")
    for name, fn, args in (("softmax", softmax, (x,)), ("rmsnorm", rmsnorm, (x, w)), ("layernorm", layernorm, (x, w, b))):
        split_kernels(name, fn, args)
    run("split", (16, 262144), torch.float32, {
        "default": {}, "2048 programs": {"SPLIT_PROGRAMS": 2048}, "512 programs": {"SPLIT_PROGRAMS": 512},
        "4 warps": {"warps": 4}, "16 warps": {"warps": 16}})
    for dtype in (torch.float32, torch.float16):
        run("long", (1024, 32768), dtype, {
            "default": {}, "looped": {"MAX_ROW_BLOCK": 16384}, "looped chunk 8192 w16": {"MAX_ROW_BLOCK": 16384, "LOOP_CHUNK": 8192, "warps": 16},
            "whole row, 8 warps": {"warps": 8}})
    for shape in ((256, 8192), (128, 16384), (64, 32768), (32, 32768), (128, 65536)):
        run("threshold", shape, torch.float32, {"default": {}, "split": {"SPLIT_ROWS": 1 << 30},
                                                "not split": {"SPLIT_MIN_ROW": 1 << 30}}, names=("softmax", "rmsnorm"))


if __name__ == "__main__":
    main()
