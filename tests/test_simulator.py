"""Tests of the NumPy simulator (tinyton.runtime.simulator) on hand-written tt kernels."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyton.dialects import tinyton_context
from tinyton.runtime.simulator import (
    KernelArgumentError,
    OutOfBoundsError,
    SimulatorError,
    run,
)


def parse(text: str) -> ModuleOp:
    module = Parser(tinyton_context(), text).parse_module()
    module.verify()
    return module


def run_both(module: ModuleOp, grid: tuple[int, ...], make_args, **kw) -> list[list]:
    """Run one-by-one, batched and batched in small chunks; all must agree. Returns the argument lists."""
    results = []
    for options in ({"batched": False}, {"batched": True}, {"batched": True, "batch_elements": 64}):
        args = make_args()
        run(module, grid, args, **options, **kw)
        results.append(args)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
    return results


# ----------------------------------------------------------------------------------------------------------
# vector add, masks, out of bounds, other
# ----------------------------------------------------------------------------------------------------------

def vector_add(block: int = 256) -> ModuleOp:
    t, p = f"tensor<{block}xi32>", f"tensor<{block}x!tt.ptr<f32>>"
    f, m = f"tensor<{block}xf32>", f"tensor<{block}xi1>"
    return parse(f"""
builtin.module {{
  func.func @add(%x_ptr: !tt.ptr<f32>, %y_ptr: !tt.ptr<f32>, %out_ptr: !tt.ptr<f32>, %n: i32) {{
    %pid = tt.program_id 0 : i32
    %c = tt.constant {block} : i32 -> i32
    %start = tt.mul %pid, %c : i32
    %r = tt.arange 0 to {block} : {t}
    %s = tt.splat %start : i32 -> {t}
    %offs = tt.add %s, %r : {t}
    %ns = tt.splat %n : i32 -> {t}
    %mask = tt.cmp "lt", %offs, %ns : {t} -> {m}
    %xp = tt.splat %x_ptr : !tt.ptr<f32> -> {p}
    %xpo = tt.addptr %xp, %offs : {p}, {t}
    %x = tt.load %xpo mask %mask : {p}, {m} -> {f}
    %yp = tt.splat %y_ptr : !tt.ptr<f32> -> {p}
    %ypo = tt.addptr %yp, %offs : {p}, {t}
    %y = tt.load %ypo mask %mask : {p}, {m} -> {f}
    %z = tt.add %x, %y : {f}
    %op = tt.splat %out_ptr : !tt.ptr<f32> -> {p}
    %opo = tt.addptr %op, %offs : {p}, {t}
    tt.store %opo, %z mask %mask : {p}, {f}, {m}
    func.return
  }}
}}""")


@pytest.mark.parametrize("batched", [False, True, None])
def test_vector_add_masked_tail(batched):
    module, n = vector_add(256), 1000  # 4 programs, the last one 24 lanes past the end of every array
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    run(module, (math.ceil(n / 256),), [x, y, out, n], batched=batched)
    np.testing.assert_array_equal(out, x + y)

    # a longer output: the elements past n stay untouched
    big = np.full(1024 + 7, -7.0, np.float32)
    run(module, (4,), [x, y, big, n], batched=batched)
    np.testing.assert_array_equal(big[:n], x + y)
    assert (big[n:] == -7.0).all()


@pytest.mark.parametrize("batched", [False, True])
def test_out_of_bounds_load(batched):
    module, n = vector_add(256), 1000
    x, y, out = np.zeros(n, np.float32), np.zeros(n + 200, np.float32), np.zeros(n + 200, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        run(module, (5,), [x, y, out, n + 100], batched=batched)  # program 3 reads x[1000..1023]
    err = info.value
    assert (err.argument, err.argument_number, err.program, err.index, err.lane) == ("x_ptr", 0, (3, 0, 0), 1000, (232,))
    message = str(err)
    for part in ("tt.load", "'x_ptr'", "program (3, 0, 0)", "element 1000", "1000 elements", "lane (232,)"):
        assert part in message
    assert isinstance(err, IndexError) and not getattr(err, "__notes__", None)


def test_out_of_bounds_store():
    module, n = vector_add(256), 600
    x, y, out = np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(300, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"tt.store out of bounds: program \(1, 0, 0\) writes element 300 of argument 'out_ptr'"):
        run(module, (3,), [x, y, out, n])
    with pytest.raises(OutOfBoundsError, match=r"program \(0, 0, 0\) writes element 0 of argument 'out_ptr' \(#2, 0 elements"):
        run(module, (1,), [x, y, np.zeros(0, np.float32), 1])
    m = np.zeros((2, 64), np.float32)
    with pytest.raises(OutOfBoundsError, match=r"program \(1, 0, 0\) reads element -64 of argument 'in_ptr'"):
        run(softmax(64), (2,), [m, m, -64, 64])  # negative offsets are caught too


OTHER = """
builtin.module {
  func.func @k(%x_ptr: !tt.ptr<f32>, %out_ptr: !tt.ptr<f32>, %n: i32) {
    %r = tt.arange 0 to 8 : tensor<8xi32>
    %ns = tt.splat %n : i32 -> tensor<8xi32>
    %mask = tt.cmp "lt", %r, %ns : tensor<8xi32> -> tensor<8xi1>
    %xs = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %xp = tt.addptr %xs, %r : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    %o = tt.constant -1.5 : f32 -> tensor<8xf32>
    %x = tt.load %xp mask %mask OTHER : tensor<8x!tt.ptr<f32>>, tensor<8xi1>TYPE -> tensor<8xf32>
    %os = tt.splat %out_ptr : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %op = tt.addptr %os, %r : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    tt.store %op, %x : tensor<8x!tt.ptr<f32>>, tensor<8xf32>
    func.return
  }
}"""


@pytest.mark.parametrize("with_other, fill", [(True, -1.5), (False, 0.0)])
def test_load_other(with_other, fill):
    text = OTHER.replace("OTHER", "other %o" if with_other else "").replace("TYPE", ", tensor<8xf32>" if with_other else "")
    x, out = np.arange(1, 6, dtype=np.float32), np.full(8, 9.0, np.float32)
    run(parse(text), (1,), [x, out, 5])
    np.testing.assert_array_equal(out, [1, 2, 3, 4, 5, fill, fill, fill])


# ----------------------------------------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------------------------------------

def softmax(block: int) -> ModuleOp:
    t, p, f, m = (f"tensor<{block}x{e}>" for e in ("i32", "!tt.ptr<f32>", "f32", "i1"))
    return parse(f"""
