"""`tinyton.testing`, as Triton's `triton.testing`: `do_bench` (tinyton/runtime/bench.py), `assert_close`,
and `perf_report` / `Benchmark`, which run a benchmark over a grid of x values and lines, print a table
and, with matplotlib installed, plot it (shown or saved as `<plot_name>.png` under `save_path`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinyton.runtime.bench import do_bench

__all__ = ["Benchmark", "assert_close", "do_bench", "perf_report"]
SKIP_BENCHMARKS = "TINYTON_SKIP_BENCHMARKS"


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().float().numpy() if str(x.dtype) == "torch.bfloat16" else x.detach().cpu().numpy()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # a tinyton DeviceArray
        return np.asarray(x.numpy())
    return np.asarray(x)


def assert_close(x: Any, y: Any, atol: float | None = None, rtol: float | None = None, err_msg: str = "") -> None:
    """NumPy's `assert_allclose` on arrays, tensors or numbers (defaults atol=1e-2, rtol=0, as Triton)."""
    np.testing.assert_allclose(
        _numpy(x), _numpy(y), atol=1e-2 if atol is None else atol, rtol=0 if rtol is None else rtol, err_msg=err_msg
    )


@dataclass
class Benchmark:
    """One benchmark's axes: x values (`x_names` x `x_vals`), lines (`line_arg` x `line_vals`), labels."""

    x_names: Sequence[str]
    x_vals: Sequence[Any]
    line_arg: str
    line_vals: Sequence[Any]
    line_names: Sequence[str]
    plot_name: str
    args: dict[str, Any] = field(default_factory=dict)
    xlabel: str = ""
    ylabel: str = ""
    x_log: bool = False
    y_log: bool = False
    styles: Sequence[tuple[str, str]] | None = None


class Mark:
    """A benchmark function bound to its `Benchmark`s; `.run(...)` measures, prints and plots."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | Sequence[Benchmark]):
        self.fn = fn
        self.benchmarks = benchmarks

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "", return_df: bool = False, **kwargs: Any) -> Any:
        """Measure every benchmark; with `$TINYTON_SKIP_BENCHMARKS` set (not 0), only say so (a script run
        for its correctness checks, e.g. scripts/run_triton_tutorials.py)."""
        benchmarks = [self.benchmarks] if isinstance(self.benchmarks, Benchmark) else list(self.benchmarks)
        if os.environ.get(SKIP_BENCHMARKS, "0") not in ("", "0"):
            print(f"tinyton.testing: {len(benchmarks)} benchmark(s) of {self.fn.__name__} skipped (${SKIP_BENCHMARKS})")
            return None
        tables = [self._run(b, show_plots, print_data, save_path, **kwargs) for b in benchmarks]
        if return_df:
            return tables[0] if len(tables) == 1 else tables
        return None

    def _run(self, bench: Benchmark, show_plots: bool, print_data: bool, save_path: str, **kwargs: Any) -> dict[str, list]:
        columns: dict[str, list] = {name: [] for name in bench.x_names}
        for name in bench.line_names:
            columns[name] = []
        for x in bench.x_vals:
            xs = x if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            point = dict(zip(bench.x_names, xs))
            for name, value in point.items():
                columns[name].append(value)
            for line, label in zip(bench.line_vals, bench.line_names):
                result = self.fn(**point, **{bench.line_arg: line}, **bench.args, **kwargs)
                columns[label].append(result[0] if isinstance(result, (tuple, list)) else result)
        if print_data:
            print(f"{bench.plot_name}:")
            print(_table(columns))
        if show_plots or save_path:
            _plot(bench, columns, show_plots, save_path)
        return columns


def _table(columns: dict[str, list]) -> str:
    names = list(columns)
    rows = [[f"{v:.6g}" if isinstance(v, float) else str(v) for v in row] for row in zip(*columns.values())]
    widths = [max(len(n), *(len(r[i]) for r in rows)) if rows else len(n) for i, n in enumerate(names)]
    lines = ["  ".join(n.rjust(w) for n, w in zip(names, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _plot(bench: Benchmark, columns: dict[str, list], show: bool, save_path: str) -> None:
    try:
        import matplotlib.pyplot as plt  # optional: plotting only
    except ImportError:
        print("tinyton.testing: matplotlib is not installed; printed the table only")
        return
    fig, ax = plt.subplots()
    x = columns[bench.x_names[0]]
    for i, label in enumerate(bench.line_names):
        style = bench.styles[i] if bench.styles else None
        ax.plot(x, columns[label], label=label, color=style[0] if style else None, ls=style[1] if style else None)
    ax.legend()
    ax.set_xlabel(bench.xlabel or bench.x_names[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    if show:
        plt.show()
    if save_path:
        os.makedirs(save_path, exist_ok=True)
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
        with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
            f.write(_table(columns))
    plt.close(fig)


def perf_report(benchmarks: Benchmark | Sequence[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Decorate a benchmark function `fn(**x, line_arg=..., **args) -> ms or (ms, min, max)`."""
    return lambda fn: Mark(fn, benchmarks)
