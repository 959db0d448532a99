"""
Global memory: `tt.addptr`, `tt.load` and `tt.store`.

Accesses are PTX through inline asm, as in Triton: a thread moves `v` consecutive
elements with one `ld.global.v{1,2,4}.b32` (`.b16`/`.u8` under 32 bits), `v` chosen by
the axis analysis, predicated by the mask so that a masked-off address is never
dereferenced; masked loads first `mov` the `other` value into their outputs.

Loads are marked side-effecting, like Triton's: LLVM takes an asm call without side
effects for one that reads no memory, and `opt -O3` then merges a load with an identical
one across a store in between, or sinks it past the store. ptxas schedules the PTX
either way. Stores are predicated to one thread of each group of replicas.
"""

from __future__ import annotations


from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    IntegerType,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.assign import is_tile
from tinyton.lowering.tt_to_llvm.axis_info import pointee_bytes, vector_width
from tinyton.lowering.tt_to_llvm.context import (
    KernelContext,
    llvm_type,
    lowers,
    lowers_tile,
)
from tinyton.lowering.tt_to_llvm.elementwise import map_registers
from tinyton.lowering.tt_to_llvm.layouts import Layout


@lowers_tile(tt.AddPtrOp)
def lower_addptr(ctx: KernelContext, op: tt.AddPtrOp, layout: Layout | None) -> list[SSAValue]:
    elem = llvm_type(tt.element_type(op.ptr.type).pointee)
    return map_registers(
        ctx, lambda c, p, o: c.gep(p, o, elem), ctx.get(op.ptr, layout), ctx.get(op.offset, layout)
    )