builtin.module {{
  func.func @softmax(%out_ptr: !tt.ptr<f32>, %in_ptr: !tt.ptr<f32>, %stride: i32, %n_cols: i32) {{
    %row = tt.program_id 0 : i32
    %start = tt.mul %row, %stride : i32
    %inb = tt.addptr %in_ptr, %start : !tt.ptr<f32>, i32
    %cols = tt.arange 0 to {block} : {t}
    %ps = tt.splat %inb : !tt.ptr<f32> -> {p}
    %p = tt.addptr %ps, %cols : {p}, {t}
    %nc = tt.splat %n_cols : i32 -> {t}
    %mask = tt.cmp "lt", %cols, %nc : {t} -> {m}
    %ninf = tt.constant 0xFF800000 : f32 -> {f}
    %x = tt.load %p mask %mask other %ninf : {p}, {m}, {f} -> {f}
    %mx = tt.reduce_max %x axis = 0 : {f} -> f32
    %ms = tt.splat %mx : f32 -> {f}
    %d = tt.sub %x, %ms : {f}
    %e = tt.exp %d : {f}
    %s = tt.reduce_sum %e axis = 0 : {f} -> f32
    %ss = tt.splat %s : f32 -> {f}
    %y = tt.div %e, %ss : {f}
    %outb = tt.addptr %out_ptr, %start : !tt.ptr<f32>, i32
    %os = tt.splat %outb : !tt.ptr<f32> -> {p}
    %o = tt.addptr %os, %cols : {p}, {t}
    tt.store %o, %y mask %mask : {p}, {f}, {m}
    func.return
  }}
}}""")


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("rows, cols, block", [(37, 100, 128), (8, 64, 64)])
def test_softmax(rows, cols, block):
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32) * 4
    results = run_both(softmax(block), (rows,), lambda: [np.zeros_like(x), x, cols, cols])
    np.testing.assert_allclose(results[0][0], np_softmax(x.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_softmax_speed():
    rows, cols = 4096, 1024
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)
    module = softmax(cols)
    start = time.perf_counter()
    run(module, (rows,), [out, x, cols, cols])
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(out, np_softmax(x), rtol=1e-5, atol=1e-6)
    assert elapsed < 3.0, f"batched softmax 4096x1024 took {elapsed:.2f}s"  # about 0.1 s on a laptop


# ----------------------------------------------------------------------------------------------------------
# 2-D tiles: expand_dims, broadcast, reductions on both axes, a transposed store, a 2-D grid
# ----------------------------------------------------------------------------------------------------------

TILE_2D = """
builtin.module {
  func.func @k(%x_ptr: !tt.ptr<f32>, %rows_ptr: !tt.ptr<f32>, %cols_ptr: !tt.ptr<f32>, %t_ptr: !tt.ptr<f32>, %R: i32, %C: i32) {
    %p0 = tt.program_id 0 : i32
    %p1 = tt.program_id 1 : i32
    %c4 = tt.constant 4 : i32 -> i32
    %c8 = tt.constant 8 : i32 -> i32
    %r0 = tt.mul %p0, %c4 : i32
    %c0 = tt.mul %p1, %c8 : i32
    %ar4 = tt.arange 0 to 4 : tensor<4xi32>
    %ar8 = tt.arange 0 to 8 : tensor<8xi32>
    %r0s = tt.splat %r0 : i32 -> tensor<4xi32>
    %rm = tt.add %r0s, %ar4 : tensor<4xi32>
    %c0s = tt.splat %c0 : i32 -> tensor<8xi32>
    %cn = tt.add %c0s, %ar8 : tensor<8xi32>
    %rm2 = tt.expand_dims %rm axis = 1 : tensor<4xi32> -> tensor<4x1xi32>
    %cn2 = tt.expand_dims %cn axis = 0 : tensor<8xi32> -> tensor<1x8xi32>
    %Cs = tt.splat %C : i32 -> tensor<4x1xi32>
    %rowoff = tt.mul %rm2, %Cs : tensor<4x1xi32>
    %rowoffb = tt.broadcast %rowoff : tensor<4x1xi32> -> tensor<4x8xi32>
    %cn2b = tt.broadcast %cn2 : tensor<1x8xi32> -> tensor<4x8xi32>
    %off = tt.add %rowoffb, %cn2b : tensor<4x8xi32>
    %Rs = tt.splat %R : i32 -> tensor<4x1xi32>
    %rmask = tt.cmp "lt", %rm2, %Rs : tensor<4x1xi32> -> tensor<4x1xi1>
    %Cs2 = tt.splat %C : i32 -> tensor<1x8xi32>
    %cmask = tt.cmp "lt", %cn2, %Cs2 : tensor<1x8xi32> -> tensor<1x8xi1>
    %rmaskb = tt.broadcast %rmask : tensor<4x1xi1> -> tensor<4x8xi1>
    %cmaskb = tt.broadcast %cmask : tensor<1x8xi1> -> tensor<4x8xi1>
    %mask = tt.and %rmaskb, %cmaskb : tensor<4x8xi1>
    %xs = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<4x8x!tt.ptr<f32>>
    %xp = tt.addptr %xs, %off : tensor<4x8x!tt.ptr<f32>>, tensor<4x8xi32>
    %x = tt.load %xp mask %mask : tensor<4x8x!tt.ptr<f32>>, tensor<4x8xi1> -> tensor<4x8xf32>
    %ninf = tt.constant 0xFF800000 : f32 -> tensor<4x8xf32>
    %xm = tt.load %xp mask %mask other %ninf : tensor<4x8x!tt.ptr<f32>>, tensor<4x8xi1>, tensor<4x8xf32> -> tensor<4x8xf32>
    %rsum = tt.reduce_sum %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
    %cmax = tt.reduce_max %xm axis = 0 : tensor<4x8xf32> -> tensor<8xf32>
    %Rv = tt.splat %R : i32 -> tensor<4xi32>
    %rm_ok = tt.cmp "lt", %rm, %Rv : tensor<4xi32> -> tensor<4xi1>
    %rbase = tt.mul %p1, %R : i32
    %rbs = tt.splat %rbase : i32 -> tensor<4xi32>
    %roff = tt.add %rbs, %rm : tensor<4xi32>
    %rps = tt.splat %rows_ptr : !tt.ptr<f32> -> tensor<4x!tt.ptr<f32>>
    %rp = tt.addptr %rps, %roff : tensor<4x!tt.ptr<f32>>, tensor<4xi32>
    tt.store %rp, %rsum mask %rm_ok : tensor<4x!tt.ptr<f32>>, tensor<4xf32>, tensor<4xi1>
    %Cv = tt.splat %C : i32 -> tensor<8xi32>
    %cn_ok = tt.cmp "lt", %cn, %Cv : tensor<8xi32> -> tensor<8xi1>
    %cbase = tt.mul %p0, %C : i32
    %cbs = tt.splat %cbase : i32 -> tensor<8xi32>
    %coff = tt.add %cbs, %cn : tensor<8xi32>
    %cps = tt.splat %cols_ptr : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %cp = tt.addptr %cps, %coff : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    tt.store %cp, %cmax mask %cn_ok : tensor<8x!tt.ptr<f32>>, tensor<8xf32>, tensor<8xi1>
    %Rs2 = tt.splat %R : i32 -> tensor<1x8xi32>
    %toff1 = tt.mul %cn2, %Rs2 : tensor<1x8xi32>
    %toff1b = tt.broadcast %toff1 : tensor<1x8xi32> -> tensor<4x8xi32>
    %rm2b = tt.broadcast %rm2 : tensor<4x1xi32> -> tensor<4x8xi32>
    %toff = tt.add %toff1b, %rm2b : tensor<4x8xi32>
    %ts = tt.splat %t_ptr : !tt.ptr<f32> -> tensor<4x8x!tt.ptr<f32>>
    %tp = tt.addptr %ts, %toff : tensor<4x8x!tt.ptr<f32>>, tensor<4x8xi32>
    tt.store %tp, %x mask %mask : tensor<4x8x!tt.ptr<f32>>, tensor<4x8xf32>, tensor<4x8xi1>
    func.return
  }
}"""


def test_2d_tiles_reductions_and_grid():
    R, C = 10, 21  # partial blocks on both axes
    gx, gy = math.ceil(R / 4), math.ceil(C / 8)
    x = np.random.default_rng(3).standard_normal((R, C)).astype(np.float32)

    def make():
        return [x, np.zeros((gy, R), np.float32), np.zeros((gx, C), np.float32), np.zeros((C, R), np.float32), R, C]

    _, rows, cols, t, *_ = run_both(parse(TILE_2D), (gx, gy), make)[0]
    np.testing.assert_array_equal(t, x.T)
    for j in range(gy):
        np.testing.assert_allclose(rows[j], x[:, 8 * j : 8 * j + 8].astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6)
    for i in range(gx):
        np.testing.assert_array_equal(cols[i], x[4 * i : 4 * i + 4].max(axis=0))


# ----------------------------------------------------------------------------------------------------------
# dot in an scf.for over K (pointer iter args)
# ----------------------------------------------------------------------------------------------------------

def matmul(el: str, B: int = 16) -> ModuleOp:
    t1, t2, tc = f"tensor<{B}xi32>", f"tensor<{B}x{B}xi32>", f"tensor<{B}x1xi32>"
    tr, pa, f = f"tensor<1x{B}xi32>", f"tensor<{B}x{B}x!tt.ptr<{el}>>", f"tensor<{B}x{B}x{el}>"
    acc, pc = f"tensor<{B}x{B}xf32>", f"tensor<{B}x{B}x!tt.ptr<f32>>"
    return parse(f"""
