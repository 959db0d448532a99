"""
tt kernels written out as text for the tinyton-to-llvm tests, parametrised by tile size and
warps (the kernels of tests/filecheck/lowering/*.mlir cover the other ops).
"""

from __future__ import annotations

DIV16 = "{tt.divisibility = 16 : i32}"


def T(shape: tuple[int, ...] | int, elem: str = "f32") -> str:
    """`tensor<AxBxelem>`; pointers as `ptr<f32>`."""
    shape = (shape,) if isinstance(shape, int) else shape
    elem = f"!tt.{elem}" if elem.startswith("ptr") else elem
    return f"tensor<{'x'.join(map(str, shape))}x{elem}>"


def module(name: str, params: str, body: str, num_warps: int = 4) -> str:
    return (
        f"builtin.module attributes {{tt.num_warps = {num_warps} : i32}} {{\n"
        f"  func.func @{name}({params}) {{\n{body}\n    func.return\n  }}\n}}\n"
    )


def vadd(block: int = 1024, num_warps: int = 4) -> str:
    P = T(block, "ptr<f32>")
    return module(
        "vadd",
        f"%a: !tt.ptr<f32> {DIV16}, %b: !tt.ptr<f32> {DIV16}, %c: !tt.ptr<f32> {DIV16}, %n: i32 {DIV16}",
        f"""
    %pid = tt.program_id 0 : i32
    %bs = tt.constant {block} : i32 -> i32
    %start = tt.mul %pid, %bs : i32
    %r = tt.arange 0 to {block} : {T(block, 'i32')}
    %s = tt.splat %start : i32 -> {T(block, 'i32')}
    %offs = tt.add %s, %r : {T(block, 'i32')}
    %ns = tt.splat %n : i32 -> {T(block, 'i32')}
    %mask = tt.cmp "lt", %offs, %ns : {T(block, 'i32')} -> {T(block, 'i1')}
    %ap = tt.splat %a : !tt.ptr<f32> -> {P}
    %aps = tt.addptr %ap, %offs : {P}, {T(block, 'i32')}
    %bp = tt.splat %b : !tt.ptr<f32> -> {P}
    %bps = tt.addptr %bp, %offs : {P}, {T(block, 'i32')}
    %cp = tt.splat %c : !tt.ptr<f32> -> {P}
    %cps = tt.addptr %cp, %offs : {P}, {T(block, 'i32')}
    %x = tt.load %aps mask %mask : {P}, {T(block, 'i1')} -> {T(block)}
    %y = tt.load %bps mask %mask : {P}, {T(block, 'i1')} -> {T(block)}
    %z = tt.add %x, %y : {T(block)}
    tt.store %cps, %z mask %mask : {P}, {T(block)}, {T(block, 'i1')}""",
        num_warps,
    )


def _row_prologue(block: int) -> str:
    """`%offs`, `%mask` and the row pointers `%xr`, `%yr` of one-row-per-program kernels."""
    return f"""
    %row = tt.program_id 0 : i32
    %start = tt.mul %row, %n : i32
    %xr = tt.addptr %x, %start : !tt.ptr<f32>, i32
    %yr = tt.addptr %y, %start : !tt.ptr<f32>, i32
    %offs = tt.arange 0 to {block} : {T(block, 'i32')}
    %ns = tt.splat %n : i32 -> {T(block, 'i32')}
    %mask = tt.cmp "lt", %offs, %ns : {T(block, 'i32')} -> {T(block, 'i1')}
    %xs = tt.splat %xr : !tt.ptr<f32> -> {T(block, 'ptr<f32>')}
    %xp = tt.addptr %xs, %offs : {T(block, 'ptr<f32>')}, {T(block, 'i32')}
    %ys = tt.splat %yr : !tt.ptr<f32> -> {T(block, 'ptr<f32>')}
    %yp = tt.addptr %ys, %offs : {T(block, 'ptr<f32>')}, {T(block, 'i32')}"""


def softmax(block: int = 4096, num_warps: int = 4) -> str:
    P, F, M = T(block, "ptr<f32>"), T(block), T(block, "i1")
    return module(
        "softmax",
        f"%x: !tt.ptr<f32> {DIV16}, %y: !tt.ptr<f32> {DIV16}, %n: i32 {DIV16}",
        _row_prologue(block)
        + f"""
    %ninf = tt.constant 0xFF800000 : f32 -> {F}
    %v = tt.load %xp mask %mask other %ninf : {P}, {M}, {F} -> {F}
    %m = tt.reduce_max %v axis = 0 : {F} -> f32
    %ms = tt.splat %m : f32 -> {F}
    %d = tt.sub %v, %ms : {F}
    %e = tt.exp %d : {F}
    %s = tt.reduce_sum %e axis = 0 : {F} -> f32
    %ss = tt.splat %s : f32 -> {F}
    %o = tt.div %e, %ss : {F}
    tt.store %yp, %o mask %mask : {P}, {F}, {M}""",
        num_warps,
    )


def rmsnorm(block: int = 4096, num_warps: int = 4) -> str:
    P, F, M = T(block, "ptr<f32>"), T(block), T(block, "i1")
    return module(
        "rmsnorm",
        f"%x: !tt.ptr<f32> {DIV16}, %w: !tt.ptr<f32> {DIV16}, %y: !tt.ptr<f32> {DIV16}, "
        f"%n: i32 {DIV16}, %eps: f32",
        _row_prologue(block)
        + f"""
    %zero = tt.constant 0.0 : f32 -> {F}
    %v = tt.load %xp mask %mask other %zero : {P}, {M}, {F} -> {F}
    %ws = tt.splat %w : !tt.ptr<f32> -> {P}
    %wp = tt.addptr %ws, %offs : {P}, {T(block, 'i32')}
    %wv = tt.load %wp mask %mask other %zero : {P}, {M}, {F} -> {F}
    %sq = tt.mul %v, %v : {F}
    %ss = tt.reduce_sum %sq axis = 0 : {F} -> f32
    %nf = tt.cast %n : i32 -> f32
    %mean = tt.div %ss, %nf : f32
    %me = tt.add %mean, %eps : f32
    %r = tt.rsqrt %me : f32
    %rs = tt.splat %r : f32 -> {F}
    %o1 = tt.mul %v, %rs : {F}
    %o = tt.mul %o1, %wv : {F}
    tt.store %yp, %o mask %mask : {P}, {F}, {M}""",
        num_warps,
    )
