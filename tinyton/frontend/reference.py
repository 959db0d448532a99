"""A NumPy reference interpreter for `tta` IR: the ground truth that fused kernels are tested against.

`evaluate(module, *arrays)` runs the module's function op by op with NumPy (float32 arithmetic, as the
kernels do); `tta.fusion` regions are evaluated inline, so a module gives the same answer before and
after fusion, which is itself a check on the fusion passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.dialects.tta import program_function
from tinyton.dtypes import ELEMENT_TO_NUMPY

_BINARY: dict[type[Operation], Callable[[Any, Any], Any]] = {
    tta.AddOp: np.add,
    tta.SubOp: np.subtract,
    tta.MulOp: np.multiply,
    tta.DivOp: np.divide,
    tta.FloorDivOp: np.floor_divide,
    tta.ModOp: np.mod,
    tta.FmodOp: np.fmod,
    tta.MaximumOp: np.maximum,
    tta.MinimumOp: np.minimum,
    tta.AndOp: np.bitwise_and,
    tta.OrOp: np.bitwise_or,
    tta.XorOp: np.bitwise_xor,
    tta.ShlOp: np.left_shift,
    tta.ShrOp: np.right_shift,
    tta.PowOp: np.power,
    tta.CopysignOp: np.copysign,
    tta.Atan2Op: np.arctan2,
    tta.HypotOp: np.hypot,
    tta.FmaxOp: np.fmax,
    tta.FminOp: np.fmin,
}
_UNARY: dict[type[Operation], Callable[[Any], Any]] = {
    tta.NegOp: np.negative,
    tta.AbsOp: np.abs,
    tta.ExpOp: np.exp,
    tta.LogOp: np.log,
    tta.SqrtOp: np.sqrt,
    tta.RsqrtOp: lambda x: 1 / np.sqrt(x),
    tta.TanhOp: np.tanh,
    tta.SinOp: np.sin,
    tta.CosOp: np.cos,
    tta.TanOp: np.tan,
    tta.Exp2Op: np.exp2,
    tta.Log2Op: np.log2,
    tta.Log10Op: np.log10,
    tta.Log1pOp: np.log1p,
    tta.Expm1Op: np.expm1,
    tta.ErfOp: np.vectorize(math.erf, otypes=[np.float64]),
    tta.FloorOp: np.floor,
    tta.CeilOp: np.ceil,
    tta.TruncOp: np.trunc,
    tta.RintOp: np.rint,
}
_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal
}
_REDUCE = {
    tta.ReduceSumOp: np.sum, tta.ReduceMaxOp: np.max, tta.ReduceMinOp: np.min, tta.ReduceMeanOp: np.mean,
    tta.ReduceProdOp: np.prod, tta.ArgMaxOp: np.argmax, tta.ArgMinOp: np.argmin,
}
_SCAN = {tta.CumSumOp: np.cumsum, tta.CumProdOp: np.cumprod}
"""Scans run in float32 for floats (as the kernels accumulate)."""


def _sorting(op: tta.SortingOp, x: np.ndarray) -> np.ndarray:
    """NumPy's stable sort (or argsort) along the op's axis; descending: the values reversed (NaN first), equal
    ones still in index order."""
    axis = op.axis.value.data
    n = x.shape[axis]
    order = np.argsort(x, axis, kind="stable")
    if op.is_descending:  # the stable order of the reversed row, mapped back to the row's indices
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis, kind="stable"), axis)
    return np.take_along_axis(x, order, axis) if isinstance(op, tta.SortOp) else order


def _op(op: Operation, args: list[Any]) -> list[Any]:
    """One op on NumPy values; results are cast to the op's result types."""
    kind = type(op)
    if kind in _BINARY:
        out = _BINARY[kind](*args)
    elif kind in _UNARY:
        out = _UNARY[kind](*args)
    elif isinstance(op, tta.CmpOp):
        out = _CMP[op.predicate.data](*args)
    elif isinstance(op, tta.WhereOp):
        out = np.where(*args)
    elif isinstance(op, (tta.CastOp, tta.BroadcastToOp, tta.ReshapeOp)):
        out = np.broadcast_to(args[0], shape_of(op.result.type)) if isinstance(op, tta.BroadcastToOp) else args[0]
        out = np.reshape(out, shape_of(op.result.type))
    elif isinstance(op, tta.ConstantOp):
        out = op.value.value.data
    elif isinstance(op, tta.ReduceOp):
        out = _REDUCE[kind](args[0], axis=op.axis.value.data, keepdims=op.keeps_dims)
    elif isinstance(op, tta.ScanOp):
        x = args[0]
        out = _SCAN[kind](x, axis=op.axis.value.data, dtype=np.float32 if x.dtype.kind == "f" else None)
    elif isinstance(op, tta.SortingOp):
        out = _sorting(op, args[0])
    elif isinstance(op, tta.MatmulOp):
        out = np.matmul(*args)
    elif isinstance(op, tta.TransposeOp):
        out = np.transpose(args[0], op.perm)
    elif isinstance(op, tta.TakeOp):
        out = np.take(args[0], args[1], axis=op.axis.value.data)
    elif isinstance(op, tta.CheckIndexOp):  # IndexError as the gather of an arange it replaces
        out = np.arange(op.size.value.data)[args[0]]
    elif isinstance(op, tta.SliceOp):
        out = _window(args[0], op)
    elif isinstance(op, tta.ConcatenateOp):
        out = np.concatenate(args, axis=op.axis.value.data)
    elif isinstance(op, tta.ArangeOp):
        out = np.arange(op.start.value.data, op.end.value.data)
    elif isinstance(op, tta.PutOp):
        out = _put(op, *args)
    elif isinstance(op, tta.FusionOp):
        return run_block(op.block, args)
    else:
        raise NotImplementedError(f"reference interpreter: no implementation of {op.name}")
    return [np.asarray(out).astype(ELEMENT_TO_NUMPY[element_type(op.results[0].type)], copy=False)]


