"""tinyton's dialects: `tt` (tile-level kernels), `tta` (array programs) and an `nvvm` subset."""

from xdsl.context import Context


def tinyton_context() -> Context:
    """A context with every dialect tinyton's pipeline reads or writes (builtin, func, scf, arith, llvm, pdl, ...)."""
    from xdsl.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    for name, factory in tinyton_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def tinyton_dialects() -> dict:
    """Lazy factories of tinyton's own dialects, keyed by dialect name (for contexts and xDSL's universe)."""

    def tt():
        from tinyton.dialects.tt import Tt

        return Tt

    factories = {"tt": tt}
    try:
        from tinyton.dialects.nvvm import NVVM  # noqa: F401

        factories["nvvm"] = lambda: NVVM
    except ImportError:
        pass
    return factories
