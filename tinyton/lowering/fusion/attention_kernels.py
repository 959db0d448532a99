"""The kernels of attention regions: the flash-attention forward (`attention.py`; flash-decoding's split KV
loop combined by its last programs, `attention_combine.py`; a float8 `p @ v`'s v copied transposed first,
`attention_values.py`) and FlashAttention-2's backward (`attention_backward.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects.builtin import i32
from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention
from tinyton.analysis.attention_backward import AttentionBackward
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dtypes import dtype_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.attention import emit_attention
from tinyton.lowering.fusion.attention_backward import BackwardBuffers, backward_blocks, emit_key_value_grads
from tinyton.lowering.fusion.attention_backward_rows import emit_delta, emit_query_grads
from tinyton.lowering.fusion.attention_blocks import (
    AttentionProblem,
    BlockChooser,
    Blocks,
    kv_split,
    packed_group_axes,
)
from tinyton.lowering.fusion.attention_combine import combine_in_last_chunk
from tinyton.lowering.fusion.attention_output import OutputLayout
from tinyton.lowering.fusion.attention_scores import score_arrays
from tinyton.lowering.fusion.attention_values import (
    VALUE_TRANSPOSE_BLOCKS,
    emit_value_transpose,
    transposed_values_shape,
    transposes_values,
    with_transposed_values,
)
from tinyton.lowering.fusion.emitter import Emitter, f32
from tinyton.lowering.fusion.kernel_spec import KernelSpec, finish_module, new_kernel
from tinyton.lowering.fusion.split import Scratch


def attention_problem(att: Attention) -> AttentionProblem:
    """The sizes that choose an attention region's tiling, and the type k and v are read as when the kernel
    casts them (a bf16 cache under f32 attention): the bytes a decode step's attention streams."""
    out = shape_of(att.pv.result.type)
    group = prod(out[a] for a in packed_group_axes(att))  # decoding packs a group's query heads as rows
    dtype = dtype_of(element_type(att.q.base.type)).name
    stored = att.k_stored.base if att.k_stored is not None and att.k_stored.ops else None
    kv_dtype = dtype_of(element_type(stored.type)).name if stored is not None else dtype
    return AttentionProblem(prod(out[:-2]) // group, out[-2] * group, shape_of(att.v.type)[-2], att.q.shape[-1],
                            out[-1], dtype, att.causal_offset is not None, "" if kv_dtype == dtype else kv_dtype,
                            len(score_arrays(att)))


def _region_pointers(fusion: tta.FusionOp, args: Sequence[SSAValue]) -> dict[SSAValue, SSAValue]:
    """The region's inputs and outputs -> the kernel arguments `new_kernel` made for them (its scratch follow)."""
    return dict(zip([*fusion.block.args, *fusion.yield_op.values], args))


def attention_kernels(fusion: tta.FusionOp, att: Attention, name: str, blocks: Blocks,
                      sm_count: int) -> list[KernelSpec]:
    """One flash-attention kernel (storing the rows' logsumexp too when the region returns it); when `kv_split`
    splits the KV loop for a GPU of `sm_count` SMs (never with a logsumexp to store), its programs store partials
    (f32 scratch buffers m, l and acc) and the last of each row block's combines them (`attention_combine.py`)."""
    problem = attention_problem(att)
    split = kv_split(problem, blocks, sm_count) if att.lse_result is None else None
    notes = {"block_m": blocks.bm, "block_n": blocks.bn}
    if split is None:
        copy = Scratch(transposed_values_shape(att), element_type(att.v.type)) if transposes_values(att) else None
        scratch = (copy,) if copy is not None else ()
        specs = []
        if copy is not None:  # v copied transposed first, for a float8 `p @ v`
            kernel, params = new_kernel(fusion, f"{name}_values", scratch)
            args = kernel.body.block.args
            grid = emit_value_transpose(Emitter(kernel.body.block), att, _region_pointers(fusion, args), args[-1])
            module = finish_module(kernel, VALUE_TRANSPOSE_BLOCKS.num_warps)
            specs.append(KernelSpec(f"{name}_values", "attention_values", module, grid,
                                    VALUE_TRANSPOSE_BLOCKS.num_warps, params, fusion, {}, scratch=scratch))
        kernel, params = new_kernel(fusion, name, scratch)
        args = kernel.body.block.args
        pointers = _region_pointers(fusion, args)
        reads = att
        if copy is not None:
            reads, pointers[att.v] = with_transposed_values(att), args[-1]
        grid = emit_attention(Emitter(kernel.body.block), reads, pointers, blocks, lse=pointers.get(att.lse_result),
                              sm_count=sm_count)
        module = finish_module(kernel, blocks.num_warps)
        return [*specs, KernelSpec(name, fusion.kind.data, module, grid, blocks.num_warps, params, fusion, notes,
                                   scratch=scratch)]
    rows = (split.count, problem.batch, problem.s_q)
    counters = Scratch((cdiv(problem.s_q, blocks.bm) * problem.batch,), i32, counter=True)
    scratch = (Scratch(rows, f32), Scratch(rows, f32), Scratch((*rows, problem.d_v), f32), counters)
    notes["kv_splits"] = split.count
    kernel, params = new_kernel(fusion, name, scratch)
    args = kernel.body.block.args
    pointers = _region_pointers(fusion, args)
    m, l_sum, acc, counter = args[len(pointers) :]
    em = Emitter(kernel.body.block)
    grid = emit_attention(em, att, pointers, blocks, split, (m, l_sum, acc))
    outputs = [(pointers[view.base], OutputLayout.of(att, view)) for view in att.outputs]
    combine_in_last_chunk(em, (m, l_sum, acc), counter, outputs, element_type(att.pv.result.type),
                          (split.count, problem.batch, problem.s_q, problem.d_v), blocks.bm, blocks.num_warps)
    module = finish_module(kernel, blocks.num_warps)
    return [KernelSpec(name, fusion.kind.data, module, grid, blocks.num_warps, params, fusion, notes, scratch=scratch)]


