"""Registry of tinyton's passes, by their `-p` names (used by `tinyton-opt` and xDSL's universe).

Each entry is a lazy factory so that listing the passes imports nothing heavy.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _tinyton_to_llvm() -> type[ModulePass]:
    from tinyton.lowering.tt_to_llvm import TinytonToLLVMPass

    return TinytonToLLVMPass


def _annotate_layouts() -> type[ModulePass]:
    from tinyton.lowering.tt_to_llvm.annotate import AnnotateLayoutsPass

    return AnnotateLayoutsPass


def _grid_dependency() -> type[ModulePass]:
    from tinyton.lowering.tt_to_llvm.grid_dependency import GridDependencyPass

    return GridDependencyPass


def _pipeline() -> type[ModulePass]:
    from tinyton.lowering.tt_to_llvm.pipeline import PipelinePass

    return PipelinePass


def _fuse_patterns() -> type[ModulePass]:
    from tinyton.rewrites.patterns import FusePatternsPass

    return FusePatternsPass


def _flash_attention() -> type[ModulePass]:
    from tinyton.rewrites.patterns import FlashAttentionPass

    return FlashAttentionPass


def _canonicalize_attention() -> type[ModulePass]:
    from tinyton.rewrites.attention_canonical import CanonicalizeAttentionPass

    return CanonicalizeAttentionPass


def _row_scale() -> type[ModulePass]:
    from tinyton.rewrites.row_scale import RowScalePass

    return RowScalePass


def _fuse() -> type[ModulePass]:
    from tinyton.rewrites.fuse import FusePass

    return FusePass


def _split_long_sorts() -> type[ModulePass]:
    from tinyton.rewrites.long_sorts import SplitLongSortsPass

    return SplitLongSortsPass


def _concatenate_to_slices() -> type[ModulePass]:
    from tinyton.rewrites.remap import ConcatenateToSlicesPass

    return ConcatenateToSlicesPass


def _push_slices() -> type[ModulePass]:
    from tinyton.rewrites.remap import PushSlicesPass

    return PushSlicesPass


def _push_layouts() -> type[ModulePass]:
    from tinyton.rewrites.layouts import PushLayoutsPass

    return PushLayoutsPass


def _push_gathers() -> type[ModulePass]:
    from tinyton.rewrites.gathers import PushGathersPass

    return PushGathersPass


def _check_indices() -> type[ModulePass]:
    from tinyton.rewrites.index_checks import CheckIndicesPass

    return CheckIndicesPass


def _split_heads() -> type[ModulePass]:
    from tinyton.rewrites.heads import SplitHeadsPass

    return SplitHeadsPass


def _in_place() -> type[ModulePass]:
    from tinyton.rewrites.in_place import InPlacePass

    return InPlacePass


def _fusion_to_kernels() -> type[ModulePass]:
    from tinyton.lowering.fusion import FusionToKernelsPass

    return FusionToKernelsPass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "tinyton-to-llvm": _tinyton_to_llvm,
    "tinyton-annotate-layouts": _annotate_layouts,
    "tinyton-pipeline": _pipeline,
    "tinyton-grid-dependency": _grid_dependency,
    "tinyton-fuse-patterns": _fuse_patterns,
    "tinyton-flash-attention": _flash_attention,
    "tinyton-canonicalize-attention": _canonicalize_attention,
    "tinyton-row-scale": _row_scale,
    "tinyton-fuse": _fuse,
    "tinyton-split-long-sorts": _split_long_sorts,
    "tinyton-concatenate-to-slices": _concatenate_to_slices,
    "tinyton-push-slices": _push_slices,
    "tinyton-push-layouts": _push_layouts,
    "tinyton-push-gathers": _push_gathers,
    "tinyton-check-indices": _check_indices,
    "tinyton-in-place": _in_place,
    "tinyton-split-heads": _split_heads,
    "tinyton-fusion-to-kernels": _fusion_to_kernels,
}
