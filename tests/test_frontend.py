"""The kernel frontend: Python AST -> tt IR, and its user-facing errors (with file:line:col)."""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING

import numpy as np
import pytest
from xdsl.dialects.builtin import Float16Type, Float32Type, i32

import tinyton as tt
from tinyton.dialects.tt import PointerType
from tinyton.frontend.codegen import build_kernel
from tinyton.frontend.source import KernelSource

F32, I32 = np.zeros(256, np.float32), np.zeros(256, np.int32)


def ir(kernel: tt.jit, *args, **kwargs) -> str:
    return kernel.compile(*args, **kwargs).asm["tt"]


def count(text: str, op: str) -> int:
    return len(re.findall(rf"\b{re.escape(op)}\b", text))


# ---- IR of the reference kernels ----------------------------------------------------------------


@tt.jit
def vector_add(a_ptr, b_ptr, c_ptr, N):
    pid = tt.program_id(0)
    offsets = pid * 64 + tt.arange(0, 64)
    mask = offsets < N
    a = tt.load(a_ptr + offsets, mask=mask)
    b = tt.load(b_ptr + offsets, mask=mask)
    tt.store(c_ptr + offsets, a + b, mask=mask)


def test_vector_add_ir():
    text = ir(vector_add, I32, I32, I32, 100)
    assert "builtin.module attributes {tt.num_warps = 4 : i32}" in text
    assert "func.func @vector_add(%a_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}" in text
    assert "%N: i32)" in text  # 100 is not a multiple of 16
    assert "tt.arange 0 to 64 : tensor<64xi32>" in text
    assert "tt.splat %a_ptr : !tt.ptr<i32> -> tensor<64x!tt.ptr<i32>>" in text
    assert count(text, "tt.addptr") == 3 and count(text, "tt.load") == 2
    assert re.search(r"tt.cmp \"lt\", %\d+, %\d+ : tensor<64xi32> -> tensor<64xi1>", text)
    assert re.search(r"tt.store %\d+, %\d+ mask %\d+ : tensor<64x!tt.ptr<i32>>, tensor<64xi32>, tensor<64xi1>", text)
    assert text.rstrip().endswith("func.return\n  }\n}")
    assert "%N: i32 {tt.divisibility = 16 : i32}" in ir(vector_add, I32, I32, I32, 64)


@tt.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tt.constexpr):
    row = tt.program_id(0)
    cols = tt.arange(0, BLOCK)
    x = tt.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tt.exp(x - tt.max(x, axis=0))
    tt.store(y_ptr + row * n_cols + cols, e / tt.sum(e, axis=0), mask=cols < n_cols)


def test_softmax_ir():
    text = ir(softmax_kernel, F32, F32, 100, BLOCK=128)
    assert "tt.arange 0 to 128" in text
    assert "tt.constant 0xff800000 : f32 -> tensor<128xf32>" in text  # other=-inf
    assert "tt.reduce_max" in text and "tt.reduce_sum" in text and "tt.exp" in text
    assert re.search(r"tt.splat %\d+ : f32 -> tensor<128xf32>", text)  # the row max broadcast back
    assert count(text, "tt.mul") == 1  # row * n_cols computed once (CSE)


@tt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tt.constexpr, BN: tt.constexpr, BK: tt.constexpr):
    rm = tt.program_id(0) * BM + tt.arange(0, BM)
    rn = tt.program_id(1) * BN + tt.arange(0, BN)
    rk = tt.arange(0, BK)
    acc = tt.zeros((BM, BN), tt.float32)
    for k in range(0, K, BK):
        a = tt.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tt.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc += tt.dot(a, b)
    tt.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_matmul_runtime_k_loop_ir():
    text = ir(matmul_kernel, F32, F32, F32, 32, 32, 40, BM=32, BN=16, BK=16)
    loop = re.search(r"(%\d+) = scf.for (%\d+) = %\d+ to %K step %\d+ iter_args\((%\d+) = %\d+\) -> \(tensor<32x16xf32>\)", text)
    assert loop, text
    assert count(text, "tt.dot") == 1
    assert re.search(rf"tt.dot %\d+, %\d+, {loop.group(3)} : tensor<32x16xf32>, tensor<16x16xf32> -> tensor<32x16xf32>", text)
    assert "scf.yield" in text
    assert re.search(rf"tt.store %\d+, {loop.group(1)} mask", text)
    assert "tt.expand_dims" in text and "tt.broadcast" in text


@tt.jit
def indexing_2d(x_ptr, y_ptr, n_cols, BLOCK: tt.constexpr):
    lane = tt.arange(0, BLOCK)
    row = tt.program_id(0) * 4 + lane // n_cols
    col = tt.program_id(1) * 8 + lane % 8
    tt.store(y_ptr + col * 4 + row, tt.load(x_ptr + row * n_cols + col))


