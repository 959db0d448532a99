"""`tinyton graph file.py:function --shape 4096x1000`: draw how an array program was fused.

Ops are nodes, each `tta.fusion` is a `subgraph cluster_N` labelled with its kind and launch index,
edges are SSA uses traced through fusion boundaries (block argument -> the operand's producer, fusion
result -> the yielded value's producer), so one picture shows both the dataflow and the kernels.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from tinyton.cli.loading import load_function
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of
from tinyton.dialects.tta import program_function
from tinyton.frontend.programs import fused_modules

FORMATS = ("dot", "svg", "png")

_FREE_OPS = (tta.ConstantOp,)
"""Ops that never become launches of their own (scalars folded into their users)."""


def count_launches(module: ModuleOp) -> int:
    """Kernels this module launches: one per `tta.fusion`, one per other compute op outside fusions."""
    ops = list(program_function(module).body.block.ops)
    return sum(1 for op in ops if not isinstance(op, (*_FREE_OPS, func.ReturnOp)))


def fusions(module: ModuleOp) -> list[tta.FusionOp]:
    """The module's fusion regions in launch (program) order."""
    return [op for op in program_function(module).body.block.ops if isinstance(op, tta.FusionOp)]


def _quote(text: str) -> str:
    """A DOT string; real newlines become DOT's `\\n` line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _type_label(value: SSAValue) -> str:
    shape = shape_of(value.type)
    return ("x".join(map(str, shape)) + " " if shape else "") + tta.dtype_name(value.type)


def _op_label(op: Operation) -> str:
    name = op.name.removeprefix("tta.")
    if isinstance(op, tta.ConstantOp):
        return f"{op.value.value.data:g}"
    details = []
    for prop in ("predicate", "axis"):
        if prop in op.properties:
            attr = op.properties[prop]
            details.append(f"{prop}={getattr(getattr(attr, 'value', attr), 'data', attr)}")
    if getattr(op, "keepdims", None) is not None:
        details.append("keepdims")
    label = " ".join([name, *details])
    return f"{label}\n{_type_label(op.results[0])}" if op.results else label


class _DotWriter:
    """Assigns node ids and resolves SSA values to the node that really produces them."""

    def __init__(self) -> None:
        self.ids: dict[object, str] = {}
        self.lines: list[str] = []

    def node_id(self, key: object) -> str:
        return self.ids.setdefault(key, f"n{len(self.ids)}")

    def producer(self, value: SSAValue) -> str:
        """The node of the op (or function argument) behind `value`, looking through fusions."""
        if isinstance(value, BlockArgument) and isinstance(value.block.parent_op(), tta.FusionOp):
            return self.producer(value.block.parent_op().operands[value.index])
        if isinstance(value, OpResult) and isinstance(value.op, tta.FusionOp):
            return self.producer(value.op.yield_op.values[value.index])
        return self.node_id(value.op if isinstance(value, OpResult) else value)

    def op_node(self, op: Operation, indent: str) -> None:
        shape = "box" if not isinstance(op, tta.ConstantOp) else "plaintext"
        self.lines.append(f"{indent}{self.node_id(op)} [label={_quote(_op_label(op))}, shape={shape}];")


def _ops(block_ops: Iterator[Operation]) -> Iterator[Operation]:
    for op in block_ops:
        if not isinstance(op, (tta.YieldOp, func.ReturnOp)):
            yield op


def to_dot(module_before: ModuleOp, module_after: ModuleOp) -> str:
    """DOT text of the fused program `module_after`; `module_before` gives the unfused launch count."""
    fn = program_function(module_after)
    fused, unfused = count_launches(module_after), count_launches(module_before)
    w = _DotWriter()
    title = f"{fn.sym_name.data}: {fused} launch{'es' * (fused != 1)} (fused) / {unfused} unfused"
    w.lines += [
        "digraph fusion {",
        f"  label={_quote(title)}; labelloc=t; fontsize=16; rankdir=TB;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for arg in fn.body.block.args:
        name = arg.name_hint or f"arg{arg.index}"
        label = _quote(name + "\n" + _type_label(arg))
        w.lines.append(f"  {w.node_id(arg)} [label={label}, shape=ellipse];")
    edges: list[tuple[str, str]] = []
    launch = 0
    for op in _ops(iter(fn.body.block.ops)):
        if isinstance(op, tta.FusionOp):
            w.lines += [
                f"  subgraph cluster_{launch} {{",
                f"    label={_quote(f'#{launch} {op.kind.data}')}; style=rounded; color=blue;",
            ]
            for inner in _ops(op.walk()):
                if inner is not op:
                    w.op_node(inner, "    ")
                    edges += [(w.producer(v), w.node_id(inner)) for v in inner.operands]
            w.lines.append("  }")
        else:
            w.op_node(op, "  ")
            edges += [(w.producer(v), w.node_id(op)) for v in op.operands]
        launch += not isinstance(op, _FREE_OPS)
    ret = fn.body.block.last_op
    for i, value in enumerate(ret.operands if ret else ()):
        out = w.node_id(("out", i))
        label = _quote(f"result {i}\n" + _type_label(value))
        w.lines.append(f"  {out} [label={label}, shape=ellipse];")
        edges.append((w.producer(value), out))
    w.lines += [f"  {a} -> {b};" for a, b in dict.fromkeys(edges)]
    w.lines.append("}")
    return "\n".join(w.lines) + "\n"


def render_dot(dot: str, fmt: str) -> str | bytes:
    """`dot` text unchanged, or rendered to SVG (str) / PNG (bytes) by Graphviz's `dot` binary."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown graph format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "dot":
        return dot
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(
            f"rendering {fmt} needs Graphviz's `dot` program, which is not installed "
            "(apt install graphviz / brew install graphviz); use --format dot to get the DOT text"
        )
    out = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True, check=True).stdout
    return out.decode() if fmt == "svg" else out


def render_fusion_graph(module_before: ModuleOp, module_after: ModuleOp, fmt: str = "dot") -> str | bytes:
    """The fusion graph of a program as DOT, SVG or PNG (see `to_dot`)."""
    return render_dot(to_dot(module_before, module_after), fmt)


def parse_shape(text: str) -> tuple[int, ...]:
    """`4096x1000` -> (4096, 1000); `x` alone or `scalar` -> ()."""
    text = text.strip().lower()
    return () if text in ("", "scalar", "x") else tuple(int(d) for d in text.split("x"))


def graph_command(target: str, shapes: Sequence[str], fmt: str = "dot", dtype: str = "float32") -> str | bytes:
    """What `tinyton graph file.py:function --shape 4096x1000 [--shape 1000] [--format svg]` prints.

    One `--shape` per array argument, in order (zero-filled arrays of `dtype`: only shapes matter)."""
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ValueError(f"expected FILE.py:FUNCTION, got {target!r}")
    fn = load_function(path, name)
    args = [np.zeros(parse_shape(s), dtype=dtype) for s in shapes]
    before, after = fused_modules(fn, args)
    return render_fusion_graph(before, after, fmt)