def attention_backward_kernels(fusion: tta.FusionOp, bwd: AttentionBackward, name: str,
                               choose_blocks: BlockChooser) -> list[KernelSpec]:
    """FlashAttention-2's backward (attention_backward.py): the forward kernel storing the rows' logsumexp
    (only without a given `lse`), then the delta, dk/dv and dq kernels; f32 scratch for delta, dq's sum (where the
    dk/dv kernel adds to it), lse and (when the program does not return it) the forward output."""
    att = bwd.scores
    rows = (prod(att.q.shape[:-2]) * att.q.shape[-2],)
    results = list(fusion.yield_op.values)
    o_scratch = bwd.lse is None and att.pv is not None and att.pv.result not in results
    if bwd.lse is None and bwd.o is None and att.pv is None:
        raise AssertionError("backward_of gives a forward output or a logsumexp")
    blocks = backward_blocks(bwd)
    delta = Scratch(rows, f32)
    dq_sum = Scratch((rows[0], next_power_of_2(max(16, att.q.shape[-1]))), f32) if blocks.dq is None else None
    lse_scratch = Scratch(rows, f32) if bwd.lse is None else None  # from the forward kernel
    o_shape = (*att.q.shape[:-2], att.q.shape[-2], shape_of(att.v.type)[-1])
    o_buffer = Scratch(o_shape, element_type(att.v.type)) if o_scratch else None
    scratch_t = tuple(b for b in (delta, dq_sum, lse_scratch, o_buffer) if b is not None)
    specs: list[KernelSpec] = []

    def kernel(stage: str, kind: str, warps: int, emit) -> None:
        kernel, params = new_kernel(fusion, f"{name}_{stage}", scratch_t)
        args = list(kernel.body.block.args)
        pointers = _region_pointers(fusion, args)
        extra = dict(zip(scratch_t, args[len(fusion.block.args) + len(results) :]))
        lse = pointers[bwd.lse] if lse_scratch is None else extra[lse_scratch]
        for st, value in ((att.k_stored, att.k), (att.v_stored, att.v)):
            if st is not None:  # read through reshapes and a cast of the array in memory, as the forward reads them
                pointers[value] = pointers[st.base]
        o_value = att.pv.result if bwd.lse is None else bwd.o_view.base if bwd.o_view is not None else bwd.o
        o = extra[o_buffer] if o_buffer is not None else pointers[o_value] if o_value is not None else None
        if o_scratch:
            pointers[att.pv.result] = o
        buffers = BackwardBuffers(lse, bwd.lse is not None, extra[delta], extra.get(dq_sum), o)
        grid = emit(Emitter(kernel.body.block), pointers, buffers)
        specs.append(KernelSpec(f"{name}_{stage}", kind, finish_module(kernel, warps), grid, warps, params, fusion,
                                {}, scratch=scratch_t))

    if bwd.lse is None:
        forward = choose_blocks(attention_problem(att))
        kernel("forward", "attention", forward.num_warps,
               lambda em, ptrs, buf: emit_attention(em, att, ptrs, forward, lse=buf.lse, lse_guarded=bwd.guarded))
    row_warps = blocks.row_blocks.num_warps
    kernel("delta", "attention_delta", row_warps, lambda em, ptrs, buf: emit_delta(em, bwd, ptrs, buf, blocks))
    kernel("dkdv", "attention_dkdv", blocks.dkdv.num_warps,
           lambda em, ptrs, buf: emit_key_value_grads(em, bwd, ptrs, buf, blocks))
    kernel("dq", "attention_dq", blocks.query_blocks.num_warps,
           lambda em, ptrs, buf: emit_query_grads(em, bwd, ptrs, buf, blocks))
    return specs