builtin.module {{
  func.func @matmul(%a_ptr: !tt.ptr<{el}>, %b_ptr: !tt.ptr<{el}>, %c_ptr: !tt.ptr<f32>, %M: i32, %N: i32, %K: i32) {{
    %pm = tt.program_id 0 : i32
    %pn = tt.program_id 1 : i32
    %cB = tt.constant {B} : i32 -> i32
    %c0 = tt.constant 0 : i32 -> i32
    %m0 = tt.mul %pm, %cB : i32
    %n0 = tt.mul %pn, %cB : i32
    %r = tt.arange 0 to {B} : {t1}
    %m0s = tt.splat %m0 : i32 -> {t1}
    %rm = tt.add %m0s, %r : {t1}
    %n0s = tt.splat %n0 : i32 -> {t1}
    %rn = tt.add %n0s, %r : {t1}
    %rm2 = tt.expand_dims %rm axis = 1 : {t1} -> {tc}
    %rn2 = tt.expand_dims %rn axis = 0 : {t1} -> {tr}
    %rk1 = tt.expand_dims %r axis = 1 : {t1} -> {tc}
    %rk2 = tt.expand_dims %r axis = 0 : {t1} -> {tr}
    %Ks = tt.splat %K : i32 -> {tc}
    %Ns = tt.splat %N : i32 -> {tc}
    %arow = tt.mul %rm2, %Ks : {tc}
    %arowb = tt.broadcast %arow : {tc} -> {t2}
    %rk2b = tt.broadcast %rk2 : {tr} -> {t2}
    %aoff = tt.add %arowb, %rk2b : {t2}
    %brow = tt.mul %rk1, %Ns : {tc}
    %browb = tt.broadcast %brow : {tc} -> {t2}
    %rn2b = tt.broadcast %rn2 : {tr} -> {t2}
    %boff = tt.add %browb, %rn2b : {t2}
    %as = tt.splat %a_ptr : !tt.ptr<{el}> -> {pa}
    %ap0 = tt.addptr %as, %aoff : {pa}, {t2}
    %bs = tt.splat %b_ptr : !tt.ptr<{el}> -> {pa}
    %bp0 = tt.addptr %bs, %boff : {pa}, {t2}
    %zero = tt.constant 0.0 : f32 -> {acc}
    %astep = tt.splat %cB : i32 -> {t2}
    %bstep1 = tt.mul %cB, %N : i32
    %bstep = tt.splat %bstep1 : i32 -> {t2}
    %res:3 = scf.for %k = %c0 to %K step %cB iter_args(%acc = %zero, %ap = %ap0, %bp = %bp0) -> ({acc}, {pa}, {pa}) : i32 {{
      %a = tt.load %ap : {pa} -> {f}
      %b = tt.load %bp : {pa} -> {f}
      %acc2 = tt.dot %a, %b, %acc : {f}, {f} -> {acc}
      %ap2 = tt.addptr %ap, %astep : {pa}, {t2}
      %bp2 = tt.addptr %bp, %bstep : {pa}, {t2}
      scf.yield %acc2, %ap2, %bp2 : {acc}, {pa}, {pa}
    }}
    %crow = tt.mul %rm2, %Ns : {tc}
    %crowb = tt.broadcast %crow : {tc} -> {t2}
    %coff = tt.add %crowb, %rn2b : {t2}
    %cs = tt.splat %c_ptr : !tt.ptr<f32> -> {pc}
    %cp = tt.addptr %cs, %coff : {pc}, {t2}
    tt.store %cp, %res#0 : {pc}, {acc}
    func.return
  }}
}}""")


@pytest.mark.parametrize("el, dtype", [("f32", np.float32), ("f16", np.float16)])
def test_dot_in_for_loop(el, dtype):
    M, N, K = 32, 48, 80
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    results = run_both(matmul(el), (M // 16, N // 16), lambda: [a, b, np.zeros((M, N), np.float32), M, N, K])
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(results[0][2], expected, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------------------------------------
# integer and float division, casts, wrap-around
# ----------------------------------------------------------------------------------------------------------

def binary_kernel(op: str, el: str, n: int = 64, out_el: str | None = None) -> ModuleOp:
    """out[i] = op(a[i], b[i]) for one program of n lanes."""
    t, e = f"tensor<{n}xi32>", f"tensor<{n}x{el}>"
    pe = f"tensor<{n}x!tt.ptr<{el}>>"
    return parse(f"""
