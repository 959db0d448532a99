"""`tinyton-fuse-patterns`: declarative fusion patterns (`*.pdl.mlir`, package data) → named regions.

Takes: a module of `func.func`s of tta ops. Gives: the same, with each matched chain outlined into a
`tta.fusion` region whose `kind` names the pattern (softmax, rmsnorm, ...); unmatched ops stay as they are.

The patterns are data: each `pdl.pattern` matches a DAG of tta ops and ends in
`pdl.rewrite %root with "outline_fusion"(%kind)`. xDSL 0.74's PDL interpreter matches and checks
native constraints but has no `apply_native_rewrite` and cannot create regions, so this pass runs
xDSL's `PDLMatcher` itself and implements the one external rewrite: outline the matched ops into a
`tta.fusion` of that kind. Adding a pattern needs a `.pdl.mlir` file, no Python.

Native constraints (what PDL cannot say): `has_one_use`, `used_only_by` (an intermediate used outside
the chain refuses the rewrite, since a template kernel writes only the root), `numel_below` (32-bit
indexing), `element_of` (two values of one element type) and `softmax_statistics` (a softmax's row max and sum
used only by it, or also by the rows' logsumexp, which the attention kernel stores too). "Same axis, keepdims" is
declarative: both reductions bind the same `pdl.attribute`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from math import prod

from xdsl.context import Context
from xdsl.dialects import func, pdl
from xdsl.dialects.builtin import Builtin, ModuleOp, StringAttr
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.parser import Parser
from xdsl.passes import ModulePass

from tinyton.analysis.attention import softmax_statistics
from tinyton.analysis.pass_inputs import check_array_program
from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.rewrites.attention import attention_scores, last_axis, outline_attention
from tinyton.rewrites.attention_backward import backward_groups
from tinyton.rewrites.attention_canonical import canonicalize_attention
from tinyton.rewrites.outline import Group, functions, order_groups, rebuild
from tinyton.rewrites.pdl_matcher import PDLMatcher

PATTERN_FILES = ("attention.pdl.mlir", "softmax.pdl.mlir", "rmsnorm.pdl.mlir")


def _uses(value: SSAValue) -> list[Operation]:
    return [u.operation for u in value.uses]


NATIVE_CONSTRAINTS: dict[str, Callable[..., bool]] = {
    "has_one_use": lambda v: len(_uses(v)) == 1,
    "used_only_by": lambda v, *ops: all(user in ops for user in _uses(v)),
    "numel_below": lambda v, limit: prod(shape_of(v.type)) < limit.value.data,
    "last_axis": last_axis,
    "attention_scores": attention_scores,
    "softmax_statistics": softmax_statistics,
    "element_of": lambda a, b: element_type(a.type) == element_type(b.type),
}


def _outline_fusion(matched: Sequence[Operation], kind: StringAttr) -> Group:
    """The external rewrite "outline_fusion": the matched ops become one region named `kind`."""
    return list(matched), kind.data


NATIVE_REWRITES: dict[str, Callable[..., Group]] = {
    "outline_fusion": _outline_fusion,
    "outline_attention": outline_attention,
}

COMMUTATIVE = (tta.AddOp, tta.MulOp, tta.MaximumOp, tta.MinimumOp, tta.AndOp, tta.OrOp, tta.XorOp)


def canonicalize_operands(fn: func.FuncOp) -> None:
    """Order commutative operands so patterns need one form: the larger array first, constants last."""

    def rank(v: SSAValue) -> tuple[int, int]:
        constant = isinstance(v, OpResult) and isinstance(v.op, tta.ConstantOp)
        return prod(shape_of(v.type)), 0 if constant else 1

    for op in fn.body.block.ops:
        if isinstance(op, COMMUTATIVE) and rank(op.rhs) > rank(op.lhs):
            op.operands = [op.rhs, op.lhs]


@dataclass
class FusionPattern:
    """One `pdl.pattern`, matched with xDSL's PDLMatcher and the native constraints above."""

    pattern: pdl.PatternOp

    @property
    def benefit(self) -> int:
        return self.pattern.benefit.value.data

    @cached_property
    def rewrite(self) -> pdl.RewriteOp:
        return next(op for op in self.pattern.body.ops if isinstance(op, pdl.RewriteOp))

    @cached_property
    def root_name(self) -> str | None:
        """The op name the root must have (None: any), checked before running the matcher."""
        root = self.rewrite.root
        assert isinstance(root, OpResult) and isinstance(root.op, pdl.OperationOp)
        return root.op.opName.data if root.op.opName is not None else None

    def match(self, op: Operation) -> Group | None:
        if self.root_name is not None and op.name != self.root_name:
            return None
        rewrite = self.rewrite
        root = rewrite.root
        assert isinstance(root, OpResult) and isinstance(root.op, pdl.OperationOp)
        matcher = PDLMatcher(native_constraints=NATIVE_CONSTRAINTS)
        if not matcher.match_operation(root, root.op, op):
            return None
        for check in self.pattern.body.ops:
            if isinstance(check, pdl.ApplyNativeConstraintOp) and not matcher.check_native_constraints(check):
                return None
        assert rewrite.name_ is not None, "fusion patterns end in `pdl.rewrite %root with \"...\"`"
        args = [matcher.get_constant_or_matched_value(a) for a in rewrite.external_args]
        matched = [v for v in matcher.matching_context.values() if isinstance(v, Operation)]
        return NATIVE_REWRITES[rewrite.name_.data](matched, *args)


