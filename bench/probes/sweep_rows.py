"""Every candidate shape of the row tuner (tinyton/lowering/fusion/row_shapes.py) timed through the program's
own call path, next to Triton's row kernel: which shapes win per program, shape and dtype, and how far the
default is from the best (to set the defaults from measurements; the tuner picks per GPU on first use).

For latency-bound shapes it also prints the host time of one call: a call slower than the L2 flush between
do_bench's repetitions shows up in the device figure.

    python bench/probes/sweep_rows.py [--cases softmax:1024x32768:fp16,log_softmax:32x2048:fp16]
"""

from __future__ import annotations

import argparse

import torch
import triton
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

import triton_reference
from bench_fusion import DTYPES, LATENCY_BOUND, PROGRAMS, TOLERANCE, _inputs, _reference
from common import check_close, gbps, host_us_per_call, median_ms, print_table

from tinyton.compiler import program as compiler_program
from tinyton.frontend import programs
from tinyton.lowering.fusion.row_shapes import candidates, default_row_shape

CASES = ("softmax:1024x32768:fp32,layernorm:8192x768:fp32,layernorm:1024x32768:fp32,rmsnorm:32x2048:fp32,"
         "log_softmax:32x2048:fp32,silu_gate:32x2048:fp32,softmax:1024x32768:fp16,softmax:4096x4096:fp16,"
         "softmax:8192x768:fp16,softmax:4096x3000:fp16,log_softmax:32x2048:fp16,silu_gate:32x2048:fp16,"
         "rmsnorm:8192x1024:fp16,softmax:65536x128:fp32,rmsnorm:4096x4096:fp16,log_softmax:4096x4096:fp16")


def forced(shape):
    """Programs compiled from now on use row shape `shape` (None: the tuner, here the default)."""
    compiler_program.row_shape = (lambda p: shape) if shape is not None else ROW_SHAPE
    programs._PROGRAMS.clear()


ROW_SHAPE = compiler_program.row_shape
WINDOW = {"warmup_ms": 10, "rep_ms": 60}


def sweep(name: str, shape: tuple[int, int], dtype: torch.dtype) -> list[list[object]]:
    program, _, triton_fn = PROGRAMS[name]
    args = _inputs(name, shape, dtype)
    reference = _reference(name, args)
    nbytes = (len(args) + 1 if name == "silu_gate" else 2) * args[0].nbytes
    latency = shape in LATENCY_BOUND
    figure = (lambda ms: ms * 1e3) if latency else (lambda ms: gbps(nbytes, ms))
    problems = []
    compiler_program.row_shape = lambda p: problems.append(p) or default_row_shape(p)
    programs._PROGRAMS.clear()
    program(*args)
    label = f"{name} {shape[0]}x{shape[1]} {str(dtype)[6:]}"
    rows = []
    out = torch.empty_like(args[0])
    fits = name == "silu_gate" or triton.next_power_of_2(shape[-1]) <= triton_reference.ROW_BLOCK_LIMIT
    peer = figure(median_ms(lambda: triton_fn(*args, out), **WINDOW)) if fits else float("nan")
    if not problems:  # elementwise: no row shape
        forced(None)
        program(*args)
        host = host_us_per_call(lambda: program(*args), calls=2000)
        return [[label, "(elementwise)", figure(median_ms(lambda: program(*args), **WINDOW)), peer, host]]
    default = default_row_shape(problems[0])
    for choice in candidates(problems[0]):
        forced(choice)
        got = program(*args)
        check_close(f"{label} {choice}", got, reference, TOLERANCE[dtype])
        fig = figure(median_ms(lambda: program(*args), **WINDOW))
        host = host_us_per_call(lambda: program(*args), calls=2000) if latency else ""
        mark = " (default)" if choice == default else ""
        capped = f" p{choice.per_sm}" if choice.per_sm else ""
        rows.append([label, f"w{choice.num_warps} r{choice.rows} c{choice.chunk}{capped}{mark}", fig, peer, host])
    forced(None)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    args = parser.parse_args()
    print(torch.cuda.get_device_name())
    rows = []
    for case in args.cases.split(","):
        name, shape, dtype = case.split(":")
        rows += sweep(name, tuple(int(v) for v in shape.split("x")), DTYPES[dtype])
        print("  " + " | ".join(map(str, rows[-1])), flush=True)
    print_table("Row-kernel shapes (GB/s, µs for 32x2048; w = warps, r = rows per program, c = chunk, 0 = whole row)",
                ["case", "shape", "tinyton", "Triton", "host µs/call"], rows)


if __name__ == "__main__":
    main()
