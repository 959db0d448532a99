"""Registry of tinyton's passes, by their `-p` names (used by `tinyton-opt` and xDSL's universe).

Each entry is a lazy factory so that listing the passes imports nothing heavy.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _tinyton_to_llvm() -> type[ModulePass]:
    from tinyton.lowering.tt_to_llvm import TinytonToLLVMPass

    return TinytonToLLVMPass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "tinyton-to-llvm": _tinyton_to_llvm,
}