class _Access:
    """How `v` elements of type `elem` travel: as PTX words of 16, 32 or 64 bits (at most 128 in all)."""

    def __init__(self, elem: Attribute, v: int):
        self.elem = elem
        self.bits = 8 if elem.bitwidth == 1 else elem.bitwidth  # booleans are bytes in memory
        total = v * self.bits
        self.word_bits = 64 if self.bits == 64 else min(32, total)
        self.words = max(1, total // self.word_bits)
        self.per_word = self.word_bits // self.bits
        self.reg = {64: i64, 32: i32}.get(self.word_bits, i16)
        self.constraint = {64: "l", 32: "r"}.get(self.word_bits, "h")
        vector = f".v{self.words}" if self.words > 1 else ""
        self.suffix = vector + (".u8" if self.word_bits == 8 else f".b{self.word_bits}")

    def operands(self, first: int) -> str:
        """`$first` or `{ $first, ... }`: the words of the access among the asm operands."""
        names = [f"${first + i}" for i in range(self.words)]
        return f"{{ {', '.join(names)} }}" if self.words > 1 else names[0]

    def pack(self, ctx: KernelContext, values: list[SSAValue]) -> list[SSAValue]:
        """Element registers to words, the first element in the low bits (little-endian)."""
        words = []
        for w in range(self.words):
            word = None
            for j, x in enumerate(values[w * self.per_word : (w + 1) * self.per_word]):
                bits = _to_bits(ctx, x, self.bits)
                if bits.type != self.reg:
                    bits = ctx.value(llvm.ZExtOp(bits, self.reg))
                part = ctx.int_op("shl", bits, ctx.const(j * self.bits, self.reg))
                word = part if word is None else ctx.int_op("or", word, part)
            words.append(word)
        return words

    def unpack(self, ctx: KernelContext, words: list[SSAValue]) -> list[SSAValue]:
        out = []
        for word in words:
            for j in range(self.per_word):
                bits = ctx.int_op("lshr", word, ctx.const(j * self.bits, self.reg))
                if self.bits != self.reg.bitwidth:
                    bits = ctx.value(llvm.TruncOp(bits, IntegerType(self.bits)))
                out.append(_from_bits(ctx, bits, self.elem))
        return out


def _to_bits(ctx: KernelContext, x: SSAValue, bits: int) -> SSAValue:
    if isinstance(x.type, AnyFloat):
        return ctx.value(llvm.BitcastOp(x, IntegerType(bits)))
    if x.type.bitwidth == 1:
        return ctx.value(llvm.ZExtOp(x, i8))
    return x


def _from_bits(ctx: KernelContext, bits: SSAValue, elem: Attribute) -> SSAValue:
    if isinstance(elem, AnyFloat):
        return ctx.value(llvm.BitcastOp(bits, elem))
    if elem.bitwidth == 1:
        return ctx.icmp("ne", bits, ctx.const(0, i8))
    return bits


def access_width(ctx: KernelContext, ptr: SSAValue, mask: SSAValue | None, layout: Layout | None) -> int:
    """Elements one access of a thread moves (the axis analysis' vector width)."""
    if layout is None:
        return 1
    mask_info = ctx.axis[mask] if mask is not None else None
    return vector_width(ctx.axis[ptr], mask_info, layout.contiguous_per_thread(), pointee_bytes(ptr.type))


def _inline_asm(
    ctx: KernelContext,
    lines: list[str],
    outputs: list[str],
    inputs: list[tuple[str, SSAValue]],
    result: Attribute | None,
) -> SSAValue | None:
    """Side-effecting inline asm: `outputs` are constraints, `inputs` (constraint, value)."""
    constraints = ",".join([*outputs, *(c for c, _ in inputs)])
    op = llvm.InlineAsmOp(
        "\n\t".join(lines), constraints, [v for _, v in inputs], [result] if result else [], has_side_effects=True
    )
    ctx.insert(op)
    return op.res


def cache_qualifier(op: tt.LoadOp | tt.StoreOp) -> str:
    """The PTX qualifier of Triton's `eviction_policy` (`.L1::evict_last`) or else of its `cache_modifier`
    (`.cg`); PTX takes one or the other."""
    if op.evict is not None:
        return f".L1::{op.evict.data}"
    return op.cache.data if op.cache is not None else ""


def l2_policy(ctx: KernelContext, op: tt.LoadOp | tt.StoreOp) -> SSAValue | None:
    """The L2 policy register of an `evict_first`/`evict_last` access, as Triton emits one on sm_80 and later
    (an unnamed target counts as one): `createpolicy.fractional.L2::<evict>.b64 $0, 1.0`, one per op, without
    side effects (LLVM may share it); the access then takes `.L2::cache_hint` and the register. The L1
    qualifier alone, which tinyton emitted before, leaves L2 as it is: on an H100 Triton's `evict_last` copy
    of 16x262144 ran 10 % (fp32) to 39 % (fp16) faster under do_bench than its plain one."""
    if op.evict is None or op.evict.data not in ("evict_first", "evict_last"):
        return None
    if ctx.sm < 80:
        return None
    asm = llvm.InlineAsmOp(
        f"createpolicy.fractional.L2::{op.evict.data}.b64 $0, 1.0;", "=l", [], [i64], has_side_effects=False
    )
    ctx.insert(asm)
    return asm.res


def _hinted(qualifier: str, policy: SSAValue | None) -> str:
    return qualifier + (".L2::cache_hint" if policy is not None else "")


def _load(
    ctx: KernelContext,
    ptr: SSAValue,
    pred: SSAValue | None,
    other: list[SSAValue] | None,
    a: _Access,
    qualifier: str = "",
    policy: SSAValue | None = None,
    volatile: bool = False,
) -> list[SSAValue]:
    """One predicated vector load; operands: words $0.., address, `other` words, L2 policy, predicate.
    A volatile load is `ld.volatile.global` (PTX takes no cache qualifier with it)."""
    n = a.words
    inputs = [("l", ptr)]
    lines, guard, hint = [], "", ""
    if pred is not None:
        fills = [f"${n + 1 + i}" for i in range(n)] if other is not None else ["0"] * n
        lines = [f"mov.b{a.reg.bitwidth} ${i}, {fill};" for i, fill in enumerate(fills)]
        if other is not None:
            inputs += [(a.constraint, w) for w in a.pack(ctx, other)]
    if policy is not None:
        hint = f", ${n + len(inputs)}"
        inputs.append(("l", policy))
    if pred is not None:
        inputs.append(("b", pred))
        guard = f"@${n + len(inputs) - 1} "
    space = "volatile.global" if volatile else f"global{_hinted(qualifier, policy)}"
    lines.append(f"{guard}ld.{space}{a.suffix} {a.operands(0)}, [ ${n} + 0 ]{hint};")
    result = llvm.LLVMStructType.from_type_list([a.reg] * n) if n > 1 else a.reg
    asm = _inline_asm(ctx, lines, [f"={a.constraint}"] * n, inputs, result)
    assert asm is not None
    if n == 1:
        return a.unpack(ctx, [asm])
    words = [ctx.value(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [i]), asm, a.reg)) for i in range(n)]
    return a.unpack(ctx, words)


