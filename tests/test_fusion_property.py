"""Property test: random array programs give the same results fused and unfused, and match NumPy.

Programs are drawn from a seeded generator (one seed per case, so a failure names its program):
elementwise ops (bounded, so float32 stays finite), reductions over any axis with or without
keepdims, reshapes restoring reduced axes, comparisons and `where`, broadcasting inputs, values used
several times and returned alongside the result. A second family ("rows") only reduces the last
axis, keepdims or restored, every op extending one chain from `x`: such a program must fuse into
exactly ONE kernel, whatever its length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from fusion_helpers import run_program

from tinyton.frontend import array_ops as ops


class NumPyBackend:
    exp, log, sqrt, maximum, minimum, where = np.exp, np.log, np.sqrt, np.maximum, np.minimum, np.where

    @staticmethod
    def rsqrt(x: Any) -> Any:
        return np.float32(1) / np.sqrt(x)


class TracedBackend:
    exp, log, sqrt, rsqrt = ops.exp, ops.log, ops.sqrt, ops.rsqrt
    maximum, minimum, where = ops.maximum, ops.minimum, ops.where


UNARY = {
    "negexp": lambda B, x: B.exp(-abs(x)),
    "log1p": lambda B, x: B.log(abs(x) + 1.0),
    "sqrt": lambda B, x: B.sqrt(abs(x)),
    "rsqrt": lambda B, x: B.rsqrt(abs(x) + 1.0),
    "neg": lambda B, x: -x,
    "affine": lambda B, x: x * 0.5 + 0.25,
}
BINARY = {
    "add": lambda B, x, y: x + y,
    "sub": lambda B, x, y: x - y,
    "mul": lambda B, x, y: x * y,
    "max": lambda B, x, y: B.maximum(x, y),
    "min": lambda B, x, y: B.minimum(x, y),
    "div": lambda B, x, y: x / (abs(y) + 1.0),
}
REDUCE = ("sum", "max", "min", "mean")


@dataclass
class Program:
    """A straight-line program over a value pool; `run(B, inputs)` evaluates it with backend B."""

    inputs: list[tuple[int, ...]]
    steps: list[tuple] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def run(self, B: Any, args: list[Any]) -> tuple:
        vals = list(args)
        for step in self.steps:
            kind = step[0]
            if kind == "unary":
                vals.append(UNARY[step[1]](B, vals[step[2]]))
            elif kind == "binary":
                vals.append(BINARY[step[1]](B, vals[step[2]], vals[step[3]]))
            elif kind == "where":
                a, b, c = (vals[i] for i in step[1:])
                vals.append(B.where(a > b, a, c))
            elif kind == "reduce":
                _, name, i, axis, keep = step
                vals.append(getattr(vals[i], name)(axis=axis, keepdims=keep))
            elif kind == "reshape":
                vals.append(vals[step[1]].reshape(step[2]))
        return tuple(vals[i] for i in self.outputs)


def _subshape(rng: np.random.Generator, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `base`: some dims set to 1, maybe leading dims dropped."""
    shape = tuple(d if rng.random() < 0.7 else 1 for d in base)
    drop = int(rng.integers(0, len(base) + 1)) if rng.random() < 0.3 else 0
    return shape[drop:]


def _base(rng: np.random.Generator, rows_only: bool) -> tuple[int, ...]:
    sizes = (1, 2, 3, 5, 8, 17, 33, 64, 100, 257)
    while True:
        rank = int(rng.integers(1, 4))
        base = tuple(int(rng.choice(sizes)) for _ in range(rank))
        if np.prod(base) <= 3000 and (not rows_only or base[-1] > 1):
            return base