def _window(x: np.ndarray, op: tta.SliceOp) -> np.ndarray:
    """`tta.slice`: element i reads x[start + i * step] per dim, the fill (0 when unspecified) outside x."""
    out = np.full(shape_of(op.result.type), op.fill_value or 0, dtype=x.dtype)
    where, read = [], []
    for start, step, n, extent in zip(op.starts, op.steps, out.shape, x.shape):
        index = start + np.arange(n) * step
        inside = (index >= 0) & (index < extent)
        where.append(np.nonzero(inside)[0])
        read.append(index[inside])
    out[np.ix_(*where)] = x[np.ix_(*read)]
    return out


def _put(op: tta.PutOp, dest: np.ndarray, value: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """`tta.put`: a copy of `dest` with its window (and along `axis` the positions of `index`) set to `value`."""
    out = np.array(dest, copy=True)
    positions = [start + np.arange(n) * step for start, step, n in zip(op.starts, op.steps, value.shape)]
    if index is not None:
        positions[op.index_axis] = np.asarray(index) % dest.shape[op.index_axis]
    out[np.ix_(*positions)] = value
    return out


def run_block(block: Block, args: Sequence[Any]) -> list[Any]:
    """Evaluate a func or fusion body; returns the values of its terminator."""
    env: dict[SSAValue, Any] = dict(zip(block.args, args))
    for op in block.ops:
        values = [env[v] for v in op.operands]
        if isinstance(op, (func.ReturnOp, tta.YieldOp)):
            return values
        with np.errstate(all="ignore"):
            env.update(zip(op.results, _op(op, values)))
    raise ValueError("block has no terminator")


def evaluate(module: ModuleOp, *arrays: Any) -> list[np.ndarray]:
    """Run the module's (first) function on NumPy arrays; returns the list of its results."""
    fn = program_function(module)
    return run_block(fn.body.block, [np.asarray(a) for a in arrays])