builtin.module {{
  func.func @k(%a_ptr: !tt.ptr<{el}>, %b_ptr: !tt.ptr<{el}>, %o_ptr: !tt.ptr<{el}>) {{
    %r = tt.arange 0 to {n} : {t}
    %as = tt.splat %a_ptr : !tt.ptr<{el}> -> {pe}
    %ap = tt.addptr %as, %r : {pe}, {t}
    %a = tt.load %ap : {pe} -> {e}
    %bs = tt.splat %b_ptr : !tt.ptr<{el}> -> {pe}
    %bp = tt.addptr %bs, %r : {pe}, {t}
    %b = tt.load %bp : {pe} -> {e}
    %c = tt.{op} %a, %b : {e}
    %os = tt.splat %o_ptr : !tt.ptr<{el}> -> {pe}
    %op = tt.addptr %os, %r : {pe}, {t}
    tt.store %op, %c : {pe}, {e}
    func.return
  }}
}}""")


INT_CASES = [(a, b) for a in (-7, -6, -1, 0, 1, 6, 7, -(2**31), 2**31 - 1) for b in (-3, -2, -1, 1, 2, 3, 5)]


@pytest.mark.parametrize(
    "op, ref",
    [
        ("floordiv", lambda a, b: a // b),
        ("mod", lambda a, b: a % b),
        ("div", lambda a, b: int(a / b) if abs(a) < 2**31 - 1 else -(-a // b) if (a < 0) != (b < 0) else a // b),
        ("rem", lambda a, b: int(math.fmod(a, b))),
    ],
)
def test_integer_division_like_python_and_c(op, ref):
    a = np.array([c[0] for c in INT_CASES], np.int32)
    b = np.array([c[1] for c in INT_CASES], np.int32)
    pad = 64 - len(a)
    a, b = np.concatenate([a, np.ones(pad, np.int32)]), np.concatenate([b, np.ones(pad, np.int32)])
    out = np.zeros(64, np.int32)
    run(binary_kernel(op, "i32"), (1,), [a, b, out])
    expected = [ref(int(x), int(y)) for x, y in zip(a, b)]
    wrapped = [(v + 2**31) % 2**32 - 2**31 for v in expected]  # INT_MIN // -1 wraps like the GPU
    assert out.tolist() == wrapped


def test_float_mod_and_div():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(64) * 10).astype(np.float32)
    b = (rng.standard_normal(64) * 3).astype(np.float32)
    out = np.zeros(64, np.float32)
    run(binary_kernel("mod", "f32"), (1,), [a, b, out])
    assert all(math.copysign(1, o) == math.copysign(1, y) or o == 0 for o, y in zip(out, b))  # divisor's sign
    np.testing.assert_allclose(out, [float(x) % float(y) for x, y in zip(a, b)], rtol=1e-5, atol=1e-5)
    run(binary_kernel("div", "f32"), (1,), [a, b, out])
    np.testing.assert_array_equal(out, a / b)


@pytest.mark.parametrize("op, expected", [("div", -1), ("rem", "a"), ("floordiv", 0), ("mod", 0)])
def test_integer_division_by_zero_gives_the_gpu_value(op, expected):
    a, b, out = np.arange(-32, 32, dtype=np.int32), np.ones(64, np.int32), np.zeros(64, np.int32)
    b[17] = 0
    run(binary_kernel(op, "i32"), (1,), [a, b, out])
    assert out[17] == (a[17] if expected == "a" else expected)


def test_i32_wraps_and_max_propagates_nan():
    a = np.full(64, 2**31 - 1, np.int32)
    out = np.zeros(64, np.int32)
    run(binary_kernel("add", "i32"), (1,), [a, np.ones(64, np.int32), out])
    assert (out == -(2**31)).all()
    run(binary_kernel("mul", "i32"), (1,), [np.full(64, 65536, np.int32), np.full(64, 65536, np.int32), out])
    assert (out == 0).all()
    x, y, o = np.zeros(64, np.float32), np.ones(64, np.float32), np.zeros(64, np.float32)
    x[3] = np.nan
    run(binary_kernel("maximum", "f32"), (1,), [x, y, o])
    assert np.isnan(o[3]) and (np.delete(o, 3) == 1).all()


CASTS = """
builtin.module {
  func.func @k(%x_ptr: !tt.ptr<f32>, %i_ptr: !tt.ptr<i32>, %h_ptr: !tt.ptr<f16>, %f_ptr: !tt.ptr<f32>, %b_ptr: !tt.ptr<i32>) {
    %r = tt.arange 0 to 16 : tensor<16xi32>
    %xs = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>>
    %xp = tt.addptr %xs, %r : tensor<16x!tt.ptr<f32>>, tensor<16xi32>
    %x = tt.load %xp : tensor<16x!tt.ptr<f32>> -> tensor<16xf32>
    %xi = tt.cast %x : tensor<16xf32> -> tensor<16xi32>
    %is = tt.splat %i_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %ip = tt.addptr %is, %r : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %ip, %xi : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    %xh = tt.cast %x : tensor<16xf32> -> tensor<16xf16>
    %hs = tt.splat %h_ptr : !tt.ptr<f16> -> tensor<16x!tt.ptr<f16>>
    %hp = tt.addptr %hs, %r : tensor<16x!tt.ptr<f16>>, tensor<16xi32>
    tt.store %hp, %xh : tensor<16x!tt.ptr<f16>>, tensor<16xf16>
    %rf = tt.cast %r : tensor<16xi32> -> tensor<16xf32>
    %fs = tt.splat %f_ptr : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>>
    %fp = tt.addptr %fs, %r : tensor<16x!tt.ptr<f32>>, tensor<16xi32>
    tt.store %fp, %rf : tensor<16x!tt.ptr<f32>>, tensor<16xf32>
    %xb = tt.cast %xi : tensor<16xi32> -> tensor<16xi1>
    %bi = tt.cast %xb : tensor<16xi1> -> tensor<16xi32>
    %bs = tt.splat %b_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %bp = tt.addptr %bs, %r : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %bp, %bi : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    func.return
  }
}"""


def test_casts():
    x = np.array([1.7, -1.7, 0.5, -0.5, 2.0, -2.0, 1e10, -1e10, np.nan, np.inf, 65504.0, 1e6, 0.1, 3.99, -3.99, 0],
                 np.float32)
    i, h, f, b = np.zeros(16, np.int32), np.zeros(16, np.float16), np.zeros(16, np.float32), np.zeros(16, np.int32)
    run(parse(CASTS), (1,), [x, i, h, f, b])
    assert i.tolist() == [1, -1, 0, 0, 2, -2, 2**31 - 1, -(2**31), 0, 2**31 - 1, 65504, 1000000, 0, 3, -3, 0]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h, x.astype(np.float16))
    np.testing.assert_array_equal(f, np.arange(16, dtype=np.float32))
    assert b.tolist() == [int(v != 0) for v in i]


# ----------------------------------------------------------------------------------------------------------
# control flow: scf.if with results, stores in branches, loops with per-program bounds
# ----------------------------------------------------------------------------------------------------------

CONTROL = """
builtin.module {
  func.func @k(%x_ptr: !tt.ptr<f32>, %out_ptr: !tt.ptr<f32>, %side_ptr: !tt.ptr<f32>, %flag: i32) {
    %pid = tt.program_id 0 : i32
    %c0 = tt.constant 0 : i32 -> i32
    %c1 = tt.constant 1 : i32 -> i32
    %c2 = tt.constant 2 : i32 -> i32
    %c8 = tt.constant 8 : i32 -> i32
    %r = tt.arange 0 to 8 : tensor<8xi32>
    %base = tt.mul %pid, %c8 : i32
    %bs = tt.splat %base : i32 -> tensor<8xi32>
    %offs = tt.add %bs, %r : tensor<8xi32>
    %xs = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %xp = tt.addptr %xs, %offs : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    %x = tt.load %xp : tensor<8x!tt.ptr<f32>> -> tensor<8xf32>
    %par = tt.mod %pid, %c2 : i32
    %odd = tt.cmp "eq", %par, %c1 : i32 -> i1
    %y = scf.if %odd -> (tensor<8xf32>) {
      %t = tt.add %x, %x : tensor<8xf32>
      %sp = tt.addptr %side_ptr, %pid : !tt.ptr<f32>, i32
      %one = tt.constant 1.0 : f32 -> f32
      tt.store %sp, %one : !tt.ptr<f32>, f32
      scf.yield %t : tensor<8xf32>
    } else {
      %t = tt.neg %x : tensor<8xf32>
      scf.yield %t : tensor<8xf32>
    }
    %on = tt.cmp "ne", %flag, %c0 : i32 -> i1
    %z = scf.if %on -> (tensor<8xf32>) {
      %e = tt.exp %y : tensor<8xf32>
      scf.yield %e : tensor<8xf32>
    } else {
      scf.yield %y : tensor<8xf32>
    }
    %n = tt.add %pid, %c1 : i32
    %acc0 = tt.constant 0.0 : f32 -> tensor<8xf32>
    %w = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (tensor<8xf32>) : i32 {
      %ib = tt.mul %i, %c8 : i32
      %ibs = tt.splat %ib : i32 -> tensor<8xi32>
      %io = tt.add %ibs, %r : tensor<8xi32>
      %ip = tt.addptr %xs, %io : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
      %xi = tt.load %ip : tensor<8x!tt.ptr<f32>> -> tensor<8xf32>
      %acc2 = tt.add %acc, %xi : tensor<8xf32>
      %big = tt.cmp "ge", %i, %c2 : i32 -> i1
      scf.if %big {
        %q = tt.addptr %side_ptr, %c8 : !tt.ptr<f32>, i32
        %q2 = tt.addptr %q, %pid : !tt.ptr<f32>, i32
        %iv = tt.cast %i : i32 -> f32
        tt.store %q2, %iv : !tt.ptr<f32>, f32
      }
      scf.yield %acc2 : tensor<8xf32>
    }
    %zw = tt.add %z, %w : tensor<8xf32>
    %os = tt.splat %out_ptr : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %op = tt.addptr %os, %offs : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    tt.store %op, %zw : tensor<8x!tt.ptr<f32>>, tensor<8xf32>
    func.return
  }
}"""


@pytest.mark.parametrize("flag", [0, 1])
def test_scf_if_and_divergent_for(flag):
    programs = 6
    x = np.random.default_rng(6).standard_normal(programs * 8).astype(np.float32)
    make = lambda: [x, np.zeros(programs * 8, np.float32), np.full(16, -1.0, np.float32), flag]  # noqa: E731
    _, out, side, _ = run_both(parse(CONTROL), (programs,), make)[0]
    rows = x.reshape(programs, 8)
    for p in range(programs):
        y = rows[p] * 2 if p % 2 else -rows[p]
        z = np.exp(y) if flag else y
        np.testing.assert_allclose(out[8 * p : 8 * p + 8], z + rows[: p + 1].sum(axis=0), rtol=1e-6)
    assert side[:programs].tolist() == [-1.0 if p % 2 == 0 else 1.0 for p in range(programs)]
    assert side[8 : 8 + programs].tolist() == [float(p) if p >= 2 else -1.0 for p in range(programs)]


RACE = """
builtin.module {
  func.func @k(%out_ptr: !tt.ptr<i32>) {
    %pid = tt.program_id 0 : i32
    %pid1 = tt.program_id 1 : i32
    %r = tt.arange 0 to 4 : tensor<4xi32>
    %os = tt.splat %out_ptr : !tt.ptr<i32> -> tensor<4x!tt.ptr<i32>>
    %op = tt.addptr %os, %r : tensor<4x!tt.ptr<i32>>, tensor<4xi32>
    %c10 = tt.constant 10 : i32 -> i32
    %v1 = tt.mul %pid1, %c10 : i32
    %v = tt.add %v1, %pid : i32
    %vs = tt.splat %v : i32 -> tensor<4xi32>
    tt.store %op, %vs : tensor<4x!tt.ptr<i32>>, tensor<4xi32>
    func.return
  }
}"""


def test_overlapping_stores_follow_program_order():
    (out,) = run_both(parse(RACE), (3, 4), lambda: [np.zeros(4, np.int32)])[0]
    assert out.tolist() == [32] * 4  # program (2, 3) is the last in x-fastest order


def test_batched_equals_per_program_2d_grid_softmax():
    x = np.random.default_rng(7).standard_normal((300, 50)).astype(np.float32)
    run_both(softmax(64), (300,), lambda: [np.zeros_like(x), x, 50, 50])


# ----------------------------------------------------------------------------------------------------------
# launch checking
# ----------------------------------------------------------------------------------------------------------

def test_argument_checks():
    module = vector_add(256)
    x = np.zeros(256, np.float32)
    with pytest.raises(KernelArgumentError, match="points to float32 elements, got an array of float64"):
        run(module, (1,), [x, np.zeros(256), x, 256])
    with pytest.raises(KernelArgumentError, match="takes 4 arguments, got 3"):
        run(module, (1,), [x, x, x])
    with pytest.raises(KernelArgumentError, match="does not fit in int32"):
        run(module, (1,), [x, x, x, 2**40])
    with pytest.raises(KernelArgumentError, match="pass a NumPy array"):
        run(module, (1,), [x, 3, x, 256])


def test_non_contiguous_arrays_are_memory_from_their_first_element():
    module, big = vector_add(256), np.zeros((256, 2), np.float32)
    x = np.arange(256, dtype=np.float32)
    run(module, (1,), [x, x, big[:, 0], 256])  # element offsets i address big[i // 2, i % 2]
    np.testing.assert_array_equal(big.reshape(-1)[:256], 2 * x)


def test_unsupported_op_is_reported():
    module = parse("""