def generate(seed: int, rows_only: bool = False) -> Program:
    rng = np.random.default_rng(seed)
    base = _base(rng, rows_only)
    n_in = int(rng.integers(1, 4))
    inputs = [base] + [_subshape(rng, base) for _ in range(n_in - 1)]
    prog = Program(inputs, shapes=list(inputs))

    def add(step: tuple, shape: tuple[int, ...]) -> int:
        prog.steps.append(step)
        prog.shapes.append(shape)
        return len(prog.shapes) - 1

    dropped: set[int] = set()  # reductions without keepdims: their axes no longer line up

    def partner(i: int, *others: int) -> int:
        choices = [j for j, s in enumerate(prog.shapes) if _broadcasts(s, prog.shapes[i], *(prog.shapes[o] for o in others))]
        if rows_only:
            choices = [j for j in choices if j not in dropped] or [i]
        return int(rng.choice(choices))

    last = 0
    for _ in range(int(rng.integers(2, 9))):
        cur = last if rows_only else int(rng.integers(0, len(prog.shapes)))
        shape = prog.shapes[cur]
        r = rng.random()
        if r < 0.3:
            last = add(("unary", str(rng.choice(list(UNARY))), cur), shape)
        elif r < 0.6:
            j = partner(cur)
            a, b = (cur, j) if rng.random() < 0.5 else (j, cur)
            last = add(("binary", str(rng.choice(list(BINARY))), a, b), _bshape(prog.shapes[a], prog.shapes[b]))
        elif r < 0.7:
            j = partner(cur)
            k = partner(cur, j)
            last = add(("where", cur, j, k), _bshape(shape, prog.shapes[j], prog.shapes[k]))
        elif shape:
            axis = len(shape) - 1 if rows_only or rng.random() < 0.6 else int(rng.integers(0, len(shape)))
            if rows_only and shape[-1] != base[-1]:
                last = add(("unary", "affine", cur), shape)
                continue
            keep = bool(rng.random() < 0.5)
            reduced = tuple(1 if a == axis else d for a, d in enumerate(shape))
            last = add(("reduce", str(rng.choice(REDUCE)), cur, axis, keep), reduced if keep else _drop(shape, axis))
            if not keep:
                dropped.add(last)
            if not keep and (rows_only or rng.random() < 0.6):
                last = add(("reshape", last, reduced), reduced)
    extra = [i for i in range(len(inputs), len(prog.shapes) - 1) if rng.random() < 0.25]
    prog.outputs = [len(prog.shapes) - 1, *extra[:2]]
    if all(o < len(inputs) for o in prog.outputs):
        prog.outputs = [add(("unary", "neg", 0), base)]
    return prog


def _drop(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return tuple(d for a, d in enumerate(shape) if a != axis)


def _broadcasts(*shapes: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _bshape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Normwise relative difference (max abs error over the larger of 1 and the max magnitude)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.size == 0:
        return 0.0
    return float(np.max(np.abs(a64 - b64)) / max(1.0, float(np.max(np.abs(b64)))))


def check(prog: Program, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed + 10_000)
    args = [rng.uniform(-2, 2, s).astype(np.float32) for s in prog.inputs]
    fn = lambda *xs: prog.run(TracedBackend, list(xs))
    fused, n_fused = run_program(fn, args, fuse=True)
    unfused, n_unfused = run_program(fn, args, fuse=False)
    with np.errstate(all="ignore"):
        reference = prog.run(NumPyBackend, args)
    for f, u, r in zip(fused, unfused, reference):
        r = np.asarray(r, np.float32)
        assert f.shape == r.shape and u.shape == r.shape
        assert _rel(f, u) <= 1e-6, f"fused and unfused differ: {prog}"
        assert _rel(f, r) <= 1e-5, f"fused differs from NumPy: {prog}"
    assert n_fused <= n_unfused
    return n_fused, n_unfused


@pytest.mark.parametrize("seed", range(240))
def test_random_programs(seed: int) -> None:
    check(generate(seed), seed)


@pytest.mark.parametrize("seed", range(80))
def test_row_chains_are_one_kernel(seed: int) -> None:
    prog = generate(1_000 + seed, rows_only=True)
    n_fused, _ = check(prog, seed)
    assert n_fused == 1, f"a chain over the same rows took {n_fused} kernels: {prog}"