def _store(
    ctx: KernelContext,
    ptr: SSAValue,
    pred: SSAValue | None,
    values: list[SSAValue],
    a: _Access,
    qualifier: str = "",
    policy: SSAValue | None = None,
) -> None:
    """One predicated vector store; operands: address, words, L2 policy, predicate."""
    inputs = [("l", ptr), *((a.constraint, w) for w in a.pack(ctx, values))]
    guard, hint = "", ""
    if policy is not None:
        hint = f", ${len(inputs)}"
        inputs.append(("l", policy))
    if pred is not None:
        inputs.append(("b", pred))
        guard = f"@${len(inputs) - 1} "
    line = f"{guard}st.global{_hinted(qualifier, policy)}{a.suffix} [ $0 + 0 ], {a.operands(1)}{hint};"
    _inline_asm(ctx, [line], [], inputs, None)


def load_words(ctx: KernelContext, ptr: SSAValue, pred: SSAValue | None, elem: Attribute, v: int) -> list[SSAValue]:
    """`v` elements at `ptr` as one predicated access (zeros where `pred` is false)."""
    return _load(ctx, ptr, pred, None, _Access(elem, v))


@lowers_tile(tt.LoadOp)
def lower_load(ctx: KernelContext, op: tt.LoadOp, layout: Layout | None) -> list[SSAValue]:
    ptrs = ctx.get(op.ptr, layout)
    masks = ctx.get(op.mask, layout) if op.mask is not None else None
    others = ctx.get(op.other, layout) if op.other is not None and masks is not None else None
    v = access_width(ctx, op.ptr, op.mask, layout)
    access = _Access(llvm_type(op.result.type), v)
    volatile = op.volatile is not None
    qualifier, policy = ("", None) if volatile else (cache_qualifier(op), l2_policy(ctx, op))
    out: list[SSAValue] = []
    for g in range(0, len(ptrs), v):
        pred = masks[g] if masks is not None else None
        others_g = others[g : g + v] if others is not None else None
        out += _load(ctx, ptrs[g], pred, others_g, access, qualifier, policy, volatile)
    return out


@lowers(tt.StoreOp)
def lower_store(ctx: KernelContext, op: tt.StoreOp) -> None:
    layout = ctx.assign.anchor([op.value, op.ptr, op.mask], op.ptr) if is_tile(op.ptr) else None
    ptrs = ctx.get(op.ptr, layout)
    values = ctx.get(op.value, layout)
    masks = ctx.get(op.mask, layout) if op.mask is not None else None
    replica = ctx.replica_predicate(layout)
    v = access_width(ctx, op.ptr, op.mask, layout)
    access = _Access(llvm_type(op.value.type), v)
    qualifier, policy = cache_qualifier(op), l2_policy(ctx, op)
    for g in range(0, len(ptrs), v):
        pred = ctx.all_of([masks[g] if masks is not None else None, replica])
        _store(ctx, ptrs[g], pred, values[g : g + v], access, qualifier, policy)
