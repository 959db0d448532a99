"""Block sizes of flash-attention regions: measured once per GPU, dtype, head dim, causality and sequence
class, with the `Tuner` the matmul tiles use (tinyton/compiler/autotune.py).

On a GPU, the first attention of a class times each of `attention_blocks.candidates` on a standalone
attention of the problem's exact shape (the same launches the program makes: one kernel, or partials and
combine when the KV loop is split) and keeps the fastest in the disk cache. For decoding the candidates
include the number of KV chunks (flash-decoding's split), so the split is measured too (the class then
also counts batch x heads). Without a GPU (or with `TINYTON_TUNE=0`), for 32-bit
inputs (one candidate) and below `TUNE_MIN_FLOPS` and `TUNE_MIN_BYTES`, the lowering's default is used.
"""

from __future__ import annotations

from functools import partial

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyton.compiler.autotune import Timer, Tuner, tuning_enabled
from tinyton.compiler.tuning_runs import Samples, compile_candidates_ahead, program_timer
from tinyton.dialects import tinyton_context
from tinyton.dtypes import dtype_of
from tinyton.intmath import next_power_of_2
from tinyton.lowering.fusion.attention_blocks import (
    AttentionProblem,
    Blocks,
    candidates,
    default_blocks,
)
from tinyton.runtime import driver

TUNER: Tuner[Blocks] = Tuner("attention", decode=lambda d: Blocks(**d))
TUNE_MIN_FLOPS = 1 << 26
"""Attentions below this many FLOPs (4 x batch x S_q x S_kv x D) take the default blocks: a few
microseconds of work, against seconds to compile and time the candidates. A decode step over a
4096-key cache for 8 x 32 heads (2^29) is tuned."""

TUNE_MIN_BYTES = 1 << 20
"""...or reading at least this many bytes of keys and values: decoding does few FLOPs over a cache it must
stream (Llama-3.2-1B's 8 key/value heads at 1024 positions: 2 MiB a layer), and its KV split decides how
close to the copy bandwidth that gets."""


def worth_tuning(p: AttentionProblem) -> bool:
    """Whether `p` takes long enough on a GPU, by its FLOPs or by its key and value bytes, to be measured."""
    kv_bytes = p.batch * p.s_kv * (p.d + p.d_v) * p.kv_element_bytes
    return 4 * p.batch * p.s_q * p.s_kv * p.d >= TUNE_MIN_FLOPS or kv_bytes >= TUNE_MIN_BYTES


def attention_blocks(problem: AttentionProblem) -> Blocks:
    """The blocks for `problem`: tuned on this GPU, or the default without one or for a small problem."""
    p = problem
    if not tuning_enabled() or not worth_tuning(p):
        return default_blocks(p)
    device = driver.device()
    options = candidates(p, device.sm_count)
    if len(options) == 1:
        return default_blocks(p)
    decoding = any(b.splits for b in options)  # the split depends on how many programs batch x heads give
    key = (device.name, p.dtype, p.d, p.d_v, p.causal, p.seq_class(), *((next_power_of_2(p.batch),) if decoding else ()),
           *((p.kv_dtype,) if p.kv_dtype else ()), *((f"{p.score_arrays} score arrays",) if p.score_arrays else ()))
    samples: Samples = {}
    timer = lambda blocks: _timer(p, blocks, device.sm_count, samples)
    return TUNER.choose(key, options, timer, default=default_blocks(p), ahead=partial(_compile_ahead, p, device.sm_count))


_MINUS_INF = {"f16": "0xfc00", "bf16": "0xff80", "f32": "0xff800000", "f64": "0xfff0000000000000"}
"""-inf as MLIR writes it, per float type."""


