"""
`tinyton-annotate-layouts`: print the layout assignment into the tt IR, for tests and debugging.

Every op with a tile result gets a `tt.layout` string attribute, the analogue of Triton's
`#blocked`/`#mma` encodings in TTGIR: the bases of its register, lane and warp bits (see
`layouts`), or `free` for tiles rebuilt in whatever layout their consumer wants. The module
stays tt (the attribute is discardable); `tinyton-to-llvm` ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from tinyton.lowering.tt_to_llvm.assign import LayoutAssignment, is_tile
from tinyton.lowering.tt_to_llvm.layouts import Basis, Layout
from tinyton.lowering.tt_to_llvm.context import kernel_num_warps
from tinyton.lowering.tt_to_llvm.pass_ import is_kernel

LAYOUT_ATTR = "tt.layout"


def _bases(bases: tuple[Basis, ...]) -> str:
    return "[" + ", ".join("(" + ",".join(map(str, b)) + ")" for b in bases) + "]"


def describe(layout: Layout) -> str:
    """`reg=[(0,1), ...] lane=[...] warp=[...]`: the coordinate each bit adds."""
    return f"reg={_bases(layout.reg)} lane={_bases(layout.lane)} warp={_bases(layout.warp)}"


@dataclass(frozen=True)
class AnnotateLayoutsPass(ModulePass):
    """Attach `tt.layout` to every tile-producing op of the module's kernels."""

    name = "tinyton-annotate-layouts"

    num_warps: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps = kernel_num_warps(op, self.num_warps)
        for kernel in op.ops:
            if not (isinstance(kernel, func.FuncOp) and is_kernel(kernel)):
                continue
            assign = LayoutAssignment(kernel, warps)
            for inner in kernel.walk():
                tiles = [r for r in inner.results if is_tile(r)]
                if len(tiles) == 1 and tiles[0] in assign.layout:
                    text = "free" if tiles[0] in assign.free else describe(assign.layout[tiles[0]])
                    inner.attributes[LAYOUT_ATTR] = StringAttr(text)
