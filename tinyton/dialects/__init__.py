"""tinyton's dialects: `tt` (tile-level kernels), `tta` (array programs) and an `nvvm` subset."""

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect


def tinyton_context() -> Context:
    """A context with every dialect tinyton's pipeline reads or writes (builtin, func, scf, arith, llvm, pdl, ...)."""
    from xdsl.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    for name, factory in tinyton_dialects().items():
        ctx.register_dialect(name, factory)
    from tinyton.dialects.llvm_extra import load_llvm_extra

    load_llvm_extra(ctx)
    return ctx


def tinyton_dialects() -> dict[str, Callable[[], Dialect]]:
    """Lazy factories of tinyton's own dialects, keyed by dialect name (for contexts and xDSL's universe)."""

    def tt() -> Dialect:
        from tinyton.dialects.tt import Tt

        return Tt

    def tta() -> Dialect:
        from tinyton.dialects.tta import Tta

        return Tta

    def nvvm() -> Dialect:
        from tinyton.dialects.nvvm import NVVM

        return NVVM

    return {"tt": tt, "tta": tta, "nvvm": nvvm}