def test_2d_grid_floordiv_mod_ir():
    text = ir(indexing_2d, F32, F32, 8, BLOCK=32)
    assert "tt.program_id 0" in text and "tt.program_id 1" in text
    assert "tt.div" in text and "tt.rem" in text  # Triton's truncating // and %


@tt.jit
def branches(x_ptr, n, FLAG: tt.constexpr):
    offs = tt.arange(0, 16)
    x = tt.load(x_ptr + offs)
    if n > 3:
        y = x * 2.0
        z = 1
    else:
        y = x - 1
        z = 1
    if FLAG:
        y = y + 100.0
    else:
        y = y - 100.0
    tt.store(x_ptr + offs, y + z)


def test_scf_if_yields_runtime_branches_and_folds_constexpr_ones():
    text = ir(branches, F32, 5, FLAG=True)
    assert count(text, "scf.if") == 1
    assert re.search(r"%\d+ = scf.if %\d+ -> \(tensor<16xf32>\)", text)  # only y is yielded: z is 1 in both
    assert count(text, "scf.yield") == 2
    assert "1.000000e+02" in text and count(text, "tt.sub") == 1  # FLAG: only the then-branch


@tt.jit
def loops(x_ptr, n, N: tt.constexpr):
    offs = tt.arange(0, 16)
    acc = tt.zeros((16,), tt.float32)
    for i in range(N):
        acc += tt.load(x_ptr + i * 16 + offs)
    for i in tt.static_range(0, 16, 8):  # noqa: B007
        acc = acc * 2.0
    for i in range(1, n, 2):
        acc += i
    tt.store(x_ptr + offs, acc)


def test_constexpr_loops_unroll_and_runtime_loops_do_not():
    text = ir(loops, F32, 7, N=3)
    assert count(text, "tt.load") == 3 and count(text, "scf.for") == 1
    text = ir(loops, F32, 7, N=12)  # more trips than UNROLL_MAX_TRIPS: a loop
    assert count(text, "tt.load") == 1 and count(text, "scf.for") == 2


def build(fn, signature, **constexprs) -> str:
    return str(build_kernel(KernelSource.parse(fn), signature, constexprs))