def attention_module(p: AttentionProblem) -> ModuleOp:
    """softmax(q kᵀ / sqrt(D) [causal] [+ bias...]) v over `[batch, S, D]` arrays, as the frontend traces it; k and
    v stored as `p.kv_dtype` and cast, where the problem's are (a bf16 cache under f32 attention); `p.score_arrays`
    `[S_q, S_kv]` arrays added to the scores, each read block by block as a bias is. Float8 operands multiply into
    float32 (ml_dtypes' NumPy): the scores and softmax are float32, the probabilities cast back for `p @ v`
    (FlashAttention-3's e4m3 forward)."""
    t = str(dtype_of(p.dtype).ir)
    float8 = p.dtype.startswith("float8")
    score_t = "f32" if float8 else t
    sizes = ((p.s_q, p.d), (p.s_kv, p.d), (p.s_kv, p.d_v))
    q, k, v = (f"tensor<{p.batch}x{s}x{d}x{t}>" for s, d in sizes)
    o = f"tensor<{p.batch}x{p.s_q}x{p.d_v}x{score_t}>"
    inputs, casts = f"%q: {q}, %k: {k}, %v: {v}", ""
    if p.kv_dtype:
        stored = str(dtype_of(p.kv_dtype).ir)
        k_in, v_in = (f"tensor<{p.batch}x{p.s_kv}x{d}x{stored}>" for d in (p.d, p.d_v))
        inputs = f"%q: {q}, %ks: {k_in}, %vs: {v_in}"
        casts = f"""
    %k = tta.cast %ks : {k_in} -> {k}
    %v = tta.cast %vs : {v_in} -> {v}"""
    kt, s = f"tensor<{p.batch}x{p.d}x{p.s_kv}x{t}>", f"tensor<{p.batch}x{p.s_q}x{p.s_kv}x{score_t}>"
    bias_type = f"tensor<{p.s_q}x{p.s_kv}x{score_t}>"
    inputs += "".join(f", %bias{i}: {bias_type}" for i in range(p.score_arrays))
    scores, biases = "scaled", ""
    for i in range(p.score_arrays):
        biases += f"""
    %biased{i} = tta.add %{scores}, %bias{i} : {s}, {bias_type} -> {s}"""
        scores = f"biased{i}"
    row, keep = f"tensor<{p.batch}x{p.s_q}x1x{score_t}>", f"tensor<{p.s_q}x{p.s_kv}xi1>"
    mask = f"""
    %i0 = tta.arange 0 to {p.s_q} : tensor<{p.s_q}xi32>
    %i1 = tta.reshape %i0 : tensor<{p.s_q}xi32> -> tensor<{p.s_q}x1xi32>
    %c = tta.constant {p.s_kv - p.s_q} : i32 -> i32
    %i = tta.add %i1, %c : tensor<{p.s_q}x1xi32>, i32 -> tensor<{p.s_q}x1xi32>
    %j = tta.arange 0 to {p.s_kv} : tensor<{p.s_kv}xi32>
    %keep = tta.cmp "ge", %i, %j : tensor<{p.s_q}x1xi32>, tensor<{p.s_kv}xi32> -> {keep}
    %ninf = tta.constant {_MINUS_INF[score_t]} : {score_t} -> {score_t}
    %s = tta.where %keep, %{scores}, %ninf : {keep}, {s}, {score_t} -> {s}""" if p.causal else ""
    masked = "s" if p.causal else scores
    narrowed = f"tensor<{p.batch}x{p.s_q}x{p.s_kv}x{t}>"
    cast = f"""
    %pc = tta.cast %p : {s} -> {narrowed}""" if float8 else ""
    text = f"""func.func @tune_attention({inputs}) -> {o} {{{casts}
    %kt = tta.transpose %k permutation = [0, 2, 1] : {k} -> {kt}
    %qk = tta.matmul %q, %kt : {q}, {kt} -> {s}
    %scale = tta.constant {p.d ** -0.5} : {score_t} -> {score_t}
    %scaled = tta.mul %qk, %scale : {s}, {score_t} -> {s}{biases}{mask}
    %m = tta.reduce_max %{masked} axis = 2 keepdims : {s} -> {row}
    %d = tta.sub %{masked}, %m : {s}, {row} -> {s}
    %e = tta.exp %d : {s}
    %l = tta.reduce_sum %e axis = 2 keepdims : {s} -> {row}
    %p = tta.div %e, %l : {s}, {row} -> {s}{cast}
    %o = tta.matmul %{"pc" if float8 else "p"}, %v : {narrowed if float8 else s}, {v} -> {o}
    func.return %o : {o}
}}"""
    return Parser(tinyton_context(), text).parse_module()


def _compile_ahead(p: AttentionProblem, sm_count: int, options: list[Blocks]) -> None:
    """Every candidate's kernels compiled at once, in worker processes, before they are timed one by one."""
    compile_candidates_ahead(attention_module(p), True, "choose_blocks", options, sm_count=sm_count)


def _timer(p: AttentionProblem, blocks: Blocks, sm_count: int, samples: Samples | None = None) -> Timer:
    """A timer of the launches of the attention of `p` tiled by `blocks` on a GPU of `sm_count` SMs."""
    return program_timer(attention_module(p), fuse=True, samples=samples, choose_blocks=lambda _: blocks,
                         sm_count=sm_count)
