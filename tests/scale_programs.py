"""Long array programs for compile-time tests and bench/bench_compile.py (issue 11, "Scale").

`chain(n)` is one elementwise chain of n ops; `mixed(n)` interleaves elementwise chains with row
reductions (softmax- and rmsnorm-like blocks), broadcasts of a second input, and returns many outputs;
`wide(n)` needs many kernels (row and column reductions of one array, transposed reads, matmuls);
`straight(n)` is written out one statement per line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyton.frontend import array_ops as ops


def chain(n: int) -> Callable[..., Any]:
    """`x` through n elementwise ops (alternating multiply and add)."""

    def program(x):
        for i in range(n):
            x = x * 1.0001 if i % 2 == 0 else x + 0.001
        return x

    return program


def mixed(n: int) -> Callable[..., Any]:
    """About n ops: blocks of elementwise ops, a row reduction every few blocks, an output every ~50 ops."""

    def program(x, w):
        outputs = []
        count = 0
        block = 0
        while count < n:
            for i in range(6):
                x = x * 0.999 if i % 3 == 0 else (x + w if i % 3 == 1 else ops.maximum(x, -4.0))
            count += 6
            if block % 3 == 0:  # rmsnorm-like: square, mean, add, rsqrt, multiply, multiply
                x = x * ops.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w
                count += 6
            elif block % 3 == 1:  # softmax-like: max, sub, exp, sum, div
                e = ops.exp(x - x.max(axis=-1, keepdims=True))
                x = e / e.sum(axis=-1, keepdims=True)
                count += 5
            if block % 8 == 7:
                outputs.append(x.sum(axis=-1))
                count += 1
            block += 1
        return (x, *outputs)

    return program


def chain_inputs() -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)]


def mixed_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 64)).astype(np.float32), rng.standard_normal(64).astype(np.float32)]


def wide(n: int) -> Callable[..., Any]:
    """About n ops in many kernels: column and row reductions of the same array, their results broadcast
    back, transposed reads, a matmul now and then, and an output every few blocks."""

    def program(x, w, m):
        outputs = []
        count = 0
        block = 0
        while count < n:
            a = x * 0.999 + w  # 2
            col = a.sum(axis=0)  # a column reduction: another kernel than the row one
            row = a.max(axis=1, keepdims=True)
            t = (a.T * 0.5).sum(axis=1)  # a transposed read of a (a view of a computed value needs memory)
            x = x - row * 0.01 + col * 0.001 + t * 0.001  # 6
            count += 12
            if block % 10 == 9:
                x = x + (x @ m) * 0.001  # 3
                count += 3
            if block % 4 == 3:
                outputs.append(col)
            block += 1
        return (x, *outputs)

    return program


def wide_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32),
            rng.standard_normal((32, 32)).astype(np.float32)]


_STRAIGHT_LINES = (  # (statement, ops it traces)
    ("x = x * 1.0001", 1),
    ("x = x + 0.001", 1),
    ("x = ops.maximum(x, -4.0)", 1),
    ("x = x * ops.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)", 5),
    ("y = ops.exp(x - x.max(axis=-1, keepdims=True))", 3),
    ("x = y / y.sum(axis=-1, keepdims=True)", 2),
)


def straight(n: int) -> Callable[..., Any]:
    """About n ops written out line by line, as a long generated or hand-written program is (one Python
    line per statement, so the tracer's source locations index a long code object)."""
    lines, count = [], 0
    while count < n:
        line, ops_in_line = _STRAIGHT_LINES[len(lines) % len(_STRAIGHT_LINES)]
        lines.append(f"    {line}")
        count += ops_in_line
    source = "def program(x):\n" + "\n".join(lines) + "\n    return x\n"
    namespace: dict[str, Any] = {"ops": ops}
    exec(compile(source, f"<straight program of {n} ops>", "exec"), namespace)  # noqa: S102 - generated test code
    return namespace["program"]
