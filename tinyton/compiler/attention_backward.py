"""`attention_backward`: the gradients of scaled-dot-product attention from the forward's saved output and
logsumexp, for callers outside array programs (the torch backend's attention backward).

It writes the textbook backward as a tta program over grouped heads (`backward_module`: `p = exp(s - lse)`, `dv = pᵀ do`,
`ds = p (do vᵀ - rowsum(do o))`, `dq = ds k c`, `dk = dsᵀ q c`, grouped-query sums), which the attention
backward rewrite turns into FlashAttention-2's three kernels (tinyton/lowering/fusion/attention_backward.py),
and caches the compiled program per shapes, dtypes, scale and mask.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyton.compiler.program import ArrayProgram, build_program
from tinyton.dialects import tinyton_context
from tinyton.dtypes import dtype_of
from tinyton.errors import CompilationError

_MINUS_INF = {"f16": "0xfc00", "bf16": "0xff80", "f32": "0xff800000"}


def _tensor(shape: tuple[int, ...], element: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def backward_module(q: tuple[int, ...], k: tuple[int, ...], d_v: int, dtype: str, scale: float,
                    causal_offset: int | None = None, bias: tuple[int, ...] | None = None,
                    bias_dtype: str | None = None) -> ModuleOp:
    """The textbook backward over grouped heads: q, o, do `(B, H_kv, G, S_q, D)`, k, v `(B, H_kv, 1, S_kv, D)`,
    lse `(B, H_kv, G, S_q, 1)` f32, an additive `bias` broadcasting to the scores; keys `j <= i +
    causal_offset` kept when the offset is given. Returns dq, dk, dv (dk and dv summed over the group when
    G > 1: `(B, H_kv, S_kv, D)`)."""
    b, h_kv, g, s_q, d = q
    s_kv = k[-2]
    t = str(dtype_of(dtype).ir)
    v5, o5 = (b, h_kv, 1, s_kv, d_v), (b, h_kv, g, s_q, d_v)
    s5, row5, st5 = (b, h_kv, g, s_q, s_kv), (b, h_kv, g, s_q, 1), (b, h_kv, g, s_kv, s_q)
    kt5, vt5 = (b, h_kv, 1, d, s_kv), (b, h_kv, 1, d_v, s_kv)
    dk5, dv5 = (b, h_kv, g, s_kv, d), (b, h_kv, g, s_kv, d_v)
    perm = "[0, 1, 2, 4, 3]"
    T = lambda shape, e=t: _tensor(shape, e)  # noqa: E731
    lines = [
        f"%kt = tta.transpose %k permutation = {perm} : {T(k)} -> {T(kt5)}",
        f"%qk = tta.matmul %q, %kt : {T(q)}, {T(kt5)} -> {T(s5)}",
        f"%c = tta.constant {scale!r} : {t} -> {t}",
        f"%s0 = tta.mul %qk, %c : {T(s5)}, {t} -> {T(s5)}",
    ]
    scores = "%s0"
    bt = str(dtype_of(bias_dtype or dtype).ir)
    if bias is not None:
        if bt != t:
            lines.append(f"%biasc = tta.cast %bias : {T(bias, bt)} -> {T(bias)}")
        lines.append(f"%s1 = tta.add %s0, %bias{'c' if bt != t else ''} : {T(s5)}, {T(bias)} -> {T(s5)}")
        scores = "%s1"
    if causal_offset is not None:
        keep = T((s_q, s_kv), "i1")
        lines += [
            f"%i0 = tta.arange 0 to {s_q} : tensor<{s_q}xi32>",
            f"%i1 = tta.reshape %i0 : tensor<{s_q}xi32> -> tensor<{s_q}x1xi32>",
            f"%off = tta.constant {causal_offset} : i32 -> i32",
            f"%i = tta.add %i1, %off : tensor<{s_q}x1xi32>, i32 -> tensor<{s_q}x1xi32>",
            f"%j = tta.arange 0 to {s_kv} : tensor<{s_kv}xi32>",
            f"%keep = tta.cmp \"ge\", %i, %j : tensor<{s_q}x1xi32>, tensor<{s_kv}xi32> -> {keep}",
            f"%ninf = tta.constant {_MINUS_INF[t]} : {t} -> {t}",
            f"%s2 = tta.where %keep, {scores}, %ninf : {keep}, {T(s5)}, {t} -> {T(s5)}",
        ]
        scores = "%s2"
    if t != "f32":
        lines.append(f"%sf = tta.cast {scores} : {T(s5)} -> {T(s5, 'f32')}")
        scores = "%sf"
    lines += [
        f"%centered = tta.sub {scores}, %lse : {T(s5, 'f32')}, {T(row5, 'f32')} -> {T(s5, 'f32')}",
        f"%pf = tta.exp %centered : {T(s5, 'f32')}",
    ]
    p = "%pf"
    if t != "f32":
        lines.append(f"%p = tta.cast %pf : {T(s5, 'f32')} -> {T(s5)}")
        p = "%p"
    lines += [
        f"%pt = tta.transpose {p} permutation = {perm} : {T(s5)} -> {T(st5)}",
        f"%dv5 = tta.matmul %pt, %do : {T(st5)}, {T(o5)} -> {T(dv5)}",
        f"%vt = tta.transpose %v permutation = {perm} : {T(v5)} -> {T(vt5)}",
        f"%dp = tta.matmul %do, %vt : {T(o5)}, {T(vt5)} -> {T(s5)}",
        f"%od = tta.mul %do, %o : {T(o5)}, {T(o5)} -> {T(o5)}",
        f"%delta = tta.reduce_sum %od axis = 4 keepdims : {T(o5)} -> {T(row5)}",
        f"%diff = tta.sub %dp, %delta : {T(s5)}, {T(row5)} -> {T(s5)}",
        f"%ds = tta.mul {p}, %diff : {T(s5)}, {T(s5)} -> {T(s5)}",
        f"%dqm = tta.matmul %ds, %k : {T(s5)}, {T(k)} -> {T(q)}",
        f"%dq = tta.mul %dqm, %c : {T(q)}, {t} -> {T(q)}",
        f"%dst = tta.transpose %ds permutation = {perm} : {T(s5)} -> {T(st5)}",
        f"%dkm = tta.matmul %dst, %q : {T(st5)}, {T(q)} -> {T(dk5)}",
        f"%dk5 = tta.mul %dkm, %c : {T(dk5)}, {t} -> {T(dk5)}",
    ]
    dk, dv = "%dk5", "%dv5"
    dk_t, dv_t = dk5, dv5
    if g > 1:  # the gradients of k and v broadcast over the group: summed over it
        dk_t, dv_t = (b, h_kv, s_kv, d), (b, h_kv, s_kv, d_v)
        lines += [f"%dk = tta.reduce_sum %dk5 axis = 2 : {T(dk5)} -> {T(dk_t)}",
                  f"%dv = tta.reduce_sum %dv5 axis = 2 : {T(dv5)} -> {T(dv_t)}"]
        dk, dv = "%dk", "%dv"
    args = [f"%q: {T(q)}", f"%k: {T(k)}", f"%v: {T(v5)}", f"%o: {T(o5)}", f"%lse: {T(row5, 'f32')}", f"%do: {T(o5)}"]
    if bias is not None:
        args.append(f"%bias: {T(bias, bt)}")
    types = f"{T(q)}, {T(dk_t)}, {T(dv_t)}"
    body = "\n    ".join(lines)
    text = f"""func.func @attention_backward({", ".join(args)}) -> ({types}) attributes {{tta.returns_tuple}} {{
    {body}
    func.return %dq, {dk}, {dv} : {types}
}}"""
    return Parser(tinyton_context(), text).parse_module()


@cache
def backward_program(q: tuple[int, ...], k: tuple[int, ...], d_v: int, dtype: str, scale: float,
                     causal_offset: int | None, bias: tuple[int, ...] | None, bias_dtype: str | None) -> ArrayProgram:
    """The compiled `backward_module` (cached): three launches, delta, dk/dv and dq."""
    module = backward_module(q, k, d_v, dtype, scale, causal_offset, bias, bias_dtype)
    return build_program(module, "attention_backward", tuple(range(7 if bias is not None else 6)))


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


def _dtype(x: Any) -> str:
    return dtype_of(x.dtype).name


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, scale: float, *, causal: bool = False,
                       causal_offset: int | None = None, bias: Any = None) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `o = softmax(q kᵀ scale + bias [causal]) v`, FlashAttention-2's backward: three
    launches, no S x S buffer.

    q, o, do: `(B, H, S_q, D)`; k, v: `(B, H_kv, S_kv, D)` with H a multiple of H_kv (grouped-query: query
    head h reads key/value head h // (H / H_kv)); lse: `(B, H, S_q)` float32, the natural-log logsumexp of
    each row's scaled (and biased, masked) scores, as the forward saves it (-inf for a row that sees no key).
    `causal` keeps the keys `j <= i` (top-left aligned, torch's `is_causal`), `causal_offset=c` the keys
    `j <= i + c` (c = S_kv - S_q: bottom-right aligned); `bias` broadcasts to `(B, H, S_q, S_kv)`. Arrays
    are NumPy arrays or torch tensors (CUDA tensors stay on the GPU; they are reshaped, so contiguous ones are
    not copied); fp16, bf16 or fp32, all of one dtype (bias may be any float dtype)."""
    shapes = [_shape(x) for x in (q, k, v, o, do)]
    (b, h, s_q, d), (bk, h_kv, s_kv, dk_), (bv, hv, sv, d_v) = shapes[:3]
    if (bk, dk_) != (b, d) or (bv, hv, sv) != (b, h_kv, s_kv) or h % h_kv or shapes[3] != shapes[4] != (b, h, s_q, d_v):
        raise CompilationError(f"attention_backward: q {shapes[0]}, k {shapes[1]}, v {shapes[2]}, o {shapes[3]}, "
                               f"do {shapes[4]} are not (B, H, S_q, D), (B, H_kv, S_kv, D), (B, H_kv, S_kv, D_v), "
                               f"(B, H, S_q, D_v) with H a multiple of H_kv")
    if _shape(lse) != (b, h, s_q):
        raise CompilationError(f"attention_backward: lse has shape {_shape(lse)}, expected {(b, h, s_q)} (float32)")
    offset = causal_offset if causal_offset is not None else 0 if causal else None
    g = h // h_kv
    grouped, single = (b, h_kv, g), (b, h_kv, 1)
    args = [q.reshape(*grouped, s_q, d), k.reshape(*single, s_kv, d), v.reshape(*single, s_kv, d_v),
            o.reshape(*grouped, s_q, d_v), lse.reshape(*grouped, s_q, 1), do.reshape(*grouped, s_q, d_v)]
    if bias is not None:
        b4 = (1,) * (4 - len(_shape(bias))) + _shape(bias)
        heads = (h_kv, g) if b4[1] == h else (1, 1)
        args.append(bias.reshape(b4[0], *heads, *b4[2:]))
    program = backward_program(_shape(args[0]), _shape(args[1]), d_v, _dtype(q), float(scale), offset,
                               _shape(args[6]) if bias is not None else None, _dtype(bias) if bias is not None else None)
    dq, dk, dv = program(*args)
    return dq.reshape(b, h, s_q, d), dk.reshape(b, h_kv, s_kv, d), dv.reshape(b, h_kv, s_kv, d_v)
