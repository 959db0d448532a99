"""
tinyton-to-llvm: layouts, the axis analysis, and tt kernels lowered to PTX that ptxas takes.

The lit tests in tests/filecheck/lowering check the emitted IR and PTX op by op; here the
same kernels (and the vector add, softmax and rmsnorm of `lowering_kernels` at several
sizes and warp counts) go through both PTX toolchains and ptxas, and, on a GPU, run and
are compared with the NumPy simulator.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import lowering_kernels as kernels
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyton.dialects import tinyton_context, tt
from tinyton.lowering.ptx import compile_llvm_module
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.tt_to_llvm import (
    KernelInfo,
    LoweringError,
    TinytonToLLVMPass,
    lower_to_llvm,
)
from tinyton.lowering.tt_to_llvm.assign import LayoutAssignment
from tinyton.lowering.tt_to_llvm.axis_info import AxisAnalysis, vector_width
from tinyton.lowering.tt_to_llvm.layouts import blocked, register_map, replica_mask
from tinyton.passes import ALL_PASSES
from toolchains import TOOLCHAINS, needs_mlir, needs_ptxas

LIT_KERNELS = sorted(p for p in (Path(__file__).parent / "filecheck" / "lowering").glob("*.mlir") if p.stem != "errors")


def parse(text: str) -> ModuleOp:
    module = Parser(tinyton_context(), text).parse_module()
    module.verify()
    return module


def lowered(text: str, num_warps: int | None = None) -> tuple[KernelInfo, ModuleOp]:
    module = parse(text)
    info = lower_to_llvm(module, num_warps)
    module.verify()
    return info, module


def to_ptx(text: str, toolchain: str = "llvmlite", num_warps: int | None = None) -> str:
    return compile_llvm_module(lowered(text, num_warps)[1], arch="sm_90", toolchain=toolchain)["ptx"]


def ptxas(ptx: str) -> str:
    """ptxas's `-v` report; fails the test if it rejects the PTX."""
    command = [find_tool("ptxas"), "-arch=sm_90", "-v", "-", "-o", "/dev/null"]
    proc = subprocess.run(command, input=ptx.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stderr.decode()


def kernel_of(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


# --- layouts ------------------------------------------------------------------------------


def test_blocked_layout_of_a_row():
    layout = blocked((4096,), num_warps=4)
    assert layout.num_regs == 32
    assert layout.contiguous_per_thread() == 4  # 128-bit accesses
    assert layout.lane[0] == (4,)  # lanes side by side after each thread's 4 elements
    assert replica_mask(layout.lane) == 0 and replica_mask(layout.warp) == 0


def test_blocked_layout_puts_warps_on_rows():
    layout = blocked((64, 64), num_warps=4)
    assert layout.contiguous_per_thread() == 4
    assert all(b[1] == 0 for b in layout.warp)  # a row never spans warps
    one_row = blocked((1, 4096), num_warps=8)
    assert all(b[0] == 0 for b in one_row.warp)  # unless there is only one


def test_small_tiles_replicate():
    layout = blocked((16,), num_warps=4)
    assert layout.num_regs == 1
    assert replica_mask(layout.lane) == 0b10000 and replica_mask(layout.warp) == 0b11


def test_reduce_then_broadcast_reuses_registers():
    layout = blocked((64, 64), num_warps=4)
    rows = layout.slice(1).expand(1)
    assert rows.broadcast_target((64, 64)) is layout
    assert register_map(rows, layout) == [r >> 2 for r in range(layout.num_regs)]
    assert register_map(blocked((64,), 4).expand(1), layout) is None  # needs shared memory


# --- analyses -----------------------------------------------------------------------------


def _load_widths(text: str) -> list[int]:
    module = parse(text)
    kernel = kernel_of(module)
    axis, assign = AxisAnalysis(kernel), LayoutAssignment(kernel, 4)
    widths = []
    for op in kernel.walk():
        if isinstance(op, tt.LoadOp):
            per_thread = assign.layout[op.result].contiguous_per_thread()
            widths.append(vector_width(axis[op.ptr], axis[op.mask] if op.mask else None, per_thread, 4))
    return widths


def test_vector_width_follows_divisibility():
    assert _load_widths(kernels.vadd()) == [4, 4]
    # Without tt.divisibility on n, the mask may change inside any group of 4.
    assert _load_widths(kernels.vadd().replace("%n: i32 {tt.divisibility = 16 : i32}", "%n: i32")) == [1, 1]
    # Without it on a pointer, the first element of a group may be misaligned.
    unaligned = kernels.vadd().replace("%a: !tt.ptr<f32> {tt.divisibility = 16 : i32}", "%a: !tt.ptr<f32>")
    assert _load_widths(unaligned) == [1, 4]
    # `offs <= n` flips after a multiple of 16, inside a group.
    assert _load_widths(kernels.vadd().replace('tt.cmp "lt"', 'tt.cmp "le"')) == [1, 1]


def test_transpose_keeps_each_dimensions_facts():
    """A `[1, N]` row of offsets transposed to `[N, 1]` (a column-major matmul operand's tile loaded as its
    transpose) keeps its divisibility, so the K run it is added to is still read in 16-byte vectors."""
    i32 = lambda shape: kernels.T(shape, "i32")
    module = parse(kernels.module("t", f"%a: !tt.ptr<f32> {kernels.DIV16}", f"""
    %r = tt.arange 0 to 16 : {i32(16)}
    %row = tt.expand_dims %r axis = 0 : {i32(16)} -> {i32((1, 16))}
    %c = tt.constant 64 : i32 -> {i32((1, 16))}
    %off = tt.mul %row, %c : {i32((1, 16))}
    %col = tt.trans %off {{order = array<i32: 1, 0>}} : {i32((1, 16))} -> {i32((16, 1))}"""))
    axis = AxisAnalysis(kernel_of(module))
    ops = {op.results[0].name_hint: op.results[0] for op in kernel_of(module).walk() if op.results}
    off, col = axis[ops["off"]], axis[ops["col"]]
    assert col.divisibility == off.divisibility[::-1] and col.divisibility[0] >= 64
    assert (col.contiguity, col.constancy, col.nonnegative) == (off.contiguity[::-1], off.constancy[::-1], True)


# --- the pass -----------------------------------------------------------------------------


def test_kernel_info_and_module():
    info, module = lowered(kernels.vadd())
    assert info == KernelInfo("vadd", 4, 0, ("!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<f32>", "i32"), launch_warps=4)
    text = str(module)
    assert "llvm.func @vadd" in text and "nvvm.kernel" in text and "nvvm.reqntid = array<i32: 128, 1, 1>" in text
    assert "func.func" not in text and "tt." not in text.replace("tt.num_warps", "")


def test_num_warps_option_overrides_the_module():
    info, module = lowered(kernels.softmax(4096, 4), num_warps=16)
    assert (info.num_warps, info.shared_bytes) == (16, 128)  # 16 partials, twice
    assert "array<i32: 512, 1, 1>" in str(module)
    module = parse(kernels.softmax(4096, 4))
    ALL_PASSES["tinyton-to-llvm"]()(num_warps=8).apply(Context(), module)
    assert "array<i32: 256, 1, 1>" in str(module)
    assert ALL_PASSES["tinyton-to-llvm"]() is TinytonToLLVMPass


@pytest.mark.parametrize(
    "text, message",
    [
        (kernels.vadd(), "num_warps must be 1, 2, 4, 8 or 16, got 3"),
        (kernels.vadd().replace("tt.add %x, %y", "tt.mul %x, %y") + kernels.vadd(), "expected one tt kernel"),
    ],
)
def test_rejected(text: str, message: str):
    with pytest.raises(LoweringError, match=message):
        lower_to_llvm(Parser(tinyton_context(), text).parse_module(), 3 if "num_warps" in message else None)


def test_shared_memory_limit():
    text = kernels.module(
        "big",
        "%a: !tt.ptr<f32>",
        """
    %x = tt.constant 1.0 : f32 -> tensor<128x128xf32>
    %d = tt.dot %x, %x, %x : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
    %r = tt.reduce_sum %d axis = 0 : tensor<128x128xf32> -> tensor<128xf32>
    %s = tt.reduce_sum %r axis = 0 : tensor<128xf32> -> f32
    tt.store %a, %s : !tt.ptr<f32>, f32""",
    )
    with pytest.raises(LoweringError, match="needs 131072 bytes of shared memory, more than the 49152"):
        lower_to_llvm(parse(text))


def test_unsupported_op():
    text = kernels.module("k", "%a: i32", "    %b = arith.addi %a, %a : i32")
    with pytest.raises(LoweringError, match="cannot lower arith.addi"):
        lower_to_llvm(parse(text))


# --- PTX ----------------------------------------------------------------------------------


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_vector_add_moves_128_bits(toolchain: str):
    ptx = to_ptx(kernels.vadd(1024), toolchain)
    assert ptx.count("ld.global.v4.b32") == 4 and ptx.count("st.global.v4.b32") == 2
    assert "0 bytes spill" in ptxas(ptx)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("block", [1024, 8192])
@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16])
def test_softmax(toolchain: str, block: int, num_warps: int):
    ptx = to_ptx(kernels.softmax(block, num_warps), toolchain)
    width = min(4, block // (32 * num_warps))  # each thread's share of the row, 128 bits at most
    for marker in (f"ld.global.v{width}.b32", "shfl.sync.bfly", "ex2.approx", f"st.global.v{width}.b32"):
        assert marker in ptx
    # One shared-memory round per reduction, across warps; one warp needs none.
    assert ptx.count("bar.sync") == (2 if num_warps > 1 else 0)
    report = ptxas(ptx)
    if block // (32 * num_warps) <= 64:  # more values per thread is the user's choice
        assert "0 bytes spill stores" in report


@needs_ptxas
@pytest.mark.parametrize("num_warps", [4, 8])
def test_rmsnorm(num_warps: int):
    ptx = to_ptx(kernels.rmsnorm(4096, num_warps))
    assert ptx.count("ld.global.v4.b32") == 2 * 4096 // (128 * num_warps)
    assert "rsqrt.approx.f32" in ptx and ptx.count("bar.sync") == 1
    assert "0 bytes spill stores" in ptxas(ptx)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("path", LIT_KERNELS, ids=lambda p: p.stem)
def test_lit_kernels_assemble(toolchain: str, path: Path):
    assert "0 bytes spill stores" in ptxas(to_ptx(path.read_text(), toolchain))


@needs_mlir
def test_huge_tiles_compile():
    """65536 elements in 512 threads: 128 registers each, spilling is the user's choice."""
    ptxas(to_ptx(kernels.softmax(65536, 16), "mlir"))


# --- on a GPU -----------------------------------------------------------------------------

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


LAUNCHES = {
    # n must honour the kernel's tt.divisibility = 16.
    "vector_add": lambda: ((3,), [_f32(2992), _f32(2992), np.zeros(2992, np.float32), 2992]),
    "softmax": lambda: ((3,), [_f32(3, 4000), np.zeros((3, 4000), np.float32), 4000]),
    "reduce_2d": lambda: ((2,), [_f32(2, 32, 64), _f32(64), *(np.zeros(n, np.float32) for n in (64, 128, 4096))]),
    "broadcast": lambda: ((1,), [_f32(64), _f32(32), np.zeros((64, 32), np.float32)]),
    "dot_loop": lambda: ((2, 2), [_f32(100, 50), _f32(50, 70), np.zeros((100, 70), np.float32), 100, 70, 50]),
    "index_math": lambda: ((4,), [_f32(16, 64), np.zeros((64, 16), np.float32)]),
    "python_division": lambda: (
        (1,),
        [RNG.integers(-50, 50, 256).astype(np.int32), 7, *(np.zeros(256, t) for t in ("i4", "i4", "f4", "f4"))],
    ),
    "math": lambda: ((1,), [_f32(1024), np.zeros(4096, np.float32)]),
    "if_else": lambda: ((4,), [_f32(2048), np.zeros(2048, np.float32)]),
    "nested_loops": lambda: ((1,), [_f32(6, 1000), np.zeros(3, np.float32), 6, 1000]),
    "layout_conversion": lambda: ((1,), [_f32(64, 128), _f32(64, 4), np.zeros(64, np.float32)]),
    "pointer_loop": lambda: ((4,), [_f32(4, 4096), np.zeros(4, np.float32), 4096]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_runs_like_the_simulator(name: str):
    from tinyton.compiler import compile_module

    text = (LIT_KERNELS[0].parent / f"{name}.mlir").read_text() if name not in ("vector_add", "softmax") else None
    text = text or (kernels.vadd(1024) if name == "vector_add" else kernels.softmax(4096))
    grid, args = LAUNCHES[name]()
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    compile_module(parse(text)).simulate(grid, expected)
    compile_module(parse(text)).launch(grid, args)
    for got, want in zip(args, expected):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
