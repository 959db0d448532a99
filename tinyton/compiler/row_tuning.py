"""Shapes of fused row kernels (warps, rows per program, whole or looped rows): measured once per GPU,
dtype, program and shape class, with the `Tuner` of the matmul tiles (tinyton/compiler/autotune.py).

On a GPU, the first row region of a class times each of `row_shapes.candidates` on the region alone at the
problem's exact shape (`region_program`: the same kernel the program launches), in interleaved rounds, and
keeps the fastest in the disk cache unless the default is within the tuner's margin of it. Without a GPU, with `TINYTON_TUNE=0`, for regions mixing element types or gathering, and
below `TUNE_MIN_ELEMENTS`, the lowering's default is used.
"""

from __future__ import annotations

from functools import partial

from tinyton.compiler.autotune import Timer, Tuner, tuning_enabled
from tinyton.compiler.tuning_runs import Samples, compile_candidates_ahead, program_timer, region_program
from tinyton.lowering.fusion.row_shapes import (
    RowProblem,
    RowShape,
    candidates,
    default_row_shape,
)
from tinyton.runtime import driver

TUNER: Tuner[RowShape] = Tuner("rows", decode=lambda d: RowShape(**d))
TUNE_MIN_ELEMENTS = 1 << 17
"""Problems below this many elements take the default shape: a launch's latency, which the shape hardly
changes (32x2048 on an H100, bench/probes/sweep_rows.py: 5.0-5.5 µs on 4, 8 or 16 warps, the default 8 the
fastest), and a cold compile stays free of the ~0.5 s per candidate."""


def row_shape(problem: RowProblem) -> RowShape:
    """The shape for `problem`: tuned on this GPU, or the default (see the module's docstring)."""
    p = problem
    options = candidates(p)
    if not tuning_enabled() or not p.dtype or len(options) == 1 or p.rows * p.length < TUNE_MIN_ELEMENTS:
        return default_row_shape(p)
    key = (driver.device().name, p.dtype, p.fingerprint, p.shape_class())
    samples: Samples = {}
    return TUNER.choose(key, options, lambda shape: shape_timer(p, shape, samples), default=default_row_shape(p),
                        ahead=partial(_compile_ahead, p))


def _compile_ahead(p: RowProblem, options: list[RowShape]) -> None:
    """Every candidate's kernel compiled at once, in worker processes, before they are timed one by one."""
    assert p.region is not None
    compile_candidates_ahead(region_program(p.region), True, "choose_rows", options)


def shape_timer(p: RowProblem, shape: RowShape, samples: Samples | None = None) -> Timer:
    """A timer of the region's kernel shaped by `shape` (inputs from the tuning's `samples`)."""
    assert p.region is not None
    return program_timer(region_program(p.region), fuse=True, samples=samples, choose_rows=lambda _: shape)