def test_promotion_and_broadcasting():
    def kernel(i_ptr, h_ptr, f_ptr):
        i = tt.load(i_ptr + tt.arange(0, 16))
        h = tt.load(h_ptr + tt.arange(0, 16))
        f = tt.load(f_ptr + tt.arange(0, 16))
        tt.store(f_ptr + tt.arange(0, 16), i * 1.5)  # int tile * float -> f32
        tt.store(h_ptr + tt.arange(0, 16), h * 2.0)  # weak float keeps f16
        tt.store(f_ptr + tt.arange(0, 16), h + f)  # f16 + f32 -> f32
        tt.store(f_ptr + tt.arange(0, 16), i / 3)  # int / int -> f32
        tt.store(i_ptr + tt.arange(0, 16), i // 3 + i % 3)
        tt.store(f_ptr + tt.arange(0, 16), tt.sum(f[:, None] * f[None, :], axis=1))

    f16, f32 = Float16Type(), Float32Type()
    text = build(kernel, {"i_ptr": PointerType(i32), "h_ptr": PointerType(f16), "f_ptr": PointerType(f32)})
    assert re.search(r"tt.cast %\d+ : tensor<16xi32> -> tensor<16xf32>", text)
    assert "tt.constant 2.000000e+00 : f16 -> tensor<16xf16>" in text
    assert re.search(r"tt.cast %\d+ : tensor<16xf16> -> tensor<16xf32>", text)
    assert "tt.div" in text and "tt.rem" in text  # Triton's truncating // and %
    assert re.search(r"tt.expand_dims %\d+ axis = 1 : tensor<16xf32> -> tensor<16x1xf32>", text)
    assert "tt.broadcast" in text and "tt.reduce_sum" in text


def test_casts_constants_scalars_and_select():
    def kernel(x_ptr, n, FLAG: tt.constexpr):
        x = tt.load(x_ptr + tt.arange(0, 16))
        y = tt.where(x > 0, x, -float("inf")).to(tt.float16).to(tt.float32)
        ok = (n > 1 and n < 10) or not FLAG
        z = x if n > 2 else x + 1.0
        w = tt.maximum(tt.relu(y), tt.abs(z)) + tt.sqrt(tt.rsqrt(tt.log(tt.exp(y))))
        tt.store(x_ptr + tt.arange(0, 16), w + tt.mean(x) + tt.min(x) + ok, mask=True)

    text = build(kernel, {"x_ptr": PointerType(Float32Type()), "n": i32}, FLAG=True)
    assert "0xff800000" in text and "tt.select" in text
    assert "tensor<16xf32> -> tensor<16xf16>" in text and "tensor<16xf16> -> tensor<16xf32>" in text
    assert re.search(r"tt.and %\d+, %\d+ : i1", text)  # and on runtime scalars
    for op in ("tt.maximum", "tt.abs", "tt.sqrt", "tt.rsqrt", "tt.log", "tt.exp", "tt.reduce_min"):
        assert op in text


# ---- errors -------------------------------------------------------------------------------------


def broadcast_mismatch(p):
    a = tt.load(p + tt.arange(0, 64))
    b = tt.load(p + tt.arange(0, 32))
    tt.store(p + tt.arange(0, 64), a + b)  # error


def non_power_of_two(p, B: tt.constexpr):
    tt.store(p + tt.arange(0, B), 1.0)  # error


def too_large(p):
    tt.zeros((512, 256), tt.float32)  # error


def break_in_loop(p, n):
    for i in range(n):  # noqa: B007
        break  # error


def try_block(p):
    try:  # error
        pass
    finally:
        pass


def lambda_expr(p):
    lambda q: q  # error


def helper(x):
    return x


def non_builtin_call(p):
    helper(p)  # error


def store_non_pointer(p):
    v = tt.load(p + tt.arange(0, 16))
    tt.store(v, v)  # error


def load_non_pointer(p, n):
    tt.load(n + tt.arange(0, 16))  # error


def unsupported_dtype(p):
    tt.load(p).to(np.complex64)  # error


def carried_type_change(p, n):
    acc = 0
    for i in range(n):  # error  # noqa: B007
        acc += tt.load(p + tt.arange(0, 16))
    tt.store(p + tt.arange(0, 16), acc)


def tile_condition(p):
    x = tt.load(p + tt.arange(0, 16))
    if x > 0:  # error
        x = -x


def one_branch_only(p, n):
    if n > 0:
        y = 1.0
    tt.store(p, y)  # error


if TYPE_CHECKING:
    missing_name = 0.0  # for static checkers only: at run time the kernel below finds no such name


def undefined_name(p):
    tt.store(p, missing_name)  # error


def bad_keyword(p):
    tt.load(p, msk=None)  # error


def small_dot(p):
    a = tt.zeros((8, 8), tt.float32)
    tt.dot(a, a)  # error


def float_floordiv(p):
    tt.load(p) // 2  # error


def runtime_arange(p, n):
    tt.arange(0, n)  # error


def early_return_in_loop(p, n):
    for i in range(n):  # noqa: B007
        return  # error


def assign_to_subscript(p):
    x = tt.zeros((16,), tt.float32)
    x[0] = 1.0  # error


ERRORS = [
    (broadcast_mismatch, {}, "cannot broadcast tiles of shapes [64] and [32] in `+`"),
    (non_power_of_two, {"B": 48}, "block dimension 48 is not a power of two"),
    (non_power_of_two, {"B": 1 << 17}, "a tile holds at most 65536"),
    (too_large, {}, "a tile holds at most 65536"),
    (break_in_loop, {}, "`break` is not supported (as in Triton)"),
    (try_block, {}, "try/except is not supported"),
    (lambda_expr, {}, "lambda is not supported"),
    (non_builtin_call, {}, "`helper` is neither"),
    (store_non_pointer, {}, "tt.store needs a pointer"),
    (load_non_pointer, {}, "tt.load needs a pointer"),
    (unsupported_dtype, {}, "unsupported dtype complex64"),
    (carried_type_change, {}, "loop-carried variable `acc` is i32 before the loop but tensor<16xf32>"),
    (tile_condition, {}, "`if` needs a scalar condition"),
    (one_branch_only, {}, "`y` does not get a number or tile in both branches"),
    (undefined_name, {}, "name `missing_name` is not defined"),
    (bad_keyword, {}, "tt.load(): got an unexpected keyword argument 'msk'"),
    (small_dot, {}, "tt.dot needs blocks of at least 16"),
    (float_floordiv, {}, "`//` needs integer operands"),
    (runtime_arange, {}, "tt.arange bounds must be constexpr ints"),
    (early_return_in_loop, {}, "`return` inside a loop is not supported"),
    (assign_to_subscript, {}, "cannot assign to `x[0]`"),
]


@pytest.mark.parametrize("fn, constexprs, message", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_errors_name_the_source_line(fn, constexprs, message):
    lines, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(lines) if "# error" in text)
    kernel = tt.jit(fn)
    args = [F32, 5][: len([p for p in kernel.params if not p.constexpr])]
    with pytest.raises(tt.CompilationError) as info:
        kernel.compile(*args, **constexprs)
    text = str(info.value)
    assert text.startswith(f"{__file__}:{line}:"), text
    assert message in text, text
    assert "# error" in text.splitlines()[1] and text.splitlines()[2].strip() == "^"


def test_argument_errors_point_at_the_call():
    with pytest.raises(tt.CompilationError, match=r"test_frontend.py:\d+:\d+: vector_add\(\) argument `a_ptr`: arrays of complex64"):
        vector_add.compile(np.zeros(4, np.complex64), I32, I32, 4)
    with pytest.raises(tt.CompilationError, match="does not fit in int64"):
        vector_add.compile(I32, I32, I32, 1 << 70)