_NAMED_OP = re.compile(r'pdl\.operation\s+"([\w.]+)"')
_PATTERN_START = re.compile(r"^\s*pdl\.pattern\b", re.MULTILINE)


@cache
def _pattern_text(name: str) -> str:
    return resources.files("tinyton.rewrites").joinpath(name).read_text()


@cache
def default_context() -> Context:
    """What the fusion passes need of a context: the patterns are `pdl` ops in a `builtin.module` (they name
    tta ops by string), so two dialects, not every dialect tinyton knows (a cold compile pays for each)."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(pdl.PDL)
    return ctx


@cache
def _parse_patterns(name: str) -> tuple[FusionPattern, ...]:
    module = Parser(default_context(), _pattern_text(name)).parse_module()
    return tuple(FusionPattern(p) for p in module.ops if isinstance(p, pdl.PatternOp))


def may_match(text: str, present: AbstractSet[str]) -> bool:
    """Whether some `pdl.pattern` of `text` names only ops in `present` (`pdl.operation "name"` matches that op
    alone, so a pattern naming an absent op cannot match)."""
    return any(named <= present for named in _named_ops(text))


@cache
def _named_ops(text: str) -> tuple[frozenset[str], ...]:
    """The op names each `pdl.pattern` of `text` names, read once per text (each compile asks again)."""
    text = re.sub(r"//[^\n]*", "", text)
    starts = [m.start() for m in _PATTERN_START.finditer(text)]
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    return tuple(frozenset(_NAMED_OP.findall(chunk)) for chunk in chunks)


def load_patterns(
    files: tuple[str, ...] = PATTERN_FILES, present: AbstractSet[str] | None = None
) -> tuple[FusionPattern, ...]:
    """Packaged `.pdl.mlir` files (all of them by default), each parsed once per process (matching only reads
    them); highest benefit first. Given `present`, the op names of the module to match, a file none of whose
    patterns can match there is not parsed: xDSL's parser takes ~3 ms a pattern, a tenth of a cold compile
    for three."""
    chosen = [name for name in files if present is None or may_match(_pattern_text(name), present)]
    patterns = [pattern for name in chosen for pattern in _parse_patterns(name)]
    return tuple(sorted(patterns, key=lambda p: -p.benefit))


def match_patterns(fn: func.FuncOp, patterns: Sequence[FusionPattern]) -> list[Group]:
    """Non-overlapping matches, roots visited last-to-first so larger chains win."""
    canonicalize_operands(fn)
    claimed: set[Operation] = set()
    groups: list[Group] = []
    for op in reversed(list(fn.body.block.ops)):
        if op in claimed:
            continue
        for pattern in patterns:
            group = pattern.match(op)
            if group is None:
                continue
            ops = [o for o in group[0] if not isinstance(o, tta.ConstantOp)]
            if claimed.isdisjoint(ops):
                claimed.update(ops)
                groups.append((ops, group[1]))
                break
    return groups


def plan_with_seeds(fn: func.FuncOp, seeds: Sequence[Group]) -> list[Group]:
    """The seeds plus every other op left alone (kind None), in a topological order."""
    claimed = {op for ops, _ in seeds for op in ops}
    rest = [([op], None) for op in fn.body.block.ops if op not in claimed and not isinstance(op, func.ReturnOp)]
    return order_groups([*seeds, *rest])


@dataclass(frozen=True)
class FusePatternsPass(ModulePass):
    """Outline every match of the packaged PDL patterns into a `tta.fusion` of the pattern's kind."""

    name = "tinyton-fuse-patterns"
    files = PATTERN_FILES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_array_program(op, self.name)
        attention = "attention.pdl.mlir" in self.files
        if attention:  # one form of attention for its pattern (every spelling)
            canonicalize_attention(op)
        patterns = load_patterns(self.files, {o.name for o in op.walk()})
        for fn in functions(op):
            backward = backward_groups(fn) if attention else []
            claimed = {o for ops, _ in backward for o in ops}
            seeds = [*backward, *(g for g in match_patterns(fn, patterns) if claimed.isdisjoint(g[0]))]
            if seeds:
                rebuild(fn, plan_with_seeds(fn, seeds))


@dataclass(frozen=True)
class FlashAttentionPass(FusePatternsPass):
    """Outline attention (`q @ kᵀ` → scale/bias/mask → softmax → `@ v`) into `tta.fusion` regions of kind
    "attention", each one flash-attention kernel; `tinyton-fuse` runs the same pattern among the others."""

    name = "tinyton-flash-attention"
    files = ("attention.pdl.mlir",)
