#!/usr/bin/env python3
"""Write the README's table of the NumPy functions array programs support, from the registry itself.

The registry is `tinyton.frontend.traced.ARRAY_IMPLS` (one implementation per NumPy name, complete once
`tinyton.frontend.tracing` is loaded); a row says how a user reaches each function (`tt.name`, `np.name(x)` on a
traced array, the `x.name()` method) and the first line of its docstring. Names registered as refused (`refuse` in tinyton/frontend/refused.py) are listed
with the error they raise. tests/test_numpy_table.py fails when the README differs from this output, so
the table cannot drift from the code.

    python scripts/numpy_table.py           # rewrite the README's table
    python scripts/numpy_table.py --check   # exit 1 if the README is out of date
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import numpy as np

import tinyton as tt
from tinyton.frontend.traced import NUMPY_FUNCTIONS, Traced
from tinyton.frontend.tracing import array_implementations

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- numpy-table:begin (scripts/numpy_table.py) -->", "<!-- numpy-table:end -->"
INTERNAL = {"getitem", "setitem"}
"""Registry entries that are not NumPy functions (the `x[...]` and `x[...] = v` protocols have their own rows)."""


def _summary(fn) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n")[0].replace("\n", " ").replace("|", "\\|")


def _spellings(name: str) -> str:
    """How a program reaches `name`: the builtin, NumPy's own function on a traced array (a ufunc, or a function
    `__array_function__` routes), the array method."""
    ways = []
    if hasattr(tt, name):
        ways.append(f"`tt.{name}`")
    if isinstance(getattr(np, name, None), np.ufunc) or name in NUMPY_FUNCTIONS:
        ways.append(f"`np.{name}`")
    if hasattr(Traced, name):
        ways.append(f"`x.{name}`")
    return ", ".join(ways)


def table() -> str:
    numpy, beyond, refused = [], [], []
    implementations = array_implementations()
    for name, impl in sorted(implementations.items()):
        if name in INTERNAL or not hasattr(np, name) and not hasattr(tt, name):
            continue
        why = getattr(impl, "refused", None)
        if why is not None:
            refused.append(f"| `{name}` | {why} |")
        else:
            (numpy if hasattr(np, name) else beyond).append(f"| `{name}` | {_spellings(name)} | {_summary(impl)} |")
    lines = [BEGIN, "", "| NumPy | in array programs | notes |", "|---|---|---|", *numpy,
             f"| `x[...]` | indexing | {_summary(implementations['getitem'])} |",
             f"| `x[...] = v` | assignment | {_summary(implementations['setitem'])} |", "",
             "Beyond NumPy (Triton's and tinyton's names for array programs):", "",
             "| name | in array programs | notes |", "|---|---|---|", *beyond]  # fmt: skip
    if refused:
        lines += ["", "Refused (a `CompilationError` at the user's line says why and what to use instead):", "",
                  "| NumPy | why |", "|---|---|", *refused]  # fmt: skip
    return "\n".join([*lines, "", END])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = README.read_text()
    if BEGIN not in text or END not in text:
        print(f"{README}: no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + table() + tail
    if args.check:
        if new != text:
            print("README.md's NumPy table is out of date: run python scripts/numpy_table.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