builtin.module {
  func.func @k(%a: i32) {
    %b = arith.addi %a, %a : i32
    func.return
  }
}""")
    with pytest.raises(SimulatorError, match="cannot run arith.addi"):
        run(module, (1,), [1])


def test_empty_grid_runs_nothing():
    out = np.zeros(4, np.int32)
    run(parse(RACE), (0, 4), [out])
    assert (out == 0).all()


def compare_kernel(pred: str, el: str) -> ModuleOp:
    """out[i] = (a[i] <pred> b[i]) as 0/1, through tt.select and arith.constant."""
    t, e, pe = "tensor<8xi32>", f"tensor<8x{el}>", f"tensor<8x!tt.ptr<{el}>>"
    return parse(f"""
builtin.module {{
  func.func @k(%a_ptr: !tt.ptr<{el}>, %b_ptr: !tt.ptr<{el}>, %o_ptr: !tt.ptr<i32>) {{
    %r = tt.arange 0 to 8 : {t}
    %as = tt.splat %a_ptr : !tt.ptr<{el}> -> {pe}
    %ap = tt.addptr %as, %r : {pe}, {t}
    %a = tt.load %ap : {pe} -> {e}
    %bs = tt.splat %b_ptr : !tt.ptr<{el}> -> {pe}
    %bp = tt.addptr %bs, %r : {pe}, {t}
    %b = tt.load %bp : {pe} -> {e}
    %c = tt.cmp "{pred}", %a, %b : {e} -> tensor<8xi1>
    %one = arith.constant dense<1> : {t}
    %zero = arith.constant 0 : i32
    %zeros = tt.splat %zero : i32 -> {t}
    %v = tt.select %c, %one, %zeros : tensor<8xi1>, {t}
    %os = tt.splat %o_ptr : !tt.ptr<i32> -> tensor<8x!tt.ptr<i32>>
    %op = tt.addptr %os, %r : tensor<8x!tt.ptr<i32>>, {t}
    tt.store %op, %v : tensor<8x!tt.ptr<i32>>, {t}
    func.return
  }}
}}""")


@pytest.mark.parametrize("pred, py", [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")])
def test_compare_signed_and_nan(pred, py):
    ints_a = np.array([-1, 0, 1, -(2**31), 2**31 - 1, 5, -5, 3], np.int32)
    ints_b = np.array([1, 0, -1, 2**31 - 1, -(2**31), 5, 5, -3], np.int32)
    floats_a = np.array([np.nan, 1, np.nan, -0.0, np.inf, 1, -np.inf, 2], np.float32)
    floats_b = np.array([np.nan, np.nan, 1, 0.0, np.inf, 2, 0, 1], np.float32)
    for el, a, b in (("i32", ints_a, ints_b), ("f32", floats_a, floats_b)):
        out = np.zeros(8, np.int32)
        run(compare_kernel(pred, el), (1,), [a, b, out])
        assert out.tolist() == [int(eval(f"x {py} y")) for x, y in zip(a.tolist(), b.tolist())], el
