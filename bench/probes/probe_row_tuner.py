"""What the row tuner sees at given shapes, and how steady it is (issue 10): per case, `autotune.measure`
(interleaved rounds of median windows over every candidate, then the finalists) repeated on the same
prepared kernels, each repetition's medians and choice; then every candidate through the program's own call
next to Triton's row kernel in interleaved rounds (bench_fusion's figure); with `--dump DIR`, the PTX of each
candidate and Triton's PTX and cubin with its configuration, for SASS counts.

    python bench/probes/probe_row_tuner.py [--cases rmsnorm:8192x768:fp32,layernorm:8192x1024:fp16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics

import torch
import triton
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

import triton_reference
from bench_fusion import DTYPES, PROGRAMS, _inputs
from common import gbps, print_table
from triton.testing import do_bench

from tinyton.compiler import autotune, row_tuning
from tinyton.compiler import program as compiler_program
from tinyton.frontend import programs
from tinyton.lowering.fusion.row_shapes import candidates, default_row_shape

CASES = "rmsnorm:8192x768:fp32,rmsnorm:8192x1024:fp32,layernorm:8192x1024:fp16,rmsnorm:1024x32768:fp16"
ROUNDS = 7


def label(shape) -> str:
    return f"w{shape.num_warps} r{shape.rows} c{shape.chunk}" + (f" p{shape.per_sm}" if shape.per_sm else "")


def compiled_with(program, args, shape):
    """`program` compiled for `args` with row shape `shape` (None: record the problem, take the default)."""
    problems = []
    compiler_program.row_shape = lambda p: problems.append(p) or (shape or default_row_shape(p))
    programs._PROGRAMS.clear()
    try:
        return program.compile(*args), problems
    finally:
        compiler_program.row_shape = row_tuning.row_shape


def triton_dump(name: str, args, out, dump: pathlib.Path, case: str) -> dict:
    """Triton's compiled kernel for the case: configuration, PTX and cubin written under `dump`."""
    fn = {"softmax": triton_reference._softmax_kernel, "rmsnorm": triton_reference._rmsnorm_kernel,
          "layernorm": triton_reference._layernorm_kernel, "log_softmax": triton_reference._log_softmax_kernel}[name]
    rows, cols = args[0].shape
    block = triton.next_power_of_2(cols)
    extra = {"rmsnorm": (cols, 1e-6), "layernorm": (cols, 1e-5)}.get(name, (cols,))
    kernel = fn[(rows,)](*args, out, *extra, BLOCK=block, num_warps=triton_reference.num_warps_for(block))
    (dump / f"{case}.triton.ptx").write_text(kernel.asm["ptx"])
    (dump / f"{case}.triton.cubin").write_bytes(kernel.asm["cubin"])
    meta = kernel.metadata
    return {"num_warps": meta.num_warps, "num_stages": meta.num_stages, "shared": meta.shared, "BLOCK": block,
            "grid": rows, "registers": getattr(kernel, "n_regs", None), "spills": getattr(kernel, "n_spills", None)}


def probe(case: str, repeats: int, dump: pathlib.Path | None) -> list[list[object]]:
    name, shape, dname = case.split(":")
    rows_cols = tuple(int(v) for v in shape.split("x"))
    program, _, triton_fn = PROGRAMS[name]
    args = _inputs(name, rows_cols, DTYPES[dname])
    nbytes = 2 * args[0].nbytes
    problem = compiled_with(program, args, None)[1][0]
    options, default = candidates(problem), default_row_shape(problem)
    timers = {s: row_tuning.shape_timer(problem, s) for s in options}
    table = []
    choices = []
    medians = {s: [] for s in options}
    for _ in range(repeats):
        result = autotune.measure(options, timers.__getitem__, default)
        choices.append(label(options[result.choice]))
        for i, s in enumerate(options):
            medians[s].append(gbps(nbytes, result.median(i)))
    print(f"{case}: tuner choices {choices}", flush=True)
    compiled = {s: compiled_with(program, args, s)[0] for s in options}
    out = torch.empty_like(args[0])
    fns = {label(s): (lambda c=c: c(*args)) for s, c in compiled.items()}
    fns["Triton"] = lambda: triton_fn(*args, out)
    rounds = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, f in fns.items():
            rounds[k].append(gbps(nbytes, do_bench(f, warmup=5, rep=20, return_mode="median")))
    for s in options:
        r = rounds[label(s)]
        mark = " (default)" if s == default else ""
        table.append([case, label(s) + mark, " / ".join(f"{v:.0f}" for v in medians[s]), statistics.median(r),
                      f"{min(r):.0f}-{max(r):.0f}"])
        if dump is not None:
            (dump / f"{case.replace(':', '_')}.{label(s).replace(' ', '_')}.ptx").write_text(compiled[s].asm["ptx"])
    r = rounds["Triton"]
    config = triton_dump(name, args, out, dump, case.replace(":", "_")) if dump is not None else {}
    table.append([case, f"Triton {json.dumps(config)}", "", statistics.median(r), f"{min(r):.0f}-{max(r):.0f}"])
    table.append([case, "tuner's choices", ", ".join(choices), "", ""])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dump", type=pathlib.Path)
    args = parser.parse_args()
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
    print(torch.cuda.get_device_name())
    table = []
    for case in args.cases.split(","):
        table += probe(case, args.repeats, args.dump)
    print_table(f"Row tuner: candidates' GB/s per repetition of autotune.measure, then the program's call in "
                f"{ROUNDS} interleaved rounds (median, least-largest)",
                ["case", "shape", "tuner medians per repetition", "program call", "spread"], table)


if __name__ == "__main__":
    main()
