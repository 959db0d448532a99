"""How a region's reductions and scans combine elements: the kind of each tta reduction, the tt op folding
one more element in, and the element type the accumulator holds. Shared by every codegen strategy (rows,
split rows, grid kernels, matmul K loops)."""

from __future__ import annotations

from typing import Any

from tinyton.dialects import tt, tta
from tinyton.dialects.tt import is_float
from tinyton.lowering.fusion.emitter import f32

COMBINE = {"sum": tt.AddOp, "prod": tt.MulOp, "max": tt.MaximumOp, "min": tt.MinimumOp}
"""The tt op folding one more element into a reduction's accumulator, by `reduction_kind`."""

_KINDS = {
    tta.ReduceMaxOp: "max", tta.ReduceMinOp: "min", tta.ReduceProdOp: "prod", tta.ArgMaxOp: "argmax",
    tta.ArgMinOp: "argmin",
}


def reduction_kind(op: tta.ReduceOp) -> str:
    """"sum" (sums and means), "prod", "max", "min", "argmax" or "argmin"."""
    return _KINDS.get(type(op), "sum")


ARG_KINDS = ("argmax", "argmin")


def scan_kind(op: tta.ScanOp) -> str:
    return "prod" if isinstance(op, tta.CumProdOp) else "sum"


def accumulator_element(element: Any) -> Any:
    """Reductions accumulate in f32 (16- and 32-bit floats), f64 in f64; ints and bools in their own type."""
    return f32 if is_float(element) and element.bitwidth <= 32 else element
