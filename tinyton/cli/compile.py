"""`tinyton`: compile a kernel from a Python file and print any stage, or draw an array program's fusion.

    tinyton compile examples/vector_add.py --signature '*i32,*i32,*i32,i32' --emit ptx
    tinyton compile examples/softmax.py -k softmax_kernel -s '*fp32,*fp32,i32:16' -D BLOCK=1024 -v
    tinyton compile examples/matmul.py -k matmul_kernel -s ... --arch sm_80   # cross-compile, no GPU needed
    tinyton graph examples/fused_softmax.py:softmax --shape 4096x1000 --format svg > softmax.svg
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyton.cli import loading
from tinyton.compiler import target
from tinyton.dtypes import BF16
from tinyton.errors import CompilationError
from tinyton.lazy import lazy_module

graph = lazy_module("tinyton.cli.graph")  # xDSL and the fusion passes: loaded for `tinyton graph` only
ptx = lazy_module("tinyton.lowering.ptx.compile")

STAGES = ("tt", "llvm-mlir", "llvm-ir", "ptx")
PASS_OF_STAGE = {
    "tt": "frontend (Python AST -> tt)",
    "llvm-mlir": "tinyton-to-llvm",
    "llvm-ir": {
        "mlir": "mlir-opt --convert-nvvm-to-llvm (upstream verifier) + mlir-translate --mlir-to-llvmir + opt -O3",
        "llvmlite": "llvmlite: convert + parse + verify + O3",
    },
    "ptx": {"mlir": "llc (NVPTX)", "llvmlite": "llvmlite NVPTX target machine"},
}
"""What made each stage; for the last two, per toolchain (`TINYTON_TOOLCHAIN`)."""
DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": BF16, "i32": np.int32, "i1": np.bool_}


def signature_arguments(signature: str) -> list[Any]:
    """Stand-in arguments for a Triton-style signature: `*fp32` is an array (16-byte aligned), `i32` an int
    (`i32:16` one divisible by 16), `fp32` a float. Only their types matter to the compiler."""
    args: list[Any] = []
    for item in (s.strip() for s in signature.split(",") if signature.strip()):
        name, _, hint = item.partition(":")
        pointer = name.startswith("*")
        dtype = DTYPES.get(name.removeprefix("*"))
        if dtype is None or (hint and (hint not in ("1", "16") or not (pointer or dtype is np.int32))):
            raise ValueError(
                f"bad entry {item!r} in --signature {signature!r}: give one entry per runtime parameter, "
                "each one of *fp32, *fp16, *i32, *i1 (arrays), i32, i32:16 (an int divisible by 16) or fp32"
            )
        if pointer:
            args.append(np.zeros(16, dtype))
        elif dtype is np.float32:
            args.append(1.5)
        else:
            args.append(16 if hint == "16" else 7)
    return args


def defines(items: Sequence[str]) -> dict[str, Any]:
    """`-D NAME=VALUE` options as constexpr values."""
    values = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name.strip() or not value.strip():
            raise ValueError(f"-D {item} needs a name and a value: write -D {name.strip() or 'NAME'}=VALUE (e.g. -D BLOCK=1024)")
        values[name.strip()] = constexpr_value(value.strip())
    return values


def check_call(kernel: Any, arguments: Sequence[Any], constexprs: dict[str, Any]) -> None:
    """The signature gives every runtime parameter and -D every constexpr without a default, by name."""
    runtime = [p.name for p in kernel.params if not p.constexpr]
    needed = [p.name for p in kernel.params if p.constexpr and p.default is inspect.Parameter.empty]
    known = {p.name for p in kernel.params if p.constexpr}
    where = (kernel.source.where.filename, *kernel.source.where.of(kernel.source.tree))
    if len(arguments) != len(runtime):
        raise CompilationError(
            f"--signature has {len(arguments)} entries but {kernel.__name__} has {len(runtime)} runtime parameters "
            f"({', '.join(runtime) or 'none'}); give one entry per parameter, in order",
            *where,
        )
    unknown = sorted(set(constexprs) - known)
    if unknown:
        raise CompilationError(
            f"-D {unknown[0]}: {kernel.__name__} has no constexpr parameter {unknown[0]} "
            f"(its constexprs: {', '.join(sorted(known)) or 'none'})",
            *where,
        )
    missing = [n for n in needed if n not in constexprs]
    if missing:
        raise CompilationError(
            f"{kernel.__name__} needs a value for its constexpr parameter(s) {', '.join(missing)}: "
            + " ".join(f"-D {n}=VALUE" for n in missing),
            *where,
        )


def constexpr_value(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _compile(options: argparse.Namespace) -> int:
    with target.requesting(options.arch, "--arch"):  # as TINYTON_ARCH
        return _compile_for_target(options)


def _compile_for_target(options: argparse.Namespace) -> int:
    constexprs = defines(options.define)
    arguments = signature_arguments(options.signature)
    kernel = loading.load_jit_function(options.file, options.kernel)
    check_call(kernel, arguments, constexprs)
    compiled = kernel.compile(*arguments, num_warps=options.num_warps, **constexprs)
    stages = STAGES[: STAGES.index(options.emit) + 1] if options.verbose else (options.emit,)
    for stage in stages:
        if options.verbose:
            made_by = PASS_OF_STAGE[stage]
            made_by = made_by[ptx.resolve_toolchain()] if isinstance(made_by, dict) else made_by
            print(f"// -----// IR after {made_by} ({stage}) //----- //")
        print(compiled.asm[stage])
    return 0


def _graph(options: argparse.Namespace) -> int:
    output = graph.graph_command(options.target, options.shape, options.format)
    if isinstance(output, bytes):
        sys.stdout.buffer.write(output)
    else:
        print(output)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tinyton", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = p.add_subparsers(dest="command", required=True)

    c = commands.add_parser("compile", help="compile a @tt.jit kernel and print a stage")
    c.add_argument("file", help="Python file defining the kernel (its script part is not run)")
    c.add_argument("-k", "--kernel", help="name of the @tt.jit kernel (default: the only one)")
    c.add_argument("-s", "--signature", required=True, help="runtime parameters, e.g. '*fp32,*fp32,i32:16'")
    c.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE", help="a constexpr value")
    c.add_argument("--num-warps", type=int, default=4)
    c.add_argument("--arch", help=f"target architecture, as TINYTON_ARCH (one of {', '.join(target.ARCHS)}; "
                   "default: the GPU's, else sm_90)")
    c.add_argument("--emit", choices=STAGES, default="ptx", help="stage to print (default: ptx)")
    c.add_argument("-v", "--verbose", action="store_true", help="print the IR after every stage up to --emit")
    c.set_defaults(run=_compile)

    g = commands.add_parser("graph", help="draw the fusion graph of an array program")
    g.add_argument("target", help="FILE.py:FUNCTION")
    g.add_argument("--shape", action="append", required=True, help="shape of each array argument, e.g. 4096x1000")
    g.add_argument("--format", choices=("dot", "svg", "png"), default="dot")
    g.set_defaults(run=_graph)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    options = parser().parse_args(argv)
    try:
        return options.run(options)
    except CompilationError as error:
        print(f"tinyton: error: {error}", file=sys.stderr)
    except (LookupError, ValueError, TypeError, FileNotFoundError, RuntimeError) as error:
        print(f"tinyton: error: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
